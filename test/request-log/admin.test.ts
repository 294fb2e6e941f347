import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { checkAdminAnswer } from '../helpers/admin-contract.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem, TIMESTAMP } from '../helpers/problem.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'

// The request log on the admin port (docs/operations.md, "The request log"): a credential's
// log with the partner's filters, one entry by request id whatever its credential, and the
// CSV export, streamed. Only with ADMIN_TOKEN, and only with it; every answer is checked
// against the admin port's OpenAPI document.

const TOKEN = 'admin-token-0123456789'
const CSV_HEADER = 'id,at,credentialId,secret,mode,method,route,path,queryParameters,status,code,durationMs,cache,idempotencyKey,replayed,clientIp,userAgent,traceId'

interface Entry { id: string; at: string; [field: string]: unknown }
interface Page { data: Entry[]; meta: { requestId: string; timestamp: string; pagination: { page: number; perPage: number; total: number } } }

let t: TestGateway
let open: TestGateway
let adminUrl: string
let openAdminUrl: string
const redis = new Redis(REDIS_URL)

async function listen(gateway: TestGateway): Promise<string> {
  await gateway.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(gateway.gateway.admin.server.address() as { port: number }).port}`
}

beforeAll(async () => {
  t = await TestGateway.start({ env: { ADMIN_TOKEN: TOKEN }, config: { requestLog: { flushMs: 100 } } })
  open = await TestGateway.start({ config: { requestLog: { flushMs: 100 } } })
  adminUrl = await listen(t)
  openAdminUrl = await listen(open)
})

afterAll(async () => {
  await t.close()
  await open.close()
  redis.disconnect()
})

async function admin(path: string, options: { token?: string | null; base?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {}
  if (options.token !== null) headers.authorization = `Bearer ${options.token ?? TOKEN}`
  const res = await request(`${options.base ?? adminUrl}${path}`, { headers })
  const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
  checkAdminAnswer('GET', path, answer)
  return answer
}

/** The partner's own view of its log, once it holds `count` entries. */
async function partnerLog(key: string, count: number): Promise<Page> {
  let last: Page | undefined
  await eventually(async () => {
    const answer = await t.get('/v1/request-logs', key)
    last = JSON.parse(answer.body) as Page
    return last.meta.pagination.total >= count
  }, 10_000, 50)
  expect(last?.meta.pagination.total).toBe(count)
  return last as Page
}

function requestId(answer: Answer): string {
  return answer.headers['service-request-id'] as string
}

describe('only with ADMIN_TOKEN', () => {
  it('is not there without ADMIN_TOKEN: 404, as any unknown admin path', async () => {
    for (const path of ['/admin/v1/credentials/key_x/request-logs', '/admin/v1/credentials/key_x/request-logs.csv', '/admin/v1/request-logs/req_x']) {
      expectProblem(await admin(path, { base: openAdminUrl, token: null }), {
        code: 'ROUTE_NOT_FOUND', instance: path,
        detail: `There is no admin route at ${path}; the admin port serves /metrics, /status, /events, /admin/v1/openapi.json, /admin/v1/config/reload and /livez.`,
      })
    }
  })

  it('needs the token: none is 401 MISSING_AUTH_HEADER, another 401 INVALID_AUTH_HEADER', async () => {
    const challenge = { 'www-authenticate': 'Bearer realm="admin"' }
    for (const path of ['/admin/v1/credentials/key_x/request-logs', '/admin/v1/credentials/key_x/request-logs.csv', '/admin/v1/request-logs/req_x']) {
      expectProblem(await admin(path, { token: null }), { code: 'MISSING_AUTH_HEADER', instance: path, headers: challenge })
      expectProblem(await admin(path, { token: 'admin-token-9876543210' }), { code: 'INVALID_AUTH_HEADER', instance: path, headers: challenge })
    }
  })
})

describe('a credential\'s log, and one entry of any credential', () => {
  it('shows the partner\'s own entries with the same filters and pages, and finds an entry by its request id', async () => {
    const { key, id } = await t.keyWithId()
    const other = await t.keyWithId()
    const ok = await t.get('/v1/properties', key)
    const missing = await t.get('/v1/properties/00000000-0000-4000-8000-000000000000', key)
    const theirs = await t.get('/v1/properties', other.key)
    expect([ok.statusCode, missing.statusCode, theirs.statusCode]).toEqual([200, 404, 200])
    const mine = await partnerLog(key, 2)
    await partnerLog(other.key, 1)

    const all = await admin(`/admin/v1/credentials/${id}/request-logs`)
    expect([all.statusCode, all.headers['content-type']]).toEqual([200, 'application/json; charset=utf-8'])
    expect(JSON.parse(all.body)).toEqual({
      data: mine.data, meta: { requestId: all.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 20, total: 2 } },
    })
    const filtered = await admin(`/admin/v1/credentials/${id}/request-logs?status=404&perPage=5`)
    expect(JSON.parse(filtered.body)).toEqual({
      data: mine.data.filter((e) => e.id === requestId(missing)),
      meta: { requestId: filtered.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 5, total: 1 } },
    })

    // Whichever credential made it.
    for (const [made, holder] of [[missing, key], [theirs, other.key]] as const) {
      const partner = JSON.parse((await t.get(`/v1/request-logs/${requestId(made)}`, holder)).body) as { data: Entry }
      const found = await admin(`/admin/v1/request-logs/${requestId(made)}`)
      expect([found.statusCode, JSON.parse(found.body)]).toEqual([200, { data: partner.data, meta: { requestId: found.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP) } }])
    }
  }, 30_000)

  it('refuses an unknown credential, an unknown request id and a bad filter', async () => {
    expectProblem(await admin('/admin/v1/credentials/key_nobody/request-logs'), {
      code: 'CREDENTIAL_NOT_FOUND', instance: '/admin/v1/credentials/key_nobody/request-logs', detail: "No API key or client grant has the id 'key_nobody'.",
    })
    expectProblem(await admin('/admin/v1/request-logs/req_0123456789abcdef0123456789abcdef'), {
      code: 'REQUEST_LOG_NOT_FOUND', instance: '/admin/v1/request-logs/req_0123456789abcdef0123456789abcdef',
      detail: "No request with id 'req_0123456789abcdef0123456789abcdef' is in the request log.",
    })
    const { id } = await t.keyWithId()
    expectProblem(await admin(`/admin/v1/credentials/${id}/request-logs?status=4x`), {
      code: 'INVALID_QUERY_PARAMETER', instance: `/admin/v1/credentials/${id}/request-logs`, detail: "Invalid query parameter 'status'.",
      errors: [{ field: 'status', code: 'INVALID_FORMAT', detail: "Must be a status such as 404, a class such as 4xx, or 'errors' (every 4xx and 5xx)." }],
    })
    expectProblem(await admin(`/admin/v1/credentials/${id}/request-logs?sort=asc`), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: `/admin/v1/credentials/${id}/request-logs`, detail: "Unknown query parameter 'sort'.",
      errors: [{
        field: 'sort', code: 'UNKNOWN_PARAMETER',
        detail: "Unknown parameter; this endpoint accepts 'page', 'perPage', 'status', 'method', 'route', 'code', 'createdAfter', 'createdBefore', 'idempotencyKey'.",
      }],
    })
  })
})

describe('the CSV export', () => {
  it('streams a header row and a row per entry, newest first, quoted as RFC 4180 and guarded against formulas', async () => {
    const { key, id } = await t.keyWithId()
    const plain = await t.get('/v1/properties', key)
    const formula = await t.call('GET', '/v1/properties?-x=1&perPage=2', { key, userAgent: '=HYPERLINK("x"),y' })
    const post = await t.call('POST', '/v1/webhook-endpoints', { key, headers: { 'idempotency-key': '+retry' }, body: '{"url":"not a url","eventTypes":[]}' })
    expect([plain.statusCode, formula.statusCode, post.statusCode]).toEqual([200, 400, 422])
    const [last, middle, first] = (await partnerLog(key, 3)).data as [Entry, Entry, Entry]
    expect([last.id, middle.id, first.id]).toEqual([requestId(post), requestId(formula), requestId(plain)])

    const answer = await admin(`/admin/v1/credentials/${id}/request-logs.csv`)
    expect(answer.statusCode).toBe(200)
    expect(answer.headers).toMatchObject({
      'content-type': 'text/csv; charset=utf-8',
      'content-disposition': `attachment; filename="${id}-request-log.csv"`,
      // Streamed: sent in chunks as it is read, its length unknown when it starts.
      'transfer-encoding': 'chunked',
    })
    expect(answer.headers['content-length']).toBeUndefined()
    const common = (e: Entry) => `${e.id},${e.at},${id},current,live`
    expect(answer.body).toBe([
      CSV_HEADER,
      `${common(last)},POST,/v1/webhook-endpoints,/v1/webhook-endpoints,,422,VALIDATION_FAILED,${last.durationMs},,'+retry,false,127.0.0.1,facade-test/1.0,${last.traceId}`,
      `${common(middle)},GET,/v1/properties,/v1/properties,'-x;perPage,400,UNKNOWN_QUERY_PARAMETER,${middle.durationMs},,,false,127.0.0.1,"'=HYPERLINK(""x""),y",${middle.traceId}`,
      `${common(first)},GET,/v1/properties,/v1/properties,,200,,${first.durationMs},${first.cache},,false,127.0.0.1,facade-test/1.0,${first.traceId}`,
      '',
    ].join('\r\n'))

    // A window: after the first entry, before the last.
    const window = await admin(`/admin/v1/credentials/${id}/request-logs.csv?createdAfter=${encodeURIComponent(first.at)}&createdBefore=${encodeURIComponent(last.at)}`)
    const rows = window.body.split('\r\n')
    expect([window.statusCode, rows.length, rows[0], rows[1]?.startsWith(`${middle.id},`), rows[2]]).toEqual([200, 3, CSV_HEADER, true, ''])
  }, 30_000)

  it('refuses a window of more than 100,000 entries, an unknown credential and a bad time', async () => {
    const { id } = await t.keyWithId()
    // Index lines alone (as the layout before December 2026 kept them, without their hash): what the count reads.
    const lines = `${t.prefix}reqlog:{${id}}:live:lines`
    const now = Date.now()
    for (let from = 0; from < 100_001; from += 10_000) {
      const members: (string | number)[] = []
      for (let i = from; i < Math.min(from + 10_000, 100_001); i += 1) members.push(now - i, `req_${String(i).padStart(32, '0')} 200 GET - /v1/properties `)
      await redis.zadd(lines, ...members)
    }
    const path = `/admin/v1/credentials/${id}/request-logs.csv`
    expectProblem(await admin(path), {
      code: 'VALIDATION_FAILED', instance: path,
      detail: 'The window holds 100001 entries, more than the 100000 an export takes; narrow it with createdAfter and createdBefore.',
      errors: [{ field: 'createdAfter', code: 'OUT_OF_RANGE', detail: 'Choose a window of at most 100000 entries.' }],
    })
    // A narrower window is taken (its rows' entries are not there: the index lines only were written).
    const narrow = await admin(`${path}?createdAfter=${encodeURIComponent(new Date(now - 10).toISOString())}`)
    expect([narrow.statusCode, narrow.body]).toEqual([200, `${CSV_HEADER}\r\n`])

    expectProblem(await admin('/admin/v1/credentials/key_nobody/request-logs.csv'), {
      code: 'CREDENTIAL_NOT_FOUND', instance: '/admin/v1/credentials/key_nobody/request-logs.csv', detail: "No API key or client grant has the id 'key_nobody'.",
    })
    expectProblem(await admin(`${path}?createdBefore=yesterday`), {
      code: 'INVALID_QUERY_PARAMETER', instance: path, detail: "Invalid query parameter 'createdBefore'.",
      errors: [{ field: 'createdBefore', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, such as 2026-11-26T12:00:00Z or 2026-11-26T13:00:00.250+01:00.' }],
    })
  }, 60_000)
})

