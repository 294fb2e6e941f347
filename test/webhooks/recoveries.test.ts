import { Webhook } from 'standardwebhooks'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ACME_HOST } from '../helpers/config.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectEnvelope, expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { receiversClosedAfterEach, type Receiver } from '../helpers/receiver.js'
import { eventually } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// Recovering a time range after an outage (docs/partners.md, "After an outage: recover"), over
// real sockets, real Redis and the real queue: a receiver down while events came, then up; the
// recovery sends exactly what it missed (or everything, with `all`), oldest first, each with
// its own webhook-id and a valid signature; one recovery at a time; cancelling; the bounds of
// a request; another credential's endpoint; two instances sharing one recovery.

const RECOVERY_ID = /^wr_[0-7][0-9A-HJKMNP-TV-Z]{25}$/

interface Recovery {
  id: string
  endpointId: string
  since: string
  until: string
  include: string
  status: string
  queued: number
  delivered: number
  failed: number
  createdAt: string
}

/** The recovery a 202 answered, after its headers and envelope are checked. */
function started(answer: Answer): Recovery {
  expect({ status: answer.statusCode, body: answer.body }).toMatchObject({ status: 202 })
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8')
  expect(answer.headers['cache-control']).toBe('no-store')
  const body = JSON.parse(answer.body) as { data: Recovery; meta: unknown }
  expect(Object.keys(body)).toEqual(['data', 'meta'])
  expect(body.meta).toEqual({ requestId: answer.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP) })
  expect(answer.headers['service-request-id']).toMatch(REQUEST_ID)
  return body.data
}

