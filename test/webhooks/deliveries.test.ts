import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisKeyStore } from '../../src/keys/store.js'
import { accepted, EVENT_ID, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { receiversClosedAfterEach } from '../helpers/receiver.js'
import { expectProblem } from '../helpers/problem.js'
import { eventually } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// Deliveries (docs/partners.md, "Webhooks") to real receivers on loopback, through real Redis
// and the real queue: signatures checked by the `standardwebhooks` package, redirects and
// timeouts retried on a short schedule, 410 disabling, isolation of a hanging endpoint, and
// who may see an event decided when it is delivered.

const dataOf = (answer: Answer): unknown => (JSON.parse(answer.body) as { data: unknown }).data

describe('deliveries', () => {
  let t: TestGateway
  let admin: string
  let key: string
  let hotel: string
  const receiver = receiversClosedAfterEach()

  beforeAll(async () => {
    t = await TestGateway.start({ env: PUBLISHER_TOKENS, config: webhookConfig({ endpointConcurrency: 2 }) })
    admin = await listenAdmin(t.gateway)
    key = await t.key()
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
  })

  const publishOne = async (sandbox = false): Promise<string> => {
    const event = sandbox ? hotelChanged(hotel, 'ACME', { source: 'pms-sandbox' }) : hotelChanged(hotel)
    const [accepted1] = accepted(await publish(admin, event, sandbox ? { token: PUBLISHER_TOKENS.EVENTS_PMS_SANDBOX_TOKEN } : {}))
    return accepted1?.eventId as string
  }

  it('signs each delivery as Standard Webhooks specifies, with the body GET /v1/events/{id} serves', async () => {
    const r = await receiver()
    const endpoint = await createEndpoint(t, key, { url: `${r.url}/hooks`, eventTypes: ['property.updated'] })
    const eventId = await publishOne()
    expect(await eventually(async () => r.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const [got] = r.of(eventId)
    const event = await t.get(`/v1/events/${eventId}`, key)
    expect(got?.body).toBe(JSON.stringify(dataOf(event)))
    expect(got?.path).toBe('/hooks')
    expect(got?.headers).toMatchObject({
      'content-type': 'application/json', 'user-agent': expect.stringMatching(/^partner-gateway\/[0-9.]+ webhooks$/) as string,
      'webhook-id': eventId, 'webhook-timestamp': expect.stringMatching(/^[0-9]{10}$/) as string, 'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/) as string,
    })
    expect(new Webhook(endpoint.secret).verify(got?.body as string, got?.headers as Record<string, string>)).toEqual(dataOf(event))
    expect(eventId).toMatch(EVENT_ID)
    // The attempt, as the partner reads it.
    expect(await eventually(async () => (dataOf(await t.get(`/v1/webhook-endpoints/${endpoint.id}/deliveries`, key)) as unknown[]).length === 1, WAIT_MS)).toBe(true)
    expect(dataOf(await t.get(`/v1/webhook-endpoints/${endpoint.id}/deliveries`, key))).toEqual([
      { eventId, attempt: 1, at: expect.any(String), status: 200, outcome: 'delivered', durationMs: expect.any(Number) },
    ])
    // What operators see: the attempt counted, the queue on /status.
    const metrics = await (await fetch(`${admin}/metrics`)).text()
    expect(metrics).toMatch(/^gateway_webhook_attempts_total\{outcome="delivered"\} [1-9]/m)
    expect(metrics).toMatch(/^gateway_webhook_attempt_duration_seconds_count [1-9]/m)
    const snapshot = await t.gateway.deliveries?.refresh()
    expect(snapshot).toEqual({ pending: expect.any(Number), oldestPendingSeconds: expect.any(Number), endpoints: { enabled: expect.any(Number), disabled: expect.any(Number) } })
    expect((await (await fetch(`${admin}/status`)).json() as { events: unknown }).events).toEqual(snapshot)
    expect(await (await fetch(`${admin}/metrics`)).text()).toMatch(/^gateway_webhook_endpoints\{status="enabled"\} [1-9]/m)
    expect(JSON.stringify(t.logs.records())).not.toContain(endpoint.secret.slice(6))
  })

  it('signs with the old and the new secret during a rotation, each verifying alone', async () => {
    const r = await receiver()
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    const rotated = await t.call('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, { key })
    expect(rotated.statusCode).toBe(200)
    const secret = (dataOf(rotated) as { secret: string }).secret
    expect(secret).not.toBe(endpoint.secret)
    const eventId = await publishOne()
    expect(await eventually(async () => r.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const [got] = r.of(eventId)
    expect((got?.headers['webhook-signature'] as string).split(' ')).toHaveLength(2)
    for (const s of [endpoint.secret, secret]) expect(new Webhook(s).verify(got?.body as string, got?.headers as Record<string, string>)).toMatchObject({ id: eventId })
  })

  it('retries a 3xx (never following it) and a timeout on the schedule, with the same webhook-id', async () => {
    const r = await receiver((n) => (n === 1 ? 302 : n === 2 ? 'hang' : 204))
    const t2 = await TestGateway.start({ env: PUBLISHER_TOKENS, config: webhookConfig({ deliveryTimeoutMs: 1000 }) })
    try {
      const admin2 = await listenAdmin(t2.gateway)
      const key2 = await t2.key()
      const endpoint = await createEndpoint(t2, key2, { url: r.url, eventTypes: ['property.updated'] })
      const [event] = accepted(await publish(admin2, hotelChanged(hotel)))
      const eventId = event?.eventId as string
      expect(await eventually(async () => r.of(eventId).length === 3, WAIT_MS)).toBe(true)
      expect(r.received.map((x) => x.path)).toEqual(['/', '/', '/'])
      const path = `/v1/webhook-endpoints/${endpoint.id}/deliveries`
      expect(await eventually(async () => (dataOf(await t2.get(path, key2)) as unknown[]).length === 3, WAIT_MS)).toBe(true)
      expect((dataOf(await t2.get(path, key2)) as { attempt: number; status: number | null; outcome: string }[]).map(({ attempt, status, outcome }) => ({ attempt, status, outcome }))).toEqual([
        { attempt: 3, status: 204, outcome: 'delivered' },
        { attempt: 2, status: null, outcome: 'timeout' },
        { attempt: 1, status: 302, outcome: 'failed' },
      ])
    } finally {
      await t2.close()
    }
  })

  it('disables an endpoint that answers 410, without retrying', async () => {
    const r = await receiver(() => 410)
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    const eventId = await publishOne()
    const path = `/v1/webhook-endpoints/${endpoint.id}`
    expect(await eventually(async () => (dataOf(await t.get(path, key)) as { status: string }).status === 'disabled', WAIT_MS)).toBe(true)
    expect(dataOf(await t.get(path, key))).toMatchObject({ status: 'disabled', disabledReason: 'gone' })
    expect(dataOf(await t.get(`${path}/deliveries`, key))).toEqual([{ eventId, attempt: 1, at: expect.any(String), status: 410, outcome: 'gone', durationMs: expect.any(Number) }])
    // A later event is not sent to it; one to another endpoint shows it was fanned out.
    const other = await receiver()
    await createEndpoint(t, key, { url: other.url, eventTypes: ['property.updated'] })
    const later = await publishOne()
    expect(await eventually(async () => other.of(later).length === 1, WAIT_MS)).toBe(true)
    expect(r.received).toHaveLength(1)
  })

  it('disables an endpoint whose attempts failed throughout events.disableAfterHours, and PATCH enables it again', async () => {
    const r = await receiver(() => 500)
    // About a second of failures disables it here; the schedule would allow 9 attempts.
    const t2 = await TestGateway.start({ env: PUBLISHER_TOKENS, config: webhookConfig({ disableAfterHours: 0.0003, retrySchedule: [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3] }) })
    try {
      const admin2 = await listenAdmin(t2.gateway)
      const key2 = await t2.key()
      const endpoint = await createEndpoint(t2, key2, { url: r.url, eventTypes: ['property.updated'] })
      accepted(await publish(admin2, hotelChanged(hotel)))
      const path = `/v1/webhook-endpoints/${endpoint.id}`
      expect(await eventually(async () => (dataOf(await t2.get(path, key2)) as { status: string }).status === 'disabled', WAIT_MS)).toBe(true)
      expect(dataOf(await t2.get(path, key2))).toMatchObject({ status: 'disabled', disabledReason: 'failing' })
      const attempts = dataOf(await t2.get(`${path}/deliveries`, key2)) as { outcome: string; status: number }[]
      expect(attempts.length).toBeGreaterThanOrEqual(2)
      expect(attempts.every((a) => a.outcome === 'failed' && a.status === 500)).toBe(true)
      const enabled = await t2.call('PATCH', path, { key: key2, body: JSON.stringify({ status: 'enabled' }) })
      expect(dataOf(enabled)).toMatchObject({ status: 'enabled', disabledReason: null })
    } finally {
      await t2.close()
    }
  })

  it('keeps a hanging endpoint from delaying another: at most endpointConcurrency attempts to it', async () => {
    const hanging = await receiver(() => 'hang')
    const fast = await receiver()
    const k = await t.key()
    await createEndpoint(t, k, { url: hanging.url, eventTypes: ['property.updated'] })
    await createEndpoint(t, k, { url: fast.url, eventTypes: ['property.updated'] })
    const ids: string[] = []
    for (let i = 0; i < 6; i += 1) ids.push(await publishOne())
    expect(await eventually(async () => ids.every((id) => fast.of(id).length >= 1), WAIT_MS)).toBe(true)
    // endpointConcurrency is 2 here: the other four wait for a slot.
    expect(hanging.received.filter((x) => ids.includes(x.headers['webhook-id'] as string)).length).toBeLessThanOrEqual(2)
  })

  it('delivers nothing to the endpoint of a key suspended after the event', async () => {
    // An instance that serves only takes the event; the key is suspended; then one that delivers starts.
    const r = await receiver()
    const serving = await TestGateway.start({ env: { ...PUBLISHER_TOKENS, EVENTS_WORKER: 'off' }, config: webhookConfig() })
    try {
      const adminUrl = await listenAdmin(serving.gateway)
      const { key: k, id } = await serving.keyWithId()
      const witness = await serving.key()
      await createEndpoint(serving, k, { url: `${r.url}/suspended`, eventTypes: ['property.updated'] })
      await createEndpoint(serving, witness, { url: `${r.url}/witness`, eventTypes: ['property.updated'] })
      const [event] = accepted(await publish(adminUrl, hotelChanged(hotel)))
      await new RedisKeyStore(serving.gateway.redis as never, serving.prefix).setStatus(id, 'suspended')
      const worker = await serving.twin({ eventsWorker: 'on' })
      try {
        expect(await eventually(async () => r.of(event?.eventId as string).length === 1, WAIT_MS)).toBe(true)
        expect(await eventually(async () => (await worker.gateway.deliveries?.backlog())?.pending === 0, WAIT_MS)).toBe(true)
        expect(r.received.map((x) => x.path)).toEqual(['/witness'])
      } finally {
        await worker.close()
      }
    } finally {
      await serving.close()
    }
  })

  it('never delivers a live event to a test credential\'s endpoint', async () => {
    const r = await receiver()
    const testKey = await t.key({ mode: 'test' })
    await createEndpoint(t, testKey, { url: r.url, eventTypes: ['property.updated'] })
    const live = await publishOne()
    const sandbox = await publishOne(true)
    expect(await eventually(async () => r.of(sandbox).length === 1, WAIT_MS)).toBe(true)
    expect(r.of(live)).toEqual([])
    expect(JSON.parse(r.of(sandbox)[0]?.body as string)).toMatchObject({ id: sandbox, mode: 'test' })
  })

  it('sends a test event to one endpoint, and redelivers a retained event on request', async () => {
    const r = await receiver()
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    const test = await t.call('POST', `/v1/webhook-endpoints/${endpoint.id}/test`, { key })
    expect(test.statusCode).toBe(202)
    const testId = (dataOf(test) as { eventId: string }).eventId
    expect(await eventually(async () => r.of(testId).length === 1, WAIT_MS)).toBe(true)
    expect(JSON.parse(r.of(testId)[0]?.body as string)).toEqual({
      id: testId, type: 'webhook.test', createdAt: expect.any(String), mode: 'live', propertyId: null,
      object: { type: 'webhook_endpoint', id: endpoint.id, path: `/v1/webhook-endpoints/${endpoint.id}` },
    })
    // A test event, in no log, is sent again to the endpoint it was sent to: the same event, signed again.
    const testAgain = await t.call('POST', `/v1/events/${testId}/redeliver`, { key, body: JSON.stringify({ endpointId: endpoint.id }) })
    expect({ status: testAgain.statusCode, data: dataOf(testAgain) }).toEqual({ status: 202, data: { eventId: testId, endpointId: endpoint.id } })
    expect(await eventually(async () => r.of(testId).length === 2, WAIT_MS)).toBe(true)
    expect(r.of(testId)[1]?.body).toBe(r.of(testId)[0]?.body)
    expect(new Webhook(endpoint.secret).verify(r.of(testId)[1]?.body as string, r.of(testId)[1]?.headers as Record<string, string>)).toEqual(JSON.parse(r.of(testId)[0]?.body as string))
    // Not to another endpoint, nor another credential's: the test was not sent there.
    const other = await createEndpoint(t, key, { url: `${r.url}/other`, eventTypes: ['property.updated'] })
    const redeliverPath = `/v1/events/${testId}/redeliver`
    expectProblem(await t.call('POST', redeliverPath, { key, body: JSON.stringify({ endpointId: other.id }) }), { code: 'EVENT_NOT_FOUND', instance: redeliverPath })
    const stranger = await t.key()
    expectProblem(await t.call('POST', redeliverPath, { key: stranger, body: JSON.stringify({ endpointId: endpoint.id }) }), { code: 'WEBHOOK_ENDPOINT_NOT_FOUND', instance: redeliverPath })
    expect((await t.call('DELETE', `/v1/webhook-endpoints/${other.id}`, { key })).statusCode).toBe(204)
    const eventId = await publishOne()
    expect(await eventually(async () => r.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const again = await t.call('POST', `/v1/events/${eventId}/redeliver`, { key, body: JSON.stringify({ endpointId: endpoint.id }) })
    expect(again.statusCode).toBe(202)
    expect(dataOf(again)).toEqual({ eventId, endpointId: endpoint.id })
    expect(await eventually(async () => r.of(eventId).length === 2, WAIT_MS)).toBe(true)
  })
})
