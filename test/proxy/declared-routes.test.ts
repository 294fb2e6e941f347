import { shipped } from '../helpers/declared.js'
import { connect } from 'node:net'
import { Readable } from 'node:stream'
import v8 from 'node:v8'
import { runInNewContext } from 'node:vm'
import { request } from 'undici'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { Hotel } from '../../mocks/pms/data.js'
import { MockPms } from '../../mocks/pms/server.js'
import { generateGuests, messagesOf, reservationsOf, roomsOf, type Guest } from '../../mocks/service/data.js'
import { MockService, problemBody } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { ACME_HOST, GLOBEX_HOST } from '../helpers/config.js'
import { TestGateway, type Answer, type CallOptions } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { eventually } from '../helpers/redis.js'
import { oneOf, secondsBetween, timed } from '../helpers/window.js'

// Declared routes (docs/architecture.md, "Declared routes") over real sockets: the gateway with
// the routes of the shipped config file, the stand-in PMS (and its sandbox) and the stand-in
// service (and its sandbox). Every row of "Order of checks", "What the service receives" and
// "What the partner receives".

const SERVICE_TOKEN = 'svc-live-token'
const SANDBOX_TOKEN = 'svc-sandbox-token'

// Every answer a test saw, checked at the end for anything of the service's internals.
const answers: Answer[] = []
const INTERNAL = ['internal-bookings', 'x-powered-by', 'set-cookie', 'session=internal', 'x-internal-shard', 'eu-west-3', 'NullPointerException',
  'bookings-lb', 'build 4c1d2e', 'rejected by bookings', SERVICE_TOKEN, SANDBOX_TOKEN, '127.0.0.1', 'x-service-token']

function remember(answer: Answer): Answer {
  answers.push(answer)
  return answer
}


let t: TestGateway
let service: MockService
let sandboxService: MockService
let key: string
let keyId: string

/** A request with the test's key unless `key` is given (undefined: none). */
async function call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  return remember(await t.call(method, path, { userAgent: 'routes-test/1.0', ...options, key: 'key' in options ? options.key : key }))
}

function acmeHotels(pms: MockPms, lifecycle?: string): Hotel[] {
  return pms.hotels.filter((h) => h.chain_code === 'ACME' && (lifecycle === undefined || h.lifecycle === lifecycle))
}

/** Asserts a passed-on success: the service's status and whole body, and the gateway's own headers. */
function expectPassed(res: Answer, status: number, data: unknown, pagination?: { page: number; perPage: number; total: number }): void {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status })
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
  expect(res.headers['x-content-type-options']).toBe('nosniff')
  expect(res.headers['cache-control']).toBe('no-store')
  const requestId = res.headers['service-request-id']
  expect(requestId).toMatch(REQUEST_ID)
  expect(res.headers['ratelimit-limit']).toBe('1000')
  expect(JSON.parse(res.body)).toEqual({
    data,
    meta: { requestId, timestamp: expect.stringMatching(TIMESTAMP), ...(pagination === undefined ? {} : { pagination }) },
  })
}

/** Only the headers a partner may see from the service, and the gateway's own. */
function expectOnlyAllowedHeaders(res: Answer): void {
  const allowed = new Set(['content-type', 'content-length', 'content-language', 'link', 'location', 'service-request-id', 'x-content-type-options',
    'cache-control', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'ratelimit', 'service-correlation-id', 'date', 'connection', 'keep-alive',
    'transfer-encoding', 'retry-after', 'www-authenticate', 'allow'])
  expect(Object.keys(res.headers).filter((name) => !allowed.has(name))).toEqual([])
}

beforeAll(async () => {
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  sandboxService = await new MockService({ token: SANDBOX_TOKEN, seed: 99 }).listen()
  t = await TestGateway.start({
    sandbox: true,
    config: {
      ...shipped,
      upstreams: {
        ...shipped.upstreams,
        // A service with no sandbox: test keys may not use its route.
        notes: { url: 'http://127.0.0.1:9', tokenHeader: 'X-Service-Token' },
      } as FileConfigInput['upstreams'],
      routes: [
        ...shipped.routes,
        { path: '/v1/notes', methods: ['GET'], scope: 'brand', upstream: 'notes', upstreamPath: '/partner/v1/notes', pathParams: {}, query: {} },
      ],
    },
    env: {
      UPSTREAM_BOOKINGS_URL: service.url,
      UPSTREAM_BOOKINGS_SANDBOX_URL: sandboxService.url,
      UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN,
      UPSTREAM_BOOKINGS_SANDBOX_TOKEN: SANDBOX_TOKEN,
      UPSTREAM_NOTES_TOKEN: 'notes-token',
    },
  })
  const created = await t.keyWithId()
  key = created.key
  keyId = created.id
})

