import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RedisKeyStore } from '../../src/keys/store.js'
import type { RequestLogRecord } from '../../src/request-log/entry.js'
import { RequestLogStore } from '../../src/request-log/store.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { eventually, keysUnder, textsOf, PrivateRedis, REDIS_URL } from '../helpers/redis.js'

// The request log over real sockets and real Redis (docs/partners.md, "The request log"):
// every answer to a request whose credential the gateway knows becomes an entry of that
// credential's log, written within a flush; a partner reads its own entries only.

const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const MISSING = '00000000-0000-4000-8000-000000000000'

interface Entry { id: string; at: string; status: number; code: string | null; route: string | null; [field: string]: unknown }
interface Page { data: Entry[]; meta: { pagination: { page: number; perPage: number; total: number } } }

let t: TestGateway
let store: RedisKeyStore
const redis = new Redis(REDIS_URL)

beforeAll(async () => {
  t = await TestGateway.start({ config: { requestLog: { flushMs: 100 } } })
  store = new RedisKeyStore(redis, t.prefix)
})

afterAll(async () => {
  await t.close()
  redis.disconnect()
})

function requestId(answer: Answer): string {
  return answer.headers['service-request-id'] as string
}

async function page(key: string, query = ''): Promise<Page> {
  const answer = await t.get(`/v1/request-logs${query}`, key)
  expect(answer.statusCode, answer.body).toBe(200)
  return JSON.parse(answer.body) as Page
}

/** The credential's log once it holds `count` entries (an entry appears within a flush). */
async function logOf(key: string, count: number, query = ''): Promise<Page> {
  let last: Page | undefined
  const found = await eventually(async () => {
    last = await page(key, query)
    return last.meta.pagination.total >= count
  }, 10_000, 50)
  expect({ found, total: last?.meta.pagination.total }).toEqual({ found: true, total: count })
  return last as Page
}

