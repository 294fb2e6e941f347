import { shipped } from './helpers/declared.js'
import { connect } from 'node:net'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hotel } from '../mocks/pms/data.js'
import { MockService } from '../mocks/service/server.js'
import type { FileConfigInput } from '../src/config.js'
import { RedisKeyStore, type NewKey } from '../src/keys/store.js'
import { ACME_HOST, GLOBEX_HOST } from './helpers/config.js'
import { checkAnswer } from './helpers/contract.js'
import { TestGateway, type Answer } from './helpers/gateway.js'
import { expectProblem } from './helpers/problem.js'
import { parseResponses } from './helpers/raw.js'
import { eventually, REDIS_URL } from './helpers/redis.js'

// The order of checks (docs/architecture.md, "Order of checks"), one pair of adjacent steps
// at a time: a request that fails both steps gets the earlier step's answer. Over real
// sockets (a client need not send a User-Agent, which inject always adds), against a gateway
// with its rate limiter on real Redis, the stand-in PMS and the stand-in service.

const SERVICE_TOKEN = 'order-service-token'
const UNKNOWN_ID = '00000000-0000-4000-8000-00000000dead'

let t: TestGateway
let service: MockService
let redis: Redis
let store: RedisKeyStore
let key: string

beforeAll(async () => {
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  t = await TestGateway.start({
    config: {
      // An hour's window: a quota spent by a test stays spent while the test runs.
      rateLimit: { enabled: true, limit: 1000, windowSeconds: 3600 },
      upstreams: {
        // The bookings service with no sandbox here: test keys may not use its routes.
        bookings: { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs: 2000 },
      } as FileConfigInput['upstreams'],
      routes: shipped.routes,
    },
    env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
  })
  redis = new Redis(REDIS_URL)
  store = new RedisKeyStore(redis, t.prefix)
  key = await t.key()
})

afterAll(async () => {
  await t.close()
  await service.close()
  redis.disconnect()
})

async function newKey(input: Partial<NewKey> = {}): Promise<{ key: string; id: string }> {
  const { key: secret, record } = await store.create({ brand: 'acme', mode: 'live', properties: '*', ...input })
  return { key: secret, id: record.id }
}

/** A request with exactly these headers (and a Host), over a real socket. */
async function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const res = await request(`${t.url}${path}`, { method: method as 'GET', headers: { host: ACME_HOST, ...headers }, body })
  const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
  checkAnswer(method, path, answer, t.gateway.app.gatewayConfig)
  return answer
}

const UA = { 'user-agent': 'order-test/1.0' }
const auth = (secret: string) => ({ ...UA, authorization: `Bearer ${secret}` })
const acmeHotels = (lifecycle = 'LIVE'): Hotel[] => t.pms.hotels.filter((h) => h.chain_code === 'ACME' && h.lifecycle === lifecycle)
const globexHotel = (): Hotel => t.pms.hotels.find((h) => h.chain_code === 'GLBX') as Hotel

/** Spends the whole quota of a key of limit 1 and shows that it is spent. */
async function spend(secret: string, path = '/v1/properties?perPage=1'): Promise<void> {
  expect((await send('GET', path, auth(secret))).statusCode).toBe(200)
  expect((await send('GET', path, auth(secret))).statusCode).toBe(429)
}

describe('step 1 (route) before step 2 (Accept)', () => {
  it('answers an unknown path with a refused Accept 404', async () => {
    expectProblem(await send('GET', '/v1/hotels', { ...auth(key), accept: 'text/html' }), { code: 'ROUTE_NOT_FOUND', instance: '/v1/hotels' })
  })

  it('answers another method with a refused Accept 405', async () => {
    expectProblem(await send('DELETE', '/v1/properties', { ...auth(key), accept: 'text/html' }), {
      code: 'METHOD_NOT_ALLOWED', instance: '/v1/properties', headers: { allow: 'GET, HEAD' },
    })
  })

  it('answers a trailing slash with a refused Accept 400', async () => {
    expectProblem(await send('GET', '/v1/properties/', { ...auth(key), accept: 'text/html' }), { code: 'TRAILING_SLASH_NOT_ALLOWED', instance: '/v1/properties/' })
  })
})

