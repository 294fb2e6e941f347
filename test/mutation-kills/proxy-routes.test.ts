import { Redis } from 'ioredis'
import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { roomsOf, type Guest } from '../../mocks/service/data.js'
import { MockService, problemBody } from '../../mocks/service/server.js'
import { ACME_HOST } from '../helpers/config.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import type { Answer, CallOptions } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { eventually, keysUnder, REDIS_URL } from '../helpers/redis.js'

// Rules of a declared route that are set when the gateway is built or decided as the
// service's answer is judged (docs/architecture.md, "Declared routes", "Idempotency records",
// "What the service receives" and "What the partner receives"): which origins an absolute
// Location may name, which routes' paths it may map to, uuid path parameters lower-cased, the
// property of a property-scoped route, the lease of a keyed request's record, the head-size
// bound with the gateway's own headers, which requests claim a record, what a replay echoes,
// how each answer of the service is counted and logged, the partner who left before the answer,
// a keyed answer cut before the partner got a byte, and a record that Redis fails to release or
// keep.
//
// Each test builds its own gateway and stand-in service: the route's constructor and the
// declaredRoutes plugin run while a gateway is built, and mutation testing counts code run in a
// file-level beforeAll as static, testing its changes against no test that could notice them
// (stryker.config.mjs, ignoreStatic). Over real sockets, with real Redis.

const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}'
const UPPER_ID = '3F0C6F2E-8F0A-4A57-9D0E-2D6F5D1B7A10'

function call(s: Setup, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  return s.t.call(method, path, { key: s.key, userAgent: 'route-kills/1.0', ...options })
}

function post(s: Setup, idempotencyKey: string | undefined, options: CallOptions = {}): Promise<Answer> {
  const headers = { ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }), ...options.headers }
  return call(s, 'POST', '/v1/guests', { body: GUEST, ...options, headers })
}

let counter = 0
/** An Idempotency-Key no other test uses. */
function newKey(): string {
  counter += 1
  return `route-kill-${process.pid}-${Date.now()}-${counter}`
}

async function metricsOf(s: Setup): Promise<string> {
  return (await s.t.gateway.admin.inject({ url: '/metrics' })).body
}

/** The metric's lines for the bookings upstream, e.g. `gateway_upstream_requests_total{upstream="bookings",outcome="success"} 1`. */
function linesOf(metrics: string, name: string): string[] {
  return metrics.split('\n').filter((l) => l.startsWith(`${name}{`) && l.includes('upstream="bookings"'))
}

/** The record of the only keyed request in flight, once it is claimed. */
async function recordOf(s: Setup, redis: Redis): Promise<string> {
  let names: string[] = []
  expect(await eventually(async () => (names = await keysUnder(redis, `${s.t.prefix}idem:`)).length === 1, 10_000)).toBe(true)
  return names[0] as string
}

/** The log lines with this message. */
function logged(s: Setup, msg: string): Record<string, unknown>[] {
  return s.t.logs.records().filter((r) => r.msg === msg)
}

/** The request log line of an answer, once it is written (it may follow the answer by a moment). */
async function requestLine(s: Setup, answer: Answer): Promise<Record<string, unknown>> {
  const requestId = answer.headers['service-request-id']
  const lines = (): Record<string, unknown>[] => s.t.logs.records().filter((r) => r.msg === 'request' && r.reqId === requestId)
  expect(await eventually(async () => lines().length > 0, 5000)).toBe(true)
  return lines()[0] as Record<string, unknown>
}

function receivedWith(service: MockService, idempotencyKey: string): number {
  return service.received.filter((r) => r.headers['idempotency-key'] === idempotencyKey).length
}