// Each waits for an outage's retries and a recovery, on a busy machine.
describe('recovering a time range', { timeout: 60_000 }, () => {
  let t: TestGateway
  let admin: string
  let key: string
  let hotel: string
  const receiver = receiversClosedAfterEach()

  beforeAll(async () => {
    // One lease per endpoint: the order of sending is the order of arrival. At most 3 events per recovery.
    t = await TestGateway.start({ env: PUBLISHER_TOKENS, config: webhookConfig({ endpointConcurrency: 1, retrySchedule: [0.2], maxRecoveryEvents: 3 }) })
    admin = await listenAdmin(t.gateway)
    key = await t.key()
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
  })

  const publishOne = async (): Promise<string> => {
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    return event?.eventId as string
  }
  const recover = (endpointId: string, body: unknown, as = key): Promise<Answer> =>
    t.call('POST', `/v1/webhook-endpoints/${endpointId}/recover`, { key: as, body: JSON.stringify(body) })
  const recoveryOf = async (endpointId: string, id: string): Promise<Recovery> =>
    expectEnvelope(await t.get(`/v1/webhook-endpoints/${endpointId}/recoveries/${id}`, key)) as Recovery
  const attemptsOf = async (endpointId: string): Promise<{ eventId: string; outcome: string }[]> =>
    (JSON.parse((await t.get(`/v1/webhook-endpoints/${endpointId}/deliveries?perPage=100`, key)).body) as { data: { eventId: string; outcome: string }[] }).data
  const eventOf = async (eventId: string): Promise<unknown> => (JSON.parse((await t.get(`/v1/events/${eventId}`, key)).body) as { data: unknown }).data

  /** A receiver down while three events come (each fails its two attempts), then up for a fourth. */
  async function outage(): Promise<{ r: Receiver; endpoint: { id: string; secret: string }; since: string; missed: string[]; received: string }> {
    const r = await receiver(() => 503)
    const endpoint = await createEndpoint(t, key, { url: `${r.url}/hooks`, eventTypes: ['property.updated'] })
    const since = new Date(Date.now() - 1000).toISOString()
    const missed = [await publishOne(), await publishOne(), await publishOne()]
    expect(await eventually(async () => (await attemptsOf(endpoint.id)).filter((a) => a.outcome === 'failed').length === 6, WAIT_MS)).toBe(true)
    r.behaviour = () => 200
    const received = await publishOne()
    expect(await eventually(async () => r.of(received).length === 1, WAIT_MS)).toBe(true)
    return { r, endpoint, since, missed, received }
  }

  it('sends exactly the events the endpoint missed, oldest first, each once with its own webhook-id and a valid signature, and counts them', async () => {
    const { r, endpoint, since, missed, received } = await outage()
    const before = r.received.length
    const recovery = started(await recover(endpoint.id, { since }))
    expect(recovery).toEqual({
      id: expect.stringMatching(RECOVERY_ID), endpointId: endpoint.id, since, until: expect.stringMatching(TIMESTAMP), include: 'failed',
      status: 'running', queued: 3, delivered: 0, failed: 0, createdAt: expect.stringMatching(TIMESTAMP),
    })
    expect(Date.parse(recovery.until)).toBeGreaterThanOrEqual(Date.parse(since))
    expect(await eventually(async () => (await recoveryOf(endpoint.id, recovery.id)).status === 'done', WAIT_MS)).toBe(true)
    expect(await recoveryOf(endpoint.id, recovery.id)).toEqual({ ...recovery, status: 'done', delivered: 3 })
    const sent = r.received.slice(before)
    expect(sent.map((x) => x.headers['webhook-id'])).toEqual(missed)
    expect(r.of(received)).toHaveLength(1)
    for (const got of sent) {
      expect(got.path).toBe('/hooks')
      const payload = new Webhook(endpoint.secret).verify(got.body, got.headers as Record<string, string>)
      expect(payload).toEqual(await eventOf(got.headers['webhook-id'] as string))
    }
    // Received now: a second recovery of failed events has nothing to send, and is done at once.
    const again = started(await recover(endpoint.id, { since }))
    expect(again).toMatchObject({ status: 'done', queued: 0, delivered: 0, failed: 0 })
    // The list: newest first, paginated like every list.
    const list = await t.get(`/v1/webhook-endpoints/${endpoint.id}/recoveries`, key)
    expect(expectEnvelope(list, { page: 1, perPage: 20, total: 2 })).toEqual([again, { ...recovery, status: 'done', delivered: 3 }])
  })

  it('sends every event of the range with `all`, delivered ones too; more than events.maxRecoveryEvents is refused naming since', async () => {
    const { r, endpoint, since, missed, received } = await outage()
    const path = `/v1/webhook-endpoints/${endpoint.id}/recover`
    expectProblem(await recover(endpoint.id, { since, include: 'all' }), {
      code: 'VALIDATION_FAILED', instance: path, detail: 'The body has a field with a bad value.',
      errors: [{ field: 'since', code: 'OUT_OF_RANGE', detail: 'The time range holds more than 3 events to send, as many as one recovery may; choose a later since (or an earlier until), and recover the rest in another recovery once this one is done.' }],
    })
    const from = (await eventOf(missed[1] as string) as { createdAt: string }).createdAt
    const before = r.received.length
    const recovery = started(await recover(endpoint.id, { since: from, include: 'all' }))
    expect(recovery).toMatchObject({ since: from, include: 'all', status: 'running', queued: 3 })
    expect(await eventually(async () => (await recoveryOf(endpoint.id, recovery.id)).status === 'done', WAIT_MS)).toBe(true)
    expect(await recoveryOf(endpoint.id, recovery.id)).toEqual({ ...recovery, status: 'done', delivered: 3 })
    expect(r.received.slice(before).map((x) => x.headers['webhook-id'])).toEqual([missed[1], missed[2], received])
  })

  it('runs one recovery per endpoint at a time (409), and DELETE cancels what is not yet sent', async () => {
    const { r, endpoint, since, missed } = await outage()
    r.behaviour = () => 'hang'
    const before = r.received.length
    const recovery = started(await recover(endpoint.id, { since }))
    expect(await eventually(async () => r.received.length === before + 1, WAIT_MS)).toBe(true)
    const path = `/v1/webhook-endpoints/${endpoint.id}/recover`
    expectProblem(await recover(endpoint.id, { since }), {
      code: 'WEBHOOK_RECOVERY_IN_PROGRESS', instance: path,
      detail: `Webhook endpoint '${endpoint.id}' is running recovery '${recovery.id}'; wait until it is done, or cancel it, before asking for another.`,
    })
    const one = `/v1/webhook-endpoints/${endpoint.id}/recoveries/${recovery.id}`
    const cancelled = await t.call('DELETE', one, { key })
    expect(cancelled.statusCode).toBe(204)
    expect(cancelled.body).toBe('')
    expect(await recoveryOf(endpoint.id, recovery.id)).toEqual({ ...recovery, status: 'cancelled' })
    // The attempt in flight ends and is counted; a cancelled recovery stays cancelled.
    r.behaviour = () => 200
    expect(r.answerHeld(200)).toBe(1)
    expect(await eventually(async () => (await recoveryOf(endpoint.id, recovery.id)).delivered === 1, WAIT_MS)).toBe(true)
    expect((await t.call('DELETE', one, { key })).statusCode).toBe(204)
    // Another may start now. Its deliveries queue behind whatever the cancelled one had queued,
    // so once they have arrived, the cancelled deliveries would have too: none did.
    const next = started(await recover(endpoint.id, { since }))
    expect(next.queued).toBe(2)
    expect(await eventually(async () => (await recoveryOf(endpoint.id, next.id)).status === 'done', WAIT_MS)).toBe(true)
    expect(r.received.slice(before).map((x) => x.headers['webhook-id'])).toEqual([missed[0], missed[1], missed[2]])
    expect(await recoveryOf(endpoint.id, recovery.id)).toEqual({ ...recovery, status: 'cancelled', delivered: 1 })
  })

  it('refuses each bound of a request with its status and field error', async () => {
    const r = await receiver()
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    const path = `/v1/webhook-endpoints/${endpoint.id}/recover`
    const field = (f: string, code: string, detail: string): object => ({
      code: 'VALIDATION_FAILED', instance: path, detail: 'The body has a field with a bad value.', errors: [{ field: f, code, detail }],
    })
    const now = Date.now()
    expectProblem(await recover(endpoint.id, {}), field('since', 'REQUIRED', 'since is required: the start of the time range to recover.') as never)
    expectProblem(await recover(endpoint.id, { since: 'yesterday' }), field('since', 'INVALID_FORMAT', 'since must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.') as never)
    expectProblem(await recover(endpoint.id, { since: new Date(now - 60_000).toISOString(), until: '2026-11-20T08:00:00' }), field('until', 'INVALID_FORMAT', 'until must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.') as never)
    const oldest = /^since must be within the events' retention of 30 days: no earlier than \d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\.$/
    const old = await recover(endpoint.id, { since: new Date(now - 31 * 86_400_000).toISOString() })
    expectProblem(old, { code: 'VALIDATION_FAILED', instance: path, detail: 'The body has a field with a bad value.', errors: [{ field: 'since', code: 'OUT_OF_RANGE', detail: expect.stringMatching(oldest) as unknown as string }] })
    expectProblem(await recover(endpoint.id, { since: new Date(now - 60_000).toISOString(), until: new Date(now + 3_600_000).toISOString() }), field('until', 'OUT_OF_RANGE', 'until must not be in the future.') as never)
    expectProblem(await recover(endpoint.id, { since: new Date(now - 60_000).toISOString(), until: new Date(now - 120_000).toISOString() }), field('until', 'OUT_OF_RANGE', 'until must not be before since.') as never)
    expectProblem(await recover(endpoint.id, { since: new Date(now - 60_000).toISOString(), include: 'some' }), field('include', 'INVALID_ENUM_VALUE', 'include must be one of \'failed\', \'all\', not \'some\'.') as never)
    expectProblem(await recover(endpoint.id, { Since: new Date(now - 60_000).toISOString() }), {
      code: 'UNKNOWN_BODY_FIELD', instance: path, detail: 'The body has a field this operation does not take: Since.',
      errors: [{ field: 'Since', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'Since\'. Did you mean \'since\'?' }],
    })
    // A disabled endpoint would not receive what it asks for.
    expect((await t.call('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { key, body: JSON.stringify({ status: 'disabled' }) })).statusCode).toBe(200)
    expectProblem(await recover(endpoint.id, { since: new Date(now - 60_000).toISOString() }), {
      code: 'VALIDATION_FAILED', instance: path,
      detail: `Webhook endpoint '${endpoint.id}' is disabled; enable it (PATCH with status 'enabled') before recovering events to it.`,
      errors: [{ field: 'endpointId', code: 'NOT_ALLOWED', detail: 'A recovery needs an enabled endpoint.' }],
    })
    // Scopes: webhooks:write to recover, webhooks:read to read.
    const reader = await t.key({ scopes: ['webhooks:read'] })
    const refused = await recover(endpoint.id, { since: new Date(now - 60_000).toISOString() }, reader)
    expectProblem(refused, { code: 'INSUFFICIENT_SCOPE', instance: path, detail: /webhooks:write/, headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="webhooks:write"' } })
  })

  it('answers 404 for another credential\'s endpoint and for a recovery the endpoint does not have', async () => {
    const r = await receiver()
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    const other = await t.key()
    const base = `/v1/webhook-endpoints/${endpoint.id}`
    const notFound = { code: 'WEBHOOK_ENDPOINT_NOT_FOUND' as const, detail: `No webhook endpoint with id '${endpoint.id}' exists for this credential.` }
    expectProblem(await recover(endpoint.id, { since: new Date(Date.now() - 60_000).toISOString() }, other), { ...notFound, instance: `${base}/recover` })
    expectProblem(await t.get(`${base}/recoveries`, other), { ...notFound, instance: `${base}/recoveries` })
    const recovery = started(await recover(endpoint.id, { since: new Date(Date.now() - 60_000).toISOString() }))
    expectProblem(await t.get(`${base}/recoveries/${recovery.id}`, other), { ...notFound, instance: `${base}/recoveries/${recovery.id}` })
    expectProblem(await t.call('DELETE', `${base}/recoveries/${recovery.id}`, { key: other }), { ...notFound, instance: `${base}/recoveries/${recovery.id}` })
    const unknown = 'wr_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2'
    expectProblem(await t.get(`${base}/recoveries/${unknown}`, key), {
      code: 'WEBHOOK_RECOVERY_NOT_FOUND', instance: `${base}/recoveries/${unknown}`, detail: `No recovery with id '${unknown}' exists for this webhook endpoint.`,
    })
    expectProblem(await t.get(`${base}/recoveries/we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2`, key), {
      code: 'INVALID_PATH_PARAMETER', instance: `${base}/recoveries/we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2`,
      errors: [{ field: 'recoveryId', code: 'INVALID_FORMAT', detail: expect.any(String) as unknown as string }],
    })
  })

  it('shares one recovery between two instances: an instance that stops mid-recovery loses nothing', async () => {
    const { r, endpoint, since, missed } = await outage()
    const twin = await t.twin()
    let closed = false
    try {
      // The first delivery hangs, on whichever instance takes it; the other instance runs too.
      r.behaviour = () => 'hang'
      const before = r.received.length
      const res = await request(`${twin.url}/v1/webhook-endpoints/${endpoint.id}/recover`, {
        method: 'POST', headers: { host: ACME_HOST, 'user-agent': 'facade-test/1.0', authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ since }),
      })
      const answer: Answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
      const recovery = started(answer)
      expect(recovery.queued).toBe(3)
      // The other instance sees it, and refuses a second one.
      expect(await recoveryOf(endpoint.id, recovery.id)).toEqual(recovery)
      expect((await recover(endpoint.id, { since })).statusCode).toBe(409)
      expect(await eventually(async () => r.received.length > before, WAIT_MS)).toBe(true)
      // The instance that was asked stops (its attempt in flight, if it held it, goes back to the queue).
      closed = true
      r.behaviour = () => 200
      await twin.close()
      r.answerHeld(200)
      expect(await eventually(async () => (await recoveryOf(endpoint.id, recovery.id)).status === 'done', WAIT_MS)).toBe(true)
      expect(await recoveryOf(endpoint.id, recovery.id)).toEqual({ ...recovery, status: 'done', delivered: 3 })
      // Each missed event arrived, in order of their first arrival; one handed back may come twice (at least once).
      const firsts = [...new Set(r.received.slice(before).map((x) => x.headers['webhook-id']))]
      expect(firsts).toEqual(missed)
    } finally {
      if (!closed) await twin.close()
    }
  })
})