describe('step 1 (route) before the body is read (step 6)', () => {
  it('answers malformed JSON to an unknown path 404, and to another method 405', async () => {
    const json = { ...UA, 'content-type': 'application/json' }
    expectProblem(await send('POST', '/v1/hotels', json, '{"name":'), { code: 'ROUTE_NOT_FOUND', instance: '/v1/hotels', detail: 'There is no endpoint at /v1/hotels.' })
    for (const path of ['/v1/properties', '/v1/health']) {
      expectProblem(await send('POST', path, json, '{"name":'), {
        code: 'METHOD_NOT_ALLOWED', instance: path, headers: { allow: 'GET, HEAD' }, detail: `${path} does not support POST; it supports GET, HEAD.`,
      })
    }
  })

  it('answers an unknown path at once, without waiting for the body it announces', async () => {
    const socket = connect(Number(new URL(t.url).port), '127.0.0.1')
    let received = ''
    socket.on('data', (chunk: Buffer) => { received += chunk.toString('utf8') })
    // The head and the first chunk of a body that never ends, with no credential.
    socket.write(`POST /v1/hotels HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: order-test/1.0\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n`)
    try {
      const answered = (): boolean => parseResponses(received).some((r) => r.statusCode > 0 && r.body.length === Number(r.headers['content-length']))
      expect(await eventually(async () => answered(), 5000)).toBe(true)
    } finally {
      socket.destroy()
    }
    const [answer] = parseResponses(received)
    expectProblem(answer as Answer, { code: 'ROUTE_NOT_FOUND', instance: '/v1/hotels', detail: 'There is no endpoint at /v1/hotels.' })
  })
})

describe('step 2 (Accept) before step 3 (headers, body)', () => {
  it('answers a refused Accept without a User-Agent 406', async () => {
    expectProblem(await send('GET', '/v1/properties', { authorization: `Bearer ${key}`, accept: 'text/html' }), { code: 'NOT_ACCEPTABLE', instance: '/v1/properties' })
  })

  it('answers a refused Accept with a body on GET 406', async () => {
    expectProblem(await send('GET', '/v1/properties', { ...auth(key), accept: 'application/xml', 'content-type': 'application/json' }, '{"a":1}'), {
      code: 'NOT_ACCEPTABLE', instance: '/v1/properties',
    })
  })
})

describe('step 3 (headers, body) before step 4 (credential)', () => {
  it('answers a missing User-Agent without Authorization 400', async () => {
    expectProblem(await send('GET', '/v1/properties', {}), {
      code: 'MISSING_REQUIRED_HEADER', instance: '/v1/properties', detail: 'The User-Agent header is required.',
      errors: [{ field: 'User-Agent', code: 'REQUIRED', detail: 'Send a User-Agent naming your integration, e.g. acme-channel-sync/2.3.' }],
    })
  })

  it('answers a body on GET with an unknown key 400 UNEXPECTED_BODY', async () => {
    expectProblem(await send('GET', '/v1/properties', { ...auth('svc_live_unknown'), 'content-type': 'application/json' }, '{"a":1}'), {
      code: 'UNEXPECTED_BODY', instance: '/v1/properties', detail: 'This endpoint takes no request body; send parameters in the query string.',
    })
  })

  it('answers a body that is not JSON with an unknown key 415', async () => {
    expectProblem(await send('POST', '/v1/guests', { ...auth('svc_live_unknown'), 'content-type': 'text/plain' }, 'hello'), {
      code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests', detail: "Request bodies must be application/json; the Content-Type was 'text/plain'.",
    })
  })

  it('answers a body over the route\'s limit without Authorization 413', async () => {
    expectProblem(await send('POST', '/v1/guests', { ...UA, 'content-type': 'application/json' }, `"${'x'.repeat(70_000)}"`), {
      code: 'PAYLOAD_TOO_LARGE', instance: '/v1/guests', detail: 'The request body exceeds 65536 bytes.',
    })
  })

  it('answers Service-Property-Id on a brand-wide route with an unknown key 400', async () => {
    expectProblem(await send('GET', '/v1/guests', { ...auth('svc_live_unknown'), 'service-property-id': UNKNOWN_ID }), {
      code: 'HEADER_NOT_ALLOWED', instance: '/v1/guests',
      errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
    })
  })
})

