import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ACME_HOST } from '../helpers/config.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import type { Answer } from '../helpers/gateway.js'
import { eventually } from '../helpers/redis.js'

// The kinds of answer the request log keeps that only a declared route gives (docs/partners.md,
// "The request log"): a 304 passed on from the service, a 409 for an Idempotency-Key still in
// flight (and the replay after it), and a request whose partner closed the connection before
// the answer (499), over real sockets with the stand-in bookings service.

const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const TRACE = /^[0-9a-f]{32}$/
const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}'

interface Entry { id: string; status: number; [field: string]: unknown }

let s: Setup

beforeAll(async () => {
  s = await startWithService({ config: { requestLog: { flushMs: 100 } } })
})

afterAll(async () => {
  await s.close()
})

function requestId(answer: Answer): string {
  return answer.headers['service-request-id'] as string
}

/** A new key's log once it holds `count` entries, newest first (an entry appears within a flush). */
async function logOf(key: string, count: number): Promise<Entry[]> {
  let entries: Entry[] = []
  const found = await eventually(async () => {
    const answer = await s.t.get('/v1/request-logs', key)
    expect(answer.statusCode, answer.body).toBe(200)
    entries = (JSON.parse(answer.body) as { data: Entry[] }).data
    return entries.length >= count
  }, 15_000, 50)
  expect({ found, entries: entries.length }).toEqual({ found: true, entries: count })
  return entries
}

/** The fields every entry of these tests shares: a live key of acme, from loopback, with the test's user agent. */
function common(keyId: string): Record<string, unknown> {
  return { credentialId: keyId, secret: 'current', mode: 'live', clientIp: '127.0.0.1', at: expect.stringMatching(UTC_MILLIS), durationMs: expect.any(Number), traceId: expect.stringMatching(TRACE) }
}

describe('entries of a declared route\'s answers', () => {
  it('keeps a 304 passed on from the service, with no problem code and no cache outcome', async () => {
    const { key, id } = await s.t.keyWithId()
    s.service.setFailure({ mode: 'exact', status: 304, headers: { etag: '"v1"' }, times: 1 })
    const unchanged = await s.t.get('/v1/guests?perPage=1', key, { 'if-none-match': '"v1"' })
    expect({ status: unchanged.statusCode, body: unchanged.body }).toEqual({ status: 304, body: '' })

    expect(await logOf(key, 1)).toEqual([{
      ...common(id), id: requestId(unchanged), method: 'GET', route: '/v1/guests', path: '/v1/guests', queryParameters: ['perPage'],
      status: 304, code: null, cache: null, idempotencyKey: null, replayed: false, userAgent: 'facade-test/1.0',
    }])
  }, 30_000)

  it('keeps a 409 for a key still in flight, the write it waited on, and the replay after it', async () => {
    const { key, id } = await s.t.keyWithId()
    const idempotencyKey = `reqlog-${process.pid}-${Date.now()}`
    const post = async (): Promise<Answer> => s.t.call('POST', '/v1/guests', { key, body: GUEST, headers: { 'idempotency-key': idempotencyKey } })
    s.service.setFailure({ mode: 'latency', latencyMs: 1500, times: 1 })
    const first = post()
    expect(await eventually(async () => s.service.received.some((r) => r.headers['idempotency-key'] === idempotencyKey), 15_000, 20)).toBe(true)
    const inUse = await post()
    expect([inUse.statusCode, (JSON.parse(inUse.body) as { code: string }).code]).toEqual([409, 'IDEMPOTENCY_KEY_IN_USE'])
    const created = await first
    expect(created.statusCode).toBe(201)
    const replay = await post()
    expect([replay.statusCode, replay.headers['idempotent-replayed']]).toEqual([201, 'true'])

    // Newest first by arrival: the replay, then the 409, which arrived after the write it waited on.
    const write = { ...common(id), method: 'POST', route: '/v1/guests', path: '/v1/guests', queryParameters: [], cache: null, idempotencyKey, userAgent: 'facade-test/1.0' }
    expect(await logOf(key, 3)).toEqual([
      { ...write, id: requestId(replay), status: 201, code: null, replayed: true },
      { ...write, id: requestId(inUse), status: 409, code: 'IDEMPOTENCY_KEY_IN_USE', replayed: false },
      { ...write, id: requestId(created), status: 201, code: null, replayed: false },
    ])
  }, 30_000)

  it('keeps a request whose partner left before the service answered as 499, with no problem code', async () => {
    const { key, id } = await s.t.keyWithId()
    const before = s.service.received.length
    s.service.setFailure({ mode: 'latency', latencyMs: 800, times: 1 })
    const controller = new AbortController()
    const gone = request(`${s.t.url}/v1/guests`, {
      signal: controller.signal, headers: { host: ACME_HOST, 'user-agent': 'reqlog-test/1.0', authorization: `Bearer ${key}` },
    }).then(() => 'answered', () => 'closed')
    expect(await eventually(async () => s.service.received.length === before + 1, 15_000, 20)).toBe(true)
    controller.abort()
    expect(await gone).toBe('closed')

    // The partner never saw its request id: the log line names it.
    expect(await eventually(async () => s.t.logs.records().some((r) => r.msg === 'request' && r.status === 499), 15_000, 50)).toBe(true)
    const line = s.t.logs.records().find((r) => r.msg === 'request' && r.status === 499)
    expect(await logOf(key, 1)).toEqual([{
      ...common(id), id: line?.reqId, method: 'GET', route: '/v1/guests', path: '/v1/guests', queryParameters: [],
      status: 499, code: null, cache: null, idempotencyKey: null, replayed: false, userAgent: 'reqlog-test/1.0',
    }])
  }, 30_000)
})