afterAll(async () => {
  await t.close()
  await service.close()
  await sandboxService.close()
  expect(answers.length).toBeGreaterThan(40)
  for (const answer of answers) {
    const text = `${JSON.stringify(answer.headers)}\n${answer.body}`
    for (const leak of INTERNAL) expect(text, `answer leaks ${leak}`).not.toContain(leak)
  }
})

beforeEach(() => {
  service.received.length = 0
  sandboxService.received.length = 0
})
afterEach(() => {
  service.setFailure(undefined)
  service.resetGuests()
})

describe('order of checks: step 1, the route', () => {
  it('refuses a trailing slash, names the right case, and matches a declared path exactly', async () => {
    expectProblem(await call('GET', '/v1/guests/'), { code: 'TRAILING_SLASH_NOT_ALLOWED', instance: '/v1/guests/', detail: 'Remove the trailing slash: request /v1/guests.' })
    expectProblem(await call('GET', '/v1/Rooms'), { code: 'PATH_CASE_MISMATCH', instance: '/v1/Rooms', detail: 'Paths are case-sensitive: request /v1/rooms.' })
    expectProblem(await call('GET', '/v1/rooms/extra'), { code: 'ROUTE_NOT_FOUND', instance: '/v1/rooms/extra', detail: 'There is no endpoint at /v1/rooms/extra.' })
    expectProblem(await call('GET', '/v1/guests/x/y'), { code: 'ROUTE_NOT_FOUND', instance: '/v1/guests/x/y' })
    expect(service.received).toEqual([])
  })

  it.each([
    ['DELETE', '/v1/guests', 'GET, HEAD, POST'],
    ['PUT', '/v1/guests/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', 'GET, HEAD, PATCH'],
    ['POST', '/v1/rooms', 'GET, HEAD'],
  ])('answers %s %s with 405 and Allow: %s', async (method, path, allow) => {
    expectProblem(await call(method, path), {
      code: 'METHOD_NOT_ALLOWED', instance: path, headers: { allow }, detail: `${path} does not support ${method}; it supports ${allow}.`,
    })
  })

  it('answers a declared path on a host of no brand with 404', async () => {
    expectProblem(await call('GET', '/v1/guests', { host: 'api.unknown.example' }), {
      code: 'ROUTE_NOT_FOUND', instance: '/v1/guests', detail: "No API is served at host 'api.unknown.example'.",
    })
  })
})

describe('order of checks: step 3, headers and body', () => {
  const propertyId = () => String(acmeHotels(t.pms, 'LIVE')[0]?.hotel_uuid)

  it('requires Service-Property-Id on a property-scoped route', async () => {
    expectProblem(await call('GET', '/v1/rooms'), {
      code: 'MISSING_REQUIRED_HEADER', instance: '/v1/rooms', detail: 'The Service-Property-Id header is required.',
      errors: [{ field: 'Service-Property-Id', code: 'REQUIRED', detail: 'Send the id of the property this request is about, as listed by GET /v1/properties.' }],
    })
  })

  it('refuses a Service-Property-Id that is not a UUID', async () => {
    expectProblem(await call('GET', '/v1/rooms', { headers: { 'service-property-id': 'hotel-1' } }), {
      code: 'INVALID_HEADER', instance: '/v1/rooms', detail: 'Invalid Service-Property-Id header.',
      errors: [{ field: 'Service-Property-Id', code: 'INVALID_FORMAT', detail: 'Must be a property id (a UUID) as listed by GET /v1/properties.' }],
    })
  })

  it('refuses Service-Property-Id on a brand-wide route', async () => {
    expectProblem(await call('GET', '/v1/guests', { headers: { 'service-property-id': propertyId() } }), {
      code: 'HEADER_NOT_ALLOWED', instance: '/v1/guests', detail: 'This endpoint takes no Service-Property-Id header.',
      errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
    })
  })

  it('refuses a body on GET', async () => {
    expectProblem(await call('GET', '/v1/guests', { body: '{"page":1}' }), {
      code: 'UNEXPECTED_BODY', instance: '/v1/guests', detail: 'This endpoint takes no request body; send parameters in the query string.',
    })
  })

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/jsonp'])('refuses a body of type %s with 415', async (type) => {
    expectProblem(await call('POST', '/v1/guests', { body: '{"firstName":"Ann"}', headers: { 'content-type': type } }), {
      code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests', detail: `Request bodies must be application/json; the Content-Type was '${type}'.`,
    })
    expect(service.received).toEqual([])
  })

  it('refuses a body over body.maxBytes by its Content-Length, before reading it', async () => {
    expectProblem(await call('POST', '/v1/guests', { body: `{"pad":"${'x'.repeat(70_000)}"}` }), {
      code: 'PAYLOAD_TOO_LARGE', instance: '/v1/guests', detail: 'The request body exceeds 65536 bytes.',
    })
  })

  it('refuses a chunked body that grows over body.maxBytes while it is read', async () => {
    const chunks = Readable.from(Array.from({ length: 20 }, () => Buffer.from(`{"pad":"${'x'.repeat(5000)}"}`)))
    const res = await request(`${t.url}/v1/guests`, {
      method: 'POST', body: chunks,
      headers: { host: ACME_HOST, 'user-agent': 'routes-test/1.0', authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    })
    expectProblem(remember({ statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }), {
      code: 'PAYLOAD_TOO_LARGE', instance: '/v1/guests',
    })
    expect(service.received).toEqual([])
  })
})

