import { Redis } from 'ioredis'
import pino from 'pino'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiError } from '../../src/contract/errors.js'
import { EventLog } from '../../src/events/log.js'
import { MemoryEventStore } from '../../src/events/store.js'
import type { Principal } from '../../src/keys/principal.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { Deliveries, type DeliverySettings } from '../../src/webhooks/deliveries.js'
import { EndpointStore, type AttemptOutcome } from '../../src/webhooks/endpoints.js'
import { RecoveryStore } from '../../src/webhooks/recoveries.js'
import { SecretBox } from '../../src/webhooks/secrets.js'
import { WebhookEndpoints } from '../../src/webhooks/service.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { checked, CREDENTIAL_CACHE, DELIVERY_SETTINGS, eventTypes, HOTEL, receiverPath, WAIT_MS, WEBHOOK_SETTINGS } from '../helpers/webhook-unit.js'

// Deliveries and the endpoints API without a gateway (docs/architecture.md, "Webhooks"): the
// service over a real store, queue and worker (BullMQ on the test's Redis), delivering to a
// receiver on loopback. What a partner asks for, what it is answered, what its endpoint gets
// (headers, signature, body), and the bookkeeping of each answer: retried, gone, disabled,
// timed out, blocked, parked behind a busy endpoint. The module's mutation run uses these
// (scripts/mutation.ts).

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
const types = eventTypes()
const keys = new RedisKeyStore(redis, prefix)
const box = new SecretBox('k'.repeat(32))
const receiver = new Receiver()
const attempts: [AttemptOutcome, number][] = []
const connections: Redis[] = []
const running: Deliveries[] = []

const settings = DELIVERY_SETTINGS
const webhookSettings = WEBHOOK_SETTINGS

let namespaces = 0

/** A log, a store, deliveries (working) and the service, under a namespace of their own. */
function world(over: Partial<DeliverySettings> = {}) {
  namespaces += 1
  const ns = `${prefix}w${namespaces}:`
  const log = new EventLog(new MemoryEventStore(), types, { retentionDays: 1 })
  const store = new EndpointStore(redis, ns)
  const deliveries = new Deliveries({
    settings: { ...settings, ...over }, store, log, keys, credentialCache: CREDENTIAL_CACHE, box, logger: pino({ level: 'silent' }), work: true, userAgent: 'partner-gateway-test/1',
    connection: () => {
      const client = new Redis(REDIS_URL, { maxRetriesPerRequest: null })
      connections.push(client)
      return client
    },
    sleepMs: () => 200,
    onAttempt: (outcome, seconds) => { attempts.push([outcome, seconds]) },
    recoveries: new RecoveryStore(redis, store),
  })
  deliveries.start()
  running.push(deliveries)
  const service = new WebhookEndpoints({ store, deliveries, log, box, settings: webhookSettings })
  return { log, store, deliveries, service }
}

let acme: Principal
let acmeKey: string

function principal(keyId: string, over: Partial<Principal> = {}): Principal {
  return { keyId, kind: 'api_key', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all', ...over } as Principal
}

beforeAll(async () => {
  await receiver.listen()
  acmeKey = (await keys.create({ brand: 'acme', mode: 'live', properties: '*' })).record.id
  acme = principal(acmeKey)
})

afterAll(async () => {
  for (const deliveries of running) await deliveries.close()
  await receiver.close()
  await removePrefix(redis, prefix)
  for (const client of connections) client.disconnect()
  redis.disconnect()
})


/** The problem `run` rejects with: its code and detail. */
async function refusal(run: () => Promise<unknown>): Promise<{ code: string; detail: string; status: number }> {
  try {
    await run()
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError)
    const e = error as ApiError
    return { code: e.code, detail: e.detail, status: e.status }
  }
  throw new Error('expected a refusal')
}

/** A fresh path on the receiver, answered by `answer` (n counts this path's requests from 1). */
const path = (name: string, answer?: (n: number) => number | 'hang'): string => receiverPath(receiver, name, answer)