describe('an entry per answer to a known credential', () => {
  it('keeps every field of each answer, newest first, and nothing for a credential it does not know', async () => {
    const { key, id } = await t.keyWithId()
    const list = await t.get('/v1/properties?perPage=1', key, { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` })
    expect(list.statusCode).toBe(200)
    const propertyId = (JSON.parse(list.body) as { data: { id: string }[] }).data[0]?.id as string
    const first = await t.get(`/v1/properties/${propertyId}`, key)
    const second = await t.get(`/v1/properties/${propertyId}`, key)
    const bad = await t.get('/v1/properties?bogus=QVALUE1&perPage=2', key)
    const missing = await t.get(`/v1/properties/${MISSING}`, key)
    expect([list, first, second, bad, missing].map((a) => a.statusCode)).toEqual([200, 200, 200, 400, 404])

    // A revoked key is no longer known: its refusal belongs to nobody.
    const revoked = await t.keyWithId()
    await store.revoke(revoked.id)
    expect((await t.get('/v1/properties', revoked.key)).statusCode).toBe(401)

    const log = await logOf(key, 5)
    const common = { credentialId: id, secret: 'current', mode: 'live', method: 'GET', idempotencyKey: null, replayed: false, clientIp: '127.0.0.1', userAgent: 'facade-test/1.0' }
    expect(log.data).toEqual([
      { ...common, id: requestId(missing), at: expect.stringMatching(UTC_MILLIS), route: '/v1/properties/{propertyId}', path: `/v1/properties/${MISSING}`, queryParameters: [], status: 404, code: 'PROPERTY_NOT_FOUND', durationMs: expect.any(Number), cache: expect.stringMatching(/^(hit|miss|stale)$/), traceId: expect.stringMatching(/^[0-9a-f]{32}$/) },
      { ...common, id: requestId(bad), at: expect.stringMatching(UTC_MILLIS), route: '/v1/properties', path: '/v1/properties', queryParameters: ['bogus', 'perPage'], status: 400, code: 'UNKNOWN_QUERY_PARAMETER', durationMs: expect.any(Number), cache: null, traceId: expect.stringMatching(/^[0-9a-f]{32}$/) },
      { ...common, id: requestId(second), at: expect.stringMatching(UTC_MILLIS), route: '/v1/properties/{propertyId}', path: `/v1/properties/${propertyId}`, queryParameters: [], status: 200, code: null, durationMs: expect.any(Number), cache: 'hit', traceId: expect.stringMatching(/^[0-9a-f]{32}$/) },
      { ...common, id: requestId(first), at: expect.stringMatching(UTC_MILLIS), route: '/v1/properties/{propertyId}', path: `/v1/properties/${propertyId}`, queryParameters: [], status: 200, code: null, durationMs: expect.any(Number), cache: 'miss', traceId: expect.stringMatching(/^[0-9a-f]{32}$/) },
      { ...common, id: requestId(list), at: expect.stringMatching(UTC_MILLIS), route: '/v1/properties', path: '/v1/properties', queryParameters: ['perPage'], status: 200, code: null, durationMs: expect.any(Number), cache: expect.stringMatching(/^(hit|miss|stale)$/), traceId: TRACE_ID },
    ])
    // Each entry's time is its request's arrival, in the order sent; its duration a tenth of a millisecond at most.
    const times = log.data.map((e) => Date.parse(e.at))
    expect(times).toEqual([...times].sort((a, b) => b - a))
    for (const entry of log.data) expect(Math.round((entry.durationMs as number) * 10) / 10).toBe(entry.durationMs)
    // The trace id is the one the request's log line carries.
    const lines = t.logs.records().filter((r) => r.msg === 'request')
    for (const entry of log.data) expect(entry.traceId).toBe(lines.find((r) => r.reqId === entry.id)?.traceId)
    expect((await keysUnder(redis, t.prefix)).filter((k) => k.includes(revoked.id))).toEqual([])
  }, 30_000)

  it('logs a refused scope, a quota refusal and a known credential\'s refusal (expired, suspended)', async () => {
    const narrow = await t.keyWithId({ scopes: ['request-logs:read'] })
    expect((await t.get('/v1/properties', narrow.key)).statusCode).toBe(403)
    expect((await logOf(narrow.key, 1)).data.map((e) => [e.status, e.code, e.route])).toEqual([[403, 'INSUFFICIENT_SCOPE', '/v1/properties']])

    // Over its quota, the key cannot read its log through the API either: the store shows it.
    const limited = await t.keyWithId({ rateLimit: 1 })
    expect([(await t.get('/v1/properties', limited.key)).statusCode, (await t.get('/v1/properties', limited.key)).statusCode]).toEqual([200, 429])
    await t.gateway.requestLog?.writer.flush()
    const quota = await t.gateway.requestLog?.store.list(limited.id, 'live', {}, 1, 10)
    expect((JSON.parse(quota?.json ?? '[]') as Entry[]).map((e) => [e.status, e.code])).toEqual([[429, 'RATE_LIMITED'], [200, null]])

    const suspended = await t.keyWithId()
    await store.setStatus(suspended.id, 'suspended')
    const refused = await t.get('/v1/properties', suspended.key)
    expect([refused.statusCode, (JSON.parse(refused.body) as { code: string }).code]).toEqual([403, 'API_KEY_SUSPENDED'])
    const expired = await t.keyWithId({ expiresAt: '2020-01-01T00:00:00.000Z' })
    const late = await t.get('/v1/properties', expired.key)
    expect([late.statusCode, (JSON.parse(late.body) as { code: string }).code]).toEqual([401, 'API_KEY_EXPIRED'])
    // Back in use, each reads its refusal in its own log.
    await store.setStatus(suspended.id, 'active')
    await store.update(expired.id, { expiresAt: new Date(Date.now() + 86_400_000).toISOString() })
    const readable = async (key: string): Promise<boolean> => eventually(async () => (await t.get('/v1/request-logs', key)).statusCode === 200, 10_000, 50)
    expect([await readable(suspended.key), await readable(expired.key)]).toEqual([true, true])
    expect((await logOf(suspended.key, 1)).data.map((e) => [e.id, e.status, e.code, e.credentialId])).toEqual([[requestId(refused), 403, 'API_KEY_SUSPENDED', suspended.id]])
    expect((await logOf(expired.key, 1)).data.map((e) => [e.id, e.status, e.code, e.credentialId])).toEqual([[requestId(late), 401, 'API_KEY_EXPIRED', expired.id]])
  }, 30_000)

  it('tells a rolled key\'s previous secret from its current one', async () => {
    const { key, id } = await t.keyWithId()
    const rolled = await store.roll(id, new Date(Date.now() + 3600_000))
    const old = await t.get('/v1/properties', key)
    const fresh = await t.get('/v1/properties', rolled?.key as string)
    expect([old.statusCode, fresh.statusCode]).toEqual([200, 200])
    expect((await logOf(rolled?.key as string, 2)).data.map((e) => [e.id, e.secret, e.credentialId])).toEqual([
      [requestId(fresh), 'current', id], [requestId(old), 'previous', id],
    ])
  }, 30_000)
})

describe('GET /v1/request-logs and /v1/request-logs/{requestId}', () => {
  it('filters by status, method, route, code, time and Idempotency-Key, and pages', async () => {
    const { key } = await t.keyWithId()
    const ok = await t.get('/v1/properties', key)
    const missing = await t.get(`/v1/properties/${MISSING}`, key)
    const post = await t.call('POST', '/v1/webhook-endpoints', { key, headers: { 'idempotency-key': 'retry-7' }, body: '{"url":"not a url","eventTypes":[]}' })
    expect([ok.statusCode, missing.statusCode, post.statusCode]).toEqual([200, 404, 422])
    const all = await logOf(key, 3)
    expect(all.data.map((e) => e.id)).toEqual([requestId(post), requestId(missing), requestId(ok)])
    const ids = async (query: string): Promise<string[]> => (await page(key, query)).data.map((e) => e.id)
    expect(await ids('?status=404')).toEqual([requestId(missing)])
    expect(await ids('?status=4xx')).toEqual([requestId(post), requestId(missing)])
    expect(await ids('?status=errors')).toEqual([requestId(post), requestId(missing)])
    expect(await ids('?status=2xx')).toEqual([requestId(ok)])
    expect(await ids('?method=POST')).toEqual([requestId(post)])
    expect(await ids('?route=/v1/properties/{propertyId}')).toEqual([requestId(missing)])
    expect(await ids('?code=PROPERTY_NOT_FOUND')).toEqual([requestId(missing)])
    expect(await ids('?idempotencyKey=retry-7')).toEqual([requestId(post)])
    expect(all.data.find((e) => e.id === requestId(post))?.idempotencyKey).toBe('retry-7')
    const middle = all.data[1] as Entry
    expect(await ids(`?createdBefore=${encodeURIComponent(middle.at)}`)).toEqual(all.data.filter((e) => e.at < middle.at).map((e) => e.id))
    expect(await ids(`?createdAfter=${encodeURIComponent(middle.at)}`)).toEqual(all.data.filter((e) => e.at > middle.at).map((e) => e.id))
    const second = await page(key, '?perPage=2&page=2')
    expect([second.data.map((e) => e.id), second.meta.pagination]).toEqual([[requestId(ok)], { page: 2, perPage: 2, total: 3 }])
    const filteredPage = await page(key, '?status=4xx&perPage=1&page=2')
    expect([filteredPage.data.map((e) => e.id), filteredPage.meta.pagination]).toEqual([[requestId(missing)], { page: 2, perPage: 1, total: 2 }])
  }, 30_000)

  it('refuses a filter value it does not take with a field error, suggesting the nearest route', async () => {
    const key = await t.key()
    const refused = async (query: string) => {
      const answer = await t.get(`/v1/request-logs${query}`, key)
      const body = JSON.parse(answer.body) as { code: string; errors: { field: string; code: string; detail: string }[] }
      return [answer.statusCode, body.code, body.errors]
    }
    expect(await refused('?status=4x')).toEqual([400, 'INVALID_QUERY_PARAMETER', [{ field: 'status', code: 'INVALID_FORMAT', detail: "Must be a status such as 404, a class such as 4xx, or 'errors' (every 4xx and 5xx)." }]])
    expect(await refused('?route=/v1/propertys')).toEqual([400, 'INVALID_QUERY_PARAMETER', [{
      field: 'route', code: 'INVALID_ENUM_VALUE', detail: "Must be a route template as the API reference writes it, such as '/v1/properties/{propertyId}'; did you mean '/v1/properties'?",
    }]])
    expect(await refused('?code=NOPE')).toEqual([400, 'INVALID_QUERY_PARAMETER', [{ field: 'code', code: 'INVALID_ENUM_VALUE', detail: "'NOPE' is not a code of the API's errors, such as PROPERTY_NOT_FOUND; the API reference lists them." }]])
    expect(await refused('?method=FETCH')).toEqual([400, 'INVALID_QUERY_PARAMETER', [{ field: 'method', code: 'INVALID_ENUM_VALUE', detail: "Must be one of 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'." }]])
    expect(await refused('?createdAfter=yesterday')).toEqual([400, 'INVALID_QUERY_PARAMETER', [{
      field: 'createdAfter', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, such as 2026-11-26T12:00:00Z or 2026-11-26T13:00:00.250+01:00.',
    }]])
  })

  it('shows one entry to its own credential only, and never logs its own routes', async () => {
    const mine = await t.key()
    const other = await t.key()
    const made = await t.get('/v1/properties', mine)
    await logOf(mine, 1)
    const own = await t.get(`/v1/request-logs/${requestId(made)}`, mine)
    expect([own.statusCode, (JSON.parse(own.body) as { data: Entry }).data.id]).toEqual([200, requestId(made)])
    const foreign = await t.get(`/v1/request-logs/${requestId(made)}`, other)
    expect([foreign.statusCode, (JSON.parse(foreign.body) as { code: string; detail: string })]).toEqual([404, expect.objectContaining({
      code: 'REQUEST_LOG_NOT_FOUND', detail: `No request with id '${requestId(made)}' is in the log of this credential.`,
    })])
    // Many reads of the log later, it still holds the one request; the other credential's log holds nothing.
    for (let i = 0; i < 5; i += 1) await page(mine)
    const flushed = t.gateway.requestLog?.writer
    await flushed?.flush()
    expect((await page(mine)).meta.pagination.total).toBe(1)
    expect((await page(other)).meta.pagination.total).toBe(0)
  }, 30_000)
})

describe('what is never kept', () => {
  it('holds no key, token, body or query value in any entry or log line', async () => {
    const { key } = await t.keyWithId()
    const body = '{"url":"https://BODYSECRET.example/hook","eventTypes":["x"]}'
    expect((await t.call('POST', '/v1/webhook-endpoints', { key, body, headers: { 'idempotency-key': 'scan-1' } })).statusCode).toBe(422)
    expect((await t.get('/v1/properties?perPage=QVALUE2', key)).statusCode).toBe(400)
    expect((await t.get('/v1/properties', key, { 'service-correlation-id': 'corr-scan' })).statusCode).toBe(200)
    await logOf(key, 3)
    const stored: string[] = []
    for (const name of (await keysUnder(redis, t.prefix)).filter((k) => k.includes('reqlog:'))) {
      // A log's entries are a sorted set, a minute's logs a set.
      stored.push(...await textsOf(redis, name))
    }
    const texts = [...stored, ...t.logs.lines]
    expect(stored.length).toBeGreaterThan(0)
    const secret = key.slice(key.lastIndexOf('_') + 1)
    for (const forbidden of [key, secret.slice(0, 12), secret.slice(-12), 'BODYSECRET', 'QVALUE1', 'QVALUE2', 'Bearer ']) {
      expect(texts.filter((text) => text.includes(forbidden))).toEqual([])
    }
    // Nor a header value other than User-Agent, Idempotency-Key and the trace id.
    expect(stored.filter((text) => text.includes('corr-scan'))).toEqual([])
  }, 30_000)
})

describe('retention', () => {
  it('keeps at most maxPerCredential entries, the newest', async () => {
    const small = await TestGateway.start({ config: { requestLog: { flushMs: 100, maxPerCredential: 2 } } })
    try {
      const key = await small.key()
      const sent: string[] = []
      for (let i = 0; i < 4; i += 1) {
        sent.push(requestId(await small.get('/v1/properties', key)))
        await small.gateway.requestLog?.writer.flush()
      }
      const answer = await small.get('/v1/request-logs', key)
      expect((JSON.parse(answer.body) as Page).data.map((e) => e.id)).toEqual([sent[3], sent[2]])
    } finally {
      await small.close()
    }
  }, 30_000)

  it('drops entries older than retentionDays at the next write', async () => {
    let now = Date.now()
    const log = new RequestLogStore(redis, t.prefix, { retentionDays: 1, maxPerCredential: 10 }, () => now)
    const entry = (id: string, at: number): RequestLogRecord => ({
      id, atMs: at, credentialId: 'key_aged', secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties', path: '/v1/properties',
      queryParameters: [], status: 200, code: null, durationMs: 1.5, cache: null, idempotencyKey: null, replayed: false, clientIp: '127.0.0.1', userAgent: 'x/1', traceId: null,
    })
    await log.write([entry('req_old', now - 60_000), entry('req_new', now)])
    expect((await log.list('key_aged', 'live', {}, 1, 10)).total).toBe(2)
    // Two minutes short of a day on, both stay; a minute past it, the older goes at the next write.
    now += 86_400_000 - 120_000
    await log.write([entry('req_later', now)])
    expect(JSON.parse((await log.list('key_aged', 'live', {}, 1, 10)).json).map((e: Entry) => e.id)).toEqual(['req_later', 'req_new', 'req_old'])
    now += 90_000
    await log.write([entry('req_last', now)])
    const left = await log.list('key_aged', 'live', {}, 1, 10)
    expect([JSON.parse(left.json).map((e: Entry) => e.id), left.total]).toEqual([['req_last', 'req_later', 'req_new'], 3])
    expect(await log.get('key_aged', 'live', 'req_old')).toBeUndefined()
  })
})

describe('Redis stopped mid-run', () => {
  it('answers every request, counts the entries dropped, throws nothing, and writes again once Redis is back', async () => {
    const own = await PrivateRedis.start()
    const gw = await TestGateway.start({ config: { requestLog: { flushMs: 100 } }, env: { REDIS_URL: own.url } })
    const direct = new Redis(own.url)
    // Its reconnection attempts while the server is stopped are expected.
    direct.on('error', () => {})
    try {
      const { key } = await new RedisKeyStore(direct, gw.prefix).create({ brand: 'acme', mode: 'live', properties: '*' })
      expect((await gw.get('/v1/properties', key)).statusCode).toBe(200)
      await gw.gateway.requestLog?.writer.flush()
      const dropped = async (): Promise<string> => gw.gateway.metrics.registry.getSingleMetricAsString('gateway_request_log_dropped_total')
      await own.stop()
      // The key is held by this instance: its requests are still answered.
      const statuses: number[] = []
      for (let i = 0; i < 5; i += 1) statuses.push((await gw.get('/v1/properties', key)).statusCode)
      expect(statuses).toEqual([200, 200, 200, 200, 200])
      await gw.gateway.requestLog?.writer.flush()
      expect(await eventually(async () => /gateway_request_log_dropped_total\{reason="redis"\} 5/.test(await dropped()), 5000, 50)).toBe(true)
      expect(gw.logs.records().filter((r) => (r.level as number) >= 50)).toEqual([])
      // A Redis started afresh is empty: a key made now is known again.
      await own.start()
      const fresh = await eventually(async () => direct.ping().then(() => true, () => false), 5000, 50)
      const again = await new RedisKeyStore(direct, gw.prefix).create({ brand: 'acme', mode: 'live', properties: '*' })
      const back = await eventually(async () => {
        await gw.get('/v1/properties', again.key)
        await gw.gateway.requestLog?.writer.flush()
        return (await direct.zcard(`${gw.prefix}reqlog:{${again.record.id}}:live:lines`).catch(() => 0)) > 0
      }, 10_000, 200)
      expect([fresh, back]).toEqual([true, true])
    } finally {
      direct.disconnect()
      await gw.close()
      await own.stop()
    }
  }, 60_000)
})
