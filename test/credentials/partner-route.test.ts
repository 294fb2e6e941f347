import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { errorHandler } from '../../src/contract/error-handler.js'
import { errorCatalog, kebabCode, type ErrorCode } from '../../src/contract/errors.js'
import type { Principal } from '../../src/keys/principal.js'
import { credentialRoute } from '../../src/credentials/partner-route.js'
import type { CredentialView } from '../../src/credentials/schemas.js'
import { CredentialNotFound, type CredentialService } from '../../src/credentials/service.js'
import { expectedError } from '../helpers/catalog.js'

// GET /v1/credential's own handler without a gateway (docs/partners.md, "Who am I: GET
// /v1/credential"): the route on a bare Fastify instance, the principal set as authentication
// would set it, over a service that answers from a table. What the partner sees for an API key,
// a rolled key, an OAuth client, and when the record is gone or cannot be read. (The whole
// pipeline in front of it: test/credentials/credential-route.test.ts.)
// The module's mutation run uses these (scripts/mutation.ts).

const DOCS = 'https://developer.example.com'
const KEY = 'key_0123456789abcdef'
const ROLLED = 'key_rolled0123456789'
const GRANT = 'cli_0123456789abcdef'
const GONE_KEY = 'key_gone000000000000'
const GONE_GRANT = 'cli_gone000000000000'
const BROKEN = 'key_broken0000000000'
const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'

const keyView: CredentialView = {
  id: KEY, type: 'api_key', brand: 'acme', mode: 'live', properties: [HOTEL], scopes: ['properties:read'], status: 'active',
  name: 'Booking engine', expiresAt: '2027-01-01T00:00:00.000Z', rateLimit: null, allowedIps: ['203.0.113.0/24'],
  previousSecretExpiresAt: null, lastUsedAt: '2026-11-28T10:15:00.000Z', createdAt: '2026-01-01T00:00:00.000Z',
}
const rolledView: CredentialView = {
  ...keyView, id: ROLLED, mode: 'test', properties: '*', rateLimit: 25, allowedIps: null, expiresAt: null, name: null,
  previousSecretExpiresAt: '2026-11-29T12:00:00.000Z', previousSecretLastUsedAt: '2026-11-28T09:00:00.000Z', lastUsedAt: null,
}
const grantView: CredentialView = {
  id: GRANT, type: 'oauth_client', issuer: 'https://idp.example.com', clientId: 'booking-engine', brand: 'globex', mode: 'live',
  properties: '*', scopes: ['properties:read', 'events:read'], status: 'active', name: 'Channel manager', expiresAt: null,
  rateLimit: 0, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt: '2026-02-01T00:00:00.000Z',
}
const views = new Map([[KEY, keyView], [ROLLED, rolledView], [GRANT, grantView]])
const asked: string[] = []

const service = {
  known: { rateLimit: { limit: 100, windowSeconds: 60 } },
  async show(id: string): Promise<CredentialView> {
    asked.push(id)
    if (id === BROKEN) throw new Error('connection lost')
    const view = views.get(id)
    if (view === undefined) throw new CredentialNotFound(id)
    return view
  },
} as unknown as CredentialService

function principal(keyId: string, kind: Principal['kind'], extra: Partial<Principal> = {}): Principal {
  return { keyId, kind, brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all', ...extra }
}

let app: FastifyInstance
const principals = new Map<string, Principal>()

beforeAll(async () => {
  app = Fastify()
  app.decorate('gatewayConfig', { docsUrl: DOCS } as never)
  for (const field of ['principal', 'correlationId', 'brand', 'routeUrl', 'errorCode'] as const) app.decorateRequest(field, null)
  // As the pipeline does before the handler: the principal of the credential presented.
  app.addHook('onRequest', async (request) => {
    request.principal = principals.get(request.headers['x-test-credential'] as string) ?? null
    const correlation = request.headers['service-correlation-id']
    request.correlationId = typeof correlation === 'string' ? correlation : null
  })
  app.setErrorHandler(errorHandler)
  await app.register(credentialRoute(service))
  principals.set('key', principal(KEY, 'apiKey'))
  principals.set('rolled', principal(ROLLED, 'apiKey', { previousSecret: true }))
  principals.set('grant', principal(GRANT, 'accessToken'))
  principals.set('gone-key', principal(GONE_KEY, 'apiKey'))
  principals.set('gone-grant', principal(GONE_GRANT, 'accessToken'))
  principals.set('broken', principal(BROKEN, 'apiKey'))
})

afterAll(async () => {
  await app.close()
})

async function get(credential: string, headers: Record<string, string> = {}) {
  const res = await app.inject({ method: 'GET', url: '/v1/credential', headers: { 'x-test-credential': credential, ...headers } })
  return { status: res.statusCode, headers: res.headers, body: JSON.parse(res.body) as Record<string, unknown> }
}

const meta = { requestId: expect.any(String) as unknown, timestamp: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/) as unknown }

