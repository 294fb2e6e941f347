import { shipped } from '../helpers/declared.js'
import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { MemoryRecordStore, RedisRecordStore, type RecordStore } from '../../src/idempotency/records.js'
import { MemoryKeyStore } from '../../src/keys/store.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { eventually, keysUnder, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// Rules of the idempotency records that mutation testing found undefended: the records a
// gateway keeps in its own memory when it runs without Redis (the demo's fallback,
// scripts/demo.ts; src/gateway.ts picks them with the key store), which no test reached, and
// a record in Redis that this version cannot read, which must count as another request's
// (docs/architecture.md, "Idempotency records"). Over real sockets, with the stand-in service
// and real Redis; the store's own rules (a record answered or released only by the claim that
// holds it, leases that run out) at the store's edge, the same for both stores.

const SERVICE_TOKEN = 'svc-idem-kills-token'
const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}'

let counter = 0
/** An Idempotency-Key no other test uses. */
function newKey(): string {
  counter += 1
  return `kill-${process.pid}-${Date.now()}-${counter}`
}

/** Starts the stand-in service and a gateway with the shipped routes in front of it. */
async function start(keyStore?: () => MemoryKeyStore): Promise<{ t: TestGateway; service: MockService; key: string }> {
  const service = await new MockService({ token: SERVICE_TOKEN }).listen()
  const t = await TestGateway.start({
    config: { upstreams: { bookings: { ...shipped.upstreams.bookings, sandboxUrl: undefined } } as FileConfigInput['upstreams'], routes: shipped.routes },
    env: { UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    ...(keyStore === undefined ? {} : { keyStore }),
  })
  // The gateway's own key store: without Redis, only it knows the key.
  const key = (await t.gateway.keyStore.create({ brand: 'acme', mode: 'live', properties: '*' })).key
  return { t, service, key }
}

function post(t: TestGateway, key: string, idempotencyKey: string, body = GUEST): Promise<Answer> {
  return t.call('POST', '/v1/guests', { key, body, headers: { 'idempotency-key': idempotencyKey } })
}

function expectCreated(answer: Answer): void {
  expect({ status: answer.statusCode, body: answer.body }).toMatchObject({ status: 201 })
  expect(answer.headers['idempotent-replayed']).toBeUndefined()
  const body = JSON.parse(answer.body) as { data: { id: string } }
  expect(body).toEqual({
    data: { object: 'guest', id: expect.any(String), firstName: 'Ann', lastName: 'Lee', email: 'ann@example.com', phone: null, createdAt: expect.stringMatching(TIMESTAMP), updatedAt: expect.stringMatching(TIMESTAMP) },
    meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP) },
  })
  expect(answer.headers.location).toBe(`/v1/guests/${body.data.id}`)
}

/** The first answer again, byte for byte, marked as a replay. */
function expectReplay(replay: Answer, first: Answer): void {
  expect({ status: replay.statusCode, body: replay.body }).toEqual({ status: first.statusCode, body: first.body })
  expect(replay.headers['idempotent-replayed']).toBe('true')
  expect(replay.headers.location).toBe(first.headers.location)
  expect(replay.headers['content-type']).toBe('application/json; charset=utf-8')
}

/** What the request log line of `answer` says the record did. */
async function outcomeOf(t: TestGateway, answer: Answer): Promise<unknown> {
  const requestId = answer.headers['service-request-id']
  const line = (): Record<string, unknown> | undefined => t.logs.records().find((r) => r.msg === 'request' && r.reqId === requestId)
  // The line is written once the answer is sent, so it may follow the answer by a moment.
  expect(await eventually(async () => line() !== undefined, 5000)).toBe(true)
  return line()?.idempotency
}

const reused = {
  code: 'IDEMPOTENCY_KEY_REUSED' as const, instance: '/v1/guests',
  detail: 'This Idempotency-Key was used for a different request; send a new key with each new request.',
}

describe('without Redis: the records kept in the gateway\'s memory', () => {
  let t: TestGateway
  let service: MockService
  let key: string

  beforeAll(async () => {
    ({ t, service, key } = await start(() => new MemoryKeyStore()))
    // Given a key store of its own, the gateway opens no Redis connection at all.
    expect(t.gateway.redis).toBeUndefined()
  })
  afterAll(async () => {
    await t.close()
    await service.close()
  })
  afterEach(() => {
    service.setFailure(undefined)
  })

  it('keeps the answer and replays it to a retry with the same key; another request with the key is 422', async () => {
    const idempotencyKey = newKey()
    const first = await post(t, key, idempotencyKey)
    expectCreated(first)
    const replay = await post(t, key, idempotencyKey)
    expectReplay(replay, first)
    expectProblem(await post(t, key, idempotencyKey, GUEST.replace('Ann', 'Bob')), reused)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
    // The operator's view: the first answer kept, the second a replay.
    expect([await outcomeOf(t, first), await outcomeOf(t, replay)]).toEqual(['stored', 'replayed'])
  })

  it('answers a retry while the first request is in flight 409, then replays the answer', async () => {
    const idempotencyKey = newKey()
    service.setFailure({ mode: 'latency', latencyMs: 1500, times: 1 })
    const first = post(t, key, idempotencyKey)
    expect(await eventually(async () => service.received.some((r) => r.headers['idempotency-key'] === idempotencyKey), 10_000)).toBe(true)
    expectProblem(await post(t, key, idempotencyKey), {
      code: 'IDEMPOTENCY_KEY_IN_USE', instance: '/v1/guests', headers: { 'retry-after': '1' },
      detail: 'A request with this Idempotency-Key is still in flight; retry in 1 second to get its answer.',
    })
    const answered = await first
    expectCreated(answered)
    expectReplay(await post(t, key, idempotencyKey), answered)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })

  it('releases the record when the service fails, so the retry with the same key is forwarded again', async () => {
    const idempotencyKey = newKey()
    service.setFailure({ mode: 'html-5xx', status: 502, times: 1 })
    const failed = await post(t, key, idempotencyKey)
    expect(failed.statusCode).toBe(503)
    expect(await outcomeOf(t, failed)).toBe('released')
    const retry = await post(t, key, idempotencyKey)
    expectCreated(retry)
    expect(service.received.filter((r) => r.headers['idempotency-key'] === idempotencyKey)).toHaveLength(2)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })
})