describe('/status', () => {
  it('says the log is off when a gateway starts with it off: nothing is kept, the partner\'s route answers 404, the admin port reads what was kept', async () => {
    const off = await TestGateway.start({ env: { ADMIN_TOKEN: TOKEN }, config: { requestLog: { enabled: false, flushMs: 50 } } })
    try {
      const url = await listen(off)
      const { key, id } = await off.keyWithId()
      expect((await off.get('/v1/properties', key)).statusCode).toBe(200)
      expectProblem(await off.get('/v1/request-logs', key), { code: 'ROUTE_NOT_FOUND', instance: '/v1/request-logs' })
      // A few of the writer's periods: had the request been kept, it would have been written by now.
      await new Promise((resolve) => setTimeout(resolve, 300))
      const status = JSON.parse((await admin('/status', { base: url })).body) as { requestLog: unknown }
      expect(status.requestLog).toEqual({ enabled: false, buffered: 0, bufferMax: 10_000, lastFlushAt: null, written: 0, dropped: { buffer_full: 0, redis: 0 } })
      const kept = await admin(`/admin/v1/credentials/${id}/request-logs`, { base: url })
      expect({ status: kept.statusCode, data: (JSON.parse(kept.body) as Page).data }).toEqual({ status: 200, data: [] })
    } finally {
      await off.close()
    }
  })

  it('shows the instance\'s buffer, its last flush, and the entries written and dropped', async () => {
    const small = await TestGateway.start({ config: { requestLog: { flushMs: 60_000, bufferMax: 2 } } })
    try {
      const url = await listen(small)
      const status = async () => (JSON.parse((await admin('/status', { base: url, token: null })).body) as { requestLog: unknown }).requestLog
      expect(await status()).toEqual({ enabled: true, buffered: 0, bufferMax: 2, lastFlushAt: null, written: 0, dropped: { buffer_full: 0, redis: 0 } })
      const key = await small.key()
      for (let i = 0; i < 3; i += 1) expect((await small.get('/v1/properties', key)).statusCode).toBe(200)
      // The answers are sent before their entries are kept: the third finds the buffer full.
      expect(await eventually(async () => JSON.stringify(await status()) === JSON.stringify({
        enabled: true, buffered: 2, bufferMax: 2, lastFlushAt: null, written: 0, dropped: { buffer_full: 1, redis: 0 },
      }), 10_000, 50)).toBe(true)
      const before = Date.now()
      await small.gateway.requestLog?.writer.flush()
      const after = await status() as { lastFlushAt: string }
      expect(after).toEqual({ enabled: true, buffered: 0, bufferMax: 2, lastFlushAt: expect.stringMatching(TIMESTAMP), written: 2, dropped: { buffer_full: 1, redis: 0 } })
      expect(Date.parse(after.lastFlushAt)).toBeGreaterThanOrEqual(before)
    } finally {
      await small.close()
    }
  }, 30_000)
})