function problem(code: ErrorCode, detail: string) {
  const spec = expectedError(code)
  return {
    type: `${DOCS}/errors/${kebabCode(code)}`, title: spec.title, status: spec.status, detail, moreInfo: errorCatalog[code].tip,
    instance: '/v1/credential', code, errors: [], requestId: expect.any(String) as unknown, timestamp: expect.any(String) as unknown,
  }
}

describe('GET /v1/credential', () => {
  it('answers an API key with its record as the partner may see it, the default quota where it has none', async () => {
    const res = await get('key', { 'service-correlation-id': 'corr-1' })
    expect(res.status).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.headers['service-correlation-id']).toBe('corr-1')
    expect(res.body).toEqual({
      data: {
        id: KEY, type: 'api_key', name: 'Booking engine', brand: 'acme', mode: 'live', scopes: ['properties:read'], properties: [HOTEL],
        rateLimit: { limit: 100, windowSeconds: 60 }, expiresAt: '2027-01-01T00:00:00.000Z', allowedIps: ['203.0.113.0/24'],
        previousSecretExpiresAt: null, lastUsedAt: '2026-11-28T10:15:00.000Z',
      },
      meta,
    })
    expect(asked.at(-1)).toBe(KEY)
  })

  it('answers a rolled key with its own quota and when its previous secret stops working, not when that secret was last used', async () => {
    const res = await get('rolled')
    expect(res.status).toBe(200)
    expect(res.headers['service-correlation-id']).toBeUndefined()
    expect(res.body).toEqual({
      data: {
        id: ROLLED, type: 'api_key', name: null, brand: 'acme', mode: 'test', scopes: ['properties:read'], properties: '*',
        rateLimit: { limit: 25, windowSeconds: 60 }, expiresAt: null, allowedIps: null,
        previousSecretExpiresAt: '2026-11-29T12:00:00.000Z', lastUsedAt: null,
      },
      meta,
    })
    expect(asked.at(-1)).toBe(ROLLED)
  })

  it('answers an access token with its client\'s grant, a quota of 0 kept as 0', async () => {
    const res = await get('grant')
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      data: {
        id: GRANT, type: 'oauth_client', name: 'Channel manager', brand: 'globex', mode: 'live', scopes: ['properties:read', 'events:read'],
        properties: '*', rateLimit: { limit: 0, windowSeconds: 60 }, expiresAt: null, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null,
      },
      meta,
    })
    expect(Object.keys(res.body.data as object)).not.toContain('issuer')
  })

  it('answers 401 INVALID_API_KEY when the key was revoked since it was checked', async () => {
    const res = await get('gone-key')
    expect(res.status).toBe(401)
    expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(res.headers['retry-after']).toBeUndefined()
    expect(res.body).toEqual(problem('INVALID_API_KEY', 'The API key is not valid.'))
  })

  it('answers CLIENT_NOT_REGISTERED when the client\'s grant was revoked since it was checked', async () => {
    const res = await get('gone-grant')
    expect(res.status).toBe(expectedError('CLIENT_NOT_REGISTERED').status)
    expect(res.body).toEqual(problem('CLIENT_NOT_REGISTERED', 'The client of this access token is not registered for this API.'))
  })

  it('answers 503 with Retry-After: 1 when the record cannot be read', async () => {
    const res = await get('broken')
    expect(res.status).toBe(503)
    expect(res.headers['retry-after']).toBe('1')
    expect(res.body).toEqual(problem('SERVICE_UNAVAILABLE', 'The credential cannot be read right now; retry shortly.'))
  })
})