describe('order of checks: steps 4 to 6', () => {
  it('checks the key before reading the body', async () => {
    // The body is announced and never sent: the answer must not wait for it.
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect((new URL(t.url)).port as unknown as number, '127.0.0.1', () => {
        socket.write(`POST /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer svc_live_nope\r\n`
          + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"firstName":')
      })
      let text = ''
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString()
        if (text.includes('\r\n\r\n') && text.includes('"timestamp"')) {
          socket.destroy()
          resolve(text)
        }
      })
      socket.on('error', reject)
    })
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized')
    expect(answer).toContain('"code":"INVALID_API_KEY"')
  })

  it('refuses a key of another brand', async () => {
    const globexKey = await t.key({ brand: 'globex' })
    expectProblem(await call('GET', '/v1/guests', { key: globexKey }), { code: 'BRAND_ACCESS_DENIED', instance: '/v1/guests' })
    const res = await call('GET', '/v1/guests?perPage=2', { key: globexKey, host: GLOBEX_HOST })
    expectPassed(res, 200, generateGuests('globex').slice(0, 2), { page: 1, perPage: 2, total: generateGuests('globex').length })
  })

  it("counts the key's quota on declared routes too", async () => {
    const limited = await t.key({ rateLimit: 1 })
    const all = generateGuests('acme')
    const first = await call('GET', '/v1/guests?perPage=1', { key: limited })
    expect({ limit: first.headers['ratelimit-limit'], remaining: first.headers['ratelimit-remaining'] }).toEqual({ limit: '1', remaining: '0' })
    expect(JSON.parse(first.body).data).toEqual(all.slice(0, 1))
    // The shipped config's window: 60 s.
    const { answer: refused, secondsLeft } = await timed(60, async () => call('GET', '/v1/guests?perPage=1', { key: limited }))
    expectProblem(refused, {
      code: 'RATE_LIMITED', instance: '/v1/guests',
      headers: { 'ratelimit-limit': '1', 'ratelimit-remaining': '0', 'ratelimit-reset': oneOf(secondsLeft), 'retry-after': oneOf(secondsLeft) },
    })
    expect(service.received).toHaveLength(1)
  })

  it('refuses an unknown query parameter with a suggestion', async () => {
    expectProblem(await call('GET', '/v1/guests?per_page=5&sort=name'), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/guests', detail: "Unknown query parameters 'per_page', 'sort'. 'per_page': Did you mean 'perPage'?",
      errors: [
        { field: 'per_page', code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'perPage'?" },
        { field: 'sort', code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter; this endpoint accepts 'page', 'perPage', 'email'." },
      ],
    })
  })

  it('checks integers, strings, enums and lists by the route\'s rules', async () => {
    expectProblem(await call('GET', `/v1/guests?page=0&perPage=1.5&email=${'a'.repeat(255)}`), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/guests', detail: "Invalid query parameters 'page', 'perPage', 'email'.",
      errors: [
        { field: 'page', code: 'OUT_OF_RANGE', detail: 'Must be between 1 and 9007199254740991.' },
        { field: 'perPage', code: 'INVALID_FORMAT', detail: 'Must be a whole number written with digits only.' },
        { field: 'email', code: 'INVALID_FORMAT', detail: 'Must be 1 to 254 characters.' },
      ],
    })
    const id = String(acmeHotels(t.pms, 'LIVE')[0]?.hotel_uuid)
    expectProblem(await call('GET', '/v1/rooms?status=broken', { headers: { 'service-property-id': id } }), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/rooms', detail: "Invalid query parameter 'status'.",
      errors: [{ field: 'status', code: 'INVALID_ENUM_VALUE', detail: "Must be one of 'clean', 'dirty', 'out-of-order'." }],
    })
    const guest = generateGuests('acme')[0] as Guest
    for (const [value, error] of [
      ['messages,notes', { field: 'with', code: 'INVALID_ENUM_VALUE', detail: "'notes' is not one of 'messages', 'reservations'." }],
      ['messages,messages', { field: 'with', code: 'INVALID_FORMAT', detail: "Give a comma-separated list of 'messages', 'reservations', each at most once." }],
      ['messages,', { field: 'with', code: 'INVALID_FORMAT', detail: "Give a comma-separated list of 'messages', 'reservations', each at most once." }],
    ] as const) {
      expectProblem(await call('GET', `/v1/guests/${guest.id}?with=${value}`), {
        code: 'INVALID_QUERY_PARAMETER', instance: `/v1/guests/${guest.id}`, detail: "Invalid query parameter 'with'.", errors: [error],
      })
    }
    expect(service.received).toEqual([])
  })

  it('refuses a path parameter that breaks its rule', async () => {
    expectProblem(await call('GET', '/v1/guests/not-a-uuid'), {
      code: 'INVALID_PATH_PARAMETER', instance: '/v1/guests/not-a-uuid', detail: "'guestId' must be a UUID.",
      errors: [{ field: 'guestId', code: 'INVALID_FORMAT', detail: 'Must be a UUID such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10.' }],
    })
  })

  it('refuses a body that is not well-formed JSON, after the parameters', async () => {
    expectProblem(await call('POST', '/v1/guests', { body: '{"firstName": "Ann",' }), {
      code: 'MALFORMED_JSON', instance: '/v1/guests', detail: 'The request body is not well-formed JSON.',
    })
    expectProblem(await call('POST', '/v1/guests?bogus=1', { body: '{"firstName": "Ann",' }), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/guests', errors: [{ field: 'bogus', code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter; this endpoint accepts 'page', 'perPage', 'email'." }],
    })
    expect(service.received).toEqual([])
  })
})

