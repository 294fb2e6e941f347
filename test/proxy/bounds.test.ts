import { connect } from 'node:net'
import { Agent, request, type Dispatcher } from 'undici'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { generateGuests, type Guest } from '../../mocks/service/data.js'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { ACME_HOST } from '../helpers/config.js'
import { shipped } from '../helpers/declared.js'
import { TestGateway, type Answer, type CallOptions } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { exchangeAfterContinue, type RawResponse } from '../helpers/raw.js'
import { eventually } from '../helpers/redis.js'

// What may cross a declared route (docs/architecture.md, "The pass-through's bounds"), over
// real sockets: the stand-in service records the request line and the header lines exactly as
// they reached it, so every rule is checked as a service behind the gateway would see it.

// Long, as some services' tokens are: the gateway's own headers are a good part of what a
// service receives, and they count against its header limit.
const SERVICE_TOKEN = `svc-live-${'t'.repeat(1000)}`
const FILE_ROUTE = { path: '/v1/files/{fileId}', methods: ['GET', 'DELETE'], scope: 'brand', upstream: 'bookings', upstreamPath: '/internal/files/{fileId}/content', pathParams: { fileId: { type: 'string' } }, query: {} }
// A route whose other method takes a body: its DELETE meets the route's own JSON parser.
const NOTE_ROUTE = { path: '/v1/notes/{noteId}', methods: ['PATCH', 'DELETE'], scopes: { PATCH: 'files:write', DELETE: 'files:write' }, scope: 'brand', upstream: 'bookings', upstreamPath: '/internal/notes/{noteId}', pathParams: { noteId: { type: 'string' } }, query: {} }

let t: TestGateway
let service: MockService
let key: string
let keyId: string
let port: number

/** A request with the test's key unless `key` is given (undefined: none). */
function call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  return t.call(method, path, { userAgent: 'bounds-test/1.0', ...options, key: 'key' in options ? options.key : key })
}

/** The names of the header lines the service received, in order. */
function namesReceived(index = 0): string[] {
  return (service.received[index]?.rawHeaders ?? []).map(([name]) => name)
}

/** What one request made the service receive: its request line and its header lines. */
function received(index = 0): { line: string | undefined; headers: Record<string, string> } {
  const request = service.received[index]
  return { line: request?.requestLine, headers: Object.fromEntries(request?.rawHeaders ?? []) }
}

/** Sends `head` (and, once the gateway answers 100 Continue, `body`) to the test's gateway; see exchangeAfterContinue. */
function exchange(head: string, body?: string): Promise<RawResponse[]> {
  return exchangeAfterContinue(port, head, body)
}

beforeAll(async () => {
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  t = await TestGateway.start({
    config: {
      // A breaker quick to open: a call counted against it would show.
      upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token', breaker: { volumeThreshold: 4 } } } as FileConfigInput['upstreams'],
      routes: [...shipped.routes, FILE_ROUTE, NOTE_ROUTE] as FileConfigInput['routes'],
    },
    env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
  })
  const created = await t.keyWithId()
  key = created.key
  keyId = created.id
  port = Number(new URL(t.url).port)
})

afterAll(async () => {
  await t.close()
  await service.close()
})

beforeEach(() => {
  service.received.length = 0
})
afterEach(() => {
  service.setFailure(undefined)
  service.resetGuests()
})

describe('Expect', () => {
  const guest = '{"firstName":"Ann","lastName":"Lee","email":"ann.lee@example.com"}'

  it('answers 100 Continue once the checks before the body pass, and never forwards Expect', async () => {
    const head = `POST /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(guest)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`
    const [interim, final] = await exchange(head, guest)
    expect(interim).toEqual({ statusCode: 100, headers: {}, body: '' })
    const created = service.guestsOf('acme').find((g) => g.email === 'ann.lee@example.com') as Guest
    expect({ status: final?.statusCode, location: final?.headers.location, body: JSON.parse(final?.body ?? '{}') as unknown }).toEqual({
      status: 201, location: `/v1/guests/${created.id}`,
      body: { data: created, meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP) } },
    })
    expect(service.received.map((r) => ({ line: r.requestLine, expect: r.rawHeaders.filter(([name]) => name.toLowerCase() === 'expect'), body: r.body })))
      .toEqual([{ line: 'POST /partner/v1/guests HTTP/1.1', expect: [], body: guest }])
  })

  it('answers a refused request without a 100, so the partner never sends its body, and closes', async () => {
    const head = `POST /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer svc_live_nope\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(guest)}\r\nExpect: 100-continue\r\n\r\n`
    const answers = await exchange(head, guest)
    expect(answers.map((a) => a.statusCode)).toEqual([401])
    expectProblem(answers[0] as Answer, { code: 'INVALID_API_KEY', instance: '/v1/guests', headers: { connection: 'close', 'www-authenticate': 'Bearer' } })
    expect(service.received).toEqual([])
  })
})

