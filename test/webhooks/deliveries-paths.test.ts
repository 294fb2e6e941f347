import { SpanStatusCode, type Span } from '@opentelemetry/api'
import { Redis } from 'ioredis'
import pino from 'pino'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { CheckedEvent } from '../../src/events/cloudevents.js'
import { EventLog } from '../../src/events/log.js'
import { MemoryEventStore } from '../../src/events/store.js'
import type { Principal } from '../../src/keys/principal.js'
import { RedisKeyStore, type KeyStore } from '../../src/keys/store.js'
import type { Tracing } from '../../src/tracing/tracing.js'
import { Deliveries, type DeliverySettings } from '../../src/webhooks/deliveries.js'
import { EndpointStore, secretContext, type AttemptOutcome } from '../../src/webhooks/endpoints.js'
import { RecoveryStore } from '../../src/webhooks/recoveries.js'
import { SecretBox } from '../../src/webhooks/secrets.js'
import { WebhookEndpoints } from '../../src/webhooks/service.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, freePort, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { checked, CREDENTIAL_CACHE, DELIVERY_SETTINGS, eventTypes, receiverPath, WAIT_MS, WEBHOOK_SETTINGS } from '../helpers/webhook-unit.js'

// The paths of a delivery that the everyday ones (worker.test.ts) do not take, without a
// gateway: what an attempt lists (a refused connection, the time it took) and the backlog
// operators read, an endpoint deleted or disabled while its delivery waits, one batch of two
// brands, an endpoint an OAuth client made, the bound on tests not yet finished, signing
// secrets sealed under a previous key or under none configured, a reloaded configuration, the
// attempt's span, and a shutdown with an attempt in flight. Each asserts what the partner's
// endpoint receives, the attempts the partner lists, the endpoint's record, and what operators
// are told.

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
const types = eventTypes()
const keys = new RedisKeyStore(redis, prefix)
const KEY = 'k'.repeat(32)
const box = new SecretBox(KEY)
const receiver = new Receiver()
const connections: Redis[] = []
const running: Deliveries[] = []

const settings = DELIVERY_SETTINGS
const webhookSettings = WEBHOOK_SETTINGS

/** What one instance told its metrics: each attempt's outcome and seconds, and the unreadable secrets it met. */
interface Told {
  attempts: [AttemptOutcome, number][]
  unreadable: number
}

/** A span as an exporter would get it: its name, attributes, status, and whether it ended. */
interface SpanSeen {
  name: string
  attributes: Record<string, unknown>
  status: SpanStatusCode | undefined
  ended: boolean
}

/** Tracing that keeps the spans of attempts as they are written. */
function recordingTracing(spans: SpanSeen[]): Tracing {
  return {
    startLinkedClientSpan: (name: string) => {
      const seen: SpanSeen = { name, attributes: {}, status: undefined, ended: false }
      spans.push(seen)
      const span = {
        setAttribute: (key: string, value: unknown) => { seen.attributes[key] = value; return span },
        setAttributes: (values: Record<string, unknown>) => { Object.assign(seen.attributes, values); return span },
        setStatus: (status: { code: SpanStatusCode }) => { seen.status = status.code; return span },
        end: () => { seen.ended = true },
      }
      return span as unknown as Span
    },
  } as unknown as Tracing
}

interface InstanceOptions {
  over?: Partial<DeliverySettings>
  /** The keys this instance opens secrets with (the service seals with `box`). */
  box?: SecretBox
  tracing?: Tracing
  /** False: the instance queues deliveries but makes none (EVENTS_WORKER=off). */
  work?: boolean
  now?: () => number
  /** The key store the instance reads owners from (one without a subscriber, hearing no changes, by default). */
  keys?: KeyStore
}

