import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { errorCatalog, kebabCode, type ErrorCode } from '../src/contract/errors.js'
import { ERROR_TABLE, expectedError } from './helpers/catalog.js'
import { ACME_HOST, DOCS_URL, testConfig } from './helpers/config.js'
import { FakeKeys } from './helpers/fake-keys.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource, property } from './helpers/memory-source.js'
import { REQUEST_ID, TIMESTAMP } from './helpers/problem.js'
import { contractChecked } from './helpers/contract.js'

// Whatever a client sends, the answer is a valid envelope or a complete problem+json with
// a request id, and never a 500.

const ID = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const PROBLEM_FIELDS = ['type', 'title', 'status', 'detail', 'moreInfo', 'instance', 'code', 'errors', 'requestId', 'timestamp']

let app: FastifyInstance
beforeAll(async () => {
  app = await buildApp({
    config: testConfig(),
    logger: captureLogs('silent').logger,
    keys: new FakeKeys({ svc_live_ok: { keyId: 'key_ok', brand: 'acme', mode: 'live', properties: new Set([ID]), rateLimit: null, kind: 'apiKey', scopes: 'all' } }),
    properties: new MemorySource([{ chainCode: 'ACME', property: property({ id: ID }) }]),
  })
  contractChecked(app)
})
afterAll(async () => app.close())

const printable = fc.string({ unit: 'grapheme-ascii', maxLength: 40 })
const segment = fc.oneof(
  fc.constantFrom('v1', 'V1', 'properties', 'Properties', 'health', ID, ID.toUpperCase(), '', '%zz', '%2F', '..', 'x'),
  fc.stringMatching(/^[A-Za-z0-9._~%-]{0,12}$/),
)
const path = fc.oneof(
  fc.constantFrom('/v1/properties', `/v1/properties/${ID}`, '/v1/health', '/v1/properties/', '/'),
  fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join('/')}`),
  fc.webPath().map((p) => (p.startsWith('/') ? p : `/${p}`)),
)
const queryName = fc.oneof(fc.constantFrom('page', 'perPage', 'PerPage', 'per_page', 'with', ''), fc.stringMatching(/^[A-Za-z_-]{1,8}$/))
const queryValue = fc.oneof(fc.constantFrom('1', '0', '20', '100', '101', '-1', '1.5', '', '9'.repeat(30)), printable.map(encodeURIComponent))
const query = fc.array(fc.tuple(queryName, fc.option(queryValue)), { maxLength: 4 })
  .map((pairs) => pairs.map(([n, v]) => (v === null ? n : `${n}=${v}`)).join('&'))
const headers = fc.record({
  host: fc.constantFrom(ACME_HOST, 'api.globex-resorts.example', 'unknown.example', 'localhost:3000'),
  'user-agent': fc.oneof(fc.constant('fuzz/1.0'), printable),
  accept: fc.oneof(fc.constantFrom('application/json', '*/*', 'text/html', 'application/json;q=0', 'application/*;q=0.2'), printable),
  authorization: fc.oneof(fc.constantFrom('Bearer svc_live_ok', 'Bearer svc_live_nope', 'Basic x', 'bearer svc_live_ok'), printable),
  'service-correlation-id': printable,
  'service-property-id': printable,
  traceparent: printable,
}, { requiredKeys: ['host'] })

// The injector normalises dot segments as a URL parser would; the instance is what arrived.
function sentPath(url: string): string {
  return new URL(`http://x${url}`).pathname
}

describe('any request', () => {
  it('gets a valid envelope or a complete problem+json, never a 500', async () => {
    await fc.assert(fc.asyncProperty(fc.constantFrom('GET', 'HEAD', 'POST', 'DELETE'), path, query, headers, async (method, p, q, h) => {
      const url = q === '' ? p : `${p}?${q}`
      const res = await app.inject({ method: method as 'GET', url, headers: h })
      const requestId = res.headers['service-request-id']
      expect(requestId).toMatch(REQUEST_ID)
      expect(res.statusCode).toBeLessThan(500)
      if (method === 'HEAD') {
        expect(res.body).toBe('')
        return
      }
      const body = JSON.parse(res.body) as Record<string, unknown>
      if (res.statusCode === 200) {
        expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
        if (body.status === 'ok') return
        expect(body.meta).toMatchObject({ requestId, timestamp: expect.stringMatching(TIMESTAMP) })
        return
      }
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(Object.keys(body)).toEqual(PROBLEM_FIELDS)
      const code = body.code as ErrorCode
      expect(Object.keys(ERROR_TABLE)).toContain(code)
      expect(res.statusCode).toBe(expectedError(code).status)
      expect(body).toMatchObject({
        status: expectedError(code).status, title: expectedError(code).title, moreInfo: errorCatalog[code].tip, requestId,
        type: `${DOCS_URL}/errors/${kebabCode(code)}`, instance: sentPath(url), timestamp: expect.stringMatching(TIMESTAMP),
      })
    }), { numRuns: 400 })
  })
})
