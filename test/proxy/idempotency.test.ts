import { shipped } from '../helpers/declared.js'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { Agent, request, type Dispatcher } from 'undici'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { RedisQuotaStore } from '../../src/ratelimit/store.js'
import { openApiDocument } from '../../src/docs/openapi.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { checkAnswer } from '../helpers/contract.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { eventually, freePort, keysUnder, PrivateRedis, REDIS_URL } from '../helpers/redis.js'
import { DEVELOPMENT_KEY } from '../../src/webhooks/secrets.js'

// Safe retries of writes (docs/partners.md, "Safe retries of writes (`Idempotency-Key`)";
// docs/architecture.md, "Idempotency records"): Idempotency-Key on the POST and
// PATCH of declared routes, over real sockets, with real Redis and the stand-in service, which
// counts what it created per key it received and never deduplicates by itself.

const SERVICE_TOKEN = 'svc-idem-token'
const RETENTION_HOURS = 2
const MAX_BODY_BYTES = 4096

const routes = [
  ...shipped.routes,
  // The same service's guests, where every POST must carry a key.
  { path: '/v1/vip-guests', methods: ['POST'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', idempotency: 'required', scopes: { POST: 'guests:write' } },
  // PUT and DELETE, where the header is ignored (the service has no such path: its own 404, passed on).
  { path: '/v1/guest-flags/{guestId}', methods: ['PUT', 'DELETE'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/flags/{guestId}',
    pathParams: { guestId: { type: 'uuid' } }, scopes: { PUT: 'guests:write', DELETE: 'guests:write' } },
] as FileConfigInput['routes']

let t: TestGateway
let service: MockService
let key: string
const redis = new Redis(REDIS_URL)
let counter = 0

/** A key no other test uses. */
function newKey(): string {
  counter += 1
  return `idem-${process.pid}-${Date.now()}-${counter}`
}

const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}'

interface CallOptions {
  key?: string
  headers?: Record<string, string>
  body?: string
  url?: string
  /** Aborting it closes the partner's connection. */
  signal?: AbortSignal
  /** A connection pool of the request's own. */
  dispatcher?: Dispatcher
}

async function call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { host: ACME_HOST, 'user-agent': 'idem-test/1.0', authorization: `Bearer ${options.key ?? key}`, ...options.headers }
  if (options.body !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json'
  const res = await request(`${options.url ?? t.url}${path}`, { method: method as 'POST', headers, body: options.body, ...(options.signal === undefined ? {} : { signal: options.signal }),
    ...(options.dispatcher === undefined ? {} : { dispatcher: options.dispatcher }) })
  const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
  checkAnswer(method, path, answer, t.gateway.app.gatewayConfig)
  return answer
}

function post(idempotencyKey: string | undefined, options: CallOptions = {}, path = '/v1/guests'): Promise<Answer> {
  const headers = { ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }), ...options.headers }
  return call('POST', path, { body: GUEST, ...options, headers })
}

function records(): Promise<string[]> {
  return keysUnder(redis, `${t.prefix}idem:`)
}

/** The service's requests that carried `idempotencyKey`. */
function receivedWith(idempotencyKey: string): number {
  return service.received.filter((r) => r.headers['idempotency-key'] === idempotencyKey).length
}

function expectCreated(res: Answer): { id: string } {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status: 201 })
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
  const body = JSON.parse(res.body) as { data: { id: string }; meta: unknown }
  expect(body).toEqual({
    data: { object: 'guest', id: expect.any(String), firstName: 'Ann', lastName: 'Lee', email: 'ann@example.com', phone: null, createdAt: expect.stringMatching(TIMESTAMP), updatedAt: expect.stringMatching(TIMESTAMP) },
    meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP) },
  })
  expect(res.headers.location).toBe(`/v1/guests/${body.data.id}`)
  return body.data
}

/** A replay: the first answer's status, body bytes and passed-on headers; fresh gateway headers. */
function expectReplay(replay: Answer, first: Answer): void {
  expect({ status: replay.statusCode, body: replay.body }).toEqual({ status: first.statusCode, body: first.body })
  expect(replay.headers['idempotent-replayed']).toBe('true')
  for (const name of ['content-type', 'location', 'content-language']) expect(replay.headers[name]).toBe(first.headers[name])
  expect(replay.headers['content-length']).toBe(String(Buffer.byteLength(first.body)))
  expect(replay.headers['service-request-id']).toMatch(REQUEST_ID)
  expect(replay.headers['service-request-id']).not.toBe(first.headers['service-request-id'])
  expect(replay.headers['x-content-type-options']).toBe('nosniff')
  expect(replay.headers['cache-control']).toBe('no-store')
  expect(replay.headers['ratelimit-limit']).toBe('1000')
}