/** One instance's deliveries (working) over `store` and `log`. */
function instance(store: EndpointStore, log: EventLog, options: InstanceOptions = {}) {
  const told: Told = { attempts: [], unreadable: 0 }
  const deliveries = new Deliveries({
    settings: { ...settings, ...options.over }, store, log, keys: options.keys ?? keys, credentialCache: CREDENTIAL_CACHE, box: options.box ?? box, logger: pino({ level: 'silent' }), work: options.work ?? true, userAgent: 'partner-gateway-test/1',
    connection: () => {
      const client = new Redis(REDIS_URL, { maxRetriesPerRequest: null })
      connections.push(client)
      return client
    },
    sleepMs: () => 200,
    onAttempt: (outcome, seconds) => { told.attempts.push([outcome, seconds]) },
    onSecretUnreadable: () => { told.unreadable += 1 },
    ...(options.tracing === undefined ? {} : { tracing: options.tracing }),
    ...(options.now === undefined ? {} : { now: options.now }),
    recoveries: new RecoveryStore(redis, store),
  })
  deliveries.start()
  running.push(deliveries)
  return { deliveries, told }
}

let namespaces = 0

/** A log, a store, one instance's deliveries and the service (sealing with `box`), under a namespace of their own. */
function world(options: InstanceOptions = {}) {
  namespaces += 1
  const log = new EventLog(new MemoryEventStore(), types, { retentionDays: 1 })
  const store = new EndpointStore(redis, `${prefix}w${namespaces}:`)
  const { deliveries, told } = instance(store, log, options)
  const service = new WebhookEndpoints({ store, deliveries, log, box, settings: webhookSettings })
  return { log, store, deliveries, told, service }
}

/** Stops an instance, as a shutdown does. */
async function shutDown(deliveries: Deliveries): Promise<void> {
  running.splice(running.indexOf(deliveries), 1)
  await deliveries.close()
}

let acme: Principal