describe('order of checks: step 7, the property', () => {
  it('refuses a property the key may not use with 403, without calling the service', async () => {
    const [mine, other] = acmeHotels(t.pms, 'LIVE').map((h) => String(h.hotel_uuid)) as [string, string]
    const limited = await t.key({ properties: [mine] })
    expectProblem(await call('GET', '/v1/rooms', { key: limited, headers: { 'service-property-id': other } }), {
      code: 'PROPERTY_ACCESS_DENIED', instance: '/v1/rooms', detail: `Your API key is not authorised for property '${other}'.`,
    })
    expect(service.received).toEqual([])
  })

  it("answers an unknown property and another brand's with 404", async () => {
    const globex = String(t.pms.hotels.find((h) => h.chain_code === 'GLBX')?.hotel_uuid)
    for (const id of [globex, '00000000-0000-4000-8000-000000000000']) {
      expectProblem(await call('GET', '/v1/rooms', { headers: { 'service-property-id': id } }), {
        code: 'PROPERTY_NOT_FOUND', instance: '/v1/rooms', detail: `No property with id '${id}' exists for this brand.`,
      })
    }
    expect(service.received).toEqual([])
  })
})

describe('what the service receives', () => {
  it('gets the method, the filled upstreamPath, the query rebuilt in the order sent, and the identity headers', async () => {
    const hotel = acmeHotels(t.pms, 'ONBOARDING')[0] as Hotel
    const id = String(hotel.hotel_uuid)
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const res = await call('GET', '/v1/rooms?status=dirty&perPage=5', {
      headers: {
        'service-property-id': id.toUpperCase(), traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'partner=1',
        cookie: 'session=partner', 'x-service-brand': 'globex', 'x-service-mode': 'live', 'x-service-key-id': 'key_forged',
        'x-service-token': 'forged', 'x-service-property-id': '00000000-0000-4000-8000-000000000000', 'accept-language': 'de',
        'service-correlation-id': 'corr-7',
      },
    })
    const rooms = (roomsOf(id) ?? []).filter((r) => r.status === 'dirty')
    expectPassed(res, 200, rooms.slice(0, 5), { page: 1, perPage: 5, total: rooms.length })
    expect(res.headers['service-correlation-id']).toBe('corr-7')
    expect(service.received).toHaveLength(1)
    const sent = service.received[0]
    expect(sent).toMatchObject({ method: 'GET', path: `/partner/v1/properties/${id}/rooms?status=dirty&perPage=5`, body: '' })
    const headers = sent?.headers ?? {}
    expect(headers).toMatchObject({
      'x-service-token': SERVICE_TOKEN,
      'x-request-id': res.headers['service-request-id'],
      'x-service-key-id': keyId,
      'x-service-brand': 'acme',
      'x-service-mode': 'live',
      'x-service-property-id': id,
      tracestate: 'partner=1',
      'accept-language': 'de',
      'user-agent': 'routes-test/1.0',
    })
    expect(headers['x-service-key-id']).not.toBe('key_forged')
    expect(headers.traceparent).toMatch(new RegExp(`^00-${traceId}-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$`))
    for (const name of ['authorization', 'cookie', 'service-property-id']) expect(headers[name], name).toBeUndefined()
  })

  it('gets the body bytes unchanged, typed plain application/json, and answers 201 with Location mapped to the public path', async () => {
    const body = '{ "lastName" : "Ørsted",\n  "firstName":"Zoë", "email": "zoe+test@example.com" }'
    const res = await call('POST', '/v1/guests', { body, headers: { 'content-type': 'application/json; charset=utf-8' } })
    const created = service.guestsOf('acme').find((g) => g.email === 'zoe+test@example.com') as Guest
    expectPassed(res, 201, created)
    expect(res.headers.location).toBe(`/v1/guests/${created.id}`)
    expectOnlyAllowedHeaders(res)
    expect(service.received.map((r) => ({ method: r.method, path: r.path, body: r.body, type: r.headers['content-type'] })))
      .toEqual([{ method: 'POST', path: '/partner/v1/guests', body, type: 'application/json' }])
  })

  it('gets a UUID path parameter in lower case, and the relations asked for', async () => {
    const guest = generateGuests('acme')[3] as Guest
    const res = await call('GET', `/v1/guests/${guest.id.toUpperCase()}?with=reservations,messages`)
    expectPassed(res, 200, { ...guest, messages: messagesOf(guest), reservations: reservationsOf(guest, 'acme') })
    // Rebuilt from the validated list: each value percent-encoded, its comma too.
    expect(service.received.map((r) => r.path)).toEqual([`/partner/v1/guests/${guest.id}?with=reservations%2Cmessages`])
  })

  it('sends test keys to the sandbox, with its token, and never to the live service', async () => {
    const testKey = await t.key({ mode: 'test' })
    const sandboxHotel = t.sandbox?.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE') as Hotel
    const id = String(sandboxHotel.hotel_uuid)
    const res = await call('GET', '/v1/rooms', { key: testKey, headers: { 'service-property-id': id } })
    const rooms = roomsOf(id, 99) ?? []
    expectPassed(res, 200, rooms.slice(0, 20), { page: 1, perPage: 20, total: rooms.length })
    const guests = await call('GET', '/v1/guests?perPage=3', { key: testKey })
    expectPassed(guests, 200, generateGuests('acme', 99).slice(0, 3), { page: 1, perPage: 3, total: generateGuests('acme', 99).length })
    expect(service.received).toEqual([])
    expect(sandboxService.received.map((r) => [r.headers['x-service-token'], r.headers['x-service-mode']])).toEqual([[SANDBOX_TOKEN, 'test'], [SANDBOX_TOKEN, 'test']])
  })

  it('answers a test key 403 TEST_MODE_UNAVAILABLE on a route whose service has no sandbox', async () => {
    const testKey = await t.key({ mode: 'test' })
    expectProblem(await call('GET', '/v1/notes', { key: testKey }), {
      code: 'TEST_MODE_UNAVAILABLE', instance: '/v1/notes', detail: 'This endpoint has no sandbox: test keys (svc_test_) cannot use it; use a live key.',
    })
    // After steps 1 to 6: a bad parameter is still named first.
    expectProblem(await call('GET', '/v1/notes?x=1', { key: testKey }), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/notes', errors: [{ field: 'x', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter; this endpoint accepts none.' }],
    })
  })
})