beforeAll(async () => {
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  t = await TestGateway.start({
    config: {
      upstreams: { bookings: { ...shipped.upstreams.bookings, sandboxUrl: undefined } } as FileConfigInput['upstreams'],
      routes,
      idempotency: { retentionHours: RETENTION_HOURS, maxBodyBytes: MAX_BODY_BYTES },
    },
    env: { UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
  })
  key = await t.key()
})

afterAll(async () => {
  await t.close()
  await service.close()
  redis.disconnect()
})

beforeEach(async () => {
  service.received.length = 0
  // Each test sees only its own records.
  const left = await records()
  if (left.length > 0) await redis.del(...left)
})

afterEach(() => {
  service.setFailure(undefined)
  service.resetGuests()
})

describe('the header', () => {
  it.each([
    ['a space inside', 'abc def'],
    ['a double quote inside', 'ab"c'],
    ['a backslash', 'ab\\c'],
    ['256 characters', 'k'.repeat(256)],
    ['an empty string', '""'],
    ['a non-ASCII character', 'clé'],
    ['an unclosed quote', '"abc'],
  ])('refuses %s with 400 INVALID_HEADER before any record or call', async (_name, value) => {
    expectProblem(await post(undefined, { headers: { 'idempotency-key': value } }), {
      code: 'INVALID_HEADER', instance: '/v1/guests', detail: 'Invalid Idempotency-Key header.',
      errors: [{ field: 'Idempotency-Key', code: 'INVALID_FORMAT', detail: 'Send it once: 1 to 255 visible ASCII characters other than " and \\, bare or in double quotes.' }],
    })
    expect(service.received).toEqual([])
    expect(await records()).toEqual([])
  })

  it('refuses the header sent twice', async () => {
    const res = await request(`${t.url}/v1/guests`, {
      method: 'POST', body: GUEST,
      headers: ['host', ACME_HOST, 'user-agent', 'idem-test/1.0', 'authorization', `Bearer ${key}`, 'content-type', 'application/json',
        'idempotency-key', 'one', 'idempotency-key', 'two'],
    })
    const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
    expectProblem(answer, {
      code: 'INVALID_HEADER', instance: '/v1/guests',
      errors: [{ field: 'Idempotency-Key', code: 'INVALID_FORMAT', detail: 'Send it once: 1 to 255 visible ASCII characters other than " and \\, bare or in double quotes.' }],
    })
    expect(service.received).toEqual([])
  })

  it('takes 255 characters, and the quoted form as the same key as the bare one', async () => {
    const long = `${newKey()}-`.padEnd(255, 'x')
    expectCreated(await post(long))
    const bare = newKey()
    const first = await post(bare)
    expectCreated(first)
    expectReplay(await post(`"${bare}"`), first)
    // The service receives the header as the partner sent it.
    expect(service.received.map((r) => r.headers['idempotency-key'])).toEqual([long, bare])
  })

  it('is required on a route that says so: 400 MISSING_REQUIRED_HEADER', async () => {
    expectProblem(await post(undefined, {}, '/v1/vip-guests'), {
      code: 'MISSING_REQUIRED_HEADER', instance: '/v1/vip-guests', detail: 'The Idempotency-Key header is required.',
      errors: [{ field: 'Idempotency-Key', code: 'REQUIRED', detail: 'POST on this endpoint needs a key that names this request, e.g. a UUID you keep until you have its answer.' }],
    })
    expect(service.received).toEqual([])
    const first = await post(newKey(), {}, '/v1/vip-guests')
    expect(first.statusCode).toBe(201)
    expect(service.received).toHaveLength(1)
  })

  it('is optional by default: a POST without it is forwarded as before, and every one creates', async () => {
    expectCreated(await post(undefined))
    expectCreated(await post(undefined))
    expect(service.writesOf('')).toEqual({ created: 2, updated: 0 })
    expect(service.received.map((r) => r.headers['idempotency-key'])).toEqual([undefined, undefined])
    expect(await records()).toEqual([])
  })

  it('is ignored and not forwarded on GET, PUT and DELETE, whatever its value', async () => {
    const guestId = (service.guestsOf('acme')[0] as { id: string }).id
    const get = await call('GET', '/v1/guests?perPage=1', { headers: { 'idempotency-key': 'not a valid key' } })
    expect(get.statusCode).toBe(200)
    expect(get.headers['idempotent-replayed']).toBeUndefined()
    for (const method of ['PUT', 'DELETE']) {
      const res = await call(method, `/v1/guest-flags/${guestId}`, { headers: { 'idempotency-key': 'not a valid key' }, ...(method === 'PUT' ? { body: GUEST } : {}) })
      expect({ method, status: res.statusCode }).toEqual({ method, status: 404 })
    }
    expect(service.received.map((r) => [r.method, r.headers['idempotency-key']])).toEqual([['GET', undefined], ['PUT', undefined], ['DELETE', undefined]])
    expect(await records()).toEqual([])
  })
})

describe('the record', () => {
  it('none: claims it, forwards the key, keeps the answer for the retention (TTL in Redis); a retry replays it byte for byte', async () => {
    const idempotencyKey = newKey()
    const first = await post(idempotencyKey, { headers: { 'service-correlation-id': 'corr-1' } })
    expectCreated(first)
    expect(first.headers['idempotent-replayed']).toBeUndefined()
    expect(first.headers['service-correlation-id']).toBe('corr-1')
    expect(receivedWith(idempotencyKey)).toBe(1)
    const [record, ...others] = await records()
    expect(others).toEqual([])
    // One slot per credential: the key id is the hash tag.
    expect(record).toMatch(new RegExp(`^${t.prefix}idem:\\{key_[^}]+\\}:[A-Za-z0-9_-]{43}$`))
    const ttl = await redis.pttl(record as string)
    expect(ttl).toBeGreaterThan(RETENTION_HOURS * 3600_000 - 60_000)
    expect(ttl).toBeLessThanOrEqual(RETENTION_HOURS * 3600_000)

    const replay = await post(idempotencyKey, { headers: { 'service-correlation-id': 'corr-2' } })
    expectReplay(replay, first)
    expect(replay.headers['service-correlation-id']).toBe('corr-2')
    expect(receivedWith(idempotencyKey)).toBe(1)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })

  it('keeps and replays a 4xx of the service (its final word)', async () => {
    const idempotencyKey = newKey()
    const first = await post(idempotencyKey, { body: '{"firstName":"Ann"}' })
    expect(first.statusCode).toBe(422)
    expect(first.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(JSON.parse(first.body)).toMatchObject({ code: 'VALIDATION_FAILED', status: 422 })
    const replayed = await post(idempotencyKey, { body: '{"firstName":"Ann"}', headers: { 'service-correlation-id': 'corr-3' } })
    expectReplay(replayed, first)
    // No success, so no correlation id echoed, replayed or not.
    expect(replayed.headers['service-correlation-id']).toBeUndefined()
    expect(receivedWith(idempotencyKey)).toBe(1)
  })

  it('tells requests apart by what the service receives: the query as forwarded, the media type normalised', async () => {
    // The same request spelled two ways reaches the service as the same bytes: a retry, not a reuse.
    const idempotencyKey = newKey()
    const first = await call('POST', '/v1/guests?email=a@b.example', { body: GUEST, headers: { 'idempotency-key': idempotencyKey } })
    expectCreated(first)
    for (const [path, type] of [['/v1/guests?email=a%40b.example', 'application/json'], ['/v1/guests?email=a@b.example', 'Application/JSON; charset=UTF-8']] as const) {
      const again = await call('POST', path, { body: GUEST, headers: { 'idempotency-key': idempotencyKey, 'content-type': type } })
      expectReplay(again, first)
    }
    expect(receivedWith(idempotencyKey)).toBe(1)
    // Another value is another request.
    expectProblem(await call('POST', '/v1/guests?email=a@c.example', { body: GUEST, headers: { 'idempotency-key': idempotencyKey } }),
      { code: 'IDEMPOTENCY_KEY_REUSED', instance: '/v1/guests' })
  })

  it('works on PATCH: one change per key', async () => {
    const guestId = (service.guestsOf('acme')[0] as { id: string }).id
    const idempotencyKey = newKey()
    const patch = (): Promise<Answer> => call('PATCH', `/v1/guests/${guestId}`, { body: '{"phone":"+33 1 23 45 67 89"}', headers: { 'idempotency-key': idempotencyKey } })
    const first = await patch()
    expect(first.statusCode).toBe(200)
    expectReplay(await patch(), first)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 0, updated: 1 })
  })

  it('any state, other request: 422 IDEMPOTENCY_KEY_REUSED, nothing forwarded', async () => {
    const idempotencyKey = newKey()
    expectCreated(await post(idempotencyKey))
    const reused = {
      code: 'IDEMPOTENCY_KEY_REUSED' as const, instance: '/v1/guests',
      detail: 'This Idempotency-Key was used for a different request; send a new key with each new request.',
    }
    expectProblem(await post(idempotencyKey, { body: GUEST.replace('Ann', 'Bob') }), reused)
    expectProblem(await call('POST', '/v1/guests?page=2', { body: GUEST, headers: { 'idempotency-key': idempotencyKey } }), { ...reused, instance: '/v1/guests' })
    expect(receivedWith(idempotencyKey)).toBe(1)
    // One key on another route (or method) is another record.
    const guestId = (service.guestsOf('acme')[0] as { id: string }).id
    const patched = await call('PATCH', `/v1/guests/${guestId}`, { body: '{}', headers: { 'idempotency-key': idempotencyKey } })
    expect(patched.statusCode).toBe(200)
    expect(patched.headers['idempotent-replayed']).toBeUndefined()
  })

  it('in flight: 409 IDEMPOTENCY_KEY_IN_USE with Retry-After: 1, the service not called; then the answer is replayed', async () => {
    const idempotencyKey = newKey()
    service.setFailure({ mode: 'latency', latencyMs: 1500, times: 1 })
    const first = post(idempotencyKey)
    expect(await eventually(async () => receivedWith(idempotencyKey) === 1, 10_000)).toBe(true)
    expectProblem(await post(idempotencyKey), {
      code: 'IDEMPOTENCY_KEY_IN_USE', instance: '/v1/guests', headers: { 'retry-after': '1' },
      detail: 'A request with this Idempotency-Key is still in flight; retry in 1 second to get its answer.',
    })
    // Another body while in flight is a reuse all the same.
    expectProblem(await post(idempotencyKey, { body: '{}' }), { code: 'IDEMPOTENCY_KEY_REUSED', instance: '/v1/guests' })
    const answered = await first
    expectCreated(answered)
    expectReplay(await post(idempotencyKey), answered)
    expect(receivedWith(idempotencyKey)).toBe(1)
  })

  it('a partner that goes away after its request was forwarded changes nothing: a retry meanwhile is 409, afterwards the replay, one creation', async () => {
    // The review's case (docs/security.md, "Findings of the review of wave 3", 1): a slow
    // service, the partner's socket closed while it works, the same request again at once.
    const idempotencyKey = newKey()
    const earlier = new Set(await records())
    // Within the route's timeoutMs (2 s): the service answers, late.
    service.setFailure({ mode: 'latency', latencyMs: 1500, times: 1 })
    const controller = new AbortController()
    const gone = post(idempotencyKey, { signal: controller.signal }).then(() => 'answered', () => 'closed')
    expect(await eventually(async () => receivedWith(idempotencyKey) === 1, 10_000)).toBe(true)
    controller.abort()
    expect(await gone).toBe('closed')
    expectProblem(await post(idempotencyKey), { code: 'IDEMPOTENCY_KEY_IN_USE', instance: '/v1/guests', headers: { 'retry-after': '1' } })
    // The call ran to its end and its answer was kept: the retry gets it.
    const [record] = (await records()).filter((r) => !earlier.has(r))
    expect(await eventually(async () => (await redis.get(record as string))?.startsWith('D') === true, 15_000)).toBe(true)
    const replayed = await post(idempotencyKey)
    expect(replayed.statusCode).toBe(201)
    expect(replayed.headers['idempotent-replayed']).toBe('true')
    expect(receivedWith(idempotencyKey)).toBe(1)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })

  it('20 concurrent identical requests with one key reach the service once; the others get 409 or the replay', async () => {
    const idempotencyKey = newKey()
    service.setFailure({ mode: 'latency', latencyMs: 300 })
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(idempotencyKey)))
    service.setFailure(undefined)
    const created = answers.filter((a) => a.statusCode === 201)
    const inUse = answers.filter((a) => a.statusCode === 409)
    expect(created.length + inUse.length).toBe(20)
    expect(created.filter((a) => a.headers['idempotent-replayed'] === undefined)).toHaveLength(1)
    const original = created.find((a) => a.headers['idempotent-replayed'] === undefined) as Answer
    for (const replay of created.filter((a) => a !== original)) expectReplay(replay, original)
    for (const refused of inUse) expectProblem(refused, { code: 'IDEMPOTENCY_KEY_IN_USE', instance: '/v1/guests', headers: { 'retry-after': '1' } })
    expect(receivedWith(idempotencyKey)).toBe(1)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
    expectReplay(await post(idempotencyKey), original)
  })

  it.each([
    ['a 5xx', { mode: 'html-5xx', status: 502 }],
    ['a 429', { mode: 'throttle', retryAfter: 2 }],
    ['a reset connection', { mode: 'drop' }],
    ['a 200 that is not JSON (500)', { mode: 'non-json' }],
  ] as const)('%s of the service releases the record: the retry, with the same key, is forwarded again', async (_name, failure) => {
    const idempotencyKey = newKey()
    service.setFailure({ ...failure, times: 1 } as Parameters<MockService['setFailure']>[0])
    const failed = await post(idempotencyKey)
    expect([500, 503]).toContain(failed.statusCode)
    expect(failed.headers['idempotent-replayed']).toBeUndefined()
    expect(await records()).toEqual([])
    expectCreated(await post(idempotencyKey))
    expect(receivedWith(idempotencyKey)).toBe(2)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
  })

  it('passes on an answer above maxBodyBytes and releases the record; the log says so', async () => {
    const idempotencyKey = newKey()
    service.setFailure({ mode: 'large', bytes: MAX_BODY_BYTES * 4, times: 1 })
    const large = await post(idempotencyKey)
    expect(large.statusCode).toBe(200)
    expect(Buffer.byteLength(large.body)).toBeGreaterThan(MAX_BODY_BYTES)
    expect(JSON.parse(large.body)).toMatchObject({ data: expect.any(Array) })
    expect(await records()).toEqual([])
    expect(t.logs.records().some((line) => line.msg === 'answer over idempotency.maxBodyBytes: passed on without being kept; the idempotency record is released'
      && line.maxBodyBytes === MAX_BODY_BYTES)).toBe(true)
    expectCreated(await post(idempotencyKey))
    expect(receivedWith(idempotencyKey)).toBe(2)
  })

  it('never creates or touches a record for a request the gateway refuses itself (steps 1 to 7)', async () => {
    const idempotencyKey = newKey()
    const withKey = { 'idempotency-key': idempotencyKey }
    // A key whose quota of one is spent by a read first, and in the store for the window after
    // the read's too: the POST is refused in whichever of the two it lands, a window's end
    // between them included.
    const { key: spent, id: spentId } = await t.keyWithId({ rateLimit: 1 })
    expect((await call('GET', '/v1/guests?perPage=1', { key: spent })).statusCode).toBe(200)
    const windowMs = t.gateway.app.gatewayConfig.rateLimit.windowSeconds * 1000
    const readIn = Math.floor(Date.now() / windowMs)
    const quotas = new RedisQuotaStore(redis, t.prefix)
    for (const window of [readIn, readIn + 1]) await quotas.lease(spentId, window, 1, 1, 2 * windowMs)
    service.received.length = 0
    const refusals: [Answer, number][] = [
      [await call('POST', '/v1/guests', { body: GUEST, headers: withKey, key: spent }), 429],
      // A test key, and this gateway's service has no sandbox.
      [await call('POST', '/v1/guests', { body: GUEST, headers: withKey, key: await t.key({ mode: 'test' }) }), 403],
      [await call('POST', '/v1/guests/', { body: GUEST, headers: withKey }), 400],
      [await call('POST', '/v1/guests', { body: GUEST, headers: { ...withKey, accept: 'text/html' } }), 406],
      [await call('POST', '/v1/guests', { body: GUEST, headers: { ...withKey, 'user-agent': 'x' } }), 400],
      [await call('POST', '/v1/guests', { body: GUEST, headers: withKey, key: 'svc_live_invalid' }), 401],
      [await call('POST', '/v1/guests', { body: GUEST, headers: { ...withKey, 'content-type': 'text/plain' } }), 415],
      [await call('POST', '/v1/guests', { body: `{"pad":"${'x'.repeat(70_000)}"}`, headers: withKey }), 413],
      [await call('POST', '/v1/guests?bogus=1', { body: GUEST, headers: withKey }), 400],
      [await call('POST', '/v1/guests', { body: '{"firstName":', headers: withKey }), 400],
      [await call('POST', '/v1/guests', { body: GUEST, headers: withKey, key: await t.key({ scopes: ['guests:read'] }) }), 403],
      [await call('POST', '/v1/guests', { body: GUEST, headers: { ...withKey, 'accept-language': 'x'.repeat(16_300) } }), 431],
    ]
    expect(refusals.map(([answer]) => answer.statusCode)).toEqual(refusals.map(([, status]) => status))
    expect(service.received).toEqual([])
    expect(await records()).toEqual([])
  })

  it('two credentials never share a record', async () => {
    const idempotencyKey = newKey()
    const other = await t.key()
    const mine = await post(idempotencyKey)
    const theirs = await post(idempotencyKey, { key: other })
    expectCreated(mine)
    expectCreated(theirs)
    expect(theirs.headers['idempotent-replayed']).toBeUndefined()
    expect(theirs.body).not.toBe(mine.body)
    expect(service.writesOf(idempotencyKey)).toEqual({ created: 2, updated: 0 })
    expect(await records()).toHaveLength(2)
  })

  it('two instances share the records', async () => {
    const twin = await t.twin()
    try {
      const idempotencyKey = newKey()
      const first = await post(idempotencyKey)
      expectCreated(first)
      expectReplay(await post(idempotencyKey, { url: twin.url }), first)
      expect(receivedWith(idempotencyKey)).toBe(1)
    } finally {
      await twin.close()
    }
  })

  it('counts each outcome in gateway_idempotency_total{route,outcome}', async () => {
    // A fresh instance: its counters start at zero.
    const twin = await t.twin()
    try {
      const idempotencyKey = newKey()
      await post(idempotencyKey, { url: twin.url })
      await post(idempotencyKey, { url: twin.url })
      await post(idempotencyKey, { url: twin.url, body: '{}' })
      service.setFailure({ mode: 'html-5xx', times: 1 })
      await post(newKey(), { url: twin.url })
      const slowKey = newKey()
      service.setFailure({ mode: 'latency', latencyMs: 1000, times: 1 })
      const slow = post(slowKey, { url: twin.url })
      expect(await eventually(async () => receivedWith(slowKey) === 1, 10_000)).toBe(true)
      expect((await post(slowKey, { url: twin.url })).statusCode).toBe(409)
      expect((await slow).statusCode).toBe(201)
      const text = await twin.gateway.metrics.registry.getSingleMetricAsString('gateway_idempotency_total')
      const lines = text.split('\n').filter((line) => line.startsWith('gateway_idempotency_total{')).sort()
      expect(lines).toEqual([
        'gateway_idempotency_total{route="/v1/guests",outcome="in_use"} 1',
        'gateway_idempotency_total{route="/v1/guests",outcome="released"} 1',
        'gateway_idempotency_total{route="/v1/guests",outcome="replayed"} 1',
        'gateway_idempotency_total{route="/v1/guests",outcome="reused"} 1',
        'gateway_idempotency_total{route="/v1/guests",outcome="stored"} 2',
      ])
    } finally {
      await twin.close()
    }
  })
})

