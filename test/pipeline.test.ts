import type { FastifyInstance } from 'fastify'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { HealthState } from '../src/health.js'
import type { Principal } from '../src/keys/principal.js'
import type { PropertySource } from '../src/properties/source.js'
import { ACME_HOST, GLOBEX_HOST, testConfig } from './helpers/config.js'
import { FakeKeys } from './helpers/fake-keys.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource, property } from './helpers/memory-source.js'
import { expectEnvelope, expectProblem, REQUEST_ID } from './helpers/problem.js'
import { checkAnswer, contractChecked } from './helpers/contract.js'

const ID = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const acmeAll: Principal = { keyId: 'key_acme', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, kind: 'apiKey', scopes: 'all' }
const globexAll: Principal = { keyId: 'key_globex', brand: 'globex', mode: 'live', properties: 'all', rateLimit: null, kind: 'apiKey', scopes: 'all' }
const KEY = 'svc_live_acme'
const AUTH = { host: ACME_HOST, 'user-agent': 'pipeline-test/1.0', authorization: `Bearer ${KEY}` }

// 25 active ACME properties (created a minute apart), one inactive, one of another chain.
const acmeProperties = Array.from({ length: 25 }, (_, i) => property({
  id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  name: `Acme ${i}`,
  createdAt: new Date(Date.UTC(2024, 0, 1, 0, i)).toISOString(),
}))
const records = [
  ...acmeProperties.map((p) => ({ chainCode: 'ACME', property: p })),
  { chainCode: 'ACME', property: property({ id: ID, status: 'inactive', createdAt: '2023-06-01T00:00:00.000Z' }) },
  { chainCode: 'GLBX', property: property({ id: '99999999-9999-4999-8999-999999999999', name: 'Globex Lisbon' }) },
]

let app: FastifyInstance
const logs = captureLogs()
const health = new HealthState()
let failing = false
const source = new MemorySource(records)
const flakySource: PropertySource = {
  get: (id) => {
    if (failing) throw new Error('secret internal failure at db.pms.internal:5432')
    return source.get(id)
  },
  listActive: (scope, page, perPage) => source.listActive(scope, page, perPage),
}