describe('what the partner receives', () => {
  const guestPath = () => `/v1/guests/${(generateGuests('acme')[0] as Guest).id}`

  it('passes a 2xx JSON answer on with the allow-listed headers only', async () => {
    const res = await call('GET', '/v1/guests?perPage=4&page=2')
    const all = generateGuests('acme')
    expectPassed(res, 200, all.slice(4, 8), { page: 2, perPage: 4, total: all.length })
    expectOnlyAllowedHeaders(res)
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)))
  })

  it('passes a 204 with no body', async () => {
    service.setFailure({ mode: 'no-content', times: 1 })
    const res = await call('PATCH', guestPath(), { body: '{}', headers: { 'service-correlation-id': 'corr-204' } })
    expect({ status: res.statusCode, body: res.body, type: res.headers['content-type'] }).toEqual({ status: 204, body: '', type: undefined })
    // A success: the correlation id is echoed.
    expect(res.headers['service-correlation-id']).toBe('corr-204')
    expect(res.headers['service-request-id']).toMatch(REQUEST_ID)
    expectOnlyAllowedHeaders(res)
  })

  it('passes a redirect with its Location mapped to the public path', async () => {
    service.setFailure({ mode: 'redirect', times: 1 })
    const res = await call('GET', '/v1/guests', { headers: { 'service-correlation-id': 'corr-302' } })
    // A redirect is no success: the correlation id is echoed on 2xx only.
    expect({ status: res.statusCode, location: res.headers.location, body: res.body, correlation: res.headers['service-correlation-id'] })
      .toEqual({ status: 302, location: `/v1/guests/${(service.guestsOf('acme')[0] as Guest).id}`, body: '', correlation: undefined })
  })

  it.each([
    ['another host', 'http://bookings.internal/partner/v1/guests/1'],
    ['an internal path', '/internal/admin'],
    ['a path of no declared route', '/partner/v1/invoices/7'],
  ])('drops a Location to %s, which maps to no public path', async (_name, location) => {
    service.setFailure({ mode: 'redirect', location, times: 1 })
    const res = await call('GET', '/v1/guests')
    expect({ status: res.statusCode, location: res.headers.location, body: res.body }).toEqual({ status: 302, location: undefined, body: '' })
    expectOnlyAllowedHeaders(res)
  })

  it("passes the service's problem+json 4xx on, naming the partner's request: 404 and 422 with its field errors", async () => {
    const missing = '00000000-0000-4000-8000-000000000001'
    const notFound = await call('GET', `/v1/guests/${missing}`, { headers: { 'service-correlation-id': 'corr-404' } })
    expect(notFound.statusCode).toBe(404)
    expect(notFound.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(notFound.headers['service-correlation-id']).toBeUndefined()
    expect(JSON.parse(notFound.body)).toEqual({
      ...problemBody('GUEST_NOT_FOUND', `No guest with id '${missing}' exists for this brand.`, `/v1/guests/${missing}`, notFound.headers['service-request-id'] as string),
      timestamp: expect.stringMatching(TIMESTAMP),
    })
    const invalid = await call('POST', '/v1/guests', { body: '{"firstName":"","email":"nope","vip":true}' })
    expect(invalid.statusCode).toBe(422)
    expect(JSON.parse(invalid.body)).toEqual({
      ...problemBody('VALIDATION_FAILED', 'The request body failed validation.', '/v1/guests', invalid.headers['service-request-id'] as string, [
        { field: 'firstName', code: 'INVALID_FORMAT', detail: 'firstName must be a string of 1 to 100 characters.' },
        { field: 'lastName', code: 'REQUIRED', detail: 'lastName is required.' },
        { field: 'email', code: 'INVALID_FORMAT', detail: 'email must be an email address such as jane@example.com.' },
        { field: 'vip', code: 'NOT_ALLOWED', detail: 'Unknown field; allowed: firstName, lastName, email, phone.' },
      ]),
      timestamp: expect.stringMatching(TIMESTAMP),
    })
    expectOnlyAllowedHeaders(invalid)
  })

  it.each([
    ['a 2xx that is not JSON', { mode: 'non-json' as const }],
    ['a 4xx that is not problem+json', { mode: 'plain-4xx' as const }],
    ["a 401 to the gateway's token", { mode: 'unauthorized' as const }],
    // A 407 (the gateway's own proxy credentials refused) is the gateway's fault, even as problem+json.
    ['a 407 problem+json', { mode: 'problem-4xx' as const, status: 407 }],
    ['a 407 with no body', { mode: 'empty' as const, status: 407 }],
  ])('answers %s with 500 INTERNAL_ERROR', async (_name, failure) => {
    service.setFailure({ ...failure, times: 1 })
    const res = await call('GET', guestPath())
    expectProblem(res, { code: 'INTERNAL_ERROR', instance: guestPath(), detail: 'An unexpected error occurred; it has been logged.' })
  })

  it.each([
    ['an HTML 502', { mode: 'html-5xx' as const, status: 502 }, '1'],
    ['an HTML 503', { mode: 'html-5xx' as const, status: 503 }, '1'],
    ['a JSON 500', { mode: 'json-500' as const }, '1'],
    ['a 429 with Retry-After: 7', { mode: 'throttle' as const, retryAfter: 7 }, '7'],
  ])('answers %s with 503 and Retry-After', async (_name, failure, retryAfter) => {
    service.setFailure({ ...failure, times: 1 })
    expectProblem(await call('GET', guestPath()), {
      code: 'SERVICE_UNAVAILABLE', instance: guestPath(), headers: { 'retry-after': retryAfter },
      detail: `The service is temporarily unavailable; retry in ${retryAfter} second${retryAfter === '1' ? '' : 's'}.`,
    })
    // A 503 is passed on, never retried.
    expect(service.received).toHaveLength(1)
  })

  it('retries a GET once after a connection lost before any answer, never a POST', async () => {
    service.setFailure({ mode: 'drop', times: 1 })
    const all = generateGuests('acme')
    expectPassed(await call('GET', '/v1/guests?perPage=1'), 200, all.slice(0, 1), { page: 1, perPage: 1, total: all.length })
    expect(service.received).toHaveLength(2)
    service.received.length = 0
    service.setFailure({ mode: 'drop', times: 1 })
    expectProblem(await call('POST', '/v1/guests', { body: '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}' }), {
      code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': '1' },
    })
    expect(service.received).toHaveLength(1)
  })

  it('cuts the partner off when the service resets mid-answer, having passed on what came', async () => {
    service.setFailure({ mode: 'reset', times: 1 })
    const res = await request(`${t.url}/v1/guests`, { headers: { host: ACME_HOST, 'user-agent': 'routes-test/1.0', authorization: `Bearer ${key}` } })
    // The answer had begun (it is streamed): it cannot become a 503 any more, nor be retried.
    expect(res.statusCode).toBe(200)
    await expect(res.body.text()).rejects.toThrow()
    expect(service.received).toHaveLength(1)
    // The gateway goes on serving.
    expect((await call('GET', '/v1/guests?perPage=1')).statusCode).toBe(200)
  })

  it('logs the upstream, its status and the time it took', async () => {
    service.setFailure({ mode: 'html-5xx', status: 502, times: 1 })
    const res = await call('GET', guestPath())
    const line = t.logs.records().find((r) => r.reqId === res.headers['service-request-id'] && r.msg === 'request')
    expect(line).toMatchObject({
      route: '/v1/guests/{guestId}', status: 503, code: 'SERVICE_UNAVAILABLE', upstream: 'bookings', upstreamStatus: 502, upstreamMs: expect.any(Number),
    })
  })
})