describe('request headers: an allow-list', () => {
  it('passes Accept, Accept-Language, User-Agent and a valid Service-Correlation-Id on, then the gateway\'s own, and nothing else', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const res = await call('GET', '/v1/guests?perPage=1', {
      headers: {
        accept: 'application/json', 'accept-language': 'fr-CH, fr;q=0.9', 'service-correlation-id': 'corr-1',
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'partner=1',
        'x-http-method-override': 'DELETE', 'x-original-url': '/internal/admin', 'x-rewrite-url': '/internal/admin', 'x-real-ip': '10.0.0.1',
        via: '1.1 partner-proxy', forwarded: 'for=10.0.0.1', 'x-forwarded-for': '10.0.0.1', 'x-forwarded-host': 'internal', 'x-forwarded-proto': 'http',
        'content-encoding': 'gzip', cookie: 'session=partner', 'x-service-brand': 'globex', 'x-service-property-id': '00000000-0000-4000-8000-000000000000',
        'x-service-key-id': 'key_forged', 'x-service-mode': 'live', 'x-service-token': 'forged', 'x-request-id': 'mine', 'idempotency-key': 'k-1',
        'service-property-id-x': '1', 'x-custom': 'anything', te: 'trailers', 'max-forwards': '3', range: 'bytes=0-10', 'if-none-match': '"x"',
      },
    })
    expect(res.statusCode).toBe(200)
    const sent = received()
    expect(namesReceived()).toEqual(['host', 'connection', 'accept', 'accept-language', 'user-agent', 'service-correlation-id', 'x-service-token', 'x-request-id',
      'traceparent', 'tracestate', 'x-service-key-id', 'x-service-brand', 'x-service-mode', 'x-service-scopes', 'x-forwarded-for', 'accept-encoding'])
    expect(sent).toEqual({
      line: 'GET /partner/v1/guests?perPage=1 HTTP/1.1',
      headers: {
        host: new URL(service.url).host, connection: 'keep-alive', accept: 'application/json', 'accept-language': 'fr-CH, fr;q=0.9', 'user-agent': 'bounds-test/1.0',
        'service-correlation-id': 'corr-1', 'x-service-token': SERVICE_TOKEN, 'x-request-id': res.headers['service-request-id'],
        traceparent: expect.stringMatching(new RegExp(`^00-${traceId}-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$`)), tracestate: 'partner=1',
        'x-service-key-id': keyId, 'x-service-brand': 'acme', 'x-service-mode': 'live',
        // A key with every scope: every scope the routes know (the shipped ones and FILE_ROUTE's).
        'x-service-scopes': 'events:read files:read files:write guests:read guests:write properties:read request-logs:read rooms:read webhooks:read webhooks:write',
        'x-forwarded-for': '127.0.0.1', 'accept-encoding': 'identity',
      },
    })
    expect(sent.headers['x-service-key-id']).not.toBe('key_forged')
  })

  it('never passes a header whose name holds an underscore, which a CGI-style server would read as the gateway\'s', async () => {
    const head = `GET /v1/guests?perPage=1 HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\n`
      + 'X_Service_Brand: globex\r\nX_SERVICE_PROPERTY_ID: 00000000-0000-4000-8000-000000000000\r\nx_service_key_id: key_forged\r\nX_Forwarded_For: 10.0.0.1\r\n'
      + 'Accept_Language: de\r\nUser_Agent: forged/1.0\r\nConnection: close\r\n\r\n'
    const [answer] = await exchange(head)
    expect(answer?.statusCode).toBe(200)
    expect(namesReceived().filter((name) => name.includes('_'))).toEqual([])
    expect(received().headers).toMatchObject({ 'user-agent': 'raw/1.0', 'x-service-brand': 'acme', 'x-forwarded-for': '127.0.0.1' })
  })

  it('passes Idempotency-Key on POST and PATCH only', async () => {
    const guest = generateGuests('acme')[0] as Guest
    expect((await call('GET', `/v1/guests/${guest.id}`, { headers: { 'idempotency-key': 'get-1' } })).statusCode).toBe(200)
    expect((await call('PATCH', `/v1/guests/${guest.id}`, { body: '{"phone":null}', headers: { 'idempotency-key': 'patch-1' } })).statusCode).toBe(200)
    expect((await call('POST', '/v1/guests', { body: '{"firstName":"Ann"}', headers: { 'idempotency-key': 'post-1' } })).statusCode).toBe(422)
    expect(service.received.map((r) => [r.method, r.headers['idempotency-key'] ?? null])).toEqual([['GET', null], ['PATCH', 'patch-1'], ['POST', 'post-1']])
  })

  it('sets X-Forwarded-For to the client address it believes, replacing any sent', async () => {
    const behindProxy = await TestGateway.start({
      config: { trustProxy: ['127.0.0.1'], upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token' } } as FileConfigInput['upstreams'], routes: shipped.routes },
      env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    })
    try {
      const res = await behindProxy.get('/v1/guests?perPage=1', await behindProxy.key(), { 'x-forwarded-for': '10.9.9.9, 203.0.113.9' })
      expect(res.statusCode).toBe(200)
      expect(received().headers['x-forwarded-for']).toBe('203.0.113.9')
    } finally {
      await behindProxy.close()
    }
  })

  it('answers an absolute-form target as its path', async () => {
    const head = `GET http://${ACME_HOST}/v1/guests?perPage=1 HTTP/1.1\r\nHost: elsewhere.example\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`
    const [answer] = await exchange(head)
    const all = generateGuests('acme')
    expect({ status: answer?.statusCode, body: JSON.parse(answer?.body ?? '{}') as unknown }).toEqual({
      status: 200, body: { data: all.slice(0, 1), meta: { requestId: answer?.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 1, total: all.length } } },
    })
    expect(received().line).toBe('GET /partner/v1/guests?perPage=1 HTTP/1.1')
  })

  it('answers 431 before any call when its headers and the gateway\'s would pass 16 KiB', async () => {
    // 15,000 bytes of Accept fit Node's 16 KiB; with the service token and the rest they do not.
    const accept = `application/json, ${'x/y;q=0.1, '.repeat(1362)}`.slice(0, 15_000)
    const res = await call('GET', '/v1/guests', { headers: { accept } })
    expectProblem(res, { code: 'REQUEST_HEADERS_TOO_LARGE', instance: '/v1/guests', detail: /^With the headers the gateway adds, this request comes to 16\d{3} bytes of headers; at most 16384 are accepted\./ })
    expect(service.received).toEqual([])
    expect((await call('GET', '/v1/guests?perPage=1', { headers: { accept: accept.slice(0, 12_000) } })).statusCode).toBe(200)
  })
})

