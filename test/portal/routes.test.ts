import Fastify, { type FastifyError, type FastifyInstance, type RouteOptions } from 'fastify'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { ApiError } from '../../src/contract/errors.js'
import { AuditTrail, MemoryAuditStore } from '../../src/credentials/audit.js'
import { CredentialService, type Known } from '../../src/credentials/service.js'
import { MemoryUsageStore, RedisUsageStore } from '../../src/credentials/usage.js'
import { EventLog } from '../../src/events/log.js'
import { MemoryEventStore } from '../../src/events/store.js'
import { EventTypes } from '../../src/events/types.js'
import type { Brand } from '../../src/http/brands.js'
import { MemoryKeyStore } from '../../src/keys/store.js'
import { AuthFailureLimiter } from '../../src/pipeline/abuse.js'
import { portalTwin } from '../../src/portal/api.js'
import { PORTAL_HEADERS, portalHeaders } from '../../src/portal/http.js'
import { portalSessionStage } from '../../src/portal/pipeline.js'
import { portalPolicies, portalRoutes, USAGE_DAYS } from '../../src/portal/routes.js'
import { csrfTokenOf, PortalSessions } from '../../src/portal/sessions.js'
import { PortalSessionStore } from '../../src/portal/store.js'
import { builtInRoutes, webhookRoutes, type RoutePolicy } from '../../src/routes/policy.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { expectedError } from '../helpers/catalog.js'
import { TIMESTAMP } from '../helpers/problem.js'

// The portal's step 4, its own routes and its headers, without a gateway: a bare Fastify app
// that runs the portal's step on each route of a session as app.ts composes it, and answers
// an error with what was thrown (the gateway's error handler, which writes the problem, is the
// contract's). The sessions live in the shared Redis; keys, usage, events and the audit trail
// are this process's own (real objects, in memory). The module's mutation run uses this file
// (scripts/mutation.ts).

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
// A Redis that never answers: a store that cannot be read.
const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null })
// Its failures are the answers under test; the client's error events say the same again.
down.on('error', () => undefined)
afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
  down.disconnect()
})