describe('HEAD, operations and streaming', () => {
  it('answers HEAD with the status and headers of GET and no body', async () => {
    for (const path of ['/v1/guests?perPage=2', `/v1/guests/${(generateGuests('acme')[1] as Guest).id}`, '/v1/guests/not-a-uuid']) {
      const [got, head] = [await call('GET', path), await call('HEAD', path)]
      expect({ status: head.statusCode, body: head.body }).toEqual({ status: got.statusCode, body: '' })
      // undici closes the connection after a HEAD (and says so), so the connection headers differ.
      const comparable = (h: Answer['headers']) => {
        const { date: _d, 'service-request-id': _r, 'ratelimit-remaining': _rr, 'ratelimit-reset': _rs, ratelimit: _rl, connection: _c, 'keep-alive': _k, ...rest } = h
        return rest
      }
      expect(comparable(head.headers)).toEqual(comparable(got.headers))
    }
  })

  it('streams a 5 MB answer without holding it: the gateway grows by far less than its size', async () => {
    v8.setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const live = (): number => {
      gc()
      const usage = process.memoryUsage()
      return usage.heapUsed + usage.arrayBuffers
    }
    const size = 5 * 1024 * 1024
    service.setFailure({ mode: 'large', bytes: size, times: 1 })
    const before = live()
    const res = await request(`${t.url}/v1/guests`, { headers: { host: ACME_HOST, 'user-agent': 'routes-test/1.0', authorization: `Bearer ${key}` } })
    expect(res.statusCode).toBe(200)
    // The partner reads one chunk and stops: what the service sends meanwhile waits in socket
    // buffers (backpressure), not in the gateway. This process also holds the service and the
    // partner, so it stands for all three.
    const reader = res.body[Symbol.asyncIterator]()
    let received = ((await reader.next()).value as Buffer).length
    // On a loaded machine chunks may still be on their way between the sockets when first
    // measured: wait for the pipeline to settle. A gateway that held the answer would stay
    // above the bound however long it is given, as the partner reads nothing meanwhile.
    let held = Number.POSITIVE_INFINITY
    await eventually(async () => {
      held = live() - before
      return held < size / 2
    }, 10_000, 200)
    expect(held, `held ${held} bytes of a ${size}-byte answer`).toBeLessThan(size / 2)
    // The tail across chunks: the last chunk alone may hold only a few bytes of the end.
    let tail = ''
    for (let chunk = await reader.next(); chunk.done !== true; chunk = await reader.next()) {
      received += (chunk.value as Buffer).length
      tail = (tail + (chunk.value as Buffer).toString('latin1')).slice(-512)
    }
    expect(received).toBeGreaterThanOrEqual(size - 4096)
    expect(tail).toMatch(/\],"meta":\{"requestId":"req_[0-9a-f]{32}","timestamp":"[^"]+"\}\}$/)
  })

  it('shows each upstream in /status and the metrics, and names a route by its declared path', async () => {
    await t.gateway.admin.ready()
    await call('GET', `/v1/guests/${(generateGuests('acme')[2] as Guest).id}`)
    const status = await t.gateway.admin.inject({ url: '/status' })
    expect(JSON.parse(status.body)).toMatchObject({
      upstreams: {
        pms: { breaker: 'closed' }, pmsSandbox: { breaker: 'closed' },
        bookings: { breaker: 'closed', retryAfterSeconds: 0, callsInFlight: 0, stats: { successes: expect.any(Number), failures: expect.any(Number), timeouts: 0, rejects: 0 } },
        bookingsSandbox: { breaker: 'closed', retryAfterSeconds: 0, callsInFlight: 0 },
        notes: { breaker: 'closed' },
      },
    })
    const metrics = (await t.gateway.admin.inject({ url: '/metrics' })).body
    expect(metrics).toMatch(/^gateway_upstream_requests_total\{upstream="bookings",outcome="success"\} [1-9]/m)
    expect(metrics).toMatch(/^gateway_circuit_breaker_state\{upstream="bookingsSandbox"\} 0$/m)
    expect(metrics).toMatch(/^gateway_http_requests_total\{route="\/v1\/guests\/\{guestId\}",method="GET",status="200",code=""\} [1-9]/m)
  })
})