describe('a record in Redis that this version cannot read', () => {
  let t: TestGateway
  let service: MockService
  let key: string
  const redis = new Redis(REDIS_URL)

  beforeAll(async () => {
    ({ t, service, key } = await start())
  })
  afterAll(async () => {
    await t.close()
    await service.close()
    redis.disconnect()
  })
  beforeEach(async () => {
    await removePrefix(redis, `${t.prefix}idem:`)
  })

  /** The one record in Redis, after a first request with `idempotencyKey` was answered. */
  async function answeredRecord(idempotencyKey: string): Promise<{ name: string; value: Buffer }> {
    expectCreated(await post(t, key, idempotencyKey))
    const [name, ...others] = await keysUnder(redis, `${t.prefix}idem:`)
    expect(others).toEqual([])
    const value = await redis.getBuffer(name as string)
    // An answered record: "D", the request's fingerprint (43 characters), the status, then the headers and the body.
    expect(value?.subarray(0, 1).toString('latin1')).toBe('D')
    expect(value?.subarray(44, 47).toString('latin1')).toBe('201')
    return { name: name as string, value: value as Buffer }
  }

  it('counts as another request\'s when its kind is not one this version writes: 422, not a replay', async () => {
    const idempotencyKey = newKey()
    const { name, value } = await answeredRecord(idempotencyKey)
    // The same record, marked with a kind a later version might write.
    await redis.set(name, Buffer.concat([Buffer.from('E', 'latin1'), value.subarray(1)]), 'PX', 60_000)
    expectProblem(await post(t, key, idempotencyKey), reused)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })

  it('counts as another request\'s when it is cut short before its body: 422, not a 503', async () => {
    const idempotencyKey = newKey()
    const { name, value } = await answeredRecord(idempotencyKey)
    // The kind, the fingerprint, the status and the start of the headers, and no more.
    await redis.set(name, value.subarray(0, 49), 'PX', 60_000)
    expectProblem(await post(t, key, idempotencyKey), reused)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })
})

describe.each([
  ['in memory', (_redis: Redis): RecordStore => new MemoryRecordStore()],
  ['in Redis', (redis: Redis): RecordStore => new RedisRecordStore(redis)],
])('the records %s, at the store\'s edge', (_name, make) => {
  const redis = new Redis(REDIS_URL)
  const prefix = testPrefix()
  afterAll(async () => {
    await removePrefix(redis, prefix)
    redis.disconnect()
  })

  const lease = (name: string): Buffer => Buffer.from(`L-${name}`, 'latin1')

  it('are answered or released only by the claim that holds them, and a lease that runs out is taken over', async () => {
    const store = make(redis)
    const record = `${prefix}idem:{key_1}:record`
    const answer = Buffer.from('D-answer\n{"a":1}', 'utf8')
    expect(await store.claim(record, lease('a'), 50)).toBeNull()
    // Held: another claim gets the holder's value and changes nothing.
    expect(await store.claim(record, lease('b'), 60_000)).toEqual(lease('a'))
    // a's lease runs out; b takes the record over.
    expect(await eventually(async () => (await store.claim(record, lease('b'), 60_000)) === null, 5000)).toBe(true)
    expect(await store.replace(record, lease('a'), answer, 60_000)).toBe(false)
    expect(await store.remove(record, lease('a'))).toBe(false)
    expect(await store.claim(record, lease('c'), 60_000)).toEqual(lease('b'))
    // The holder answers: the answer is the record for its retention.
    expect(await store.replace(record, lease('b'), answer, 60_000)).toBe(true)
    expect(await store.claim(record, lease('c'), 60_000)).toEqual(answer)
    // Released by the one who holds it; after that nothing to answer or release.
    expect(await store.remove(record, answer)).toBe(true)
    expect(await store.remove(record, answer)).toBe(false)
    expect(await store.replace(record, answer, lease('d'), 60_000)).toBe(false)
    expect(await store.claim(record, lease('c'), 60_000)).toBeNull()
  })
})