const apps: FastifyInstance[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

const DAY = 86_400_000
const NOW = Date.now() - (Date.now() % 1000)
const HOST = 'api.acme.example'
const NO_SESSION = 'There is no portal session, or it has ended. Open a new portal link from your operator.'
const known: Known = { brands: ['acme', 'globex'], scopes: ['properties:read', 'guests:read'], issuers: [], maxLifetimeDays: undefined, rateLimit: { limit: 100, windowSeconds: 60 }, usageRetentionDays: 90 }
const types = new EventTypes([
  { type: 'property.updated', publisher: 'pms', internalType: 'hotel.changed', scope: 'properties:read', brand: 'chain', property: 'hotel', object: { type: 'property', id: 'hotel', path: '/v1/properties/{id}' } },
  { type: 'guest.created', publisher: 'pms', internalType: 'guest.new', scope: 'guests:read', brand: 'chain', object: { type: 'guest', id: 'guest', path: '/v1/guests/{id}' } },
])

let namespaces = 0

interface Options {
  /** Serve the usage and roll routes. */
  credentials?: boolean
  /** The event log, whose types a session's page lists. */
  events?: boolean
  /** Sessions whose store cannot be read. */
  broken?: boolean
  /** The credentials' service over keys of its own, which hold none of the sessions' (a credential revoked since the session's check). */
  lost?: boolean
  /** Usage counts that cannot be read. */
  usageDown?: boolean
}

async function portalApp(options: Options = {}) {
  namespaces += 1
  const keys = new MemoryKeyStore()
  const audit = new AuditTrail(new MemoryAuditStore(), 400 * DAY, pino({ level: 'silent' }))
  const store = new PortalSessionStore(options.broken === true ? down : redis, `${prefix}${namespaces}:`)
  const sessions = new PortalSessions({ store, keys, audit, origins: new Map([['acme', `https://${HOST}`], ['globex', 'https://api.globex.example']]), now: () => NOW })
  const usage = options.usageDown === true ? new RedisUsageStore(down, 'none:') : new MemoryUsageStore()
  const credentials = new CredentialService({ store: options.lost === true ? new MemoryKeyStore() : keys, usage, audit, known, now: () => NOW, onRevoke: async () => undefined, endPortalSessions: async () => undefined })
  const failures = new AuthFailureLimiter({ perMinute: 3, trackedAddresses: 100 })
  const step = portalSessionStage(sessions, failures)

  const app = Fastify({ trustProxy: true })
  apps.push(app)
  // What app.ts composes each route's pipeline from: its policy and what the portal makes of it.
  const registered: { method: unknown; url: string; config: unknown }[] = []
  app.addHook('onRoute', (route) => {
    if (route.method !== 'HEAD') registered.push({ method: route.method, url: route.url, config: route.config })
  })
  for (const field of ['brand', 'principal', 'portalSession', 'correlationId'] as const) app.decorateRequest(field, null)
  app.setErrorHandler((error: ApiError | FastifyError, _request, reply) => error instanceof ApiError
    ? reply.code(error.status).send({ code: error.code, detail: error.detail, errors: error.errors, retryAfter: error.retryAfter })
    : reply.code(error.statusCode ?? 500).send({ fastify: error.code }))
  // Step 1's brand by the host, then the portal's step 4 on a session's route, as app.ts composes them.
  app.addHook('onRequest', async (request, reply) => {
    request.brand = { id: request.hostname === 'api.globex.example' ? 'globex' : 'acme' } as Brand
    const portal = request.routeOptions.config.portal
    if (portal?.kind === 'session') await step(portal.capability)(request, reply)
  })
  app.addHook('onSend', portalHeaders)
  const events = options.events === true ? new EventLog(new MemoryEventStore(), types, { retentionDays: 2 }) : undefined
  await app.register(portalRoutes({ sessions, ...(events === undefined ? {} : { events }), ...(options.credentials === true ? { credentials } : {}) }))
  app.get('/v1/elsewhere', async () => ({ elsewhere: true }))
  app.get('/portal/plain', async () => ({ plain: true }))
  await app.ready()

  const key = async (over: Record<string, unknown> = {}) => (await keys.create({ brand: 'acme', mode: 'live', properties: '*', scopes: ['properties:read'], ...over })).record
  /** A session entered through the route, as the page enters it. */
  const enter = async (capabilities: string[] = [], over: Record<string, unknown> = {}) => {
    const record = await key(over)
    const made = await sessions.createLink(record.id, { capabilities }, 'operator')
    const res = await app.inject({ method: 'POST', url: '/portal/session', headers: { host: HOST }, payload: { token: made.url.split('#')[1] } })
    expect(res.statusCode).toBe(201)
    const cookie = /^portal_session=([^;]+);/.exec(String(res.headers['set-cookie']))?.[1] as string
    return { record, sessionId: made.sessionId, cookie, csrf: csrfTokenOf(cookie), res }
  }
  return { app, keys, sessions, usage, credentials, key, enter, registered }
}

const body = (res: { body: string }): unknown => JSON.parse(res.body)

describe('entering a link: POST /portal/session', () => {
  it('spends the token for the session\'s cookie and what the page knows of its session', async () => {
    const p = await portalApp({ events: true })
    const { record, sessionId, cookie, res } = await p.enter(['replay'], { mode: 'test' })
    // The cookie lasts as long as the session, counted on the real clock (Secure: an injected request comes from no loopback address).
    const maxAge = Number(/Max-Age=(\d+);/.exec(String(res.headers['set-cookie']))?.[1])
    expect(String(res.headers['set-cookie'])).toBe(`portal_session=${cookie}; Path=/portal; Max-Age=${maxAge}; HttpOnly; SameSite=Strict; Secure`)
    expect(maxAge).toBeLessThanOrEqual(86_400)
    expect(maxAge).toBeGreaterThan(86_400 - 60)
    expect(cookie).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect({ type: res.headers['content-type'], body: body(res) }).toEqual({
      type: 'application/json; charset=utf-8',
      body: {
        data: {
          sessionId, credentialId: record.id, brand: 'acme', mode: 'test', capabilities: ['view', 'replay'], label: null,
          expiresAt: new Date(NOW + DAY).toISOString(), csrfToken: csrfTokenOf(cookie), eventTypes: ['property.updated'],
        },
        meta: { requestId: expect.any(String), timestamp: expect.stringMatching(TIMESTAMP) },
      },
    })
  })

  it('lists no event types without the event log', async () => {
    const p = await portalApp()
    const { res } = await p.enter()
    expect((body(res) as { data: { eventTypes: unknown } }).data.eventTypes).toEqual([])
  })

  it('is refused from another site\'s page, and taken from the portal\'s own or from no browser', async () => {
    const p = await portalApp()
    const record = await p.key()
    const token = async (): Promise<string> => (await p.sessions.createLink(record.id, {}, 'operator')).url.split('#')[1] as string
    const refused = { code: 'PORTAL_CSRF_FAILED', detail: 'A portal link is entered from the portal\'s own page; this request came from another site.', errors: [] }
    for (const headers of [{ origin: 'https://evil.example' }, { origin: `https://${HOST}` }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: `http://${HOST}`, 'sec-fetch-site': 'none' }]) {
      const res = await p.app.inject({ method: 'POST', url: '/portal/session', headers: { host: HOST, ...headers }, payload: { token: await token() } })
      expect({ headers, status: res.statusCode, body: body(res) }).toEqual({ headers, status: 403, body: refused })
    }
    for (const headers of [{ origin: `http://${HOST}` }, { 'sec-fetch-site': 'same-origin' }, { origin: `http://${HOST}`, 'sec-fetch-site': 'same-origin' }, {}]) {
      const res = await p.app.inject({ method: 'POST', url: '/portal/session', headers: { host: HOST, ...headers }, payload: { token: await token() } })
      expect({ headers, status: res.statusCode }).toEqual({ headers, status: 201 })
    }
  })

  it('takes a JSON object with the token only', async () => {
    const p = await portalApp()
    const post = (payload: string, type = 'application/json') => p.app.inject({ method: 'POST', url: '/portal/session', headers: { host: HOST, 'content-type': type }, payload })
    const notObject = { code: 'VALIDATION_FAILED', detail: 'The body must be a JSON object.', errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }] }
    for (const payload of ['[]', '"token"', '7']) {
      const res = await post(payload)
      expect({ payload, status: res.statusCode, body: body(res) }).toEqual({ payload, status: expectedError('VALIDATION_FAILED').status, body: notObject })
    }
    const long = 'y'.repeat(250)
    const extra = await post(JSON.stringify({ token: 'x', next: '/', [long]: 1 }))
    expect({ status: extra.statusCode, body: body(extra) }).toEqual({
      status: expectedError('UNKNOWN_BODY_FIELD').status,
      body: {
        // A field's name is quoted as far as the budget of one quote goes.
        code: 'UNKNOWN_BODY_FIELD', detail: `The body has fields this operation does not take: next, ${'y'.repeat(200)}….`,
        errors: [{ field: 'next', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'next\'.' }, { field: long, code: 'UNKNOWN_PARAMETER', detail: `Unknown field '${'y'.repeat(200)}…'.` }],
      },
    })
    const malformed = await post('{"token":')
    expect({ status: malformed.statusCode, body: body(malformed) }).toEqual({ status: expectedError('MALFORMED_JSON').status, body: { code: 'MALFORMED_JSON', detail: 'The body is not one well-formed JSON document.', errors: [] } })
    const tooLarge = await post(JSON.stringify({ token: 'x'.repeat(4100) }))
    expect({ status: tooLarge.statusCode, body: body(tooLarge) }).toEqual({ status: 413, body: { fastify: 'FST_ERR_CTP_BODY_TOO_LARGE' } })
    // No body, or one of another type, is no token.
    const spent = { code: 'PORTAL_SESSION_INVALID', detail: expect.stringMatching(/^This link cannot be used/), errors: [] }
    for (const [payload, type] of [['', 'application/json'], ['null', 'application/json'], ['token=abc', 'text/plain']] as const) {
      const res = await post(payload, type)
      expect({ payload, status: res.statusCode, body: body(res) }).toEqual({ payload, status: 401, body: spent })
    }
  })

  it('answers 503 when the sessions cannot be read', async () => {
    const p = await portalApp({ broken: true })
    const res = await p.app.inject({ method: 'POST', url: '/portal/session', headers: { host: HOST }, payload: { token: 'x'.repeat(43) } })
    expect({ status: res.statusCode, body: body(res) }).toEqual({ status: 503, body: { code: 'SERVICE_UNAVAILABLE', detail: 'The portal cannot be entered right now; retry shortly.', errors: [], retryAfter: 1 } })
  })
})

