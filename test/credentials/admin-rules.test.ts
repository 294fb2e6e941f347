import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { credentialsAdminApi } from '../../src/credentials/admin-api.js'
import { AuditTrail, RedisAuditStore } from '../../src/credentials/audit.js'
import { CredentialService } from '../../src/credentials/service.js'
import { RedisUsageStore } from '../../src/credentials/usage.js'
import { errorCatalog, kebabCode, type ErrorCode, type FieldError } from '../../src/contract/errors.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { expectedError } from '../helpers/catalog.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The credentials API's own rules without the admin listener (docs/operations.md, "The
// credentials API"): its routes on a bare Fastify instance over the real service, answered
// in process. The body and query checks, the problems it answers with, its pages, and what a
// failure of the store becomes. (The admin port with its token: test/credentials/admin-api.test.ts.)
// The module's mutation run uses these (scripts/mutation.ts).

const DOCS = 'https://developer.example.com'
const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
const store = new RedisKeyStore(redis, prefix)
const service = new CredentialService({
  store, usage: new RedisUsageStore(redis, prefix), audit: new AuditTrail(new RedisAuditStore(redis, prefix), 400 * 86_400_000, pino({ level: 'silent' })),
  known: { brands: ['acme', 'globex'], scopes: ['properties:read'], issuers: [], maxLifetimeDays: undefined, rateLimit: { limit: 100, windowSeconds: 60 }, usageRetentionDays: 30 },
})
const errorsSeen: unknown[] = []
let app: FastifyInstance

beforeAll(async () => {
  app = Fastify()
  await app.register(credentialsAdminApi(service, { docsUrl: DOCS, storeUp: () => true, onError: (error) => { errorsSeen.push(error) } }))
})