describe('step 4 (credential, permission, scope) before step 5 (quota)', () => {
  it('answers a suspended key over its quota 403 API_KEY_SUSPENDED', async () => {
    const k = await newKey({ rateLimit: 1 })
    await spend(k.key)
    await store.setStatus(k.id, 'suspended')
    // The gateway learns of the suspension from the store's change message.
    expect(await eventually(async () => (await send('GET', '/v1/properties', auth(k.key))).statusCode === 403, 10_000, 50)).toBe(true)
    expectProblem(await send('GET', '/v1/properties', auth(k.key)), {
      code: 'API_KEY_SUSPENDED', instance: '/v1/properties', detail: /suspended/,
    })
  })

  it('answers a key of another brand over its quota 403 BRAND_ACCESS_DENIED', async () => {
    const k = await newKey({ rateLimit: 1 })
    await spend(k.key)
    expectProblem(await send('GET', '/v1/properties', { ...auth(k.key), host: GLOBEX_HOST }), {
      code: 'BRAND_ACCESS_DENIED', instance: '/v1/properties',
      detail: `This API key belongs to another brand; it cannot be used at host '${GLOBEX_HOST}'.`,
    })
  })

  it('answers a key without the route\'s scope over its quota 403 INSUFFICIENT_SCOPE', async () => {
    const k = await newKey({ rateLimit: 1, scopes: ['guests:read'] })
    await spend(k.key, '/v1/guests?perPage=1')
    const res = await send('GET', '/v1/properties', auth(k.key))
    expectProblem(res, { code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties' })
    expect(res.headers['ratelimit-remaining']).toBeUndefined()
  })

  it('answers an unknown key that fails no earlier step 401, with no quota headers', async () => {
    const res = await send('GET', '/v1/properties', auth('svc_live_unknown'))
    expectProblem(res, { code: 'INVALID_API_KEY', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' } })
    expect(res.headers['ratelimit-limit']).toBeUndefined()
  })
})

describe('step 4 (credential) before the body is read (step 6)', () => {
  it('answers malformed JSON with an unknown key 401', async () => {
    expectProblem(await send('POST', '/v1/guests', { ...auth('svc_live_unknown'), 'content-type': 'application/json' }, '{"firstName":'), {
      code: 'INVALID_API_KEY', instance: '/v1/guests', headers: { 'www-authenticate': 'Bearer' },
    })
  })
})

describe('step 5 (quota) before step 6 (input)', () => {
  it('answers an unknown parameter over the quota 429', async () => {
    const k = await newKey({ rateLimit: 1 })
    await spend(k.key)
    expectProblem(await send('GET', '/v1/properties?bogus=1', auth(k.key)), {
      code: 'RATE_LIMITED', instance: '/v1/properties', headers: { 'ratelimit-limit': '1', 'ratelimit-remaining': '0' },
    })
  })

  it('answers a path parameter that is no UUID over the quota 429', async () => {
    const k = await newKey({ rateLimit: 1 })
    await spend(k.key)
    expectProblem(await send('GET', '/v1/properties/not-a-uuid', auth(k.key)), { code: 'RATE_LIMITED', instance: '/v1/properties/not-a-uuid' })
  })

  it('answers malformed JSON over the quota 429', async () => {
    const k = await newKey({ rateLimit: 1 })
    await spend(k.key, '/v1/guests?perPage=1')
    expectProblem(await send('POST', '/v1/guests', { ...auth(k.key), 'content-type': 'application/json' }, '{"firstName":'), {
      code: 'RATE_LIMITED', instance: '/v1/guests',
    })
  })
})

describe('step 6 (input) before test mode and step 7 (resource)', () => {
  it('answers a bad query parameter of a test key on a route without sandbox 400', async () => {
    const k = await newKey({ mode: 'test' })
    expectProblem(await send('GET', '/v1/properties?page=0', auth(k.key)), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties',
      errors: [{ field: 'page', code: 'OUT_OF_RANGE', detail: 'Must be between 1 and 10000.' }],
    })
  })

  it('answers malformed JSON of a test key on a route without sandbox 400 MALFORMED_JSON', async () => {
    const k = await newKey({ mode: 'test' })
    service.received.length = 0
    expectProblem(await send('POST', '/v1/guests', { ...auth(k.key), 'content-type': 'application/json' }, '{"firstName":'), {
      code: 'MALFORMED_JSON', instance: '/v1/guests',
    })
    expect(service.received).toEqual([])
  })

  it('answers a bad query parameter for an unknown property 400', async () => {
    expectProblem(await send('GET', '/v1/rooms?status=sparkling', { ...auth(key), 'service-property-id': UNKNOWN_ID }), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/rooms', errors: expect.any(Array) as never,
    })
  })

  it('answers a bad query parameter before reading malformed JSON', async () => {
    expectProblem(await send('PATCH', `/v1/guests/${UNKNOWN_ID}?with=everything`, { ...auth(key), 'content-type': 'application/json' }, '{"firstName":'), {
      code: 'INVALID_QUERY_PARAMETER', instance: `/v1/guests/${UNKNOWN_ID}`, errors: expect.any(Array) as never,
    })
  })
})

describe('test mode before step 7 (resource)', () => {
  it('answers a test key asking for an unknown property, on a route without sandbox, 403 TEST_MODE_UNAVAILABLE', async () => {
    const k = await newKey({ mode: 'test' })
    expectProblem(await send('GET', `/v1/properties/${UNKNOWN_ID}`, auth(k.key)), { code: 'TEST_MODE_UNAVAILABLE', instance: `/v1/properties/${UNKNOWN_ID}` })
  })

  it('answers a test key naming a property it may not use 403 TEST_MODE_UNAVAILABLE', async () => {
    const [allowed, other] = acmeHotels() as [Hotel, Hotel]
    const k = await newKey({ mode: 'test', properties: [String(allowed.hotel_uuid)] })
    expectProblem(await send('GET', '/v1/rooms', { ...auth(k.key), 'service-property-id': String(other.hotel_uuid) }), {
      code: 'TEST_MODE_UNAVAILABLE', instance: '/v1/rooms',
    })
  })
})

describe('step 7 (resource) before step 8 (upstream)', () => {
  it('answers a property the key may not use 403 without calling the failing service', async () => {
    const [allowed, other] = acmeHotels() as [Hotel, Hotel]
    const k = await newKey({ properties: [String(allowed.hotel_uuid)] })
    service.received.length = 0
    service.setFailure({ mode: 'html-5xx', status: 503 })
    try {
      expectProblem(await send('GET', '/v1/rooms', { ...auth(k.key), 'service-property-id': String(other.hotel_uuid) }), {
        code: 'PROPERTY_ACCESS_DENIED', instance: '/v1/rooms', detail: `Your API key is not authorised for property '${String(other.hotel_uuid)}'.`,
      })
      expectProblem(await send('GET', '/v1/rooms', { ...auth(k.key), 'service-property-id': UNKNOWN_ID }), {
        code: 'PROPERTY_NOT_FOUND', instance: '/v1/rooms', detail: `No property with id '${UNKNOWN_ID}' exists for this brand.`,
      })
    } finally {
      service.setFailure(undefined)
    }
    expect(service.received).toEqual([])
  })
})

describe('step 7: unknown and other-brand ids are 404, also for a key with an allow-list (docs/architecture.md, "Properties")', () => {
  it.each([
    ['an unknown id', () => UNKNOWN_ID],
    ["another brand's property", () => String(globexHotel().hotel_uuid)],
  ])('answers %s 404 PROPERTY_NOT_FOUND', async (_name, id) => {
    const [allowed] = acmeHotels() as [Hotel]
    const k = await newKey({ properties: [String(allowed.hotel_uuid)] })
    expectProblem(await send('GET', `/v1/properties/${id()}`, auth(k.key)), {
      code: 'PROPERTY_NOT_FOUND', instance: `/v1/properties/${id()}`, detail: `No property with id '${id()}' exists for this brand.`,
    })
    expectProblem(await send('GET', '/v1/rooms', { ...auth(k.key), 'service-property-id': id() }), {
      code: 'PROPERTY_NOT_FOUND', instance: '/v1/rooms', detail: `No property with id '${id()}' exists for this brand.`,
    })
  })

  it('answers a property of the brand outside the allow-list 403 PROPERTY_ACCESS_DENIED', async () => {
    const [allowed, other] = acmeHotels() as [Hotel, Hotel]
    const k = await newKey({ properties: [String(allowed.hotel_uuid)] })
    expectProblem(await send('GET', `/v1/properties/${String(other.hotel_uuid)}`, auth(k.key)), {
      code: 'PROPERTY_ACCESS_DENIED', instance: `/v1/properties/${String(other.hotel_uuid)}`,
      detail: `Your API key is not authorised for property '${String(other.hotel_uuid)}'.`,
    })
  })
})