describe('a session\'s routes', () => {
  it('GET /portal/api/session: the page learns its session again, its CSRF token included', async () => {
    const p = await portalApp()
    const { cookie, res: entered } = await p.enter(['manage_webhooks'])
    const res = await p.app.inject({ url: '/portal/api/session', headers: { host: HOST, cookie: `portal_session=${cookie}` } })
    expect({ status: res.statusCode, body: body(res) }).toEqual({ status: 200, body: { data: (body(entered) as { data: unknown }).data, meta: expect.any(Object) } })
  })

  it('POST /portal/logout: the session ends, its cookie is cleared', async () => {
    const p = await portalApp()
    const { cookie, csrf } = await p.enter()
    const headers = { host: HOST, cookie: `portal_session=${cookie}`, 'x-csrf-token': csrf }
    const extra = await p.app.inject({ method: 'POST', url: '/portal/logout', headers, payload: { all: true } })
    expect({ status: extra.statusCode, code: (body(extra) as { code: string }).code }).toEqual({ status: expectedError('UNKNOWN_BODY_FIELD').status, code: 'UNKNOWN_BODY_FIELD' })
    const res = await p.app.inject({ method: 'POST', url: '/portal/logout', headers })
    expect({ status: res.statusCode, body: res.body, cookie: res.headers['set-cookie'] })
      .toEqual({ status: 204, body: '', cookie: 'portal_session=; Path=/portal; Max-Age=0; HttpOnly; SameSite=Strict; Secure' })
    const after = await p.app.inject({ url: '/portal/api/session', headers })
    expect({ status: after.statusCode, body: body(after) }).toEqual({ status: 401, body: { code: 'PORTAL_SESSION_INVALID', detail: NO_SESSION, errors: [] } })
  })

  it('GET /portal/api/usage: the credential\'s requests of the last 30 days', async () => {
    const p = await portalApp({ credentials: true })
    const { record, cookie } = await p.enter()
    const res = await p.app.inject({ url: '/portal/api/usage', headers: { host: HOST, cookie: `portal_session=${cookie}` } })
    const { id: _id, ...usage } = await p.credentials.usageOf(record.id, USAGE_DAYS)
    expect({ status: res.statusCode, body: body(res) }).toEqual({ status: 200, body: { data: JSON.parse(JSON.stringify(usage)) as unknown, meta: expect.any(Object) } })
    expect(USAGE_DAYS).toBe(30)
  })

  it('POST /portal/api/roll: with roll_credential, the new secret once, audited with the session as actor', async () => {
    const p = await portalApp({ credentials: true })
    const { record, sessionId, cookie, csrf } = await p.enter(['roll_credential'])
    const res = await p.app.inject({ method: 'POST', url: '/portal/api/roll', headers: { host: HOST, cookie: `portal_session=${cookie}`, 'x-csrf-token': csrf } })
    expect({ status: res.statusCode, body: body(res) }).toEqual({
      status: 201,
      body: { data: { id: record.id, secret: expect.any(String), previousSecretExpiresAt: new Date(NOW + DAY).toISOString() }, meta: expect.any(Object) },
    })
    const entries = (await p.credentials.auditTrail({ id: record.id })).entries
    expect(entries.map((e) => ({ actor: e.actor, action: e.action }))).toContainEqual({ actor: `portal:${sessionId}`, action: 'roll' })
  })

  it('POST /portal/api/roll: a grant has no secret to roll', async () => {
    const p = await portalApp({ credentials: true })
    const grant = await p.keys.createGrant({ issuer: 'https://id.example.com', clientId: 'c1', brand: 'acme', mode: 'live', properties: '*', scopes: '*' })
    const made = await p.sessions.createLink(grant.id, { capabilities: ['roll_credential'] }, 'operator')
    const entered = await p.sessions.enter(made.url.split('#')[1])
    const res = await p.app.inject({ method: 'POST', url: '/portal/api/roll', headers: { host: HOST, cookie: `portal_session=${entered.cookie}`, 'x-csrf-token': entered.csrfToken } })
    expect({ status: res.statusCode, body: body(res) }).toEqual({
      status: expectedError('VALIDATION_FAILED').status,
      body: { code: 'VALIDATION_FAILED', detail: expect.any(String), errors: [{ field: 'id', code: 'NOT_ALLOWED', detail: `${grant.id} is a client's grant: the identity provider rotates a client's secret, the gateway holds none` }] },
    })
  })

  it('answer a credential gone since the session\'s check as the session ended, and one that cannot be read as 503', async () => {
    const p = await portalApp({ credentials: true, lost: true })
    const { cookie, csrf } = await p.enter(['roll_credential'])
    const headers = { host: HOST, cookie: `portal_session=${cookie}`, 'x-csrf-token': csrf }
    const roll = await p.app.inject({ method: 'POST', url: '/portal/api/roll', headers })
    expect({ status: roll.statusCode, body: body(roll) }).toEqual({ status: 401, body: { code: 'PORTAL_SESSION_INVALID', detail: 'This portal session has ended: its credential is gone.', errors: [] } })
    const down = await portalApp({ credentials: true, usageDown: true })
    const entered = await down.enter()
    const usage = await down.app.inject({ url: '/portal/api/usage', headers: { host: HOST, cookie: `portal_session=${entered.cookie}` } })
    expect({ status: usage.statusCode, body: body(usage) }).toEqual({ status: 503, body: { code: 'SERVICE_UNAVAILABLE', detail: 'The credential cannot be read right now; retry shortly.', errors: [], retryAfter: 1 } })
  })

  it('are not served without the credentials', async () => {
    const p = await portalApp()
    const { cookie } = await p.enter()
    expect((await p.app.inject({ url: '/portal/api/usage', headers: { host: HOST, cookie: `portal_session=${cookie}` } })).statusCode).toBe(404)
    expect((await p.app.inject({ method: 'POST', url: '/portal/api/roll', headers: { host: HOST, cookie: `portal_session=${cookie}` } })).statusCode).toBe(404)
  })

  it('are each served with the pipeline its policy and its portal kind name', async () => {
    const p = await portalApp({ credentials: true })
    const session = (policy: (typeof portalPolicies)[keyof typeof portalPolicies], capability = 'view') => ({ policy, portal: { kind: 'session', capability, path: policy.path } })
    expect(p.registered.filter((route) => route.url.startsWith('/portal/') && route.url !== '/portal/plain')).toEqual([
      { method: 'POST', url: '/portal/session', config: { policy: portalPolicies.enter, portal: { kind: 'enter' } } },
      { method: 'POST', url: '/portal/logout', config: session(portalPolicies.logout) },
      { method: 'GET', url: '/portal/api/session', config: session(portalPolicies.session) },
      { method: 'GET', url: '/portal/api/usage', config: session(portalPolicies.usage) },
      { method: 'POST', url: '/portal/api/roll', config: session(portalPolicies.roll, 'roll_credential') },
    ])
  })

  it('are each a policy of a session under /portal, a body only for a change', () => {
    const policy = (path: string, methods: string[], body: unknown) => ({
      kind: 'facade', path, methods, scope: 'brand', auth: true, query: {}, pathParams: {}, body, upstreams: [], scopes: {}, noScope: true,
    })
    expect(portalPolicies).toEqual({
      enter: { ...policy('/portal/session', ['POST'], { maxBytes: 4096 }), auth: false },
      logout: policy('/portal/logout', ['POST'], { maxBytes: 4096 }),
      session: policy('/portal/api/session', ['GET'], 'none'),
      usage: policy('/portal/api/usage', ['GET'], 'none'),
      roll: policy('/portal/api/roll', ['POST'], { maxBytes: 4096 }),
    })
  })
})