afterAll(async () => {
  await app.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

interface Call { method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; url: string; body?: unknown; raw?: string; type?: string }

async function call({ method, url, body, raw, type }: Call) {
  const payload = raw ?? (body === undefined ? undefined : JSON.stringify(body))
  const res = await app.inject({ method, url, ...(payload === undefined ? {} : { payload, headers: { 'content-type': type ?? 'application/json' } }) })
  return { status: res.statusCode, type: res.headers['content-type'], body: res.body === '' ? undefined : JSON.parse(res.body) as Record<string, unknown> }
}

/** The whole problem answer of `code` at `instance`. */
function problem(code: ErrorCode, instance: string, detail: string, errors: FieldError[] = []) {
  const spec = expectedError(code)
  return {
    status: spec.status, type: 'application/problem+json; charset=utf-8',
    body: {
      type: `${DOCS}/errors/${kebabCode(code)}`, title: spec.title, status: spec.status, detail, moreInfo: errorCatalog[code].tip, instance, code, errors,
      requestId: expect.any(String) as unknown, timestamp: expect.any(String) as unknown,
    },
  }
}

const page = (data: unknown, pagination?: { page: number; perPage: number; total: number }) => ({
  status: 200, type: 'application/json; charset=utf-8',
  body: { data, meta: { requestId: expect.any(String) as unknown, timestamp: expect.any(String) as unknown, ...(pagination === undefined ? {} : { pagination }) } },
})

describe('the credentials API\'s checks', () => {
  it('creates a key and answers its view with the secret, once', async () => {
    const created = await call({ method: 'POST', url: '/admin/v1/credentials', body: { type: 'api_key', brand: 'acme', mode: 'live', properties: [HOTEL] } })
    const data = (created.body as { data: Record<string, unknown> }).data
    expect(created).toEqual({
      status: 201, type: 'application/json; charset=utf-8',
      body: { data: { ...(await service.show(data.id as string)), secret: data.secret }, meta: { requestId: expect.any(String), timestamp: expect.any(String) } },
    })
    expect(data.secret).toMatch(/^svc_live_/)
    expect(await call({ method: 'GET', url: `/admin/v1/credentials/${data.id as string}` })).toEqual(page(await service.show(data.id as string)))
  })

  it('refuses a body that is not an object, a type it does not know, and fields an operation does not take', async () => {
    const url = '/admin/v1/credentials'
    expect(await call({ method: 'POST', url, body: [1] })).toEqual(problem('VALIDATION_FAILED', url, 'The body must be a JSON object.', [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }]))
    expect(await call({ method: 'POST', url, body: {} })).toEqual(problem('VALIDATION_FAILED', url, 'The request has a field with a bad value.', [{ field: 'type', code: 'REQUIRED', detail: 'type is required: "api_key" or "oauth_client"' }]))
    expect(await call({ method: 'POST', url, body: { type: 'token' } })).toEqual(problem('VALIDATION_FAILED', url, 'The request has a field with a bad value.', [{ field: 'type', code: 'INVALID_ENUM_VALUE', detail: 'type is "api_key" or "oauth_client"' }]))
    expect(await call({ method: 'POST', url, body: { type: 'api_key', brand: 'acme', mode: 'live', properties: '*', Name: 'x', secret: 's' } })).toEqual(problem('UNKNOWN_BODY_FIELD', url,
      'The body has fields this operation does not take: Name, secret.', [
        { field: 'Name', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'Name\'. Did you mean \'name\'?' },
        { field: 'secret', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'secret\'.' },
      ]))
    expect(await call({ method: 'POST', url, body: { type: 'oauth_client', issuer: 'x', clientId: 'c', brand: 'acme', mode: 'live', properties: '*' } })).toEqual(problem('VALIDATION_FAILED', url,
      'The request has a field with a bad value.', [{ field: 'issuer', code: 'INVALID_ENUM_VALUE', detail: 'no token issuer is configured (oauth.issuers or OAUTH_ISSUER)' }]))
    expect(await call({ method: 'POST', url, body: { type: 'api_key', brand: 'x', mode: 'x', properties: '*' } })).toMatchObject({ status: 422, body: { detail: 'The request has fields with a bad value.' } })
  })

  it('answers 415, 413 and 400 for a body that is not JSON, too large or malformed', async () => {
    const url = '/admin/v1/credentials'
    expect(await call({ method: 'POST', url, raw: 'a=b', type: 'application/x-www-form-urlencoded' })).toEqual(problem('UNSUPPORTED_MEDIA_TYPE', url, 'Send the body as JSON with `Content-Type: application/json`.'))
    expect(await call({ method: 'POST', url, raw: JSON.stringify({ name: 'x'.repeat(70_000) }) })).toEqual(problem('PAYLOAD_TOO_LARGE', url, 'The body is larger than 65536 bytes.'))
    expect(await call({ method: 'POST', url, raw: '{"type":' })).toEqual(problem('MALFORMED_JSON', url, 'The body is not one well-formed JSON document.'))
    // An empty body is none: the type is then missing.
    expect(await call({ method: 'POST', url, raw: '' })).toMatchObject({ status: 422, body: { errors: [{ field: 'type', code: 'REQUIRED' }] } })
  })

  it('checks the list\'s query: known parameters, once each, pages within bounds, a known brand and status', async () => {
    const url = '/admin/v1/credentials'
    expect(await call({ method: 'GET', url: `${url}?Brand=acme&x=1` })).toEqual(problem('UNKNOWN_QUERY_PARAMETER', `${url}`, 'Unknown query parameters: Brand, x.', [
      { field: 'Brand', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter \'Brand\'. Did you mean \'brand\'?' },
      { field: 'x', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter \'x\'.' },
    ]))
    expect(await call({ method: 'GET', url: `${url}?y=1` })).toMatchObject({ status: 400, body: { detail: 'Unknown query parameter: y.' } })
    expect(await call({ method: 'GET', url: `${url}?brand=acme&brand=globex` })).toEqual(problem('INVALID_QUERY_PARAMETER', url, 'A query parameter has a bad value.', [
      { field: 'brand', code: 'INVALID_FORMAT', detail: 'brand is given more than once.' },
    ]))
    expect(await call({ method: 'GET', url: `${url}?page=0&perPage=101&brand=initech&status=revoked` })).toEqual(problem('INVALID_QUERY_PARAMETER', url, 'A query parameter has a bad value.', [
      { field: 'page', code: 'OUT_OF_RANGE', detail: 'page must be a whole number from 1 to 10000.' },
      { field: 'perPage', code: 'OUT_OF_RANGE', detail: 'perPage must be a whole number from 1 to 100.' },
      { field: 'brand', code: 'INVALID_ENUM_VALUE', detail: 'unknown brand \'initech\' (known: acme, globex)' },
      { field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is active or suspended.' },
    ]))
    for (const bad of ['1.5', 'x', '10001', '-1', '0', '0001000000']) expect((await call({ method: 'GET', url: `${url}?page=${bad}` })).status, bad).toBe(400)
  })

  it('pages the list, of a brand and status', async () => {
    const made: string[] = []
    for (let i = 0; i < 3; i += 1) made.push((await service.createKey({ type: 'api_key', brand: 'globex', mode: 'test', properties: '*' }, 'ops')).view.id)
    await service.setStatus(made[2] as string, 'suspended', 'ops')
    const all = await service.list({ brand: 'globex' })
    expect(await call({ method: 'GET', url: '/admin/v1/credentials?brand=globex&page=2&perPage=2' })).toEqual(page(all.slice(2), { page: 2, perPage: 2, total: 3 }))
    expect(await call({ method: 'GET', url: '/admin/v1/credentials?brand=globex&status=active&perPage=1' })).toEqual(page(all.slice(0, 1), { page: 1, perPage: 1, total: 2 }))
    expect(await call({ method: 'GET', url: '/admin/v1/credentials?brand=globex&status=suspended' })).toEqual(page([all[2]], { page: 1, perPage: 20, total: 1 }))
  })

  it('updates, rolls, ends an overlap, suspends, resumes and revokes, each refusing fields it does not take', async () => {
    const id = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')).view.id
    const base = `/admin/v1/credentials/${id}`
    expect(await call({ method: 'PATCH', url: base, body: { name: 'n' } })).toEqual(page(await service.show(id)))
    expect((await call({ method: 'PATCH', url: base, body: { type: 'api_key' } })).status).toBe(400)
    const rolled = await call({ method: 'POST', url: `${base}/roll`, body: { overlap: '1h' } })
    expect(rolled).toEqual(page({ id, secret: expect.stringMatching(/^svc_live_/), previousSecretExpiresAt: (await service.show(id)).previousSecretExpiresAt }))
    expect(await call({ method: 'POST', url: `${base}/roll`, body: { overlap: 60 } })).toEqual(problem('VALIDATION_FAILED', `${base}/roll`, 'The request has a field with a bad value.', [
      { field: 'overlap', code: 'INVALID_FORMAT', detail: 'overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once' },
    ]))
    expect((await call({ method: 'POST', url: `${base}/roll`, body: { overlap: '8d' } })).status).toBe(422)
    expect(await call({ method: 'POST', url: `${base}/end-overlap` })).toEqual(page(await service.show(id)))
    expect((await call({ method: 'POST', url: `${base}/end-overlap`, body: { now: true } })).status).toBe(400)
    expect(await call({ method: 'POST', url: `${base}/suspend`, body: {} })).toEqual(page({ ...(await service.show(id)), status: 'suspended' }))
    expect(await call({ method: 'POST', url: `${base}/resume` })).toEqual(page({ ...(await service.show(id)), status: 'active' }))
    expect(await call({ method: 'GET', url: `${base}?x=1` })).toMatchObject({ status: 400, body: { code: 'UNKNOWN_QUERY_PARAMETER' } })
    expect(await call({ method: 'POST', url: `${base}/revoke` })).toEqual(page({ id, status: 'revoked' }))
    expect(await call({ method: 'GET', url: base })).toEqual(problem('CREDENTIAL_NOT_FOUND', base, `No API key or client grant has the id '${id}'.`))
  })

  it('reads usage over the days asked, within the retention', async () => {
    const id = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')).view.id
    const url = `/admin/v1/credentials/${id}/usage`
    expect(await call({ method: 'GET', url })).toEqual(page(await service.usageOf(id, 7)))
    expect(await call({ method: 'GET', url: `${url}?days=30` })).toEqual(page(await service.usageOf(id, 30)))
    expect(await call({ method: 'GET', url: `${url}?days=31` })).toEqual(problem('INVALID_QUERY_PARAMETER', url, 'A query parameter has a bad value.', [
      { field: 'days', code: 'OUT_OF_RANGE', detail: 'days must be a whole number from 1 to 30.' },
    ]))
  })

  it('reads the audit trail a page at a time, of a credential, since a time', async () => {
    const id = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')).view.id
    await service.update(id, { name: 'm' }, 'ops')
    const trail = await service.auditTrail({ id })
    expect(await call({ method: 'GET', url: `/admin/v1/audit?id=${id}&perPage=1&page=2` })).toEqual(page([trail.entries[1]], { page: 2, perPage: 1, total: 2 }))
    expect(await call({ method: 'GET', url: `/admin/v1/audit?id=${id}&since=2999-01-01` })).toEqual(page([], { page: 1, perPage: 20, total: 0 }))
    expect(await call({ method: 'GET', url: '/admin/v1/audit?since=yesterday' })).toEqual(problem('INVALID_QUERY_PARAMETER', '/admin/v1/audit', 'A query parameter has a bad value.', [
      { field: 'since', code: 'INVALID_FORMAT', detail: 'since is an ISO 8601 date-time.' },
    ]))
  })

  it('answers 503 when Redis does not answer, else 500 with the error handed on', async () => {
    const broken = new CredentialService({
      store: { list: async () => { throw new Error('boom') }, listGrants: async () => [] } as never,
      usage: {} as never, audit: {} as never, known: service.known,
    })
    const local = Fastify()
    const seen: unknown[] = []
    let alive = false
    await local.register(credentialsAdminApi(broken, { docsUrl: DOCS, storeUp: () => alive, onError: (error) => { seen.push(error) } }))
    const down = await local.inject({ method: 'GET', url: '/admin/v1/credentials' })
    expect(down.statusCode).toBe(503)
    expect(down.headers['retry-after']).toBe('1')
    expect(JSON.parse(down.body)).toMatchObject({ code: 'SERVICE_UNAVAILABLE', detail: 'Credentials cannot be read or changed right now (Redis does not answer); retry shortly.' })
    expect(seen).toEqual([])
    alive = true
    const failed = await local.inject({ method: 'GET', url: '/admin/v1/credentials' })
    expect(failed.statusCode).toBe(500)
    expect(JSON.parse(failed.body)).toMatchObject({ code: 'INTERNAL_ERROR', detail: 'An unexpected error occurred; it has been logged.' })
    expect(seen).toEqual([new Error('boom')])
    await local.close()
    // The main instance met no unexpected error in any test.
    expect(errorsSeen).toEqual([])
  })
})