const at = (name: string) => receiver.received.filter((r) => r.path === `/${name}`)

describe('the endpoints API', () => {
  it('creates an endpoint with its secret shown once, lists, shows, changes and deletes it', async () => {
    const { service, store } = world()
    const url = path('crud')
    const created = await (service.prepareCreate(acme, { url, eventTypes: ['property.updated'], description: 'ops' }))()
    const data = created.data as Record<string, unknown>
    expect(created.status).toBe(201)
    const id = data.id as string
    expect(data).toEqual({
      id, url, eventTypes: ['property.updated'], description: 'ops', status: 'enabled', disabledReason: null,
      createdAt: data.createdAt, updatedAt: data.createdAt, secret: data.secret,
    })
    expect(id).toMatch(/^we_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(data.secret).toMatch(/^whsec_/)
    const view = { id, url, eventTypes: ['property.updated'], description: 'ops', status: 'enabled', disabledReason: null, createdAt: data.createdAt, updatedAt: data.createdAt }
    expect(await service.list(acme)).toEqual([view])
    expect(await service.get(acme, `we_${id.slice(3).toLowerCase()}`)).toEqual(view)
    expect(await service.list(principal('key_other'))).toEqual([])
    expect(await refusal(() => service.get(principal('key_other'), id))).toEqual({ code: 'WEBHOOK_ENDPOINT_NOT_FOUND', detail: `No webhook endpoint with id '${id}' exists for this credential.`, status: 404 })
    const changed = await service.update(acme, id, { description: null, status: 'disabled' })
    expect(changed).toEqual({ ...view, description: null, status: 'disabled', disabledReason: 'partner', updatedAt: changed.updatedAt })
    // The secret is kept sealed, never in clear.
    const stored = await store.get(id)
    expect(JSON.stringify(stored)).not.toContain(data.secret as string)
    expect(box.open(stored?.secrets[0]?.sealed as string, `webhook-endpoint:${id}`).plain.toString()).toBe(data.secret)
    await service.remove(acme, id)
    expect(await service.list(acme)).toEqual([])
    expect(await refusal(() => service.update(acme, id, {}))).toMatchObject({ code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404 })
  })

  it('refuses a type whose scope the credential lacks, and an endpoint past the credential\'s bound', async () => {
    const { service } = world()
    const reader = principal(acmeKey, { scopes: new Set(['properties:read']) } as Partial<Principal>)
    expect(await refusal(async () => service.prepareCreate(reader, { url: path('scope'), eventTypes: ['property.updated', 'guest.created'] })))
      .toEqual({ code: 'INSUFFICIENT_SCOPE', detail: 'Subscribing to \'guest.created\' needs the scope \'guests:read\', which this credential does not have.', status: 403 })
    const made = await (service.prepareCreate(reader, { url: path('scope'), eventTypes: ['property.updated'] }))()
    expect(await refusal(() => service.update(reader, (made.data as { id: string }).id, { eventTypes: ['guest.created'] })))
      .toMatchObject({ code: 'INSUFFICIENT_SCOPE', status: 403 })
    const owner = principal('key_bound')
    for (let i = 0; i < 3; i += 1) await (service.prepareCreate(owner, { url: path('bound'), eventTypes: ['guest.created'] }))()
    expect(await refusal(() => (service.prepareCreate(owner, { url: path('bound'), eventTypes: ['guest.created'] }))()))
      .toEqual({ code: 'WEBHOOK_ENDPOINT_LIMIT_REACHED', detail: 'This credential has 3 webhook endpoints, as many as it may; delete one first.', status: 409 })
  })

  it('rotates the secret: both sign for the overlap, each verifiable by the partner', async () => {
    const { service } = world()
    const created = (await (service.prepareCreate(acme, { url: path('rotate'), eventTypes: ['property.updated'] }))()).data as { id: string; secret: string }
    expect(await refusal(() => service.prepareRotate(acme, created.id, { x: 1 }))).toMatchObject({ code: 'UNKNOWN_BODY_FIELD', status: 400 })
    const rotated = (await (await service.prepareRotate(acme, created.id, undefined))()).data as { secret: string }
    expect(rotated.secret).not.toBe(created.secret)
    const sent = await (await service.prepareTest(acme, created.id, {}))()
    const eventId = (sent.data as { eventId: string }).eventId
    expect(sent).toEqual({ status: 202, data: { eventId } })
    expect(await eventually(async () => at('rotate').length === 1, WAIT_MS)).toBe(true)
    const request = at('rotate')[0]
    const headers = { 'webhook-id': String(request?.headers['webhook-id']), 'webhook-timestamp': String(request?.headers['webhook-timestamp']), 'webhook-signature': String(request?.headers['webhook-signature']) }
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2)
    for (const secret of [created.secret, rotated.secret]) expect(new Webhook(secret).verify(request?.body as string, headers)).toEqual(JSON.parse(request?.body as string))
    expect(JSON.parse(request?.body as string)).toEqual({
      id: eventId, type: 'webhook.test', createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as unknown, mode: 'live', propertyId: null,
      object: { type: 'webhook_endpoint', id: created.id, path: `/v1/webhook-endpoints/${created.id}` },
    })
    expect(request?.method).toBe('POST')
    expect(request?.headers['content-type']).toBe('application/json')
    expect(request?.headers['user-agent']).toBe('partner-gateway-test/1')
  })
})

