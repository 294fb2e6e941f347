import Fastify, { type FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, describe, expect, it } from 'vitest'
import { credentialsAdminApi } from '../../src/credentials/admin-api.js'
import { AuditTrail, RedisAuditStore } from '../../src/credentials/audit.js'
import { CredentialService } from '../../src/credentials/service.js'
import { RedisUsageStore } from '../../src/credentials/usage.js'
import { errorCatalog, kebabCode, type ErrorCode, type FieldError } from '../../src/contract/errors.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { expectedError } from '../helpers/catalog.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The credentials API's routes, each test registering them on its own Fastify instance. The
// mutation run counts code run in a file-level beforeAll as static and tests such code only
// against the tests that run it themselves (stryker.config.mjs, ignoreStatic), so the route
// table, its paths and the filters a list and the audit trail pass on are checked here from
// inside the tests. (The rules of each route: test/credentials/admin-rules.test.ts.)
// The module's mutation run uses these (scripts/mutation.ts).

const DOCS = 'https://developer.example.com'
const redis = new Redis(REDIS_URL)
const prefixes: string[] = []

afterAll(async () => {
  for (const prefix of prefixes) await removePrefix(redis, prefix)
  redis.disconnect()
})

/** The real service over a fresh prefix, and the API registered on a new instance. */
async function adminApp(): Promise<{ app: FastifyInstance; service: CredentialService }> {
  const prefix = testPrefix()
  prefixes.push(prefix)
  const service = new CredentialService({
    store: new RedisKeyStore(redis, prefix), usage: new RedisUsageStore(redis, prefix),
    audit: new AuditTrail(new RedisAuditStore(redis, prefix), 400 * 86_400_000, pino({ level: 'silent' })),
    known: { brands: ['acme', 'globex'], scopes: ['properties:read'], issuers: [], maxLifetimeDays: undefined, rateLimit: { limit: 100, windowSeconds: 60 }, usageRetentionDays: 30 },
  })
  const app = Fastify()
  await app.register(credentialsAdminApi(service, { docsUrl: DOCS, storeUp: () => true }))
  return { app, service }
}

async function call(app: FastifyInstance, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) {
  const res = await app.inject({ method, url, ...(body === undefined ? {} : { payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } }) })
  return { status: res.statusCode, type: res.headers['content-type'], body: JSON.parse(res.body) as unknown }
}

const meta = { requestId: expect.any(String) as unknown, timestamp: expect.any(String) as unknown }

const page = (data: unknown, status = 200, pagination?: { page: number; perPage: number; total: number }) => ({
  status, type: 'application/json; charset=utf-8', body: { data, meta: { ...meta, ...(pagination === undefined ? {} : { pagination }) } },
})

function problem(code: ErrorCode, instance: string, detail: string, errors: FieldError[] = []) {
  const spec = expectedError(code)
  return {
    status: spec.status, type: 'application/problem+json; charset=utf-8',
    body: { type: `${DOCS}/errors/${kebabCode(code)}`, title: spec.title, status: spec.status, detail, moreInfo: errorCatalog[code].tip, instance, code, errors, ...meta },
  }
}

describe('the credentials API registered inside a test', () => {
  it('answers on every route: create, list, read, update, roll, end an overlap, suspend, resume, usage, audit, revoke', async () => {
    const { app, service } = await adminApp()
    const created = await call(app, 'POST', '/admin/v1/credentials', { type: 'api_key', brand: 'acme', mode: 'live', properties: '*' })
    const { id, secret } = (created.body as { data: { id: string; secret: string } }).data
    expect(created).toEqual(page({ ...(await service.show(id)), secret }, 201))
    const base = `/admin/v1/credentials/${id}`
    expect(await call(app, 'GET', '/admin/v1/credentials')).toEqual(page([await service.show(id)], 200, { page: 1, perPage: 20, total: 1 }))
    expect(await call(app, 'GET', base)).toEqual(page(await service.show(id)))
    expect(await call(app, 'PATCH', base, { name: 'n' })).toEqual(page(await service.show(id)))
    // No overlap given: the default one, not a refusal.
    const rolled = await call(app, 'POST', `${base}/roll`)
    expect(rolled).toEqual(page({ id, secret: expect.stringMatching(/^svc_live_/) as unknown, previousSecretExpiresAt: (await service.show(id)).previousSecretExpiresAt }))
    // A number is refused for its type, 0 included, which as text would be a valid overlap.
    expect(await call(app, 'POST', `${base}/roll`, { overlap: 0 })).toEqual(problem('VALIDATION_FAILED', `${base}/roll`, 'The request has a field with a bad value.', [
      { field: 'overlap', code: 'INVALID_FORMAT', detail: 'overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once' },
    ]))
    expect(await call(app, 'POST', `${base}/end-overlap`)).toEqual(page(await service.show(id)))
    expect(await call(app, 'POST', `${base}/suspend`)).toEqual(page({ ...(await service.show(id)), status: 'suspended' }))
    expect(await call(app, 'POST', `${base}/resume`)).toEqual(page({ ...(await service.show(id)), status: 'active' }))
    expect(await call(app, 'GET', `${base}/usage`)).toEqual(page(await service.usageOf(id, 7)))
    const trail = await service.auditTrail({ id })
    expect(trail.total).toBe(6)
    expect(await call(app, 'GET', '/admin/v1/audit')).toEqual(page(trail.entries, 200, { page: 1, perPage: 20, total: 6 }))
    expect(await call(app, 'POST', `${base}/revoke`)).toEqual(page({ id, status: 'revoked' }))
    expect(await call(app, 'GET', base)).toEqual(problem('CREDENTIAL_NOT_FOUND', base, `No API key or client grant has the id '${id}'.`))
    await app.close()
  })

  it('lists one brand\'s credentials and reads one credential\'s trail, when others exist', async () => {
    const { app, service } = await adminApp()
    const acme = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'test', properties: '*' }, 'ops')).view.id
    const globex = (await service.createKey({ type: 'api_key', brand: 'globex', mode: 'test', properties: '*' }, 'ops')).view.id
    expect(await call(app, 'GET', '/admin/v1/credentials?brand=globex')).toEqual(page([await service.show(globex)], 200, { page: 1, perPage: 20, total: 1 }))
    const trail = await service.auditTrail({ id: acme })
    expect(trail.entries.map((entry) => entry.credentialId)).toEqual([acme])
    expect(await call(app, 'GET', `/admin/v1/audit?id=${acme}`)).toEqual(page(trail.entries, 200, { page: 1, perPage: 20, total: 1 }))
    await app.close()
  })
})