beforeAll(async () => {
  app = await buildApp({
    config: testConfig({
      brands: [
        { id: 'acme', chainCode: 'ACME', hosts: [ACME_HOST, 'localhost'] },
        { id: 'globex', chainCode: 'GLBX', hosts: [GLOBEX_HOST], docsUrl: 'https://docs.globex.example' },
      ],
    }),
    logger: logs.logger,
    keys: new FakeKeys({ [KEY]: acmeAll, svc_live_globex: globexAll }),
    properties: flakySource,
    health,
  })
  contractChecked(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
})
afterAll(async () => app.close())

/** A real HTTP request: inject always adds a User-Agent, a real client need not. */
async function overSocket(url: string, headers: Record<string, string>) {
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening')
  const res = await request(`http://127.0.0.1:${address.port}${url}`, { headers })
  const answer = { statusCode: res.statusCode, headers: res.headers as Record<string, string>, body: await res.body.text() }
  checkAnswer('GET', url, answer, app.gatewayConfig)
  return answer
}

function get(url: string, headers: Record<string, string> = AUTH, method: 'GET' | 'HEAD' = 'GET') {
  return app.inject({ method, url, headers })
}

describe('routes (docs/architecture.md, "Order of checks", step 1)', () => {
  it('answers an unknown path with 404 ROUTE_NOT_FOUND', async () => {
    expectProblem(await get('/v1/hotels'), { code: 'ROUTE_NOT_FOUND', instance: '/v1/hotels', detail: 'There is no endpoint at /v1/hotels.' })
  })

  it('answers a known path on a host of no brand with 404 ROUTE_NOT_FOUND', async () => {
    expectProblem(await get('/v1/properties', { ...AUTH, host: 'api.unknown.example' }), {
      code: 'ROUTE_NOT_FOUND', instance: '/v1/properties', detail: "No API is served at host 'api.unknown.example'.",
    })
  })

  it('answers health on every host, without key or User-Agent', async () => {
    const res = await app.inject({ url: '/v1/health', headers: { host: '10.0.0.7:3000' } })
    expect(res.statusCode).toBe(200)
    expect(res.body).toBe('{"status":"ok"}')
  })

  it.each(['/v1/properties/', '/v1/health/', `/v1/properties/${ID}/`])('refuses the trailing slash of %s', async (url) => {
    expectProblem(await get(url), {
      code: 'TRAILING_SLASH_NOT_ALLOWED', instance: url, detail: `Remove the trailing slash: request ${url.slice(0, -1)}.`,
    })
  })

  it.each([
    ['/v1/Properties', '/v1/properties'],
    ['/V1/properties', '/v1/properties'],
    ['/V1/HEALTH', '/v1/health'],
    [`/v1/PROPERTIES/${ID.toUpperCase()}`, `/v1/properties/${ID.toUpperCase()}`],
  ])('names the right path when %s differs only in case', async (url, right) => {
    expectProblem(await get(url), { code: 'PATH_CASE_MISMATCH', instance: url, detail: `Paths are case-sensitive: request ${right}.` })
  })

  it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const)('answers %s on a known path with 405 and Allow', async (method) => {
    const res = await app.inject({ method, url: '/v1/properties', headers: AUTH })
    expectProblem(res, {
      code: 'METHOD_NOT_ALLOWED', instance: '/v1/properties', headers: { allow: 'GET, HEAD' },
      detail: `/v1/properties does not support ${method}; it supports GET, HEAD.`,
    })
  })

  it('matches no route for empty segments', async () => {
    expectProblem(await get('/v1//properties'), { code: 'ROUTE_NOT_FOUND', instance: '/v1//properties' })
  })

  it('answers an oversize request target with 414', async () => {
    const url = `/v1/properties?page=${'1'.repeat(9000)}`
    expectProblem(await get(url), { code: 'URI_TOO_LONG', instance: '/v1/properties' })
  })

  it('answers a path with broken percent-encoding with 400 MALFORMED_REQUEST', async () => {
    expectProblem(await get('/v1/properties/%zz'), { code: 'MALFORMED_REQUEST', instance: '/v1/properties/%zz' })
  })

  it('answers HEAD with the status and headers of GET and no body', async () => {
    for (const url of ['/v1/properties', `/v1/properties/${ID}`, '/v1/properties?page=0', '/v1/nothing', '/v1/health']) {
      const [getRes, headRes] = [await get(url), await get(url, AUTH, 'HEAD')]
      expect(headRes.statusCode).toBe(getRes.statusCode)
      expect(headRes.body).toBe('')
      const comparable = (h: Record<string, unknown>) => {
        const { date: _d, 'service-request-id': _r, ...rest } = h
        return rest
      }
      expect(comparable(headRes.headers)).toEqual(comparable(getRes.headers))
    }
  })
})

describe('content negotiation (docs/architecture.md, "Order of checks", step 2)', () => {
  it.each(['*/*', 'application/*', 'application/json', 'application/json;q=0.5', 'text/html, application/json;q=0.1',
    'APPLICATION/JSON', 'application/json; charset=utf-8', 'text/html;q=0.9, */*;q=0.1'])('accepts Accept: %s', async (accept) => {
    expectEnvelope(await get(`/v1/properties/00000000-0000-4000-8000-000000000000`, { ...AUTH, accept }))
  })

  it('accepts a missing Accept header', async () => {
    expectEnvelope(await get('/v1/properties/00000000-0000-4000-8000-000000000000'))
  })

  it.each(['text/html', 'application/xml', 'application/json;q=0', 'application/problem+json', '*/*;q=0',
    'application/json;q=0, */*;q=1', 'not a media type'])('refuses Accept: %s with 406', async (accept) => {
    expectProblem(await get('/v1/properties', { ...AUTH, accept }), {
      code: 'NOT_ACCEPTABLE', instance: '/v1/properties',
      detail: `This API produces application/json only; the Accept header '${accept}' does not admit it.`,
    })
  })

  it('checks the route before the Accept header', async () => {
    expectProblem(await get('/v1/nothing', { ...AUTH, accept: 'text/html' }), { code: 'ROUTE_NOT_FOUND', instance: '/v1/nothing' })
  })

  it('negotiates on health too', async () => {
    expectProblem(await get('/v1/health', { accept: 'text/html' }), { code: 'NOT_ACCEPTABLE', instance: '/v1/health' })
  })
})