describe('request bodies', () => {
  const guest = '{"firstName":"Zoë","lastName":"Ørsted","email":"zoe@example.com"}'

  it.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON;charset=UTF-8', 'application/json; charset="utf-8"'])(
    'takes Content-Type %s and sends plain application/json',
    async (type) => {
      expect((await call('POST', '/v1/guests', { body: guest, headers: { 'content-type': type } })).statusCode).toBe(201)
      expect(service.received.map((r) => ({ type: r.headers['content-type'], length: r.headers['content-length'], body: r.body })))
        .toEqual([{ type: 'application/json', length: String(Buffer.byteLength(guest)), body: guest }])
    },
  )

  it.each(['application/json; charset=utf-7', 'application/json; charset=iso-8859-1', 'application/json; profile=x', 'application/json; charset=utf-8; x=y'])(
    'refuses Content-Type %s with 415',
    async (type) => {
      expectProblem(await call('POST', '/v1/guests', { body: guest, headers: { 'content-type': type } }), {
        code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests',
        detail: `Request bodies must be application/json in UTF-8, with no parameter but charset=utf-8; the Content-Type was '${type}'.`,
      })
      expect(service.received).toEqual([])
    },
  )

  it('refuses a body that is not UTF-8 with 400 MALFORMED_JSON', async () => {
    const latin1 = Buffer.from('{"firstName":"Zo\xeb","lastName":"Lee","email":"zoe@example.com"}', 'latin1')
    const res = await request(`${t.url}/v1/guests`, {
      method: 'POST', body: latin1,
      headers: { host: ACME_HOST, 'user-agent': 'bounds-test/1.0', authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    })
    const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
    expectProblem(answer, { code: 'MALFORMED_JSON', instance: '/v1/guests', detail: 'The request body is not valid UTF-8.' })
    expect(service.received).toEqual([])
  })
})