describe('the portal\'s step 4', () => {
  it('refuses no cookie, a cookie of no session, and counts each refusal of an address', async () => {
    const p = await portalApp()
    const { cookie } = await p.enter()
    const invalid = { status: 401, body: { code: 'PORTAL_SESSION_INVALID', detail: NO_SESSION, errors: [] } }
    for (const headers of [{}, { cookie: `portal_session=${'x'.repeat(43)}` }, { cookie: `other=${cookie}` }]) {
      const res = await p.app.inject({ url: '/portal/api/session', headers: { host: HOST, ...headers } })
      expect({ headers, status: res.statusCode, body: body(res) }).toEqual({ headers, ...invalid })
    }
    // Three refusals a minute: the address is refused before its cookie is looked up, however good.
    const res = await p.app.inject({ url: '/portal/api/session', headers: { host: HOST, cookie: `portal_session=${cookie}` } })
    expect({ status: res.statusCode, code: (body(res) as { code: string }).code }).toEqual({ status: 429, code: 'RATE_LIMITED' })
    const elsewhere = await p.app.inject({ url: '/portal/api/session', remoteAddress: '192.0.2.7', headers: { host: HOST, cookie: `portal_session=${cookie}` } })
    expect(elsewhere.statusCode).toBe(200)
  })

  it('refuses a session on another brand\'s host', async () => {
    const p = await portalApp()
    const { cookie } = await p.enter()
    const res = await p.app.inject({ url: '/portal/api/session', headers: { host: 'api.globex.example', cookie: `portal_session=${cookie}` } })
    expect({ status: res.statusCode, body: body(res) }).toEqual({ status: 401, body: { code: 'PORTAL_SESSION_INVALID', detail: 'This portal session belongs to another brand\'s portal.', errors: [] } })
  })

  it('asks a change for the session\'s CSRF token, a read not', async () => {
    const p = await portalApp({ credentials: true })
    const { cookie, csrf } = await p.enter(['roll_credential'])
    const refused = {
      status: 403,
      body: { code: 'PORTAL_CSRF_FAILED', detail: 'A change in the portal needs the session\'s CSRF token in the x-csrf-token header; nothing was changed. Reload the portal and try again.', errors: [] },
    }
    for (const sent of [undefined, '', csrfTokenOf('x'.repeat(43)), `${csrf}x`]) {
      const res = await p.app.inject({ method: 'POST', url: '/portal/logout', headers: { host: HOST, cookie: `portal_session=${cookie}`, ...(sent === undefined ? {} : { 'x-csrf-token': sent }) } })
      expect({ sent, status: res.statusCode, body: body(res) }).toEqual({ sent, ...refused })
    }
    for (const method of ['GET', 'HEAD'] as const) {
      expect((await p.app.inject({ method, url: '/portal/api/usage', headers: { host: HOST, cookie: `portal_session=${cookie}` } })).statusCode, method).toBe(200)
    }
  })

  it('refuses what the session\'s link gave no capability for', async () => {
    const p = await portalApp({ credentials: true })
    const { cookie, csrf } = await p.enter(['replay'])
    const res = await p.app.inject({ method: 'POST', url: '/portal/api/roll', headers: { host: HOST, cookie: `portal_session=${cookie}`, 'x-csrf-token': csrf } })
    expect({ status: res.statusCode, body: body(res) }).toEqual({
      status: 403,
      body: { code: 'PORTAL_CAPABILITY_MISSING', detail: 'This portal session may not do this: it needs the capability \'roll_credential\', which its link did not give.', errors: [] },
    })
  })

  it('answers 503 when the session cannot be read, and counts no refusal', async () => {
    const p = await portalApp({ broken: true })
    for (let i = 0; i < 4; i += 1) {
      const res = await p.app.inject({ url: '/portal/api/session', headers: { host: HOST, cookie: `portal_session=${'x'.repeat(43)}` } })
      expect({ status: res.statusCode, body: body(res) }).toEqual({ status: 503, body: { code: 'SERVICE_UNAVAILABLE', detail: 'The portal session cannot be checked right now; retry shortly.', errors: [], retryAfter: 1 } })
    }
  })
})

