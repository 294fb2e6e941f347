import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { errorCatalog, type ErrorCode } from '../src/contract/errors.js'
import { adminOpenApiDocument } from '../src/credentials/admin-openapi.js'
import { exampleProblem, openApiDocument, type JsonObject } from '../src/docs/openapi.js'
import { ADMIN_PORT_CODES, errorCodesOf, PORTAL_CODES, publicRoutes } from '../src/docs/responses.js'
import { builtInRoutes } from '../src/routes/policy.js'
import { checkAnswer, type CheckedAnswer } from './helpers/contract.js'
import { DOCS_URL } from './helpers/config.js'

// The OpenAPI document against a real OpenAPI 3.1 validator, and the contract check that
// every integration test's answers go through (helpers/contract.ts) against answers the
// document does not describe: it must refuse them, or it checks nothing.

const shipped = loadConfig({ CONFIG_FILE: 'config/default.json' })
const document = openApiDocument(shipped)
const paths = document.paths as Record<string, Record<string, JsonObject>>

const REQUEST_ID = 'req_0b1e6c8f5d2a4e7f9a3c1b2d4e6f8a0c'
const COMMON = { 'service-request-id': REQUEST_ID, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' }

function problem(code: ErrorCode, instance: string, headers: Record<string, string> = {}): CheckedAnswer {
  return {
    statusCode: errorCatalog[code].status,
    headers: { ...COMMON, 'content-type': 'application/problem+json; charset=utf-8', ...headers },
    body: JSON.stringify(exampleProblem(code, DOCS_URL, instance)),
  }
}

function envelope(data: unknown, meta: unknown): CheckedAnswer {
  return { statusCode: 200, headers: { ...COMMON, 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ data, meta }) }
}

const PROPERTY = {
  object: 'property', id: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', name: 'Acme Berlin', code: null, status: 'active',
  timezone: 'Europe/Berlin', createdAt: '2026-01-02T03:04:05.000Z', updatedAt: '2026-01-02T03:04:05.000Z',
}
const META = { requestId: REQUEST_ID, timestamp: '2026-11-21T09:30:00.000Z' }