describe('the query: rebuilt from the validated values', () => {
  it.each([
    ['email=a;perPage=1000', 'email=a%3BperPage%3D1000'],
    ['perPage=2&page=1', 'perPage=2&page=1'],
    ['email=%2541', 'email=%2541'],
    ['page=007&email=a+b', 'page=7&email=a%20b'],
    ["email=o'hara(x)*!@example.com", 'email=o%27hara%28x%29%2A%21%40example.com'],
    ['email=%C3%A9l%C3%A8ve%40example.com', 'email=%C3%A9l%C3%A8ve%40example.com'],
  ])('sends ?%s as ?%s', async (sent, expected) => {
    expect((await call('GET', `/v1/guests?${sent}`)).statusCode).toBe(200)
    expect(received().line).toBe(`GET /partner/v1/guests?${expected} HTTP/1.1`)
  })

  it.each(['%00', 'a%0d%0aX-Injected:%201', '%7F', '%C2%85', 'tab%09'])('refuses a control character in a string value: email=%s', async (value) => {
    expectProblem(await call('GET', `/v1/guests?email=${value}`), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/guests', detail: "Invalid query parameter 'email'.",
      errors: [{ field: 'email', code: 'INVALID_FORMAT', detail: 'Must not contain control characters.' }],
    })
    expect(service.received).toEqual([])
  })
})

describe('path parameters', () => {
  const rawGet = (method: string, path: string) => exchange(`${method} ${path} HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`)

  it.each(['.', '..', '...', '%2e', '%2E%2e', '.%2E', '%2e%2e%2e'])('refuses %s, made of dots only, with 400 and calls nothing', async (value) => {
    for (const method of ['GET', 'DELETE']) {
      const [answer] = await rawGet(method, `/v1/files/${value}`)
      expectProblem(answer as Answer, {
        code: 'INVALID_PATH_PARAMETER', instance: `/v1/files/${value}`, detail: "'fileId' is not a valid identifier.",
        errors: [{ field: 'fileId', code: 'INVALID_FORMAT', detail: 'Must not be made of dots only.' }],
      })
    }
    expect(service.received).toEqual([])
  })

  it.each(['%00', 'a%0D%0Ab', '%7F'])('refuses a control character, %s, with 400 INVALID_FORMAT', async (value) => {
    const [answer] = await rawGet('GET', `/v1/files/${value}`)
    expectProblem(answer as Answer, {
      code: 'INVALID_PATH_PARAMETER', instance: `/v1/files/${value}`, detail: "'fileId' is not a valid identifier.",
      errors: [{ field: 'fileId', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ -.' }],
    })
    expect(service.received).toEqual([])
  })

  it.each([['..b', '..b'], ['b..', 'b..'], ['a.b', 'a.b'], ['%2E%2Eb', '..b'], ['~x_y-z', '~x_y-z']])('forwards %s, which is no dot segment, as %s', async (value, forwarded) => {
    const [answer] = await rawGet('DELETE', `/v1/files/${value}`)
    // The stand-in has no such path: its own 404 problem is passed on.
    expect(answer?.statusCode).toBe(404)
    expect(received().line).toBe(`DELETE /internal/files/${forwarded}/content HTTP/1.1`)
  })
})

describe('a method that takes no body', () => {
  // Step 3 refuses a body on such a method; an empty one announced with any Content-Type is no
  // body at all, so there is nothing to be malformed (docs/architecture.md, "Order of checks").
  const emptyDelete = (contentType: string, path = '/v1/files/report-7') =>
    exchange(`DELETE ${path} HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\nContent-Type: ${contentType}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)

  it.each(['application/json', 'application/json; charset=utf-8', 'application/xml', 'text/plain'])('forwards a DELETE sent as %s with no body', async (contentType) => {
    const [answer] = await emptyDelete(contentType)
    // The stand-in has no such file: its own 404 problem is passed on, so the call was made.
    expect(answer?.statusCode).toBe(404)
    expect(received().line).toBe('DELETE /internal/files/report-7/content HTTP/1.1')
    expect(received().headers['content-length']).toBeUndefined()
  })

  it.each(['application/json', 'application/xml'])('forwards a DELETE sent as %s with no body on a route whose PATCH takes one', async (contentType) => {
    const [answer] = await emptyDelete(contentType, '/v1/notes/n-1')
    expect(answer?.statusCode).toBe(404)
    expect(received().line).toBe('DELETE /internal/notes/n-1 HTTP/1.1')
    expect(received().headers['content-length']).toBeUndefined()
  })

  it.each(['xml', ''])('answers a DELETE whose Content-Type, %j, is no media type at all 400 MALFORMED_REQUEST', async (contentType) => {
    const [answer] = await emptyDelete(contentType)
    expectProblem(answer as Answer, { code: 'MALFORMED_REQUEST', instance: '/v1/files/report-7', detail: 'The request could not be understood.' })
    expect(service.received).toEqual([])
  })

  it('still refuses an empty PATCH announced as JSON: a body method must send JSON', async () => {
    const [answer] = await exchange(`PATCH /v1/notes/n-1 HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)
    expectProblem(answer as Answer, { code: 'MALFORMED_JSON', instance: '/v1/notes/n-1', detail: 'The request body is not well-formed JSON.' })
    expect(service.received).toEqual([])
  })
})