describe('the Location of an answer (docs/architecture.md, "What the partner receives")', () => {
  it('maps an absolute Location on the service\'s live origin and on its sandbox origin to the public path', async () => {
    const s = await startWithService({ sandbox: true, pmsSandbox: true })
    try {
      const liveGuest = s.service.guestsOf('acme')[0] as Guest
      s.service.setFailure({ mode: 'redirect', location: `${s.service.url}/partner/v1/guests/${liveGuest.id}`, times: 1 })
      const live = await call(s, 'GET', '/v1/guests')
      expect({ status: live.statusCode, location: live.headers.location, body: live.body }).toEqual({ status: 302, location: `/v1/guests/${liveGuest.id}`, body: '' })

      const sandbox = s.sandbox as MockService
      const testGuest = sandbox.guestsOf('acme')[0] as Guest
      sandbox.setFailure({ mode: 'redirect', location: `${sandbox.url}/partner/v1/guests/${testGuest.id}`, times: 1 })
      const test = await call(s, 'GET', '/v1/guests', { key: await s.t.key({ mode: 'test' }) })
      expect({ status: test.statusCode, location: test.headers.location, body: test.body }).toEqual({ status: 302, location: `/v1/guests/${testGuest.id}`, body: '' })
      expect(sandbox.received.map((r) => r.path)).toEqual(['/partner/v1/guests'])
    } finally {
      await s.close()
    }
  })

  it('maps the live origin of a service without a sandbox, and never to the route of another service', async () => {
    const notes = await new MockService({ token: 'notes-token' }).listen()
    const s = await startWithService({
      upstreams: { notes: { url: notes.url, tokenHeader: 'X-Service-Token' } },
      routes: [{ path: '/v1/notes', methods: ['GET'], scope: 'brand', upstream: 'notes', upstreamPath: '/partner/v1/notes', pathParams: {}, query: {} }],
      env: { UPSTREAM_NOTES_TOKEN: 'notes-token' },
    })
    try {
      const guest = s.service.guestsOf('acme')[0] as Guest
      s.service.setFailure({ mode: 'redirect', location: `${s.service.url}/partner/v1/guests/${guest.id}`, times: 1 })
      const mapped = await call(s, 'GET', '/v1/guests')
      expect({ status: mapped.statusCode, location: mapped.headers.location }).toEqual({ status: 302, location: `/v1/guests/${guest.id}` })
      // /partner/v1/notes is the notes service's path: bookings has no route there.
      s.service.setFailure({ mode: 'redirect', location: '/partner/v1/notes', times: 1 })
      const foreign = await call(s, 'GET', '/v1/guests')
      expect({ status: foreign.statusCode, location: foreign.headers.location, body: foreign.body }).toEqual({ status: 302, location: undefined, body: '' })
    } finally {
      await s.close()
      await notes.close()
    }
  })
})