beforeAll(async () => {
  await receiver.listen()
  const keyId = (await keys.create({ brand: 'acme', mode: 'live', properties: '*' })).record.id
  acme = { keyId, kind: 'apiKey', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all' } as Principal
})

afterAll(async () => {
  receiver.answerHeld(200)
  for (const deliveries of running) await deliveries.close()
  await receiver.close()
  await removePrefix(redis, prefix)
  for (const client of connections) client.disconnect()
  redis.disconnect()
})


/** A fresh path on the receiver, answered by `answer` (n counts this path's requests from 1). */
const path = (name: string, answer?: (n: number) => number | 'hang'): string => receiverPath(receiver, name, answer)

const at = (name: string) => receiver.received.filter((r) => r.path === `/${name}`)

/** The event's id, as the ingest answered it. */
async function ingest(log: EventLog, event: CheckedEvent): Promise<string> {
  const [outcome] = await log.ingest(event.mapped?.type === 'guest.created' ? 'crm' : 'pms', 'live', [event])
  return (outcome as { eventId: string }).eventId
}

/** Whether the request verifies with `secret` as the partner verifies it. */
function verifies(secret: string, request: (typeof receiver.received)[number] | undefined): boolean {
  try {
    new Webhook(secret).verify(request?.body as string, {
      'webhook-id': String(request?.headers['webhook-id']), 'webhook-timestamp': String(request?.headers['webhook-timestamp']), 'webhook-signature': String(request?.headers['webhook-signature']),
    })
    return true
  } catch {
    return false
  }
}

describe('what an attempt lists, and what operators are told', () => {
  it('lists a refused connection as a failed attempt without a status, with the time it took, and counts it failed', async () => {
    const { service, log, told } = world({ over: { retrySchedule: [30] } })
    // Nobody listens there: the connection is refused at once.
    const made = (await (service.prepareCreate(acme, { url: `http://127.0.0.1:${await freePort()}/refused`, eventTypes: ['property.updated'] }))()).data as { id: string }
    const eventId = await ingest(log, checked(0, 'src-refused'))
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    const [attempt] = await service.attempts(acme, made.id)
    expect(attempt).toEqual({ eventId, attempt: 1, at: expect.any(String) as unknown, status: null, outcome: 'failed', durationMs: expect.any(Number) as unknown })
    expect(attempt?.durationMs).toBeGreaterThanOrEqual(0)
    expect(attempt?.durationMs).toBeLessThan(WAIT_MS)
    expect(told.attempts).toEqual([['failed', (attempt?.durationMs ?? Number.NaN) / 1000]])
  })

  it('lists the time an attempt waited for its answer, and tells it to the metrics in seconds', async () => {
    // A timeout far beyond the wait below, however slow the machine.
    const { service, log, told } = world({ over: { deliveryTimeoutMs: 15_000 } })
    const made = (await (service.prepareCreate(acme, { url: path('slow', () => 'hang'), eventTypes: ['property.updated'] }))()).data as { id: string }
    const eventId = await ingest(log, checked(0, 'src-slow'))
    expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
    // The answer comes at least this long after the request arrived, so after the attempt began.
    const HELD_MS = 300
    await new Promise((resolve) => setTimeout(resolve, HELD_MS))
    receiver.answerHeld(200)
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    const [attempt] = await service.attempts(acme, made.id)
    expect(attempt).toEqual({ eventId, attempt: 1, at: expect.any(String) as unknown, status: 200, outcome: 'delivered', durationMs: expect.any(Number) as unknown })
    expect(attempt?.durationMs).toBeGreaterThanOrEqual(HELD_MS)
    expect(attempt?.durationMs).toBeLessThan(WAIT_MS)
    expect(told.attempts).toEqual([['delivered', (attempt?.durationMs ?? Number.NaN) / 1000]])
  })

  it('reports the deliveries pending and how long the oldest one ready has waited', async () => {
    // An instance that queues but does not deliver, its clock 90 s ahead of the queue's.
    const AHEAD_S = 90
    const { service, log, deliveries } = world({ work: false, now: () => Date.now() + AHEAD_S * 1000 })
    await (service.prepareCreate(acme, { url: path('pending'), eventTypes: ['property.updated'] }))()
    await ingest(log, checked(0, 'src-pending-1'))
    await ingest(log, checked(0, 'src-pending-2'))
    expect(await eventually(async () => (await deliveries.backlog()).pending === 2, WAIT_MS)).toBe(true)
    const snapshot = await deliveries.refresh()
    expect(snapshot).toEqual({ pending: 2, oldestPendingSeconds: expect.any(Number) as unknown, endpoints: { enabled: 1, disabled: 0 } })
    expect(snapshot.oldestPendingSeconds).toBeGreaterThanOrEqual(AHEAD_S)
    // Seconds since the ingest on top of the clock's lead: far less than ten minutes here.
    expect(snapshot.oldestPendingSeconds).toBeLessThan(AHEAD_S + 600)
    expect(at('pending')).toEqual([])
  })
})

describe('an endpoint deleted while its delivery waits', () => {
  it('ends the delivery when it wakes, sending nothing and listing no attempt', async () => {
    const { service, log, deliveries } = world()
    const made = (await (service.prepareCreate(acme, { url: path('deleted', (n) => (n === 1 ? 'hang' : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    await ingest(log, checked(0, 'src-del-1'))
    expect(await eventually(async () => at('deleted').length === 1, WAIT_MS)).toBe(true)
    // The second waits for the one lease, held by the first attempt (no answer yet).
    const waiting = await ingest(log, checked(0, 'src-del-2'))
    const jobId = `${waiting.slice(4)}.${made.id}`
    expect(await eventually(async () => (await deliveries.queue.getJob(jobId))?.attemptsMade === 0 && (await deliveries.queue.getJobState(jobId)) === 'delayed', WAIT_MS)).toBe(true)
    await service.remove(acme, made.id)
    expect(await eventually(async () => (await deliveries.queue.getJobState(jobId)) === 'completed', WAIT_MS)).toBe(true)
    expect((await deliveries.queue.getJob(jobId))?.returnvalue).toBe('endpoint deleted')
    expect(receiver.of(waiting)).toEqual([])
    expect(at('deleted')).toHaveLength(1)
  })
})

describe('an endpoint disabled while its delivery waits', () => {
  it('ends the delivery when it wakes, sending nothing: events of meanwhile are not sent later', async () => {
    const { service, log, deliveries } = world()
    const made = (await (service.prepareCreate(acme, { url: path('disabled', (n) => (n === 1 ? 'hang' : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    const first = await ingest(log, checked(0, 'src-dis-1'))
    expect(await eventually(async () => receiver.of(first).length === 1, WAIT_MS)).toBe(true)
    const waiting = await ingest(log, checked(0, 'src-dis-2'))
    const jobId = `${waiting.slice(4)}.${made.id}`
    expect(await eventually(async () => (await deliveries.queue.getJobState(jobId)) === 'delayed', WAIT_MS)).toBe(true)
    expect((await service.update(acme, made.id, { status: 'disabled' })).status).toBe('disabled')
    // The first attempt ends; its lease goes to the waiting delivery, which finds the endpoint disabled.
    receiver.answerHeld(200)
    expect(await eventually(async () => (await deliveries.queue.getJobState(jobId)) === 'completed', WAIT_MS)).toBe(true)
    expect((await deliveries.queue.getJob(jobId))?.returnvalue).toBe('endpoint disabled')
    expect(receiver.of(waiting)).toEqual([])
    expect((await service.attempts(acme, made.id)).map((a) => [a.eventId, a.outcome])).toEqual([[first, 'delivered']])
  })
})

describe('the endpoints an event is delivered to', () => {
  it('delivers each event of one batch to the endpoints of its own brand only', async () => {
    const { service, log } = world()
    const betaKey = (await keys.create({ brand: 'beta', mode: 'live', properties: '*' })).record.id
    const beta = { ...acme, keyId: betaKey, brand: 'beta' } as Principal
    const ofAcme = (await (service.prepareCreate(acme, { url: path('brand-acme'), eventTypes: ['property.updated'] }))()).data as { id: string }
    const ofBeta = (await (service.prepareCreate(beta, { url: path('brand-beta'), eventTypes: ['property.updated'] }))()).data as { id: string }
    const acmeEvent = checked(0, 'src-brand-acme')
    const betaEvent = { ...checked(1, 'src-brand-beta'), mapped: { ...(checked(1, 'src-brand-beta').mapped as NonNullable<CheckedEvent['mapped']>), brand: 'beta' } }
    // Both in one ingest: one fan-out for the two brands.
    const [acmeOutcome, betaOutcome] = await log.ingest('pms', 'live', [acmeEvent, betaEvent])
    const acmeId = (acmeOutcome as { eventId: string }).eventId
    const betaId = (betaOutcome as { eventId: string }).eventId
    expect(await eventually(async () => at('brand-acme').length === 1 && at('brand-beta').length === 1, WAIT_MS)).toBe(true)
    expect(receiver.of(acmeId).map((r) => r.path)).toEqual(['/brand-acme'])
    expect(receiver.of(betaId).map((r) => r.path)).toEqual(['/brand-beta'])
    expect((await service.attempts(acme, ofAcme.id)).map((a) => a.eventId)).toEqual([acmeId])
    expect((await service.attempts(beta, ofBeta.id)).map((a) => a.eventId)).toEqual([betaId])
  })

  it('delivers to an endpoint an OAuth client made, as to one of a key', async () => {
    const { service, log } = world()
    const grant = await keys.createGrant({ issuer: 'https://idp.example.com/realms/partners', clientId: `acme-sync-${namespaces}`, brand: 'acme', mode: 'live', properties: '*' })
    expect(grant.id.startsWith('cli_')).toBe(true)
    const client: Principal = { ...acme, keyId: grant.id, kind: 'accessToken' }
    const made = (await (service.prepareCreate(client, { url: path('oauth-client'), eventTypes: ['property.updated'] }))()).data as { id: string }
    const eventId = await ingest(log, checked(0, 'src-oauth'))
    expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
    expect(receiver.of(eventId).map((r) => r.path)).toEqual(['/oauth-client'])
    expect(await eventually(async () => (await service.attempts(client, made.id)).length === 1, WAIT_MS)).toBe(true)
    expect((await service.attempts(client, made.id)).map((a) => [a.eventId, a.status, a.outcome])).toEqual([[eventId, 200, 'delivered']])
  })
})

describe('the bound on tests and redeliveries not yet finished', () => {
  /** Asks for a test delivery: undefined when queued, else the problem it was refused with. */
  async function test(service: WebhookEndpoints, id: string): Promise<unknown> {
    const send = await service.prepareTest(acme, id, {})
    return send().then(() => undefined, (error: unknown) => error)
  }

  it('keeps the place of a test whose attempt failed and will be retried', async () => {
    const { service } = world({ over: { retrySchedule: [30] } })
    const made = (await (service.prepareCreate(acme, { url: path('manual-retried', () => 500), eventTypes: ['property.updated'] }))()).data as { id: string }
    expect([await test(service, made.id), await test(service, made.id)]).toEqual([undefined, undefined])
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 2, WAIT_MS)).toBe(true)
    expect((await service.attempts(acme, made.id)).map((a) => [a.status, a.outcome])).toEqual([[500, 'failed'], [500, 'failed']])
    // Both wait 30 s for their retry: still pending, still counted.
    expect(await test(service, made.id)).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
  })

  it('frees the place of a test that failed for good', async () => {
    const { service } = world({ over: { retrySchedule: [0.05] } })
    const made = (await (service.prepareCreate(acme, { url: path('manual-failed', () => 500), eventTypes: ['property.updated'] }))()).data as { id: string }
    expect([await test(service, made.id), await test(service, made.id)]).toEqual([undefined, undefined])
    // Two attempts each, the last failed: both finished, so a third is queued (once their places are given back).
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 4, WAIT_MS)).toBe(true)
    expect(await eventually(async () => (await test(service, made.id)) === undefined, WAIT_MS)).toBe(true)
  })
})

describe('endpoints deleted before their deliveries are made', () => {
  it('ends the waiting deliveries of a revoked credential\'s endpoints, which are deleted', async () => {
    const { service, log, deliveries, store } = world()
    const keyId = (await keys.create({ brand: 'acme', mode: 'live', properties: '*' })).record.id
    const revoked = { ...acme, keyId }
    const made = (await (service.prepareCreate(revoked, { url: path('revoked', (n) => (n === 1 ? 'hang' : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    await ingest(log, checked(0, 'src-rev-1'))
    expect(await eventually(async () => at('revoked').length === 1, WAIT_MS)).toBe(true)
    const waiting = await ingest(log, checked(0, 'src-rev-2'))
    const jobId = `${waiting.slice(4)}.${made.id}`
    expect(await eventually(async () => (await deliveries.queue.getJobState(jobId)) === 'delayed', WAIT_MS)).toBe(true)
    await deliveries.removeEndpointsOf(keyId)
    expect(await store.list(keyId)).toEqual([])
    expect(await store.get(made.id)).toBeUndefined()
    expect(await eventually(async () => (await deliveries.queue.getJobState(jobId)) === 'completed', WAIT_MS)).toBe(true)
    expect((await deliveries.queue.getJob(jobId))?.returnvalue).toBe('endpoint deleted')
    expect(receiver.of(waiting)).toEqual([])
  })

  it('refuses a test delivery asked for just before its endpoint was deleted, and queues nothing', async () => {
    const { service, deliveries } = world()
    const made = (await (service.prepareCreate(acme, { url: path('gone-manual'), eventTypes: ['property.updated'] }))()).data as { id: string }
    const send = await service.prepareTest(acme, made.id, {})
    await service.remove(acme, made.id)
    let refused: unknown
    await send().catch((error: unknown) => { refused = error })
    expect(refused).toMatchObject({ code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404 })
    expect(await deliveries.queue.getJobCounts('wait', 'delayed', 'active', 'completed', 'failed')).toEqual({ wait: 0, delayed: 0, active: 0, completed: 0, failed: 0 })
  })
})

describe('the owner of an endpoint, as the instance keeps it', () => {
  it('sends while it holds the owner\'s record, and sends nothing once it hears the owner was suspended', async () => {
    // A key store that hears the change channel, subscribed before it is used.
    const hearing = new RedisKeyStore(redis, prefix, () => {
      const subscriber = new Redis(REDIS_URL)
      connections.push(subscriber)
      return subscriber
    })
    let heard: () => void = () => undefined
    hearing.onChange(() => heard())
    const subscribed = async (): Promise<boolean> => ((await redis.pubsub('NUMSUB', `${prefix}keys:changed`)) as [string, number])[1] >= 1
    expect(await eventually(subscribed, WAIT_MS)).toBe(true)
    const { record } = await keys.create({ brand: 'acme', mode: 'live', properties: '*' })
    const owner = { ...acme, keyId: record.id } as Principal
    const { service, log, deliveries } = world({ keys: hearing })
    const made = (await (service.prepareCreate(owner, { url: path('kept-owner'), eventTypes: ['property.updated'] }))()).data as { id: string; secret: string }
    const first = await ingest(log, checked(0, 'src-owner-1'))
    expect(await eventually(async () => receiver.of(first).length === 1, WAIT_MS)).toBe(true)
    // Suspended behind the channel's back: the instance holds the record it read, and sends.
    expect(await redis.hset(`${prefix}key:${record.digest}`, 'status', 'suspended')).toBe(0)
    const second = await ingest(log, checked(0, 'src-owner-2'))
    expect(await eventually(async () => receiver.of(second).length === 1, WAIT_MS)).toBe(true)
    expect(verifies(made.secret, receiver.of(second)[0])).toBe(true)
    // Suspended as the key tool and the credentials API do it, announced: the next event is not even queued.
    const change = new Promise<void>((resolve) => { heard = resolve })
    await keys.setStatus(record.id, 'suspended')
    await change
    const third = await ingest(log, checked(0, 'src-owner-3'))
    expect(await deliveries.queue.getJob(`${third.slice(4)}.${made.id}`)).toBeUndefined()
    expect(receiver.of(third)).toEqual([])
  })
})

describe('signing secrets and the keys that seal them', () => {
  it('signs with a secret sealed under the previous key and seals it again under the current one', async () => {
    // The service sealed under KEY; this instance has a new key, KEY being the previous one.
    const keyChanged = new SecretBox('n'.repeat(32), [KEY])
    const { service, log, store, told } = world({ box: keyChanged })
    const made = (await (service.prepareCreate(acme, { url: path('previous'), eventTypes: ['property.updated'] }))()).data as { id: string; secret: string }
    const sealedBefore = (await store.get(made.id))?.secrets[0]?.sealed as string
    expect(keyChanged.open(sealedBefore, secretContext(made.id)).current).toBe(false)
    const eventId = await ingest(log, checked(0, 'src-prev'))
    expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
    expect(verifies(made.secret, receiver.of(eventId)[0])).toBe(true)
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    expect((await service.attempts(acme, made.id)).map((a) => [a.status, a.outcome])).toEqual([[200, 'delivered']])
    // Sealed again: the new key alone opens it now, to the same secret.
    const sealedAfter = (await store.get(made.id))?.secrets[0]?.sealed as string
    expect(sealedAfter).not.toBe(sealedBefore)
    expect(new SecretBox('n'.repeat(32)).open(sealedAfter, secretContext(made.id)).plain.toString('utf8')).toBe(made.secret)
    expect(told.unreadable).toBe(0)
  })

  it('fails an attempt whose secret no configured key opens: nothing is sent, the attempt is listed as failed and counted', async () => {
    const { service, log, told, deliveries } = world({ box: new SecretBox('x'.repeat(32)), over: { retrySchedule: [30] } })
    const made = (await (service.prepareCreate(acme, { url: path('unreadable'), eventTypes: ['property.updated'] }))()).data as { id: string }
    const eventId = await ingest(log, checked(0, 'src-unreadable'))
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    expect(await service.attempts(acme, made.id)).toEqual([{ eventId, attempt: 1, at: expect.any(String) as unknown, status: null, outcome: 'failed', durationMs: 0 }])
    expect(told.attempts).toEqual([['failed', 0]])
    expect(told.unreadable).toBe(1)
    // Retried on the schedule, with the reason operators see on the job.
    const jobId = `${eventId.slice(4)}.${made.id}`
    expect(await eventually(async () => (await deliveries.queue.getJob(jobId))?.failedReason === 'attempt failed: the signing secret cannot be opened', WAIT_MS)).toBe(true)
    expect(await deliveries.queue.getJobState(jobId)).toBe('delayed')
    expect(at('unreadable')).toEqual([])
  })

  it('opens each signing secret once, and a rotated one when it first signs', async () => {
    // The box at the instance's edge, its openings counted by sealed value.
    const openings: string[] = []
    const counting = Object.assign(Object.create(box) as SecretBox, {
      open: (sealed: string, context: string) => {
        openings.push(sealed)
        return box.open(sealed, context)
      },
    })
    const { service, log, store } = world({ box: counting })
    const made = (await (service.prepareCreate(acme, { url: path('opened-once'), eventTypes: ['property.updated'] }))()).data as { id: string; secret: string }
    const first = (await store.get(made.id))?.secrets[0]?.sealed as string
    const sent: string[] = []
    for (const source of ['src-once-1', 'src-once-2']) {
      sent.push(await ingest(log, checked(0, source)))
      expect(await eventually(async () => receiver.of(sent.at(-1) as string).length === 1, WAIT_MS)).toBe(true)
    }
    expect(sent.map((eventId) => verifies(made.secret, receiver.of(eventId)[0]))).toEqual([true, true])
    expect(openings).toEqual([first])
    // Rotated: the new secret is opened at its first use, the old one (still signing) is not opened again.
    const rotated = (await (await service.prepareRotate(acme, made.id, undefined))()).data as { secret: string }
    const current = (await store.get(made.id))?.secrets.find((s) => s.expiresAt === null)?.sealed as string
    const eventId = await ingest(log, checked(0, 'src-once-3'))
    expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const request = receiver.of(eventId)[0]
    expect(String(request?.headers['webhook-signature']).split(' ')).toHaveLength(2)
    expect([verifies(rotated.secret, request), verifies(made.secret, request)]).toEqual([true, true])
    expect(openings).toEqual([first, current])
  })

  it('leaves out a rotated-out secret no key opens, and signs with the current one alone', async () => {
    const { service, log, store, told } = world()
    const made = (await (service.prepareCreate(acme, { url: path('rotated-out'), eventTypes: ['property.updated'] }))()).data as { id: string; secret: string }
    const rotated = (await (await service.prepareRotate(acme, made.id, undefined))()).data as { secret: string }
    // The rotated-out secret, sealed under a key no longer configured.
    const lost = new SecretBox('z'.repeat(32))
    await store.update(made.id, (record) => ({
      ...record, secrets: record.secrets.map((s) => (s.expiresAt === null ? s : { ...s, sealed: lost.seal(Buffer.from(made.secret), secretContext(made.id)) })),
    }))
    expect((await store.get(made.id))?.secrets.map((s) => s.expiresAt === null)).toEqual([true, false])
    const eventId = await ingest(log, checked(0, 'src-rotated-out'))
    expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const request = receiver.of(eventId)[0]
    expect(String(request?.headers['webhook-signature']).split(' ')).toHaveLength(1)
    expect(verifies(rotated.secret, request)).toBe(true)
    expect(verifies(made.secret, request)).toBe(false)
    expect(told.unreadable).toBeGreaterThanOrEqual(1)
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    expect((await service.attempts(acme, made.id)).map((a) => a.outcome)).toEqual(['delivered'])
  })
})

describe('a reloaded configuration', () => {
  it('makes its next attempt on a new connection, and the next failure reads its events.disableAfterHours', async () => {
    const own = await new Receiver((_n, request) => (request.path === '/failing' ? 500 : 200)).listen()
    try {
      const { service, log, deliveries, store } = world()
      await (service.prepareCreate(acme, { url: `${own.url}/kept`, eventTypes: ['property.updated'] }))()
      const failing = (await (service.prepareCreate(acme, { url: `${own.url}/failing`, eventTypes: ['guest.created'] }))()).data as { id: string }
      await ingest(log, checked(0, 'src-reload-1'))
      expect(await eventually(async () => own.received.length === 1, WAIT_MS)).toBe(true)
      deliveries.reconfigure({ ...settings, disableAfterHours: 0 })
      // The next attempt comes on a connection of its own, not on the one kept before the reload.
      await ingest(log, checked(0, 'src-reload-kept'))
      expect(await eventually(async () => own.received.length === 2, WAIT_MS)).toBe(true)
      expect(own.received[1]?.remotePort).not.toBe(own.received[0]?.remotePort)
      // Failing throughout zero hours: its first failure disables it, with no retry (before the reload, three attempts and still enabled).
      await ingest(log, checked(0, 'src-reload-2', 'guest.created'))
      expect(await eventually(async () => (await store.get(failing.id))?.status === 'disabled', WAIT_MS)).toBe(true)
      expect(await service.get(acme, failing.id)).toMatchObject({ status: 'disabled', disabledReason: 'failing' })
      expect((await service.attempts(acme, failing.id)).map((a) => [a.attempt, a.status, a.outcome])).toEqual([[1, 500, 'failed']])
    } finally {
      await own.close()
    }
  })
})

describe('the span of each attempt', () => {
  it('carries the event, the endpoint, the attempt, its outcome and status, and errs when not delivered', async () => {
    const spans: SpanSeen[] = []
    const { service, log } = world({ tracing: recordingTracing(spans) })
    const made = (await (service.prepareCreate(acme, { url: path('traced', (n) => (n === 1 ? 503 : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    const eventId = await ingest(log, checked(0, 'src-traced'))
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 2, WAIT_MS)).toBe(true)
    expect(await eventually(async () => spans.filter((s) => s.ended).length === 2, WAIT_MS)).toBe(true)
    const attributes = { 'gateway.webhook.event_id': eventId, 'gateway.webhook.endpoint_id': made.id }
    expect(spans).toEqual([
      { name: 'POST webhook', attributes: { ...attributes, 'gateway.webhook.attempt': 1, 'gateway.webhook.outcome': 'failed', 'http.response.status_code': 503 }, status: SpanStatusCode.ERROR, ended: true },
      { name: 'POST webhook', attributes: { ...attributes, 'gateway.webhook.attempt': 2, 'gateway.webhook.outcome': 'delivered', 'http.response.status_code': 200 }, status: undefined, ended: true },
    ])
  })
})

describe('a shutdown with an attempt in flight', () => {
  it('hands the attempt back uncounted, and another instance makes it', async () => {
    const spans: SpanSeen[] = []
    const { service, log, store, deliveries, told } = world({ tracing: recordingTracing(spans) })
    const made = (await (service.prepareCreate(acme, { url: path('handed', (n) => (n === 1 ? 'hang' : 200)), eventTypes: ['property.updated'] }))()).data as { id: string }
    const eventId = await ingest(log, checked(0, 'src-handed'))
    expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
    await shutDown(deliveries)
    // Handed back, not failed: the span says so, and no attempt was counted as failed.
    expect(spans[0]).toEqual({ name: 'POST webhook', attributes: { 'gateway.webhook.outcome': 'handed_back' }, status: undefined, ended: true })
    expect(told.attempts.filter(([outcome]) => outcome !== 'delivered')).toEqual([])
    // Back as it was: the attempt made after it, by another instance (never by this one while it
    // shuts down, even if its worker took the job again before stopping), is the first, with the same webhook-id.
    const next = instance(store, log)
    expect(await eventually(async () => (await service.attempts(acme, made.id)).length === 1, WAIT_MS)).toBe(true)
    expect((await service.attempts(acme, made.id)).map((a) => [a.eventId, a.attempt, a.status, a.outcome])).toEqual([[eventId, 1, 200, 'delivered']])
    expect(receiver.of(eventId)).toHaveLength(2)
    expect(told.attempts).toEqual([])
    expect(next.told.attempts.map(([outcome]) => outcome)).toEqual(['delivered'])
  })
})