/** A gateway of the shipped routes over `service`, with settings of the test's own. */
async function gatewayWith(bookings: Record<string, unknown>, config: Partial<FileConfigInput> = {}, gateway: Parameters<typeof TestGateway.start>[0] = {}): Promise<TestGateway> {
  return TestGateway.start({
    ...gateway,
    config: { ...config, upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token', ...bookings } } as FileConfigInput['upstreams'], routes: shipped.routes },
    env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
  })
}

/** Sends a request on a connection of its own and never reads the answer. */
function neverReads(g: TestGateway, path: string, partnerKey: string): { destroy: () => void } {
  const socket = connect(Number(new URL(g.url).port), '127.0.0.1', () => {
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: slow-reader/1.0\r\nAuthorization: Bearer ${partnerKey}\r\n\r\n`)
  })
  socket.pause()
  socket.on('error', () => undefined)
  return { destroy: () => socket.destroy() }
}

const GLOBEX = 'api.globex-resorts.example'

describe('the breaker counts only what the service did', () => {
  it('stays closed under Expect, which never reaches the upstream client, and another brand\'s partner is served', async () => {
    const bookings = t.gateway.services.get('bookings').live.upstream
    const before = { fires: bookings.breaker.stats.fires, failures: bookings.breaker.stats.failures }
    const statuses: number[] = []
    for (let i = 0; i < 12; i += 1) {
      const expectation = i % 2 === 0 ? '100-continue' : 'foo'
      const [answer] = await exchange(`GET /v1/guests?perPage=1 HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${key}\r\nExpect: ${expectation}\r\nConnection: close\r\n\r\n`)
      statuses.push(answer?.statusCode ?? 0)
    }
    expect(statuses).toEqual(Array.from({ length: 12 }, () => 200))
    expect(service.received.map((r) => r.rawHeaders.some(([name]) => name.toLowerCase() === 'expect'))).toEqual(Array.from({ length: 12 }, () => false))
    expect({ state: bookings.state, failures: bookings.breaker.stats.failures - before.failures, fires: bookings.breaker.stats.fires - before.fires })
      .toEqual({ state: 'closed', failures: 0, fires: 12 })
    const globex = await call('GET', '/v1/guests?perPage=1', { key: await t.key({ brand: 'globex' }), headers: { host: GLOBEX } })
    expect(globex.statusCode).toBe(200)
  })

  it('answers a call undici refuses before sending 500, and never counts it', async () => {
    // At the edge: the connection pool receives every call with a header undici never sends.
    const withExpect: Dispatcher = new Agent().compose((dispatch) => (options, handler) =>
      dispatch({ ...options, headers: { ...(options.headers as Record<string, string>), expect: '100-continue' } }, handler))
    const g = await gatewayWith({ breaker: { volumeThreshold: 4 } }, {}, { gateway: { upstreamHooks: { dispatcher: withExpect } } })
    try {
      const gKey = await g.key()
      for (let i = 0; i < 12; i += 1) {
        expectProblem(await g.get('/v1/guests?perPage=1', gKey), { code: 'INTERNAL_ERROR', instance: '/v1/guests', detail: 'An unexpected error occurred; it has been logged.' })
      }
      const bookings = g.gateway.services.get('bookings').live.upstream
      expect({ state: bookings.state, fires: bookings.breaker.stats.fires, failures: bookings.breaker.stats.failures }).toEqual({ state: 'closed', fires: 0, failures: 0 })
      expect(service.received).toEqual([])
      await g.gateway.admin.ready()
      const metrics = (await g.gateway.admin.inject({ url: '/metrics' })).body
      expect(metrics).toMatch(/^gateway_upstream_requests_total\{upstream="bookings",outcome="not_sent"\} 12$/m)
    } finally {
      await g.close()
      await withExpect.close()
    }
  })
})

describe("a credential's share of an upstream", () => {
  it('answers a key over its share 429 at once, while another key is served and the bound is not full', async () => {
    const g = await gatewayWith({ maxInFlight: 8, maxInFlightPerCredential: 2 })
    const held = [new AbortController(), new AbortController()]
    try {
      const [busy, other] = [await g.key(), await g.key({ brand: 'globex' })]
      // The busy key's two calls wait at the service; the other brand's are answered at once.
      service.setFailure({ mode: 'latency', latencyMs: 15_000, times: 2, brand: 'acme' })
      const waiting = held.map((abort) => request(`${g.url}/v1/guests?perPage=1`, {
        headers: { host: ACME_HOST, 'user-agent': 'busy/1.0', authorization: `Bearer ${busy}` }, signal: abort.signal,
      }).catch(() => undefined))
      const bookings = g.gateway.services.get('bookings').live.upstream
      expect(await eventually(async () => service.received.length === 2 && bookings.callsInFlight === 2, 10_000)).toBe(true)
      const refused = await g.get('/v1/guests?perPage=1', busy)
      expectProblem(refused, {
        code: 'RATE_LIMITED', instance: '/v1/guests', headers: { 'retry-after': '1' },
        detail: 'This API key has as many calls in flight to this service as it may (a concurrency bound, apart from the quota); retry in 1 second.',
      })
      expect(refused.headers['ratelimit-limit']).toBe('1000')
      expect((await g.get('/v1/guests?perPage=1', other, { host: GLOBEX })).statusCode).toBe(200)
      expect(service.received).toHaveLength(3)
      // The partner gives up: its calls end, and their slots with them.
      for (const abort of held) abort.abort()
      await Promise.all(waiting)
      expect(await eventually(async () => bookings.callsInFlight === 0, 10_000)).toBe(true)
      expect((await g.get('/v1/guests?perPage=1', busy)).statusCode).toBe(200)
    } finally {
      await g.close()
    }
  })
})

describe('a call has an end', () => {
  /** The request log line of `g`'s first request on `route` with an upstream cut, once written. */
  const cutLine = async (g: TestGateway) => {
    let line: Record<string, unknown> | undefined
    await eventually(async () => {
      line = g.logs.records().find((r) => r.msg === 'request' && r.upstreamCut !== null && r.upstreamCut !== undefined)
      return line !== undefined
    }, 15_000)
    return line
  }

  it('cuts a 5 MB answer its partner never reads at responseTimeoutMs, freeing the slot, while another partner is served', async () => {
    const g = await gatewayWith({ responseTimeoutMs: 1500 }, { server: { writeIdleTimeoutMs: 600_000 } })
    try {
      const [slow, other] = [await g.key(), await g.key({ brand: 'globex' })]
      service.setFailure({ mode: 'large', bytes: 5 * 1024 * 1024, times: 1, brand: 'acme' })
      const reader = neverReads(g, '/v1/guests', slow)
      expect(await eventually(async () => service.received.length === 1, 10_000)).toBe(true)
      expect((await g.get('/v1/guests?perPage=1', other, { host: GLOBEX })).statusCode).toBe(200)
      const bookings = g.gateway.services.get('bookings').live.upstream
      expect(await cutLine(g)).toMatchObject({ route: '/v1/guests', status: 200, upstream: 'bookings', upstreamStatus: 200, upstreamCut: 'response_timeout', keyId: expect.any(String) })
      expect(await eventually(async () => bookings.callsInFlight === 0, 10_000)).toBe(true)
      await g.gateway.admin.ready()
      const metrics = (await g.gateway.admin.inject({ url: '/metrics' })).body
      expect(metrics).toMatch(/^gateway_upstream_calls_cut_total\{upstream="bookings",reason="response_timeout"\} 1$/m)
      reader.destroy()
    } finally {
      await g.close()
    }
  })

  it('closes a partner connection that takes no bytes for writeIdleTimeoutMs, freeing the slot', async () => {
    const g = await gatewayWith({ responseTimeoutMs: 600_000 }, { server: { writeIdleTimeoutMs: 800 } })
    try {
      const slow = await g.key()
      service.setFailure({ mode: 'large', bytes: 5 * 1024 * 1024, times: 1, brand: 'acme' })
      const reader = neverReads(g, '/v1/guests', slow)
      const bookings = g.gateway.services.get('bookings').live.upstream
      expect(await cutLine(g)).toMatchObject({ route: '/v1/guests', status: 200, upstream: 'bookings', upstreamCut: 'write_idle' })
      expect(await eventually(async () => bookings.callsInFlight === 0, 10_000)).toBe(true)
      await g.gateway.admin.ready()
      expect((await g.gateway.admin.inject({ url: '/metrics' })).body).toMatch(/^gateway_upstream_calls_cut_total\{upstream="bookings",reason="write_idle"\} 1$/m)
      // A partner that reads is served on the same gateway.
      expect((await g.get('/v1/guests?perPage=1', slow)).statusCode).toBe(200)
      reader.destroy()
    } finally {
      await g.close()
    }
  })

  it('writes the line and the count of a request whose partner left before the service answered: 499, the service\'s status, cut', async () => {
    const g = await gatewayWith({})
    try {
      const partnerKey = await g.key()
      service.setFailure({ mode: 'latency', latencyMs: 800, times: 1 })
      const controller = new AbortController()
      const gone = request(`${g.url}/v1/guests`, {
        signal: controller.signal, headers: { host: ACME_HOST, 'user-agent': 'bounds-test/1.0', authorization: `Bearer ${partnerKey}` },
      }).then(() => 'answered', () => 'closed')
      expect(await eventually(async () => service.received.length === 1, 10_000)).toBe(true)
      controller.abort()
      expect(await gone).toBe('closed')
      const line = await cutLine(g)
      expect(line).toMatchObject({ route: '/v1/guests', method: 'GET', status: 499, code: null, upstream: 'bookings', upstreamStatus: 200, upstreamCut: 'partner_closed', keyId: expect.any(String) })
      expect(g.logs.records().filter((r) => r.msg === 'request')).toHaveLength(1)
      await g.gateway.admin.ready()
      const metrics = (await g.gateway.admin.inject({ url: '/metrics' })).body
      expect(metrics).toMatch(/^gateway_http_requests_total\{route="\/v1\/guests",method="GET",status="499",code=""\} 1$/m)
      expect(metrics).toMatch(/^gateway_upstream_calls_cut_total\{upstream="bookings",reason="partner_closed"\} 1$/m)
    } finally {
      await g.close()
    }
  })

  it('serves a partner that reads slowly but keeps taking bytes, however long the answer takes', async () => {
    // The idle bound is many times the pause between reads, so a stalled test process cannot
    // pass for a partner that stopped reading; the whole answer still takes longer than it.
    const g = await gatewayWith({ responseTimeoutMs: 600_000 }, { server: { writeIdleTimeoutMs: 3000 } })
    try {
      const size = 4 * 1024 * 1024
      service.setFailure({ mode: 'large', bytes: size, times: 1 })
      const res = await request(`${g.url}/v1/guests`, { headers: { host: ACME_HOST, 'user-agent': 'slow-but-steady/1.0', authorization: `Bearer ${await g.key()}` } })
      let received = 0
      // The tail across chunks: the last chunk alone may hold only a few bytes of the end.
      let tail = ''
      for await (const chunk of res.body) {
        received += (chunk as Buffer).length
        tail = (tail + (chunk as Buffer).toString('latin1')).slice(-512)
        // Well under the idle bound between reads; the whole answer takes longer than it.
        await new Promise((r) => setTimeout(r, 200))
      }
      expect(res.statusCode).toBe(200)
      expect(received).toBeGreaterThanOrEqual(size - 4096)
      expect(tail).toMatch(/\],"meta":\{"requestId":"req_[0-9a-f]{32}","timestamp":"[^"]+"\}\}$/)
      expect(g.logs.records().filter((r) => r.msg === 'request').map((r) => r.upstreamCut)).toEqual([null])
    } finally {
      await g.close()
    }
  })

  it('cuts a service that stops sending mid-answer at responseTimeoutMs, the partner reading', async () => {
    const g = await gatewayWith({ responseTimeoutMs: 1000 })
    try {
      service.setFailure({ mode: 'stall', times: 1 })
      const { id, key } = await g.keyWithId()
      const res = await request(`${g.url}/v1/guests`, { headers: { host: ACME_HOST, 'user-agent': 'reader/1.0', authorization: `Bearer ${key}` } })
      // The answer had begun: it cannot become a problem any more; the connection is cut.
      expect(res.statusCode).toBe(200)
      await expect(res.body.text()).rejects.toThrow()
      expect(await cutLine(g)).toMatchObject({ route: '/v1/guests', status: 200, upstreamCut: 'response_timeout' })
      expect(g.gateway.services.get('bookings').live.upstream.callsInFlight).toBe(0)
      // Counted in the key's usage like an answer that ended (docs/architecture.md, "Usage and last use").
      await g.gateway.usage.flush()
      expect((await g.gateway.credentials.usageOf(id, 1)).rows).toEqual([
        { date: new Date().toISOString().slice(0, 10), route: 'GET /v1/guests', '2xx': 1, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0, total: 1 },
      ])
    } finally {
      await g.close()
    }
  })
})

describe('answers', () => {
  it('maps each Link target like Location, drops those that map to no public path, and passes Content-Language', async () => {
    service.setFailure({ mode: 'links', times: 1 })
    const res = await call('GET', '/v1/guests?perPage=2')
    const guests = generateGuests('acme')
    expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown }).toEqual({
      status: 200, body: { data: guests.slice(0, 2), meta: { requestId: res.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 2, total: guests.length } } },
    })
    expect(res.headers.link).toBe(`</v1/guests?page=2&perPage=2>; rel="next", </v1/guests?page=1&perPage=2>; rel="first"; title="First, page", </v1/guests/${(guests[0] as Guest).id}>; rel="item"`)
    expect(res.headers['content-language']).toBe('en-GB')
  })

  it('drops a Location or a link that names an upstream\'s host anywhere, encoded or not, as an unmapped one', async () => {
    const host = new URL(service.url).hostname
    const guest = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
    for (const location of [
      `/partner/v1/guests/${guest}?next=http://${host}/secret`,
      `/partner/v1/guests/${guest}?next=http%3A%2F%2F${host}%2Fsecret`,
      `/partner/v1/guests/${guest}?next=http%253A%252F%252F${host}`,
    ]) {
      service.setFailure({ mode: 'redirect', location, times: 1 })
      const res = await call('GET', '/v1/guests')
      expect({ status: res.statusCode, location: res.headers.location }).toEqual({ status: 302, location: undefined })
    }
    service.setFailure({ mode: 'redirect', location: `/partner/v1/guests/${guest}?next=/v1/rooms`, times: 1 })
    expect((await call('GET', '/v1/guests')).headers.location).toBe(`/v1/guests/${guest}?next=/v1/rooms`)
    service.setFailure({
      mode: 'links', times: 1,
      link: [`</partner/v1/guests?page=2>; rel="next"; title="see http://${host}:4020/internal"`, `</partner/v1/guests?page=1>; rel="first"`, `</partner/v1/guests/${guest}?from=${host}>; rel="item"`],
    })
    expect((await call('GET', '/v1/guests?perPage=2')).headers.link).toBe('</v1/guests?page=1>; rel="first"')
  })

  it('passes a problem of the service\'s on with the partner\'s path as its instance and the gateway\'s request id, and refuses one that is no JSON object', async () => {
    const guest = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
    const own = {
      type: 'https://bookings.internal/errors/guest-not-found', title: 'Guest not found', status: 404, detail: 'No such guest.', moreInfo: '',
      instance: `/partner/v1/guests/${guest}`, code: 'GUEST_NOT_FOUND', errors: [], requestId: 'bookings-req-77', timestamp: '2026-11-26T12:00:00.000Z',
    }
    service.setFailure({ mode: 'exact', status: 404, headers: { 'content-type': 'application/problem+json' }, body: JSON.stringify(own), times: 1 })
    const res = await call('GET', `/v1/guests/${guest.toUpperCase()}?with=messages`)
    expect(res.statusCode).toBe(404)
    expect(res.body).toBe(JSON.stringify({ ...own, instance: `/v1/guests/${guest.toUpperCase()}`, requestId: res.headers['service-request-id'] }))
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.body)))
    for (const body of ['[1,2]', 'not json', '']) {
      service.setFailure({ mode: 'exact', status: 404, headers: { 'content-type': 'application/problem+json' }, body, times: 1 })
      expectProblem(await call('GET', `/v1/guests/${guest}`), { code: 'INTERNAL_ERROR', instance: `/v1/guests/${guest}`, detail: 'An unexpected error occurred; it has been logged.' })
    }
  })

  it('answers an encoded body 500, having asked for identity', async () => {
    service.setFailure({ mode: 'gzip', times: 1 })
    expectProblem(await call('GET', '/v1/guests?perPage=2'), { code: 'INTERNAL_ERROR', instance: '/v1/guests', detail: 'An unexpected error occurred; it has been logged.' })
    expect(received().headers['accept-encoding']).toBe('identity')
  })

  it.each([['text/html', 200], [undefined, 200], ['application/json', 202]])('answers an empty 2xx of type %s 500: no JSON document', async (contentType, status) => {
    service.setFailure({ mode: 'empty', status, times: 1, ...(contentType === undefined ? {} : { contentType }) })
    expectProblem(await call('GET', '/v1/guests'), { code: 'INTERNAL_ERROR', instance: '/v1/guests', detail: 'An unexpected error occurred; it has been logged.' })
  })
})

describe('a parser error after an answer has started (docs/security.md, "Slow clients")', () => {
  it('closes the connection and never writes a second answer', async () => {
    service.setFailure({ mode: 'stall', times: 1 })
    const port = Number(new URL(t.url).port)
    const text = await new Promise<string>((resolve, reject) => {
      let received = ''
      let sentGarbage = false
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(`GET /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: bounds-test/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`)
      })
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('latin1')
        // The answer's head is in: now a request the parser refuses, on the same socket.
        if (!sentGarbage && received.includes('\r\n\r\n')) {
          sentGarbage = true
          socket.write('\u0001\u0002 not http\r\n\r\n')
        }
      })
      socket.on('error', (error: NodeJS.ErrnoException) => { if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error) })
      socket.on('close', () => resolve(received))
    })
    expect(text.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200'])
    // What the service had sent (one chunk), and nothing after it: no final chunk, no problem.
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe('9\r\n{"data":[\r\n')
    service.setFailure(undefined)
  })
})