describe('what the service receives (docs/architecture.md, "What the service receives")', () => {
  it('gets uuid path parameters lower-cased and other path parameters as the partner sent them', async () => {
    const s = await startWithService({
      routes: [{
        path: '/v1/guests/{guestId}/tags/{tag}', methods: ['GET'], scope: 'brand', upstream: 'bookings',
        upstreamPath: '/partner/v1/guests/{guestId}/tags/{tag}', pathParams: { guestId: { type: 'uuid' }, tag: { type: 'string' } }, query: {},
      }],
    })
    try {
      const res = await call(s, 'GET', `/v1/guests/${UPPER_ID}/tags/Vip-Gold`)
      const path = `/partner/v1/guests/${UPPER_ID.toLowerCase()}/tags/Vip-Gold`
      expect(s.service.received.map((r) => r.path)).toEqual([path])
      // The stand-in has no such endpoint: its problem is passed on, naming the partner's request.
      expect(res.statusCode).toBe(404)
      expect(JSON.parse(res.body)).toEqual({
        ...problemBody('ROUTE_NOT_FOUND', `No endpoint at ${path}.`, `/v1/guests/${UPPER_ID}/tags/Vip-Gold`, res.headers['service-request-id'] as string),
        timestamp: expect.stringMatching(TIMESTAMP),
      })
    } finally {
      await s.close()
    }
  })

  it('gets the checked property on a property-scoped route', async () => {
    const s = await startWithService()
    try {
      const propertyId = String(s.t.pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)
      const res = await call(s, 'GET', '/v1/rooms', { headers: { 'service-property-id': propertyId } })
      expect(s.service.received.map((r) => [r.path, r.headers['x-service-property-id']])).toEqual([[`/partner/v1/properties/${propertyId}/rooms`, propertyId]])
      const rooms = roomsOf(propertyId, 1) ?? []
      expect(res.statusCode).toBe(200)
      expect(JSON.parse(res.body)).toEqual({
        data: rooms.slice(0, 20),
        meta: { requestId: res.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 20, total: rooms.length } },
      })
    } finally {
      await s.close()
    }
  })

  it('refuses with 431 a request whose head, with the gateway\'s headers, is over 16384 bytes, and forwards one of exactly 16384', async () => {
    const s = await startWithService()
    try {
      // A first request shows what the service's head is made of: the request line and every
      // header line the gateway sends (undici adds only `connection`).
      const probe = await call(s, 'GET', '/v1/guests', { headers: { 'accept-language': 'en' } })
      expect(probe.statusCode).toBe(200)
      const seen = s.service.received[0]
      const headSize = (r: NonNullable<typeof seen>): number => {
        const [method = '', target = ''] = r.requestLine.split(' ')
        return method.length + 1 + target.length + ' HTTP/1.1\r\n'.length + '\r\n'.length
          + r.rawHeaders.filter(([name]) => name.toLowerCase() !== 'connection').reduce((sum, [name, value]) => sum + name.length + 2 + value.length + 2, 0)
      }
      const padding = 16384 - headSize(seen as NonNullable<typeof seen>)
      // The same request with a longer Accept-Language: the head comes to exactly 16384 bytes.
      const language = `en;q=0.9, ${'x'.repeat(padding - 'en;q=0.9, '.length + 2)}`
      const atLimit = await call(s, 'GET', '/v1/guests', { headers: { 'accept-language': language } })
      expect(atLimit.statusCode).toBe(200)
      expect(headSize(s.service.received[1] as NonNullable<typeof seen>)).toBe(16384)
      expectProblem(await call(s, 'GET', '/v1/guests', { headers: { 'accept-language': `${language}x` } }), {
        code: 'REQUEST_HEADERS_TOO_LARGE', instance: '/v1/guests',
        detail: 'With the headers the gateway adds, this request comes to 16385 bytes of headers; at most 16384 are accepted. Send shorter Accept, Accept-Language or query values.',
      })
      expect(s.service.received).toHaveLength(2)
    } finally {
      await s.close()
    }
  })
})