describe('the portal\'s headers', () => {
  it('are on every answer under /portal, errors included, HSTS over TLS; not elsewhere', async () => {
    const p = await portalApp()
    const portalHeadersOf = (res: { headers: Record<string, unknown> }) => Object.fromEntries(Object.keys({ ...PORTAL_HEADERS, 'strict-transport-security': '' }).map((name) => [name, res.headers[name]]))
    const plain = await p.app.inject({ url: '/portal/plain', headers: { host: HOST } })
    expect(portalHeadersOf(plain)).toEqual({ ...PORTAL_HEADERS, 'strict-transport-security': undefined })
    const refused = await p.app.inject({ url: '/portal/api/session', headers: { host: HOST, 'x-forwarded-proto': 'https' } })
    expect({ status: refused.statusCode, headers: portalHeadersOf(refused) }).toEqual({ status: 401, headers: { ...PORTAL_HEADERS, 'strict-transport-security': 'max-age=31536000' } })
    const elsewhere = await p.app.inject({ url: '/v1/elsewhere', headers: { host: HOST, 'x-forwarded-proto': 'https' } })
    expect(Object.values(portalHeadersOf(elsewhere)).every((value) => value === undefined)).toBe(true)
  })
})

describe('a partner route served again under /portal/api', () => {
  const handler = async (): Promise<string> => 'served'
  const own = { onRequest: [handler], preHandler: [handler] }
  const route = (method: RouteOptions['method'], policy: RoutePolicy = webhookRoutes.webhookEndpoints): RouteOptions => ({ method, url: policy.path, handler, config: { policy, other: 1 } } as unknown as RouteOptions)

  it('is the same handler, policy and own hooks, with the capability its method needs', () => {
    expect(portalTwin(route('POST'), own)).toEqual({
      method: 'POST', url: '/portal/api/v1/webhook-endpoints', handler,
      config: { policy: webhookRoutes.webhookEndpoints, other: 1, portal: { kind: 'session', capability: 'manage_webhooks', path: '/portal/api/v1/webhook-endpoints' } },
      onRequest: own.onRequest, preHandler: own.preHandler,
    })
    expect(portalTwin(route('GET', builtInRoutes.getCredential), own)?.config).toMatchObject({ portal: { capability: 'view', path: '/portal/api/v1/credential' } })
  })

  it('is none for HEAD (it comes with GET), several methods at once, no policy or a route the portal does not serve', () => {
    expect(portalTwin(route('HEAD'), own)).toBeUndefined()
    expect(portalTwin(route(['GET', 'POST']), own)).toBeUndefined()
    expect(portalTwin(route(['GET']), own)).toBeUndefined()
    expect(portalTwin({ method: 'GET', url: '/x', handler } as RouteOptions, own)).toBeUndefined()
    expect(portalTwin(route('PUT'), own)).toBeUndefined()
    expect(portalTwin(route('GET', builtInRoutes.listProperties), own)).toBeUndefined()
  })
})