describe('the OpenAPI document', () => {
  it('passes an OpenAPI 3.1 validator', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'openapi-'))
    try {
      await writeFile(join(dir, 'openapi.json'), JSON.stringify(document))
      const validator = new Validator()
      const result = await validator.validate(join(dir, 'openapi.json'))
      expect({ version: validator.version, result }).toEqual({ version: '3.1', result: { valid: true } })
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('has every operation of the built-in routes and of the config file, with the codes each can answer', () => {
    const expected = publicRoutes(shipped.routes).flatMap((p) => p.methods.map((m) => `${m} ${p.path}`)).sort()
    const documented = Object.entries(paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`)).sort()
    expect(documented).toEqual(expected)
    expect(documented).toEqual(expect.arrayContaining(['GET /v1/guests', 'POST /v1/guests', 'PATCH /v1/guests/{guestId}', 'GET /v1/rooms']))
    for (const policy of publicRoutes(shipped.routes)) {
      for (const method of policy.methods) {
        const responses = paths[policy.path]?.[method.toLowerCase()]?.responses as Record<string, JsonObject>
        for (const code of errorCodesOf(policy, method)) {
          expect(responses[String(errorCatalog[code].status)]?.description, `${method} ${policy.path} ${code}`).toContain(code)
        }
      }
    }
  })

  it('documents every code of the catalog on some operation, of the public API or of the admin port, and the admin port\'s on no public one', () => {
    const text = JSON.stringify(paths)
    const admin = JSON.stringify(adminOpenApiDocument().paths)
    for (const code of Object.keys(errorCatalog) as ErrorCode[]) {
      const link = `errors/${code.toLowerCase().replaceAll('_', '-')}.html`
      if (ADMIN_PORT_CODES.has(code) || PORTAL_CODES.has(code)) expect(text, code).not.toContain(link)
      // Only a route whose config gives it a sunset answers it (test/lifecycle/documents.test.ts); the shipped config retires none.
      else if (code === 'ROUTE_RETIRED') expect(text, code).not.toContain(link)
      else expect(text, code).toContain(link)
    }
    // The credentials API's codes are in its own document.
    for (const code of ['UNKNOWN_BODY_FIELD', 'VALIDATION_FAILED', 'CREDENTIAL_NOT_FOUND']) expect(admin, code).toContain(`\`${code}\``)
    // The body codes answer on the webhook endpoints API too (public since webhooks).
    expect([...ADMIN_PORT_CODES]).toEqual(['CREDENTIAL_NOT_FOUND', 'INVALID_EVENT', 'PORTAL_SESSION_LIMIT_REACHED'])
    expect(admin).toContain('`PORTAL_SESSION_LIMIT_REACHED`')
    // The portal's own codes answer under /portal/ only.
    expect([...PORTAL_CODES]).toEqual(['PORTAL_SESSION_INVALID', 'PORTAL_CSRF_FAILED', 'PORTAL_CAPABILITY_MISSING'])
  })

  it('documents both security schemes: the API key, and OAuth 2.0 client credentials with every scope described', () => {
    expect((document.components as { securitySchemes: JsonObject }).securitySchemes).toEqual({
      apiKey: { type: 'http', scheme: 'bearer', description: 'Your API key (`svc_live_…` or `svc_test_…`) as a Bearer token.' },
      oauth2: {
        type: 'oauth2',
        description: expect.stringContaining('client-credentials grant'),
        flows: {
          clientCredentials: {
            tokenUrl: 'http://127.0.0.1:4030/realms/partners/protocol/openid-connect/token',
            scopes: {
              'events:read': 'Read events: GET /v1/events, GET /v1/events/{eventId}',
              'guests:read': 'Read guests: GET /v1/guests, GET /v1/guests/{guestId}; events guest.created, guest.updated',
              'guests:write': 'Create, change and delete guests: POST /v1/guests, PATCH /v1/guests/{guestId}',
              'properties:read': 'Read properties: GET /v1/properties, GET /v1/properties/{propertyId}; events property.updated',
              'rooms:read': 'Read rooms: GET /v1/rooms',
              'webhooks:read': 'Read webhooks: GET /v1/webhook-endpoints, GET /v1/webhook-endpoints/{endpointId}, GET /v1/webhook-endpoints/{endpointId}/deliveries,'
                + ' GET /v1/webhook-endpoints/{endpointId}/recoveries, GET /v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}',
              'webhooks:write': 'Create, change and delete webhooks: POST /v1/webhook-endpoints, PATCH /v1/webhook-endpoints/{endpointId}, DELETE /v1/webhook-endpoints/{endpointId},'
                + ' POST /v1/webhook-endpoints/{endpointId}/rotate-secret, POST /v1/webhook-endpoints/{endpointId}/test, POST /v1/events/{eventId}/redeliver,'
                + ' POST /v1/webhook-endpoints/{endpointId}/recover, DELETE /v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}',
            },
          },
        },
      },
    })
  })

  it('names each operation\'s scope under both schemes, and says it in the description', () => {
    const expected: Record<string, string> = {
      'GET /v1/properties': 'properties:read', 'GET /v1/properties/{propertyId}': 'properties:read', 'GET /v1/guests': 'guests:read',
      'POST /v1/guests': 'guests:write', 'GET /v1/guests/{guestId}': 'guests:read', 'PATCH /v1/guests/{guestId}': 'guests:write', 'GET /v1/rooms': 'rooms:read',
      'GET /v1/events': 'events:read', 'GET /v1/events/{eventId}': 'events:read',
      'GET /v1/webhook-endpoints': 'webhooks:read', 'POST /v1/webhook-endpoints': 'webhooks:write', 'GET /v1/webhook-endpoints/{endpointId}': 'webhooks:read',
      'PATCH /v1/webhook-endpoints/{endpointId}': 'webhooks:write', 'DELETE /v1/webhook-endpoints/{endpointId}': 'webhooks:write',
      'POST /v1/webhook-endpoints/{endpointId}/rotate-secret': 'webhooks:write', 'POST /v1/webhook-endpoints/{endpointId}/test': 'webhooks:write',
      'GET /v1/webhook-endpoints/{endpointId}/deliveries': 'webhooks:read', 'POST /v1/events/{eventId}/redeliver': 'webhooks:write',
      'POST /v1/webhook-endpoints/{endpointId}/recover': 'webhooks:write', 'GET /v1/webhook-endpoints/{endpointId}/recoveries': 'webhooks:read',
      'GET /v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}': 'webhooks:read', 'DELETE /v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}': 'webhooks:write',
    }
    const documented = Object.fromEntries(Object.entries(paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op])))
    expect(documented['GET /v1/health']?.security).toEqual([])
    for (const [operation, scope] of Object.entries(expected)) {
      expect(documented[operation]?.security, operation).toEqual([{ apiKey: [scope] }, { oauth2: [scope] }])
      expect(documented[operation]?.description, operation).toContain(`Needs the scope \`${scope}\``)
    }
    // Any valid credential, no scope: both schemes, no scope named, no 403 INSUFFICIENT_SCOPE.
    expect(documented['GET /v1/credential']?.security).toEqual([{ apiKey: [] }, { oauth2: [] }])
    expect(documented['GET /v1/credential']?.description).not.toContain('Needs the scope')
    expect(JSON.stringify(documented['GET /v1/credential']?.responses)).not.toContain('INSUFFICIENT_SCOPE')
    expect(Object.keys(documented).sort()).toEqual([...Object.keys(expected), 'GET /v1/health', 'GET /v1/credential'].sort())
  })

  it('leaves the OAuth 2.0 scheme out where no issuer names a token endpoint', () => {
    const keysOnly = openApiDocument({ ...shipped, oauth: { issuers: [] } })
    expect(Object.keys((keysOnly.components as { securitySchemes: JsonObject }).securitySchemes)).toEqual(['apiKey'])
    expect((keysOnly.paths as Record<string, Record<string, JsonObject>>)['/v1/properties']?.get?.security).toEqual([{ apiKey: ['properties:read'] }])
  })

  it('writes nullable values as type lists, never `nullable`', () => {
    expect(JSON.stringify(document)).not.toContain('"nullable"')
    const property = (document.components as { schemas: Record<string, JsonObject> }).schemas.Property as { properties: Record<string, JsonObject> }
    expect(property.properties.code).toEqual({ type: ['string', 'null'], minLength: 1 })
  })

  it('takes the parameters from the route policies: ranges, enums, lists and Service-Property-Id', () => {
    const list = paths['/v1/properties']?.get?.parameters as JsonObject[]
    expect(list.filter((p) => p.in === 'query')).toEqual([
      { name: 'page', in: 'query', required: false, description: 'Digits only.', schema: { type: 'integer', minimum: 1, maximum: 10000, default: 1 } },
      { name: 'perPage', in: 'query', required: false, description: 'Digits only.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    ])
    const rooms = paths['/v1/rooms']?.get?.parameters as JsonObject[]
    expect(rooms).toContainEqual({ name: 'status', in: 'query', required: false, schema: { type: 'string', enum: ['clean', 'dirty', 'out-of-order'] } })
    expect(rooms).toContainEqual({ $ref: '#/components/parameters/ServicePropertyId' })
    const guest = paths['/v1/guests/{guestId}']?.get?.parameters as JsonObject[]
    expect(guest).toContainEqual(expect.objectContaining({ name: 'with', style: 'form', explode: false }))
    expect(paths['/v1/health']?.get?.security).toEqual([])
    expect(paths['/v1/properties']?.get?.security).toEqual([{ apiKey: ['properties:read'] }, { oauth2: ['properties:read'] }])
  })

  it('documents the event log: its filters, the public types each with its scope, and the event id\'s form', () => {
    const list = paths['/v1/events']?.get as JsonObject
    expect((list.parameters as JsonObject[]).filter((p) => p.in === 'query')).toEqual([
      { name: 'page', in: 'query', required: false, description: 'Digits only.', schema: { type: 'integer', minimum: 1, maximum: 10000, default: 1 } },
      { name: 'perPage', in: 'query', required: false, description: 'Digits only.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
      { name: 'type', in: 'query', required: false, schema: { type: 'string', enum: ['guest.created', 'guest.updated', 'property.updated'] } },
      { name: 'propertyId', in: 'query', required: false, description: 'A UUID (any case).', schema: { type: 'string', pattern: expect.any(String) } },
      { name: 'createdAfter', in: 'query', required: false, description: expect.stringContaining('RFC 3339'), schema: { type: 'string', format: 'date-time' } },
      { name: 'createdBefore', in: 'query', required: false, description: expect.stringContaining('RFC 3339'), schema: { type: 'string', format: 'date-time' } },
    ])
    expect(Object.keys(list.responses as JsonObject)).toEqual(['200', '400', '401', '403', '404', '405', '406', '408', '413', '414', '429', '431', '500', '503'])
    const event = (document.components as { schemas: Record<string, { properties: Record<string, JsonObject> }> }).schemas.Event
    expect(event?.properties.type).toEqual({
      type: 'string', enum: ['guest.created', 'guest.updated', 'property.updated'],
      description: 'The public type, each with the scope a credential needs to see it: `guest.created` (`guests:read`), `guest.updated` (`guests:read`), `property.updated` (`properties:read`).',
    })
    const single = paths['/v1/events/{eventId}']?.get as JsonObject
    expect(single.parameters).toContainEqual({ name: 'eventId', in: 'path', required: true, description: '`evt_` and 26 characters.', schema: { type: 'string', pattern: '^evt_[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$' } })
    expect(((single.responses as Record<string, JsonObject>)['404']?.description)).toContain('EVENT_NOT_FOUND')
    expect(((list.responses as Record<string, JsonObject>)['404']?.description)).not.toContain('EVENT_NOT_FOUND')
  })

  it('documents no event type filter where the config names no public type', () => {
    const none = openApiDocument({ ...shipped, events: { types: [] } })
    const list = (none.paths as Record<string, Record<string, JsonObject>>)['/v1/events']?.get as JsonObject
    expect((list.parameters as JsonObject[]).filter((p) => p.in === 'query').map((p) => p.name)).toEqual(['page', 'perPage', 'propertyId', 'createdAfter', 'createdBefore'])
  })
})

describe('the contract check (every integration answer goes through it)', () => {
  const get = (url: string, answer: CheckedAnswer): void => checkAnswer('GET', url, answer)

  it('passes answers the document describes', () => {
    get('/v1/properties?page=2', envelope([PROPERTY], { ...META, pagination: { page: 2, perPage: 20, total: 21 } }))
    get(`/v1/properties/${PROPERTY.id}`, envelope(PROPERTY, META))
    get('/v1/properties', problem('RATE_LIMITED', '/v1/properties', { 'retry-after': '3' }))
    get('/v1/health', { statusCode: 200, headers: { ...COMMON, 'content-type': 'application/json' }, body: '{"status":"ok"}' })
    checkAnswer('DELETE', '/v1/nowhere', problem('ROUTE_NOT_FOUND', '/v1/nowhere'))
  })

  it('refuses a status the operation does not document', () => {
    expect(() => get('/v1/properties', { ...problem('RATE_LIMITED', '/v1/properties'), statusCode: 418 })).toThrow(/describes no 418/)
  })

  it('refuses a code the operation cannot answer, though its status is documented', () => {
    expect(builtInRoutes.health.auth).toBe(false)
    expect(() => get('/v1/health', problem('INVALID_API_KEY', '/v1/health', { 'www-authenticate': 'Bearer' }))).toThrow(/describes no 401/)
    expect(() => get('/v1/health', problem('PROPERTY_NOT_FOUND', '/v1/health'))).toThrow(/breaks the schema/)
  })

  it('refuses a body off its schema and a missing required header', () => {
    expect(() => get('/v1/properties', envelope([PROPERTY], META))).toThrow(/breaks the schema/)
    expect(() => get('/v1/properties', envelope([{ ...PROPERTY, pmsId: 7 }], { ...META, pagination: { page: 1, perPage: 20, total: 1 } }))).toThrow(/breaks the schema/)
    expect(() => get('/v1/properties', problem('INVALID_API_KEY', '/v1/properties'))).toThrow(/WWW-Authenticate is required/)
    expect(() => get('/v1/properties', problem('RATE_LIMITED', '/v1/properties'))).toThrow(/Retry-After is required/)
    const { 'x-content-type-options': _dropped, ...rest } = COMMON
    expect(() => get('/v1/health', { statusCode: 200, headers: { ...rest, 'content-type': 'application/json' }, body: '{"status":"ok"}' })).toThrow(/X-Content-Type-Options is required/)
    expect(() => get('/v1/health', { statusCode: 200, headers: { ...COMMON, 'content-type': 'text/html' }, body: '<p>ok</p>' })).toThrow(/content type 'text\/html'/)
  })

  it('refuses an answer to an unknown path that is not a code of every route', () => {
    expect(() => checkAnswer('GET', '/v1/nowhere', problem('PROPERTY_NOT_FOUND', '/v1/nowhere'))).toThrow(/not a code every route documents/)
  })
})