describe('headers and body (docs/architecture.md, "Order of checks", step 3)', () => {
  it('requires a User-Agent', async () => {
    const { 'user-agent': _ua, ...headers } = AUTH
    expectProblem(await overSocket('/v1/properties', headers), {
      code: 'MISSING_REQUIRED_HEADER', instance: '/v1/properties', detail: 'The User-Agent header is required.',
      errors: [{ field: 'User-Agent', code: 'REQUIRED', detail: 'Send a User-Agent naming your integration, e.g. acme-channel-sync/2.3.' }],
    })
  })

  it('checks Accept before the headers', async () => {
    const { 'user-agent': _ua, ...headers } = AUTH
    expectProblem(await get('/v1/properties', { ...headers, accept: 'text/html' }), { code: 'NOT_ACCEPTABLE', instance: '/v1/properties' })
  })

  it.each(['', 'ab', 'x'.repeat(256), 'tab\there'])('refuses User-Agent %j', async (userAgent) => {
    expectProblem(await get('/v1/properties', { ...AUTH, 'user-agent': userAgent }), {
      code: 'INVALID_HEADER', instance: '/v1/properties', detail: 'Invalid User-Agent header.',
      errors: [{ field: 'User-Agent', code: 'INVALID_FORMAT', detail: 'Must be 3 to 255 printable ASCII characters.' }],
    })
  })

  it('accepts User-Agents of 3 and 255 characters', async () => {
    expectEnvelope(await get('/v1/properties?perPage=1', { ...AUTH, 'user-agent': 'abc' }), { page: 1, perPage: 1, total: 25 })
    expectEnvelope(await get('/v1/properties?perPage=1', { ...AUTH, 'user-agent': 'x'.repeat(255) }), { page: 1, perPage: 1, total: 25 })
  })

  it.each(['', 'has space', 'x'.repeat(129), 'emoji✓'])('refuses Service-Correlation-Id %j', async (correlation) => {
    const res = await app.inject({ url: '/v1/properties', headers: { ...AUTH, 'service-correlation-id': Buffer.from(correlation).toString('latin1') } })
    expectProblem(res, {
      code: 'INVALID_HEADER', instance: '/v1/properties', detail: 'Invalid Service-Correlation-Id header.',
      errors: [{ field: 'Service-Correlation-Id', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ = + / -.' }],
    })
  })

  it('lists both bad headers in one answer', async () => {
    const res = await get('/v1/properties', { ...AUTH, 'user-agent': 'ab', 'service-correlation-id': 'a b' })
    expectProblem(res, {
      code: 'INVALID_HEADER', instance: '/v1/properties', detail: 'Invalid User-Agent and Service-Correlation-Id header.',
      errors: [
        { field: 'User-Agent', code: 'INVALID_FORMAT', detail: 'Must be 3 to 255 printable ASCII characters.' },
        { field: 'Service-Correlation-Id', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ = + / -.' },
      ],
    })
  })

  it.each(['/v1/properties', `/v1/properties/${ID}`])('refuses Service-Property-Id on %s', async (url) => {
    expectProblem(await get(url, { ...AUTH, 'service-property-id': ID }), {
      code: 'HEADER_NOT_ALLOWED', instance: url, detail: 'This endpoint takes no Service-Property-Id header.',
      errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
    })
  })

  it('refuses a request body on GET', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/properties', headers: { ...AUTH, 'content-type': 'application/json' }, payload: '{"page":1}' })
    expectProblem(res, {
      code: 'UNEXPECTED_BODY', instance: '/v1/properties',
      detail: 'This endpoint takes no request body; send parameters in the query string.',
    })
  })

  it('accepts an empty body with Content-Length: 0', async () => {
    expectEnvelope(await get('/v1/properties?perPage=1', { ...AUTH, 'content-length': '0' }), { page: 1, perPage: 1, total: 25 })
  })

  it('refuses a body over 1 MiB with 413 before reading it', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/properties', headers: { ...AUTH, 'content-length': String(2 * 1024 * 1024) }, payload: 'x' })
    expectProblem(res, { code: 'PAYLOAD_TOO_LARGE', instance: '/v1/properties', detail: 'The request body exceeds 1048576 bytes.' })
  })

  it('checks headers before the API key', async () => {
    const { 'user-agent': _ua, authorization: _a, ...headers } = AUTH
    expectProblem(await overSocket('/v1/properties', headers), { code: 'MISSING_REQUIRED_HEADER', instance: '/v1/properties', errors: expect.any(Array) as never })
  })
})

describe('authentication in the pipeline (docs/architecture.md, "Order of checks", step 4)', () => {
  it('answers a missing Authorization header with 401 and the Bearer challenge', async () => {
    const { authorization: _a, ...headers } = AUTH
    expectProblem(await get('/v1/properties', headers), {
      code: 'MISSING_AUTH_HEADER', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' },
    })
  })

  it.each(['Basic abc', 'Bearer', 'Bearer  two spaces', 'Token svc_live_acme', 'Bearer a b'])('refuses Authorization %j', async (authorization) => {
    expectProblem(await get('/v1/properties', { ...AUTH, authorization }), {
      code: 'INVALID_AUTH_HEADER', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' },
      detail: 'The Authorization header must be `Bearer <API key>`.',
    })
  })

  it('takes the scheme in any case', async () => {
    expectEnvelope(await get('/v1/properties?perPage=1', { ...AUTH, authorization: `bEaReR ${KEY}` }), { page: 1, perPage: 1, total: 25 })
  })

  it("refuses a key of another brand with 403 BRAND_ACCESS_DENIED and the brand's docs", async () => {
    expectProblem(await get('/v1/properties', { ...AUTH, authorization: 'Bearer svc_live_acme', host: GLOBEX_HOST }), {
      code: 'BRAND_ACCESS_DENIED', instance: '/v1/properties', docsUrl: 'https://docs.globex.example',
      detail: `This API key belongs to another brand; it cannot be used at host '${GLOBEX_HOST}'.`,
    })
  })

  it('checks the key before the parameters', async () => {
    expectProblem(await get('/v1/properties?bogus=1', { ...AUTH, authorization: 'Bearer svc_live_unknown' }), {
      code: 'INVALID_API_KEY', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' },
    })
  })
})

describe('parameters (docs/partners.md, "Parameters and pagination")', () => {
  const formatError = (field: string) => ({ field, code: 'INVALID_FORMAT' as const, detail: 'Must be a whole number written with digits only.' })

  it.each(['page=', 'page', 'page=-1', 'page=%2B1', 'page=1.0', 'page=1e2', 'page=%201', 'page=one', 'page=0x1'])('refuses %s as INVALID_FORMAT', async (query) => {
    expectProblem(await get(`/v1/properties?${query}`), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties', detail: "Invalid query parameter 'page'.", errors: [formatError('page')],
    })
  })

  it.each([
    ['page=0', 'page', 'Must be between 1 and 10000.'],
    ['page=10001', 'page', 'Must be between 1 and 10000.'],
    ['page=9007199254740992', 'page', 'Must be between 1 and 10000.'],
    ['perPage=0', 'perPage', 'Must be between 1 and 100.'],
    ['perPage=101', 'perPage', 'Must be between 1 and 100.'],
  ])('refuses %s as OUT_OF_RANGE', async (query, field, detail) => {
    expectProblem(await get(`/v1/properties?${query}`), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties', detail: `Invalid query parameter '${field}'.`,
      errors: [{ field, code: 'OUT_OF_RANGE' as const, detail }],
    })
  })

  it('refuses a parameter given twice', async () => {
    expectProblem(await get('/v1/properties?page=1&page=2'), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties',
      errors: [{ field: 'page', code: 'INVALID_FORMAT', detail: 'Give this parameter once.' }],
    })
  })

  it('lists every bad parameter', async () => {
    expectProblem(await get('/v1/properties?page=0&perPage=x'), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties', detail: "Invalid query parameters 'page', 'perPage'.",
      errors: [{ field: 'page', code: 'OUT_OF_RANGE', detail: 'Must be between 1 and 10000.' }, formatError('perPage')],
    })
  })

  it.each(['PerPage', 'per_page', 'per-page', 'PER_PAGE'])("suggests 'perPage' for %s", async (name) => {
    expectProblem(await get(`/v1/properties?${name}=10`), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/properties',
      detail: `Unknown query parameter '${name}'. '${name}': Did you mean 'perPage'?`,
      errors: [{ field: name, code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'perPage'?" }],
    })
  })

  it('lets unknown names win over bad values, one error per unknown name', async () => {
    expectProblem(await get('/v1/properties?page=0&sort=name&Page=2'), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/properties',
      errors: [
        { field: 'sort', code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter; this endpoint accepts 'page', 'perPage'." },
        { field: 'Page', code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'page'?" },
      ],
    })
  })

  it('refuses any query parameter on a single property', async () => {
    expectProblem(await get(`/v1/properties/${ID}?with=rooms`), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: `/v1/properties/${ID}`,
      errors: [{ field: 'with', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter; this endpoint accepts none.' }],
    })
  })

  it.each(['not-a-uuid', '3f0c6f2e8f0a4a579d0e2d6f5d1b7a10', `${ID}0`, 'g'.repeat(8) + ID.slice(8)])('refuses property id %s', async (id) => {
    expectProblem(await get(`/v1/properties/${id}`), {
      code: 'INVALID_PATH_PARAMETER', instance: `/v1/properties/${id}`, detail: "'propertyId' must be a UUID.",
      errors: [{ field: 'propertyId', code: 'INVALID_FORMAT', detail: 'Must be a UUID such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10.' }],
    })
  })

  it('looks up an upper-case id in lower case', async () => {
    const data = expectEnvelope(await get(`/v1/properties/${ID.toUpperCase()}`)) as { id: string }
    expect(data.id).toBe(ID)
  })

  it('pages 20 by default, in createdAt order, active only', async () => {
    const data = expectEnvelope(await get('/v1/properties'), { page: 1, perPage: 20, total: 25 }) as { id: string }[]
    expect(data.map((p) => p.id)).toEqual(acmeProperties.slice(0, 20).map((p) => p.id))
    const second = expectEnvelope(await get('/v1/properties?page=2'), { page: 2, perPage: 20, total: 25 }) as unknown[]
    expect(second).toEqual(acmeProperties.slice(20))
  })

  it('answers a page past the end with [] and the true total', async () => {
    expect(expectEnvelope(await get('/v1/properties?page=99&perPage=100'), { page: 99, perPage: 100, total: 25 })).toEqual([])
  })

  it('serialises a property with exactly the public fields, in order', async () => {
    const res = await get(`/v1/properties/${ID}`)
    expectEnvelope(res)
    expect(res.body.startsWith(`{"data":${JSON.stringify(records[25]?.property)},"meta":`)).toBe(true)
  })
})

describe('every response (docs/partners.md, "Every answer")', () => {
  it('gives every answer its own request id and ignores the caller\'s', async () => {
    const a = await get('/v1/properties', { ...AUTH, 'service-request-id': 'mine' })
    const b = await get('/v1/nothing')
    expect(a.headers['service-request-id']).toMatch(REQUEST_ID)
    expect(a.headers['service-request-id']).not.toBe(b.headers['service-request-id'])
    expect((a.json() as { meta: { requestId: string } }).meta.requestId).toBe(a.headers['service-request-id'])
  })

  it('echoes the correlation id on successes only', async () => {
    const ok = await get('/v1/properties?perPage=1', { ...AUTH, 'service-correlation-id': 'partner-42.a/b=c+d_e' })
    expect(ok.headers['service-correlation-id']).toBe('partner-42.a/b=c+d_e')
    const health = await get('/v1/health', { 'service-correlation-id': 'lb-1' })
    expect(health.headers['service-correlation-id']).toBe('lb-1')
    const failed = await get('/v1/properties?page=0', { ...AUTH, 'service-correlation-id': 'partner-42' })
    expectProblem(failed, { code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties', errors: expect.any(Array) as never })
  })

  it('ignores conditional headers: no ETag, no Last-Modified, never 304', async () => {
    const res = await get(`/v1/properties/${ID}`, { ...AUTH, 'if-none-match': '*', 'if-modified-since': 'Wed, 21 Oct 2099 07:28:00 GMT' })
    expectEnvelope(res)
    expect(res.headers.etag).toBeUndefined()
    expect(res.headers['last-modified']).toBeUndefined()
  })

  it('answers an unexpected exception with a 500 that leaks nothing, and logs it', async () => {
    failing = true
    const res = await get(`/v1/properties/${ID}`).finally(() => { failing = false })
    expectProblem(res, {
      code: 'INTERNAL_ERROR', instance: `/v1/properties/${ID}`, detail: 'An unexpected error occurred; it has been logged.',
    })
    expect(res.body).not.toMatch(/secret|db\.pms|5432|Error|stack/)
    const line = logs.records().find((r) => r.reqId === res.headers['service-request-id'] && r.msg === 'request failed')
    expect(JSON.stringify(line)).toMatch(/secret internal failure/)
  })
})

describe('request log (operations, Logs)', () => {
  it('writes one line per request with its ids and outcome, never the key', async () => {
    const res = await get('/v1/properties?page=0', { ...AUTH, 'service-correlation-id': 'corr-1' })
    const lines = logs.records().filter((r) => r.reqId === res.headers['service-request-id'])
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({
      level: 'info', msg: 'request', method: 'GET', route: '/v1/properties', status: 400, code: 'INVALID_QUERY_PARAMETER',
      correlationId: 'corr-1', keyId: 'key_acme', brand: 'acme', traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
      durationMs: expect.any(Number),
    })
    expect(logs.lines.join('\n')).not.toContain(KEY)
  })

  it('continues a valid trace and restarts a malformed one, never with a 4xx', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const valid = await get('/v1/health', { traceparent: `00-${traceId}-00f067aa0ba902b7-01` })
    const malformed = await get('/v1/health', { traceparent: `00-${traceId.toUpperCase()}-00f067aa0ba902b7-01` })
    expect([valid.statusCode, malformed.statusCode]).toEqual([200, 200])
    const traceOf = (res: typeof valid) => logs.records().find((r) => r.reqId === res.headers['service-request-id'])?.traceId
    expect(traceOf(valid)).toBe(traceId)
    expect(traceOf(malformed)).toMatch(/^[0-9a-f]{32}$/)
    expect(traceOf(malformed)).not.toBe(traceId)
  })
})

describe('health (docs/operations.md, "Health")', () => {
  it('answers 200 {"status":"ok"} alone', async () => {
    const res = await get('/v1/health', {})
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.headers['service-request-id']).toMatch(REQUEST_ID)
    expect(res.body).toBe('{"status":"ok"}')
  })

  it('answers 503 {"status":"unhealthy"} with Retry-After while a condition fails', async () => {
    health.draining = true
    const res = await get('/v1/health', { 'service-correlation-id': 'lb-2' }).finally(() => { health.draining = false })
    expect(res.statusCode).toBe(503)
    expect(res.headers['retry-after']).toBe('1')
    // No success: no correlation id echoed.
    expect(res.headers['service-correlation-id']).toBeUndefined()
    expect(res.body).toBe('{"status":"unhealthy"}')
  })

  it('refuses parameters on health', async () => {
    expectProblem(await get('/v1/health?verbose=1', {}), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/health',
      errors: [{ field: 'verbose', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter; this endpoint accepts none.' }],
    })
  })
})