describe('a service that fails', () => {
  // Long enough that a stalled second between opening and asking again does not half-open it.
  const RESET_MS = 3000
  let g: TestGateway
  let down: MockService
  let gKey: string
  beforeAll(async () => {
    down = await new MockService({ token: SERVICE_TOKEN }).listen()
    g = await TestGateway.start({
      config: {
        upstreams: { bookings: { url: down.url, tokenHeader: 'X-Service-Token', timeoutMs: 1000, breaker: { volumeThreshold: 4, resetTimeoutMs: RESET_MS } } } as FileConfigInput['upstreams'],
        routes: shipped.routes,
      },
      env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    })
    gKey = await g.key()
  })
  afterAll(async () => {
    await g.close()
    await down.close()
  })
  afterEach(() => down.setFailure(undefined))

  const get = async (path: string) => remember(await g.get(path, gKey))

  it('answers a timeout with 503', async () => {
    down.setFailure({ mode: 'latency', latencyMs: 3000, times: 1 })
    expectProblem(await get('/v1/guests'), { code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': '1' } })
  })

  it('opens its own breaker only: the properties API keeps answering', async () => {
    down.setFailure({ mode: 'html-5xx', status: 503 })
    for (let i = 0; i < 3; i += 1) await get('/v1/guests')
    // The fourth failure opens the circuit, at some instant between these two readings.
    const opening = Date.now()
    await get('/v1/guests')
    const opened = Date.now()
    const bookings = g.gateway.services.get('bookings').live.upstream
    expect(bookings.state).toBe('open')
    const before = down.received.length
    const asking = Date.now()
    const open = await get('/v1/guests')
    const answered = Date.now()
    // Retry-After: the whole seconds until the circuit half-opens, RESET_MS after it opened.
    expectProblem(open, {
      code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests',
      headers: { 'retry-after': oneOf(secondsBetween(opening + RESET_MS - answered, opened + RESET_MS - asking)) },
    })
    expect(down.received.length).toBe(before)
    expect(g.gateway.upstreams?.all[0]?.client.upstream.state).toBe('closed')
    const properties = await get('/v1/properties?perPage=1')
    expect(properties.statusCode).toBe(200)
    down.setFailure(undefined)
    expect(await eventually(async () => (await get('/v1/guests?perPage=1')).statusCode === 200, RESET_MS + 5000, 100)).toBe(true)
    expect(bookings.state).toBe('closed')
  })

  it('answers too many calls in flight with 503 at once', async () => {
    const bounded = await TestGateway.start({
      config: {
        upstreams: { bookings: { url: down.url, tokenHeader: 'X-Service-Token', timeoutMs: 10_000, maxInFlight: 2 } } as FileConfigInput['upstreams'],
        routes: shipped.routes,
      },
      env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    })
    try {
      const boundedKey = await bounded.key()
      down.received.length = 0
      down.setFailure({ mode: 'latency', latencyMs: 1500 })
      // Two calls reach the service and wait there; the next two find the bound full.
      const first = [bounded.get('/v1/guests?perPage=1', boundedKey), bounded.get('/v1/guests?perPage=1', boundedKey)]
      expect(await eventually(async () => down.received.length === 2, 10_000)).toBe(true)
      const refused = await Promise.all([bounded.get('/v1/guests?perPage=1', boundedKey), bounded.get('/v1/guests?perPage=1', boundedKey)])
      const results = [...await Promise.all(first), ...refused].map(remember)
      expect(results.map((r) => r.statusCode).sort()).toEqual([200, 200, 503, 503])
      expectProblem(refused[0] as Answer, { code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': '1' } })
    } finally {
      await bounded.close()
    }
  })

  it('answers a refused connection with 503', async () => {
    const closed = await new MockService({ token: SERVICE_TOKEN }).listen()
    const url = closed.url
    await closed.close()
    const refused = await TestGateway.start({
      config: { upstreams: { bookings: { url, tokenHeader: 'X-Service-Token' } } as FileConfigInput['upstreams'], routes: shipped.routes },
      env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    })
    try {
      expectProblem(remember(await refused.get('/v1/guests', await refused.key())), {
        code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': '1' },
      })
    } finally {
      await refused.close()
    }
  })
})