describe('Idempotency-Key records (docs/architecture.md, "Idempotency records")', () => {
  it('leases a keyed request\'s record for longer than the longest call the gateway makes: the whole-call bound and 5 seconds', async () => {
    const redis = new Redis(REDIS_URL)
    // Headers within 5 s, the whole answer within 60 s: the lease is 65 s.
    const s = await startWithService({ bookings: { timeoutMs: 5000, responseTimeoutMs: 60_000 } })
    try {
      s.service.setFailure({ mode: 'latency', latencyMs: 1000, times: 1 })
      const idempotencyKey = newKey()
      const first = post(s, idempotencyKey)
      const record = await recordOf(s, redis)
      const lease = await redis.pttl(record)
      // Read after the claim: at most 65 s left, and more than 55 s (the whole-call bound
      // less 5 s), however long the read took on a loaded machine.
      expect(lease).toBeLessThanOrEqual(65_000)
      expect(lease).toBeGreaterThan(55_000)
      expect((await first).statusCode).toBe(201)
    } finally {
      await s.close()
      redis.disconnect()
    }
  })

  it('claims no record for a request without a key, nor for a keyed GET: each is forwarded and none is a replay', async () => {
    const s = await startWithService()
    try {
      const idempotencyKey = newKey()
      const gets = [await call(s, 'GET', '/v1/guests', { headers: { 'idempotency-key': idempotencyKey } }), await call(s, 'GET', '/v1/guests', { headers: { 'idempotency-key': idempotencyKey } })]
      const posts = [await post(s, undefined), await post(s, undefined)]
      expect([...gets, ...posts].map((a) => [a.statusCode, a.headers['idempotent-replayed']])).toEqual([[200, undefined], [200, undefined], [201, undefined], [201, undefined]])
      expect(s.service.received.map((r) => r.method)).toEqual(['GET', 'GET', 'POST', 'POST'])
      expect(s.service.writesOf('')).toEqual({ created: 2, updated: 0 })
    } finally {
      await s.close()
    }
  })

  it('replays a kept answer without forwarding the retry, echoing the retry\'s correlation id on a 2xx only', async () => {
    const s = await startWithService()
    try {
      const replayOf = async (method: 'POST' | 'PATCH', path: string, body: string, expectedStatus: number): Promise<Answer> => {
        const idempotencyKey = newKey()
        const first = await call(s, method, path, { body, headers: { 'idempotency-key': idempotencyKey, 'service-correlation-id': 'corr-first' } })
        expect(first.statusCode).toBe(expectedStatus)
        const replay = await call(s, method, path, { body, headers: { 'idempotency-key': idempotencyKey, 'service-correlation-id': 'corr-retry' } })
        expect({ status: replay.statusCode, body: replay.body, replayed: replay.headers['idempotent-replayed'] }).toEqual({ status: expectedStatus, body: first.body, replayed: 'true' })
        expect(receivedWith(s.service, idempotencyKey)).toBe(1)
        return replay
      }
      const created = await replayOf('POST', '/v1/guests', GUEST, 201)
      expect(created.headers['service-correlation-id']).toBe('corr-retry')
      const guest = s.service.guestsOf('acme')[0] as Guest
      const changed = await replayOf('PATCH', `/v1/guests/${guest.id}`, '{"phone":"+44 20 7946 0000"}', 200)
      expect(changed.headers['service-correlation-id']).toBe('corr-retry')
      expect(s.service.writesOf('')).toEqual({ created: 0, updated: 0 })

      s.service.setFailure({ mode: 'empty', status: 300, times: 1 })
      const multiple = await replayOf('POST', '/v1/guests', GUEST, 300)
      expect(multiple.headers['service-correlation-id']).toBeUndefined()
      s.service.setFailure({ mode: 'problem-4xx', status: 409, times: 1 })
      const conflict = await replayOf('POST', '/v1/guests', GUEST, 409)
      expect(conflict.headers['service-correlation-id']).toBeUndefined()

      // A retry that sends no correlation id gets none back.
      const idempotencyKey = newKey()
      await post(s, idempotencyKey)
      const bare = await post(s, idempotencyKey)
      expect({ status: bare.statusCode, replayed: bare.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: 'true' })
      expect(Object.keys(bare.headers)).not.toContain('service-correlation-id')
    } finally {
      await s.close()
    }
  })

  it('keeps the answer of a partner who left after its request was forwarded: a retry meanwhile is 409, afterwards the replay, and the first request has its line', async () => {
    const redis = new Redis(REDIS_URL)
    const s = await startWithService()
    try {
      const idempotencyKey = newKey()
      s.service.setFailure({ mode: 'latency', latencyMs: 1000, times: 1 })
      const controller = new AbortController()
      const left = request(`${s.t.url}/v1/guests`, {
        method: 'POST', signal: controller.signal, body: GUEST,
        headers: { host: ACME_HOST, 'user-agent': 'route-kills/1.0', authorization: `Bearer ${s.key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      })
      const gone = left.then(() => 'answered', () => 'aborted')
      const record = await recordOf(s, redis)
      expect(await eventually(async () => receivedWith(s.service, idempotencyKey) === 1, 10_000)).toBe(true)
      controller.abort()
      expect(await gone).toBe('aborted')
      // The call runs on: the record stays in flight, and the retry is told to wait.
      expectProblem(await post(s, idempotencyKey), { code: 'IDEMPOTENCY_KEY_IN_USE', instance: '/v1/guests', headers: { 'retry-after': '1' } })
      // Once the service answers, the answer is kept: the retry gets it, and nothing is created twice.
      expect(await eventually(async () => (await redis.get(record))?.startsWith('D') === true, 10_000)).toBe(true)
      const retry = await post(s, idempotencyKey)
      expect({ status: retry.statusCode, replayed: retry.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: 'true' })
      expect(receivedWith(s.service, idempotencyKey)).toBe(1)
      expect(s.service.writesOf(idempotencyKey)).toEqual({ created: 1, updated: 0 })
      // The first request was neither cut nor lost: its line and its count say the partner left (499), the service created, the answer kept.
      const metrics = await metricsOf(s)
      expect(linesOf(metrics, 'gateway_upstream_calls_cut_total')).toEqual([])
      expect(linesOf(metrics, 'gateway_upstream_requests_total')).toEqual(['gateway_upstream_requests_total{upstream="bookings",outcome="success"} 1'])
      expect(metrics.split('\n').filter((l) => l.startsWith('gateway_http_requests_total{') && l.includes('status="499"')))
        .toEqual(['gateway_http_requests_total{route="/v1/guests",method="POST",status="499",code=""} 1'])
      const first = s.t.logs.records().filter((r) => r.msg === 'request' && r.status === 499)
      expect(first).toEqual([expect.objectContaining({ route: '/v1/guests', method: 'POST', upstream: 'bookings', upstreamStatus: 201, idempotency: 'stored', upstreamCut: null, keyId: s.keyId })])
    } finally {
      await s.close()
      redis.disconnect()
    }
  })

  it('answers 503 when a kept answer is cut before the partner got a byte, frees the record, and logs the request once', async () => {
    const redis = new Redis(REDIS_URL)
    const s = await startWithService()
    try {
      const idempotencyKey = newKey()
      s.service.setFailure({ mode: 'reset', times: 1 })
      const cut = await post(s, idempotencyKey)
      expectProblem(cut, { code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': /^\d+$/ } })
      expect(await keysUnder(redis, `${s.t.prefix}idem:`)).toEqual([])
      const requestId = cut.headers['service-request-id']
      expect(await requestLine(s, cut)).toMatchObject({ status: 503, idempotency: 'released', upstreamCut: 'upstream_error' })
      expect(s.t.logs.records().filter((r) => r.msg === 'request' && r.reqId === requestId)).toHaveLength(1)
      expect(linesOf(await metricsOf(s), 'gateway_upstream_calls_cut_total')).toEqual(['gateway_upstream_calls_cut_total{upstream="bookings",reason="upstream_error"} 1'])
      const retry = await post(s, idempotencyKey)
      expect({ status: retry.statusCode, replayed: retry.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: undefined })
      expect(receivedWith(s.service, idempotencyKey)).toBe(2)
    } finally {
      await s.close()
      redis.disconnect()
    }
  })

  it('tells the operator when Redis fails to release or keep a record, or the record was taken over, and still answers the partner', async () => {
    const redis = new Redis(REDIS_URL)
    const s = await startWithService()
    try {
      /** A keyed POST whose record is changed in Redis while the service takes its time. */
      const withRecordChanged = async (change: (record: string) => Promise<unknown>): Promise<Answer> => {
        const idempotencyKey = newKey()
        const answer = post(s, idempotencyKey)
        const record = await recordOf(s, redis)
        expect(await eventually(async () => receivedWith(s.service, idempotencyKey) === 1, 10_000)).toBe(true)
        await change(record)
        const answered = await answer
        await redis.del(record)
        return answered
      }
      // A record Redis cannot read as a string (WRONGTYPE): the release fails.
      s.service.setFailure({ mode: 'html-5xx', status: 502, latencyMs: 500, times: 1 })
      const refused = await withRecordChanged(async (record) => redis.multi().del(record).rpush(record, 'x').exec())
      expectProblem(refused, { code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': /^\d+$/ } })
      expect(logged(s, 'idempotency record not released (Redis failed); it frees itself when its lease runs out').map((r) => [r.level, r.why, (r.err as { message: string }).message]))
        .toEqual([['warn', 'service answered 502', expect.stringMatching(/^WRONGTYPE/)]])

      s.service.setFailure({ mode: 'latency', latencyMs: 500, times: 1 })
      const notKept = await withRecordChanged(async (record) => redis.multi().del(record).rpush(record, 'x').exec())
      expect(notKept.statusCode).toBe(201)
      expect(logged(s, 'idempotency answer not kept (Redis failed); its record frees itself when its lease runs out').map((r) => [r.level, (r.err as { message: string }).message]))
        .toEqual([['warn', expect.stringMatching(/^WRONGTYPE/)]])

      // Another lease in the record: it is no longer this request's to answer.
      s.service.setFailure({ mode: 'latency', latencyMs: 500, times: 1 })
      const takenOver = await withRecordChanged(async (record) => redis.set(record, 'L-someone-else', 'PX', 60_000))
      expect(takenOver.statusCode).toBe(201)
      expect(logged(s, 'idempotency record was taken over before the answer came; the answer is not kept').map((r) => r.level)).toEqual(['warn'])
    } finally {
      await s.close()
      redis.disconnect()
    }
  })
})

describe('how the service\'s answers are judged, counted and logged (docs/operations.md, metrics and logs)', () => {
  it('counts a 2xx as success and a passed-on 4xx as client_error, in the upstream calls\' metrics', async () => {
    const s = await startWithService()
    try {
      expect((await call(s, 'GET', '/v1/guests')).statusCode).toBe(200)
      s.service.setFailure({ mode: 'problem-4xx', status: 400, times: 1 })
      expect((await call(s, 'GET', '/v1/guests')).statusCode).toBe(400)
      expect(linesOf(await metricsOf(s), 'gateway_upstream_requests_total')).toEqual([
        'gateway_upstream_requests_total{upstream="bookings",outcome="success"} 1',
        'gateway_upstream_requests_total{upstream="bookings",outcome="client_error"} 1',
      ])
    } finally {
      await s.close()
    }
  })

  it.each([
    ['a 401 to the gateway\'s token', { mode: 'unauthorized' as const }, 'bookings: answered 401 to the gateway\'s token'],
    ['a 407 to the gateway\'s token', { mode: 'empty' as const, status: 407, contentType: 'application/problem+json' }, 'bookings: answered 407 to the gateway\'s token'],
    ['a gzip-encoded answer', { mode: 'gzip' as const }, 'bookings: answered 200 with Content-Encoding gzip'],
    ['a 200 with no content type', { mode: 'empty' as const }, 'bookings: answered 200 with no content type'],
    ['a 200 in text/plain', { mode: 'non-json' as const }, 'bookings: answered 200 with text/plain'],
  ])('answers %s with 500, counts it as bad_response and logs why', async (_name, failure, message) => {
    const s = await startWithService()
    try {
      s.service.setFailure({ ...failure, times: 1 })
      const res = await call(s, 'GET', '/v1/guests')
      expectProblem(res, { code: 'INTERNAL_ERROR', instance: '/v1/guests', detail: 'An unexpected error occurred; it has been logged.' })
      expect(linesOf(await metricsOf(s), 'gateway_upstream_requests_total')).toEqual(['gateway_upstream_requests_total{upstream="bookings",outcome="bad_response"} 1'])
      const failed = logged(s, 'request failed').map((r) => ({ level: r.level, code: r.code, err: r.err as Record<string, unknown> }))
      expect(failed.map((f) => ({ level: f.level, code: f.code, kind: f.err.kind, outcome: f.err.outcome, message: f.err.message })))
        .toEqual([{ level: 'error', code: 'INTERNAL_ERROR', kind: 'bad-response', outcome: 'bad_response', message }])
    } finally {
      await s.close()
    }
  })

  it('reports the time of the call in seconds in the metrics and in milliseconds in the request log line: at least the service\'s delay, at most what the partner waited', async () => {
    const s = await startWithService()
    try {
      s.service.setFailure({ mode: 'latency', latencyMs: 300, times: 1 })
      const started = performance.now()
      const res = await call(s, 'GET', '/v1/guests')
      const waitedMs = performance.now() - started
      expect(res.statusCode).toBe(200)
      const metrics = await metricsOf(s)
      expect(linesOf(metrics, 'gateway_upstream_request_duration_seconds_count')).toEqual(['gateway_upstream_request_duration_seconds_count{upstream="bookings"} 1'])
      const sum = Number(linesOf(metrics, 'gateway_upstream_request_duration_seconds_sum')[0]?.split(' ')[1])
      expect(sum).toBeGreaterThanOrEqual(0.29)
      expect(sum).toBeLessThanOrEqual(waitedMs / 1000)
      const line = await requestLine(s, res)
      expect(line.upstreamMs).toBeGreaterThanOrEqual(290)
      expect(line.upstreamMs).toBeLessThanOrEqual(waitedMs)
      expect(line.upstreamStatus).toBe(200)
    } finally {
      await s.close()
    }
  })
})

describe('the head of a passed-on answer (docs/partners.md, "Every answer")', () => {
  it('echoes the correlation id on a 2xx only, sends none when the partner sent none, and keeps the connection open', async () => {
    const s = await startWithService()
    try {
      const ok = await call(s, 'GET', '/v1/guests', { headers: { 'service-correlation-id': 'corr-200' } })
      expect([ok.statusCode, ok.headers['service-correlation-id'], ok.headers.connection]).toEqual([200, 'corr-200', 'keep-alive'])
      const bare = await call(s, 'GET', '/v1/guests')
      expect(bare.statusCode).toBe(200)
      expect(Object.keys(bare.headers)).not.toContain('service-correlation-id')
      expect(bare.headers.connection).toBe('keep-alive')
      s.service.setFailure({ mode: 'empty', status: 300, times: 1 })
      const multiple = await call(s, 'GET', '/v1/guests', { headers: { 'service-correlation-id': 'corr-300' } })
      expect([multiple.statusCode, multiple.headers['service-correlation-id']]).toEqual([300, undefined])
      s.service.setFailure({ mode: 'problem-4xx', status: 409, times: 1 })
      const conflict = await call(s, 'GET', '/v1/guests', { headers: { 'service-correlation-id': 'corr-409' } })
      expect([conflict.statusCode, conflict.headers['service-correlation-id']]).toEqual([409, undefined])
    } finally {
      await s.close()
    }
  })

  it('drops a Link header none of whose targets maps to a public path', async () => {
    const s = await startWithService()
    try {
      s.service.setFailure({ mode: 'exact', status: 204, headers: { link: '</internal/admin>; rel="admin", <http://bookings.internal/x>; rel="alternate"' }, times: 1 })
      const res = await call(s, 'GET', '/v1/guests')
      expect({ status: res.statusCode, body: res.body, link: Object.keys(res.headers).includes('link') }).toEqual({ status: 204, body: '', link: false })
      expect(res.headers['service-request-id']).toMatch(REQUEST_ID)
    } finally {
      await s.close()
    }
  })
})