describe('deliveries', () => {
  it('delivers a stored event to each enabled endpoint subscribed to its type whose credential sees it, signed, and lists the attempt', async () => {
    const { service, log, deliveries } = world()
    const mine = (await (service.prepareCreate(acme, { url: path('fan'), eventTypes: ['property.updated'] }))()).data as { id: string; secret: string }
    await (service.prepareCreate(acme, { url: path('fan-guests'), eventTypes: ['guest.created'] }))()
    const off = (await (service.prepareCreate(acme, { url: path('fan-off'), eventTypes: ['property.updated'] }))()).data as { id: string }
    await service.update(acme, off.id, { status: 'disabled' })
    const suspendedKey = (await keys.create({ brand: 'acme', mode: 'live', properties: '*' })).record.id
    await (service.prepareCreate(principal(suspendedKey), { url: path('fan-suspended'), eventTypes: ['property.updated'] }))()
    await keys.setStatus(suspendedKey, 'suspended')
    const [outcome] = await log.ingest('pms', 'live', [checked(0, 'src-1')])
    const eventId = (outcome as { eventId: string }).eventId
    expect(await eventually(async () => at('fan').length === 1, WAIT_MS)).toBe(true)
    const request = at('fan')[0]
    expect(request?.method).toBe('POST')
    expect(request?.headers['webhook-id']).toBe(eventId)
    expect(new Webhook(mine.secret).verify(request?.body as string, {
      'webhook-id': eventId, 'webhook-timestamp': String(request?.headers['webhook-timestamp']), 'webhook-signature': String(request?.headers['webhook-signature']),
    })).toEqual({ id: eventId, type: 'property.updated', createdAt: expect.any(String) as unknown, mode: 'live', propertyId: HOTEL, object: { type: 'property', id: HOTEL, path: `/v1/properties/${HOTEL}` } })
    expect(await eventually(async () => (await service.attempts(acme, mine.id)).length === 1, WAIT_MS)).toBe(true)
    expect(await service.attempts(acme, mine.id)).toEqual([{ eventId, attempt: 1, at: expect.any(String) as unknown, status: 200, outcome: 'delivered', durationMs: expect.any(Number) as unknown }])
    // A publisher's copy queues nothing again.
    await log.ingest('pms', 'live', [checked(0, 'src-1')])
    expect(await deliveries.refresh()).toEqual({ pending: 0, oldestPendingSeconds: 0, endpoints: { enabled: 2, disabled: 1 } })
    expect(at('fan')).toHaveLength(1)
    expect(at('fan-guests')).toEqual([])
    expect(at('fan-off')).toEqual([])
    expect(at('fan-suspended')).toEqual([])
  })

  it('retries a failed attempt on the schedule and forgets the failures after a success', async () => {
    const { service, log, store } = world()
    const made = (await (service.prepareCreate(acme, { url: path('retry', (n) => (n === 1 ? 503 : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    const [outcome] = await log.ingest('pms', 'live', [checked(0, 'src-retry')])
    const eventId = (outcome as { eventId: string }).eventId
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 2, WAIT_MS)).toBe(true)
    expect((await service.attempts(acme, made.id)).map(({ eventId: e, attempt, status, outcome: o }) => ({ e, attempt, status, o }))).toEqual([
      { e: eventId, attempt: 2, status: 200, o: 'delivered' },
      { e: eventId, attempt: 1, status: 503, o: 'failed' },
    ])
    expect((await store.get(made.id))?.failingSince).toBeNull()
    expect((await store.get(made.id))?.status).toBe('enabled')
  })

  it('disables an endpoint that answers 410, with no retry', async () => {
    const { service, log } = world()
    const made = (await (service.prepareCreate(acme, { url: path('gone', () => 410), eventTypes: ['property.updated'] }))()).data as { id: string }
    await log.ingest('pms', 'live', [checked(0, 'src-gone')])
    expect(await eventually(async () => (await service.get(acme, made.id)).status === 'disabled', WAIT_MS)).toBe(true)
    expect(await service.get(acme, made.id)).toMatchObject({ status: 'disabled', disabledReason: 'gone' })
    expect((await service.attempts(acme, made.id)).map((a) => [a.status, a.outcome])).toEqual([[410, 'gone']])
    // Nothing more is sent to it, but a test is (the partner asked).
    await log.ingest('pms', 'live', [checked(0, 'src-gone-2')])
    await (await service.prepareTest(acme, made.id, undefined))()
    expect(await eventually(async () => at('gone').length === 2, WAIT_MS)).toBe(true)
    expect(at('gone').map((r) => JSON.parse(r.body).type)).toEqual(['property.updated', 'webhook.test'])
  })

  it('disables an endpoint that failed throughout the configured time', async () => {
    const { service, log } = world({ disableAfterHours: 0.00001, retrySchedule: [0.1, 0.1, 0.1] })
    const made = (await (service.prepareCreate(acme, { url: path('failing', () => 500), eventTypes: ['property.updated'] }))()).data as { id: string }
    await log.ingest('pms', 'live', [checked(0, 'src-failing')])
    expect(await eventually(async () => (await service.get(acme, made.id)).status === 'disabled', WAIT_MS)).toBe(true)
    expect(await service.get(acme, made.id)).toMatchObject({ status: 'disabled', disabledReason: 'failing' })
    expect((await service.attempts(acme, made.id)).map((a) => [a.attempt, a.status, a.outcome])).toEqual([[2, 500, 'failed'], [1, 500, 'failed']])
  })

  it('fails an attempt that gets no answer in time, and one to an internal address when those are not allowed', async () => {
    const slow = world({ deliveryTimeoutMs: 300, retrySchedule: [30] })
    const made = (await (slow.service.prepareCreate(acme, { url: path('slow', () => 'hang'), eventTypes: ['property.updated'] }))()).data as { id: string }
    await slow.log.ingest('pms', 'live', [checked(0, 'src-slow')])
    expect(await eventually(async () => (await slow.service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    expect((await slow.service.attempts(acme, made.id)).map((a) => [a.status, a.outcome])).toEqual([[null, 'timeout']])

    const guarded = world({ allowPrivateTargets: false, retrySchedule: [30] })
    const inside = (await (guarded.service.prepareCreate(acme, { url: path('inside'), eventTypes: ['property.updated'] }))()).data as { id: string }
    await guarded.log.ingest('pms', 'live', [checked(0, 'src-inside')])
    expect(await eventually(async () => (await guarded.service.attempts(acme, inside.id)).length === 1, WAIT_MS)).toBe(true)
    expect((await guarded.service.attempts(acme, inside.id)).map((a) => [a.status, a.outcome])).toEqual([[null, 'blocked']])
    expect(at('inside')).toEqual([])
  })

  it('makes one attempt at a time to an endpoint with one lease; the others wait and then go', async () => {
    const { service, log } = world()
    const made = (await (service.prepareCreate(acme, { url: path('busy', (n) => (n === 1 ? 'hang' : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    await log.ingest('pms', 'live', [checked(0, 'src-b1'), checked(1, 'src-b2'), checked(2, 'src-b3')])
    expect(await eventually(async () => at('busy').length === 1, WAIT_MS)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(at('busy')).toHaveLength(1)
    // Earlier tests' requests held are answered too.
    receiver.answerHeld(200)
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 3, WAIT_MS)).toBe(true)
    expect((await service.attempts(acme, made.id)).map((a) => a.outcome)).toEqual(['delivered', 'delivered', 'delivered'])
  })

  it('sends an endpoint\'s attempts on connections kept alive, and closes them when it is deleted and at shutdown', async () => {
    const own = await new Receiver().listen()
    try {
      const { service, log, deliveries } = world()
      const made = (await (service.prepareCreate(acme, { url: `${own.url}/kept`, eventTypes: ['property.updated'] }))()).data as { id: string }
      for (let i = 1; i <= 4; i += 1) {
        await log.ingest('pms', 'live', [checked(0, `src-kept-${i}`)])
        expect(await eventually(async () => own.received.length === i, WAIT_MS)).toBe(true)
      }
      // Four attempts, fewer connections: the endpoint sees a request come on a connection it saw before.
      expect(new Set(own.received.map((r) => r.remotePort)).size).toBeLessThan(4)
      expect(own.open.size).toBeGreaterThan(0)
      await service.remove(acme, made.id)
      expect(await eventually(async () => own.open.size === 0, WAIT_MS)).toBe(true)

      await (service.prepareCreate(acme, { url: `${own.url}/again`, eventTypes: ['property.updated'] }))()
      await log.ingest('pms', 'live', [checked(0, 'src-kept-5')])
      expect(await eventually(async () => own.received.length === 5, WAIT_MS)).toBe(true)
      expect(own.open.size).toBeGreaterThan(0)
      running.splice(running.indexOf(deliveries), 1)
      await deliveries.close()
      expect(await eventually(async () => own.open.size === 0, WAIT_MS)).toBe(true)
    } finally {
      await own.close()
    }
  })

  it('bounds the deliveries a partner asks for, redelivers an event it sees, and refuses one it does not', async () => {
    const { service, log } = world()
    const made = (await (service.prepareCreate(acme, { url: path('manual', () => 'hang'), eventTypes: ['property.updated'] }))()).data as { id: string }
    await (await service.prepareTest(acme, made.id, {}))()
    await (await service.prepareTest(acme, made.id, {}))()
    expect(await refusal(async () => (await service.prepareTest(acme, made.id, {}))())).toEqual({
      code: 'RATE_LIMITED', status: 429,
      detail: `Webhook endpoint '${made.id}' has 2 test or redelivered deliveries not yet finished, as many as it may; retry once some are delivered (GET /v1/webhook-endpoints/${made.id}/deliveries shows them).`,
    })
    expect(await refusal(() => service.prepareRedeliver(acme, 'evt_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2', {}))).toMatchObject({ code: 'VALIDATION_FAILED', status: 422 })
    expect(await refusal(() => service.prepareRedeliver(acme, 'evt_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2', { endpointId: made.id })))
      .toEqual({ code: 'EVENT_NOT_FOUND', detail: 'No event with id \'evt_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2\' exists for this credential.', status: 404 })
    const [outcome] = await log.ingest('pms', 'live', [checked(0, 'src-manual')])
    const eventId = (outcome as { eventId: string }).eventId
    // Another brand's credential owns no such endpoint, and sees no such event.
    expect(await refusal(() => service.prepareRedeliver(principal('key_x', { brand: 'globex' }), eventId, { endpointId: made.id }))).toMatchObject({ code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404 })
    const redeliver = await service.prepareRedeliver(acme, eventId, { endpointId: made.id })
    expect(await refusal(redeliver)).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
    receiver.behaviour = (() => { const before = receiver.behaviour; return (n: number, r: Parameters<typeof before>[1]) => (r.path === '/manual' ? 200 : before(n, r)) })()
    receiver.answerHeld(200)
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length >= 2, WAIT_MS)).toBe(true)
    expect(await eventually(async () => {
      try {
        await (await service.prepareRedeliver(acme, eventId, { endpointId: made.id }))()
        return true
      } catch {
        return false
      }
    }, WAIT_MS, 200)).toBe(true)
    expect(await eventually(async () => at('manual').some((r) => r.headers['webhook-id'] === eventId), WAIT_MS)).toBe(true)
  })

  it('recovers the events an endpoint did not receive, and shows and cancels recoveries', async () => {
    const { service, log } = world()
    const made = (await (service.prepareCreate(acme, { url: path('recover', (n) => (n === 1 ? 500 : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    const since = new Date(Date.now() - 1000).toISOString()
    const [first] = await log.ingest('pms', 'live', [checked(0, 'src-r1')])
    const eventId = (first as { eventId: string }).eventId
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 2, WAIT_MS)).toBe(true)
    await log.ingest('pms', 'live', [checked(0, 'src-r2', 'guest.created')])
    const none = await (await service.prepareRecover(acme, made.id, { since }))()
    expect(none).toMatchObject({ status: 202, data: { status: 'done', queued: 0, include: 'failed' } })
    const all = await (await service.prepareRecover(acme, made.id, { since, include: 'all' }))()
    const recovery = all.data as { id: string }
    expect(all).toMatchObject({ status: 202, data: { status: 'running', queued: 1, include: 'all', endpointId: made.id } })
    expect(await eventually(async () => (await service.recovery(acme, made.id, recovery.id)).status === 'done', WAIT_MS)).toBe(true)
    expect(await service.recovery(acme, made.id, `wr_${recovery.id.slice(3).toLowerCase()}`)).toMatchObject({ status: 'done', delivered: 1, failed: 0 })
    expect(at('recover').filter((r) => r.headers['webhook-id'] === eventId)).toHaveLength(3)
    expect((await service.recoveriesOf(acme, made.id)).map((r) => r.id)).toEqual([recovery.id, (none.data as { id: string }).id])
    expect(await refusal(() => service.recovery(acme, made.id, 'wr_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2')))
      .toEqual({ code: 'WEBHOOK_RECOVERY_NOT_FOUND', detail: 'No recovery with id \'wr_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2\' exists for this webhook endpoint.', status: 404 })
    await service.cancelRecovery(acme, made.id, recovery.id)
    expect(await service.recovery(acme, made.id, recovery.id)).toMatchObject({ status: 'done' })
    await service.update(acme, made.id, { status: 'disabled' })
    expect(await refusal(() => service.prepareRecover(acme, made.id, { since }))).toMatchObject({ code: 'VALIDATION_FAILED', status: 422 })
  })
})

describe('the attempts counted', () => {
  it('counts each attempt by its outcome, with its duration in seconds', () => {
    const outcomes = new Set(attempts.map(([outcome]) => outcome))
    expect([...outcomes].sort()).toEqual(['blocked', 'delivered', 'failed', 'gone', 'timeout'])
    for (const [, seconds] of attempts) expect(seconds).toBeGreaterThanOrEqual(0)
  })
})
