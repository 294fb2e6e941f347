import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiError } from '../../src/contract/errors.js'
import { EventLog } from '../../src/events/log.js'
import { MemoryEventStore, RedisEventStore } from '../../src/events/store.js'
import type { Principal } from '../../src/keys/principal.js'
import type { Deliveries, DeliveryJob, ManualQueued } from '../../src/webhooks/deliveries.js'
import { EndpointStore, type EndpointRecord } from '../../src/webhooks/endpoints.js'
import { RecoveryStore, type Recoveries, type Started } from '../../src/webhooks/recoveries.js'
import type { RecoveryInput } from '../../src/webhooks/recovery.js'
import { SecretBox } from '../../src/webhooks/secrets.js'
import { WebhookEndpoints } from '../../src/webhooks/service.js'
import { freePort, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { eventTypes, WEBHOOK_SETTINGS } from '../helpers/webhook-unit.js'

// The endpoints API when Redis fails (docs/architecture.md, "Webhooks"): whatever it cannot
// read or write (endpoints, attempts, the event log, the queue, recoveries), the partner is
// told 503 SERVICE_UNAVAILABLE with Retry-After 1, never a 500 and never the error's own text.
// Redis failing is a real client to a port nobody listens on; where one step must pass before
// another fails, only that one method of the store is taken from the failing one. The queue
// and the recoveries are stood in for at the service's edge, with their real stores under them.
// Also: settings reloaded, a secret no key opens, a test event sent again, the outcomes of a
// recovery asked for. Without a gateway, for the module's mutation run (scripts/mutation.ts).

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
const types = eventTypes()
const box = new SecretBox('k'.repeat(32))
const settings = WEBHOOK_SETTINGS
const URL = 'http://127.0.0.1:9/hook'

/** What the partner is answered when Redis fails. */
const UNAVAILABLE = {
  code: 'SERVICE_UNAVAILABLE', status: 503, detail: 'Webhook endpoints cannot be read or changed right now; retry shortly.', retryAfter: 1, errors: [],
}

let down: Redis

beforeAll(async () => {
  // No reconnecting and no queueing: each command fails at once, as when Redis is unreachable.
  down = new Redis({ host: '127.0.0.1', port: await freePort(), lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null })
  down.on('error', () => undefined)
})

afterAll(async () => {
  await removePrefix(redis, prefix)
  down.disconnect()
  redis.disconnect()
})

let namespaces = 0

/** `real` with `methods` taken from `failing` (the same class over the Redis that fails). */
function partly<T extends object>(real: T, failing: T, ...methods: (keyof T)[]): T {
  return new Proxy(real, {
    get(target, name, receiver) {
      const from = methods.includes(name as keyof T) ? failing : target
      const value: unknown = Reflect.get(from, name, from === target ? receiver : from)
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(from) : value
    },
  })
}

interface Edge {
  queued: ManualQueued | 'fail'
  jobs: DeliveryJob[]
  recoveries: Recoveries | undefined
}

/**
 * The service over a real store (its own namespace); the queue stands in for Deliveries: it
 * keeps the jobs asked for and answers `edge.queued`, or fails as the real one does when Redis
 * fails (its first step is the store's, over the failing Redis).
 */
function world(over: { store?: (real: EndpointStore, failing: EndpointStore) => EndpointStore; log?: EventLog; box?: SecretBox } = {}) {
  namespaces += 1
  const ns = `${prefix}w${namespaces}:`
  const real = new EndpointStore(redis, ns)
  const failing = new EndpointStore(down, ns)
  const store = over.store?.(real, failing) ?? real
  const edge: Edge = { queued: 'queued', jobs: [], recoveries: undefined }
  const deliveries = {
    async enqueueManual(job: DeliveryJob): Promise<ManualQueued> {
      if (edge.queued === 'fail') return failing.admitManual(job.endpointId, ['job'], 2, Date.now(), 60_000).then(() => 'queued')
      edge.jobs.push(job)
      return edge.queued
    },
    async removeEndpoint(record: EndpointRecord): Promise<void> {
      await store.remove(record)
    },
    get recoveries() {
      return edge.recoveries
    },
  } as unknown as Deliveries
  const log = over.log ?? new EventLog(new MemoryEventStore(), types, { retentionDays: 1 })
  const service = new WebhookEndpoints({ store, deliveries, log, box: over.box ?? box, settings: { ...settings } })
  return { real, failing, store, edge, service, ns }
}

function principal(keyId: string): Principal {
  return { keyId, kind: 'apiKey', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all' } as Principal
}

const acme = principal('key_acme')

/** The problem `run` rejects with, as the partner is answered it, and the message of its cause. */
async function refusal(run: () => Promise<unknown>): Promise<{ problem: Record<string, unknown>; cause: string | undefined }> {
  try {
    await run()
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError)
    const e = error as ApiError
    const cause = e.cause instanceof Error ? e.cause.message : undefined
    return { problem: { code: e.code, status: e.status, detail: e.detail, retryAfter: e.retryAfter, errors: e.errors }, cause }
  }
  throw new Error('expected a refusal')
}

/** `run` is answered 503 with Retry-After 1, and nothing of the failure's own text. */
async function expectUnavailable(run: () => Promise<unknown>): Promise<void> {
  const { problem, cause } = await refusal(run)
  expect(problem).toEqual(UNAVAILABLE)
  expect(cause).toBeTruthy()
  expect(JSON.stringify(problem)).not.toContain(cause)
}

async function created(service: WebhookEndpoints, who: Principal = acme): Promise<string> {
  const outcome = await service.prepareCreate(who, { url: URL, eventTypes: ['property.updated'] })()
  return (outcome.data as { id: string }).id
}

describe('when Redis fails, the partner is told to retry shortly', () => {
  it('listing, reading and creating endpoints', async () => {
    const { service } = world({ store: (_, failing) => failing })
    await expectUnavailable(() => service.list(acme))
    await expectUnavailable(() => service.get(acme, 'we_01JC0000000000000000000000'))
    await expectUnavailable(() => service.prepareCreate(acme, { url: URL, eventTypes: ['property.updated'] })())
  })

  it('changing an endpoint, rotating its secret and reading its attempts', async () => {
    const { service } = world({ store: (real, failing) => partly(real, failing, 'update', 'attempts') })
    const id = await created(service)
    await expectUnavailable(() => service.update(acme, id, { description: 'ops' }))
    const rotate = await service.prepareRotate(acme, id, {})
    await expectUnavailable(rotate)
    await expectUnavailable(() => service.attempts(acme, id))
  })

  it('deleting an endpoint', async () => {
    const { service } = world({ store: (real, failing) => partly(real, failing, 'remove') })
    const id = await created(service)
    await expectUnavailable(() => service.remove(acme, id))
  })

  it('sending a test event: whether it is kept, or queued', async () => {
    const { service, edge } = world({ store: (real, failing) => partly(real, failing, 'recordTest') })
    const id = await created(service)
    await expectUnavailable(await service.prepareTest(acme, id, {}))
    expect(edge.jobs).toEqual([])
    const queueing = world()
    const other = await created(queueing.service)
    queueing.edge.queued = 'fail'
    await expectUnavailable(await queueing.service.prepareTest(acme, other, {}))
  })

  it('redelivering: reading the event log, or when the test event was sent', async () => {
    const logDown = new EventLog(new RedisEventStore(down, `${prefix}events:`), types, { retentionDays: 1 })
    const { service } = world({ log: logDown })
    const id = await created(service)
    await expectUnavailable(() => service.prepareRedeliver(acme, 'evt_01JC0000000000000000000000', { endpointId: id }))
    const tests = world({ store: (real, failing) => partly(real, failing, 'testSentAt') })
    const other = await created(tests.service)
    await expectUnavailable(() => tests.service.prepareRedeliver(acme, 'evt_01JC0000000000000000000000', { endpointId: other }))
  })

  it('asking for, reading and cancelling recoveries', async () => {
    const { service, edge, ns } = world()
    const id = await created(service)
    const failing = new RecoveryStore(down, new EndpointStore(down, ns))
    const since = new Date(Date.now() - 60_000).toISOString()
    edge.recoveries = { store: failing, start: (endpoint: { id: string }, input: RecoveryInput) => failing.select(endpoint.id, input, 100) } as unknown as Recoveries
    await expectUnavailable(() => service.prepareRecover(acme, id, { since }))
    await expectUnavailable(() => service.recoveriesOf(acme, id))
    await expectUnavailable(() => service.recovery(acme, id, 'rc_01JC0000000000000000000000'))
    // The store reads (no recovery running), then starting it fails.
    const working = new RecoveryStore(redis, new EndpointStore(redis, ns))
    edge.recoveries = { store: working, start: (endpoint: { id: string }, input: RecoveryInput) => failing.select(endpoint.id, input, 100) } as unknown as Recoveries
    await expectUnavailable(await service.prepareRecover(acme, id, { since }))
  })

  it('cancelling a recovery: the recovery is read, its cancelling fails', async () => {
    const { service, edge } = world()
    const id = await created(service)
    const view = {
      id: 'rc_01JC0000000000000000000000', endpointId: id, since: new Date(0).toISOString(), until: new Date(0).toISOString(), include: 'failed',
      status: 'running', queued: 1, delivered: 0, failed: 0, createdAt: new Date(0).toISOString(),
    }
    const store = { get: async () => view, cancel: () => Promise.reject(new Error('READONLY You can\'t write against a read only replica.')) }
    edge.recoveries = { store } as unknown as Recoveries
    await expectUnavailable(() => service.cancelRecovery(acme, id, 'rc_01jc0000000000000000000000'))
  })

  it('when this gateway keeps no recoveries', async () => {
    const { service } = world()
    const id = await created(service)
    const { problem } = await refusal(() => service.recoveriesOf(acme, id))
    expect(problem).toEqual(UNAVAILABLE)
    expect((await refusal(() => service.prepareRecover(acme, id, { since: new Date(Date.now() - 60_000).toISOString() }))).problem).toEqual(UNAVAILABLE)
  })
})

describe('what the partner is answered besides', () => {
  it('takes reloaded settings for the next request: a smaller bound of endpoints refuses a create', async () => {
    const { service } = world()
    await created(service)
    service.reconfigure({ ...settings, maxEndpointsPerCredential: 1 })
    const { problem } = await refusal(() => service.prepareCreate(acme, { url: URL, eventTypes: ['property.updated'] })())
    expect(problem).toEqual({
      code: 'WEBHOOK_ENDPOINT_LIMIT_REACHED', status: 409, detail: 'This credential has 1 webhook endpoints, as many as it may; delete one first.', retryAfter: undefined, errors: [],
    })
  })

  it('an endpoint deleted while it is changed, or before its rotation is made, is not found', async () => {
    const { service, real } = world({
      // Someone deletes the endpoint between reading it and changing it.
      store: (real) => partly(real, {
        async update(id: string, change: (record: EndpointRecord) => EndpointRecord | undefined) {
          const record = await real.get(id)
          if (record !== undefined) await real.remove(record)
          return real.update(id, change)
        },
      } as unknown as EndpointStore, 'update'),
    })
    const id = await created(service)
    expect((await refusal(() => service.update(acme, id, { description: 'ops' }))).problem).toEqual({
      code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404, detail: `No webhook endpoint with id '${id}' exists for this credential.`, retryAfter: undefined, errors: [],
    })
    expect(await real.get(id)).toBeUndefined()
  })

  it('a rotation asked for and the endpoint deleted before it is made: not found', async () => {
    const { service, real } = world()
    const id = await created(service)
    const rotate = await service.prepareRotate(acme, id, {})
    await service.remove(acme, id)
    expect((await refusal(rotate)).problem).toEqual({
      code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404, detail: `No webhook endpoint with id '${id}' exists for this credential.`, retryAfter: undefined, errors: [],
    })
    expect(await real.get(id)).toBeUndefined()
  })

  it('a rotation keeps the old secret signing beside the new one only when a configured key opens it', async () => {
    const { service, real, ns } = world()
    const kept = await created(service)
    await (await service.prepareRotate(acme, kept, {}))()
    expect((await real.get(kept))?.secrets.map((s) => s.expiresAt === null)).toEqual([true, false])
    // The same store, under a gateway whose key is another: the old secret cannot sign, it ends.
    const ended = await created(service)
    const rekeyed = new WebhookEndpoints({ store: new EndpointStore(redis, ns), deliveries: {} as Deliveries, log: new EventLog(new MemoryEventStore(), types, { retentionDays: 1 }), box: new SecretBox('z'.repeat(32)), settings })
    const outcome = await (await rekeyed.prepareRotate(acme, ended, {}))()
    expect(outcome.status).toBe(200)
    const secrets = (await real.get(ended))?.secrets ?? []
    expect(secrets.map((s) => s.expiresAt)).toEqual([null])
  })

  it('redelivers a webhook.test event: the same event again, to the endpoint it was sent to', async () => {
    const { service, edge } = world()
    const id = await created(service)
    const test = await (await service.prepareTest(acme, id, {}))()
    const eventId = (test.data as { eventId: string }).eventId
    expect(edge.jobs).toHaveLength(1)
    const again = await (await service.prepareRedeliver(acme, eventId.toLowerCase(), { endpointId: id.toLowerCase() }))()
    expect(again).toEqual({ status: 202, data: { eventId, endpointId: id } })
    expect(edge.jobs).toHaveLength(2)
    expect(edge.jobs[1]).toEqual({ ...edge.jobs[0] })
    expect(JSON.parse(edge.jobs[1]?.json ?? '{}')).toMatchObject({ id: eventId, type: 'webhook.test', object: { id } })
  })

  it('a redelivery to an endpoint deleted meanwhile is not found; one beyond the bound is refused', async () => {
    const { service, edge } = world()
    const id = await created(service)
    const eventId = ((await (await service.prepareTest(acme, id, {}))()).data as { eventId: string }).eventId
    const asked = id.toLowerCase()
    edge.queued = 'gone'
    expect((await refusal(await service.prepareRedeliver(acme, eventId, { endpointId: asked }))).problem).toEqual({
      code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404, detail: `No webhook endpoint with id '${asked}' exists for this credential.`, retryAfter: undefined, errors: [],
    })
    edge.queued = 'full'
    const { problem } = await refusal(await service.prepareRedeliver(acme, eventId, { endpointId: id }))
    expect(problem).toMatchObject({ code: 'RATE_LIMITED', status: 429, retryAfter: 60 })
    expect(problem.detail).toContain(`Webhook endpoint '${id}' has 2 test or redelivered deliveries not yet finished`)
  })
})

describe('asking for a recovery', () => {
  async function asked(outcome: { running?: string; started?: Started }) {
    const { service, edge } = world()
    const id = await created(service)
    edge.recoveries = {
      store: { runningOf: async () => outcome.running },
      start: async () => outcome.started,
    } as unknown as Recoveries
    return { id, run: async () => (await service.prepareRecover(acme, id, { since: new Date(Date.now() - 60_000).toISOString() }))() }
  }

  it('is refused while another runs, when it started meanwhile, when the range holds too many events, and when the endpoint went', async () => {
    const running = await asked({ running: 'rc_01JC0000000000000000000001' })
    const inProgress = (id: string) => ({
      code: 'WEBHOOK_RECOVERY_IN_PROGRESS', status: 409, retryAfter: undefined, errors: [],
      detail: `Webhook endpoint '${id}' is running recovery 'rc_01JC0000000000000000000001'; wait until it is done, or cancel it, before asking for another.`,
    })
    expect((await refusal(running.run)).problem).toEqual(inProgress(running.id))
    const meanwhile = await asked({ started: { kind: 'running', id: 'rc_01JC0000000000000000000001' } })
    expect((await refusal(meanwhile.run)).problem).toEqual(inProgress(meanwhile.id))
    const many = await asked({ started: { kind: 'too many' } })
    const { problem } = await refusal(many.run)
    expect(problem).toMatchObject({ code: 'VALIDATION_FAILED', status: 422, errors: [{ field: 'since', code: 'OUT_OF_RANGE' }] })
    expect((problem.errors as { detail: string }[])[0]?.detail).toContain('more than 100 events')
    const gone = await asked({ started: { kind: 'gone' } })
    expect((await refusal(gone.run)).problem).toEqual({
      code: 'WEBHOOK_ENDPOINT_NOT_FOUND', status: 404, detail: `No webhook endpoint with id '${gone.id}' exists for this credential.`, retryAfter: undefined, errors: [],
    })
  })

  it('is answered 202 with the recovery when it started', async () => {
    const recovery = { id: 'rc_01JC0000000000000000000002' }
    const { run } = await asked({ started: { kind: 'started', recovery } as unknown as Started })
    expect(await run()).toEqual({ status: 202, data: recovery })
  })
})