/** A gateway of the describe's own, on a Redis server of its own that a test may stop or pause. */
function onPrivateRedis(): { redis: () => PrivateRedis; gateway: () => TestGateway } {
  let privateRedis: PrivateRedis
  let g: TestGateway
  beforeAll(async () => {
    privateRedis = await PrivateRedis.start()
    g = await TestGateway.start({
      config: { upstreams: { bookings: { ...shipped.upstreams.bookings, sandboxUrl: undefined } } as FileConfigInput['upstreams'], routes },
      env: { REDIS_URL: privateRedis.url, UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    })
  })
  afterAll(async () => {
    await g.close()
    await privateRedis.stop()
  })
  return { redis: () => privateRedis, gateway: () => g }
}

describe('Redis unreachable', () => {
  const setup = onPrivateRedis()

  it('answers a keyed request 503 with Retry-After, not forwarded; a keyless one on an optional route goes through', async () => {
    const [g, privateRedis] = [setup.gateway(), setup.redis()]
    const admin = new Redis(privateRedis.url)
    const privateKey = (await new RedisKeyStore(admin, g.prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
    admin.disconnect()
    // The key is cached by a first request; then Redis goes away.
    expectCreated(await post(undefined, { key: privateKey, url: g.url }))
    await privateRedis.stop()
    expect(await eventually(async () => g.gateway.redis?.status !== 'ready', 10_000)).toBe(true)
    service.received.length = 0
    const idempotencyKey = newKey()
    const refused = await post(idempotencyKey, { key: privateKey, url: g.url })
    expectProblem(refused, {
      code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': '1' },
      detail: 'Idempotency keys cannot be checked right now; retry in 1 second.',
    })
    expect(receivedWith(idempotencyKey)).toBe(0)
    expectCreated(await post(undefined, { key: privateKey, url: g.url }))
    expect(service.received).toHaveLength(1)
  })
})

describe('a partner gone before its request was forwarded', () => {
  const setup = onPrivateRedis()

  it('frees the record: nothing was sent, the retry is forwarded, and the request has its line', async () => {
    const [g, privateRedis] = [setup.gateway(), setup.redis()]
    const admin = new Redis(privateRedis.url)
    try {
      const privateKey = (await new RedisKeyStore(admin, g.prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
      // The key is cached and a quota lease held by a first request; then Redis holds every
      // script (the claim among them) while the partner leaves.
      expectCreated(await post(undefined, { key: privateKey, url: g.url }))
      const connections = (): Promise<number> => new Promise((resolve, reject) => {
        g.gateway.app.server.getConnections((error, count) => (error === null ? resolve(count) : reject(error)))
      })
      const before = await connections()
      await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE')
      const idempotencyKey = newKey()
      const controller = new AbortController()
      const own = new Agent()
      const gone = post(idempotencyKey, { key: privateKey, url: g.url, signal: controller.signal, dispatcher: own }).then(() => 'answered', () => 'closed')
      // The request is in (its connection open) and waits for Redis; then its partner leaves,
      // and the gateway has seen it leave before Redis answers.
      expect(await eventually(async () => (await connections()) === before + 1, 10_000)).toBe(true)
      controller.abort()
      expect(await gone).toBe('closed')
      expect(await eventually(async () => (await connections()) === before, 10_000)).toBe(true)
      await admin.call('CLIENT', 'UNPAUSE')
      await own.close()
      const line = async (): Promise<Record<string, unknown> | undefined> => g.logs.records().find((r) => r.msg === 'request' && r.status === 499)
      expect(await eventually(async () => (await line()) !== undefined, 10_000)).toBe(true)
      expect(await line()).toMatchObject({ route: '/v1/guests', method: 'POST', upstream: null })
      expect(receivedWith(idempotencyKey)).toBe(0)
      expect(await keysUnder(admin, `${g.prefix}idem:`)).toEqual([])
      expectCreated(await post(idempotencyKey, { key: privateKey, url: g.url }))
      expect(receivedWith(idempotencyKey)).toBe(1)
    } finally {
      admin.disconnect()
    }
  })
})

describe('an instance killed mid-call', () => {
  let child: ChildProcess | undefined

  afterAll(() => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })

  it('leaves a leased record that a retry takes over once the lease runs out', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-idem-'))
    const configFile = join(dir, 'config.json')
    // Calls of at most 1 s: a lease of 6 s.
    writeFileSync(configFile, JSON.stringify({
      docsUrl: 'https://developer.example.com',
      brands: [{ id: 'acme', chainCode: 'ACME', hosts: [ACME_HOST] }],
      upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs: 1000, responseTimeoutMs: 1000 } },
      routes: [shipped.routes[0]],
      loadShedding: { maxEventLoopDelayMs: 0 },
    }))
    const port = await freePort()
    child = spawn(process.execPath, ['dist/src/server.js'], {
      env: {
        ...process.env, PORT: String(port), ADMIN_PORT: String(await freePort()), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: t.prefix,
        PMS_URL: t.pms.url, PMS_TOKEN: 'test-pms-token', UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN, LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY,
      },
      stdio: 'ignore',
    })
    const childUrl = `http://127.0.0.1:${port}`
    const up = await eventually(async () => (await request(`${childUrl}/v1/health`).then((r) => r.body.text().then(() => r.statusCode)).catch(() => 0)) === 200, 20_000, 100)
    expect(up).toBe(true)

    const idempotencyKey = newKey()
    // The service holds the answer while the instance dies.
    service.setFailure({ mode: 'latency', latencyMs: 2500, times: 1 })
    const lost = post(idempotencyKey, { url: childUrl }).catch((error: unknown) => error)
    expect(await eventually(async () => receivedWith(idempotencyKey) === 1, 10_000)).toBe(true)
    child.kill('SIGKILL')
    expect(await lost).toBeInstanceOf(Error)

    const [record] = await records()
    const lease = await redis.pttl(record as string)
    expect(lease).toBeGreaterThan(0)
    expect(lease).toBeLessThanOrEqual(6000)
    // Still leased: a retry now is told to wait.
    expectProblem(await post(idempotencyKey), { code: 'IDEMPOTENCY_KEY_IN_USE', instance: '/v1/guests', headers: { 'retry-after': '1' } })
    expect(await eventually(async () => (await records()).length === 0, 15_000, 100)).toBe(true)
    expectCreated(await post(idempotencyKey))
    // Forwarded again with the same key, so a service that deduplicates on it stays safe.
    expect(receivedWith(idempotencyKey)).toBe(2)
  })
})

describe('the config and the OpenAPI document', () => {
  it('takes idempotency only on routes with POST or PATCH, optional by default, and says which field is wrong', () => {
    const route = { path: '/v1/notes', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/notes' }
    const upstreams = { bookings: { url: 'http://127.0.0.1:9' } } as FileConfigInput['upstreams']
    expect(() => testConfig({ upstreams, routes: [{ ...route, methods: ['GET', 'PUT'], idempotency: 'required' }] as FileConfigInput['routes'] }))
      .toThrow('config/default.json routes[0]: idempotency applies only to declared routes with POST or PATCH')
    expect(() => testConfig({ upstreams, routes: [{ ...route, methods: ['POST'], idempotency: 'always' }] as unknown as FileConfigInput['routes'] }))
      .toThrow(/config\/default.json routes\[0\]\.idempotency: /)
    expect(() => testConfig({ upstreams, idempotency: { retentionHours: 0, maxBodyBytes: 1 } })).toThrow(/idempotency\.retentionHours: /)
    const config = testConfig({ upstreams, routes: [{ ...route, methods: ['GET', 'POST'] }, { ...route, path: '/v1/memos', methods: ['GET'] }] as FileConfigInput['routes'] })
    expect(config.routes.map((r) => r.idempotency)).toEqual(['optional', undefined])
    expect(config.idempotency).toEqual({ retentionHours: 24, maxBodyBytes: 1048576 })
  })

  it('describes the header on each POST and PATCH (required or not), the 409 and 422 answers and Idempotent-Replayed', () => {
    const document = openApiDocument(t.gateway.app.gatewayConfig) as { paths: Record<string, Record<string, { parameters: { name?: string; required?: boolean }[]; responses: Record<string, { headers?: Record<string, unknown>; description?: string }> }>> }
    const header = (path: string, method: string) => document.paths[path]?.[method]?.parameters.find((p) => p.name === 'Idempotency-Key')
    expect(header('/v1/guests', 'post')).toMatchObject({ in: 'header', required: false })
    expect(header('/v1/guests/{guestId}', 'patch')).toMatchObject({ in: 'header', required: false })
    expect(header('/v1/vip-guests', 'post')).toMatchObject({ in: 'header', required: true })
    expect(header('/v1/guests', 'get')).toBeUndefined()
    expect(header('/v1/guest-flags/{guestId}', 'put')).toBeUndefined()
    const post = document.paths['/v1/guests']?.post
    expect(post?.responses['409']?.description).toContain('IDEMPOTENCY_KEY_IN_USE')
    expect(post?.responses['422']?.description).toContain('IDEMPOTENCY_KEY_REUSED')
    expect(post?.responses['422']?.description).toContain('or a problem of the service behind this route, passed on')
    expect(post?.responses['201']?.headers?.['Idempotent-Replayed']).toMatchObject({ required: false, schema: { const: 'true' } })
    expect(document.paths['/v1/guests']?.get?.responses['409']).toBeUndefined()
    expect(document.paths['/v1/guests']?.get?.responses['200']?.headers?.['Idempotent-Replayed']).toBeUndefined()
  })
})
