import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiConnectionError, ApiError, ApiTimeoutError, PartnerClient, TokenError, type ClientOptions, type RetryInfo } from '../../sdk/src/index.js'
import { retryAfterSeconds } from '../../sdk/src/errors.js'
import { retryDelayMs } from '../../sdk/src/retry.js'
import { envelope, page, problem, reset, ScriptedServer, stall, tokenAnswer, UUID_V4 } from './helpers.js'

// Retries, waits and idempotency keys of the client (sdk/), against a small server on a real
// socket that answers from a script what a gateway or the network may answer: 503 with
// Retry-After, 409 IDEMPOTENCY_KEY_IN_USE, a reset connection, a 502 page that is not JSON.
// Retry-After waits are the real ones (1 s); the backoff's base is set short with the client's
// `backoffBaseMs` option. Each wait is seen twice: as the client reports it (`onRetry`) and as
// the server saw the requests arrive (never sooner).

const server = new ScriptedServer()
const KEY = 'svc_live_test'
const PROPERTY = {
  object: 'property', id: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', name: 'Acme Berlin', code: null, status: 'active',
  timezone: 'Europe/Berlin', createdAt: '2026-01-02T03:04:05.000Z', updatedAt: '2026-01-02T03:04:05.000Z',
}
const GUEST = { object: 'guest', id: 'b5e1c0de-0000-4000-8000-000000000001', firstName: 'Ada', lastName: 'Lovelace' }

function client(options: Partial<ClientOptions> = {}): { client: PartnerClient; retries: RetryInfo[] } {
  const retries: RetryInfo[] = []
  const c = new PartnerClient({ baseUrl: server.url, apiKey: KEY, backoffBaseMs: 40, onRetry: (r) => retries.push(r), ...options } as ClientOptions)
  return { client: c, retries }
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => expect.unreachable('the call succeeded'), (error: unknown) => error)
}

/** `ms` with the ±25 % jitter of the backoff. */
function jittered(ms: number): { min: number; max: number } {
  return { min: ms * 0.75, max: ms * 1.25 }
}

beforeAll(async () => {
  await server.listen()
})

afterAll(async () => {
  await server.close()
})

describe('what is retried, and after how long', () => {
  it('a 503 with Retry-After: 1 is tried again after a second, and its answer returned', async () => {
    server.script(problem(503, 'SERVICE_UNAVAILABLE', { retryAfter: '1' }), envelope(200, [PROPERTY], { pagination: { page: 1, perPage: 20, total: 1 } }))
    const { client: c, retries } = client()
    const answer = await c.properties.list()
    expect({ status: answer.status, data: answer.data, total: answer.meta.pagination.total }).toEqual({ status: 200, data: [PROPERTY], total: 1 })
    expect(retries.map((r) => ({ retry: r.retry, delayMs: r.delayMs, method: r.method, path: r.path, code: (r.error as ApiError).code })))
      .toEqual([{ retry: 1, delayMs: 1000, method: 'GET', path: '/v1/properties', code: 'SERVICE_UNAVAILABLE' }])
    expect(server.received.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/properties', 'GET /v1/properties'])
    expect(server.gaps()[0]).toBeGreaterThanOrEqual(1000)
  })

  it('a POST keeps one Idempotency-Key, a new UUID v4, through a 409 IDEMPOTENCY_KEY_IN_USE, a reset connection and a 502 that is not JSON', async () => {
    server.script(
      problem(409, 'IDEMPOTENCY_KEY_IN_USE', { retryAfter: '1' }),
      reset,
      page(502, '<html><body><h1>502 Bad Gateway</h1></body></html>'),
      envelope(201, GUEST),
    )
    const { client: c, retries } = client({ maxRetries: 3 })
    const created = await c.guests.create({ firstName: 'Ada', lastName: 'Lovelace' })
    expect({ status: created.status, data: created.data }).toEqual({ status: 201, data: GUEST })

    const keys = server.received.map((r) => r.headers['idempotency-key'])
    expect(keys).toHaveLength(4)
    expect(keys[0]).toMatch(UUID_V4)
    expect(new Set(keys)).toEqual(new Set([keys[0]]))
    expect(new Set(server.received.map((r) => r.body))).toEqual(new Set(['{"firstName":"Ada","lastName":"Lovelace"}']))

    // After the 409: its Retry-After. After the reset and the 502: the backoff, 40 ms × 2^n ± 25 %.
    expect(retries.map((r) => r.retry)).toEqual([1, 2, 3])
    expect(retries[0]?.delayMs).toBe(1000)
    expect(retries[1]?.delayMs).toBeGreaterThanOrEqual(jittered(80).min)
    expect(retries[1]?.delayMs).toBeLessThanOrEqual(jittered(80).max)
    expect(retries[2]?.delayMs).toBeGreaterThanOrEqual(jittered(160).min)
    expect(retries[2]?.delayMs).toBeLessThanOrEqual(jittered(160).max)
    expect(retries.map((r) => r.error.name)).toEqual(['ApiError', 'ApiConnectionError', 'ApiError'])
    expect((retries[2]?.error as ApiError).status).toBe(502)
    const gaps = server.gaps()
    for (const [i, retry] of retries.entries()) expect(gaps[i]).toBeGreaterThanOrEqual(Math.floor(retry.delayMs))
  })

  it("a caller's Idempotency-Key is the one sent, on every attempt", async () => {
    server.script(problem(500, 'INTERNAL_ERROR'), envelope(200, GUEST))
    const { client: c } = client()
    await c.guests.update(GUEST.id, { lastName: 'King' }, { idempotencyKey: 'update-ada-1' })
    expect(server.received.map((r) => `${r.method} ${r.path} ${r.headers['idempotency-key']}`)).toEqual([
      `PATCH /v1/guests/${GUEST.id} update-ada-1`, `PATCH /v1/guests/${GUEST.id} update-ada-1`,
    ])
  })

  it.each([408, 429, 500, 502, 503, 504])('%i is retried', async (status) => {
    server.script(problem(status, 'ANY'), envelope(200, PROPERTY))
    const { client: c } = client()
    expect((await c.properties.get(PROPERTY.id)).data).toEqual(PROPERTY)
    expect(server.received).toHaveLength(2)
  })

  it.each([
    [400, 'INVALID_QUERY_PARAMETER'], [401, 'INVALID_API_KEY'], [403, 'INSUFFICIENT_SCOPE'], [404, 'PROPERTY_NOT_FOUND'],
    [409, 'CONFLICT'], [422, 'IDEMPOTENCY_KEY_REUSED'], [501, 'NOT_IMPLEMENTED'],
  ])('%i %s is not retried', async (status, code) => {
    server.script(problem(status, code, { retryAfter: '1' }), envelope(200, PROPERTY))
    const { client: c, retries } = client()
    const error = await failure(c.properties.get(PROPERTY.id)) as ApiError
    expect({ status: error.status, code: error.code, retryAfter: error.retryAfter }).toEqual({ status, code, retryAfter: 1 })
    expect({ requests: server.received.length, retries: retries.length }).toEqual({ requests: 1, retries: 0 })
  })

  it('a Retry-After over 60 s is not waited for: the error goes to the caller at once', async () => {
    server.script(problem(429, 'RATE_LIMITED', { retryAfter: '61' }), envelope(200, PROPERTY))
    const { client: c, retries } = client()
    const error = await failure(c.properties.get(PROPERTY.id)) as ApiError
    expect({ status: error.status, code: error.code, retryAfter: error.retryAfter }).toEqual({ status: 429, code: 'RATE_LIMITED', retryAfter: 61 })
    expect({ requests: server.received.length, retries: retries.length }).toEqual({ requests: 1, retries: 0 })
  })

  it('waits Retry-After as given, up to 60 s, else 2^n times the base with ±25 % jitter, at most 8 s before jitter', () => {
    const [low, mid, high] = [() => 0, () => 0.5, () => 1]
    expect([0, 1, 2, 3].map((n) => retryDelayMs(n, null, 500, mid))).toEqual([500, 1000, 2000, 4000])
    expect([retryDelayMs(1, null, 500, low), retryDelayMs(1, null, 500, high)]).toEqual([750, 1250])
    expect([retryDelayMs(5, null, 500, low), retryDelayMs(5, null, 500, mid), retryDelayMs(9, null, 500, high)]).toEqual([6000, 8000, 10_000])
    expect([0, 1, 60, 61].map((s) => retryDelayMs(2, s, 500, high))).toEqual([0, 1000, 60_000, undefined])
  })

  it('reads Retry-After in seconds or as an HTTP date', () => {
    const now = Date.parse('2026-11-26T12:00:00.000Z')
    expect(retryAfterSeconds('7', now)).toBe(7)
    expect(retryAfterSeconds(' 0 ', now)).toBe(0)
    expect(retryAfterSeconds('Thu, 26 Nov 2026 12:00:05 GMT', now)).toBe(5)
    expect(retryAfterSeconds('Thu, 26 Nov 2026 11:59:00 GMT', now)).toBe(0)
    expect(retryAfterSeconds('-1', now)).toBeNull()
    expect(retryAfterSeconds('soon', now)).toBeNull()
    expect(retryAfterSeconds(null, now)).toBeNull()
  })
})

describe('when the retries run out', () => {
  it('the last answer is thrown as ApiError; one that is not problem+json has no code', async () => {
    const html = '<html><body><h1>502 Bad Gateway</h1></body></html>'
    server.script(page(502, html), page(502, html), page(502, html), envelope(200, PROPERTY))
    const { client: c, retries } = client()
    const error = await failure(c.properties.get(PROPERTY.id)) as ApiError
    expect(error).toBeInstanceOf(ApiError)
    expect({ status: error.status, code: error.code, title: error.title, detail: error.detail, errors: error.errors, requestId: error.requestId, retryAfter: error.retryAfter, problem: error.problem })
      .toEqual({ status: 502, code: null, title: 'Bad Gateway', detail: '', errors: [], requestId: null, retryAfter: null, problem: null })
    expect(error.message).toBe('502 Bad Gateway')
    expect({ requests: server.received.length, retries: retries.length }).toEqual({ requests: 3, retries: 2 })
  })

  it('maxRetries 0 makes one attempt', async () => {
    server.script(problem(503, 'SERVICE_UNAVAILABLE', { retryAfter: '1' }), envelope(200, PROPERTY))
    const { client: c } = client({ maxRetries: 0 })
    expect(((await failure(c.properties.get(PROPERTY.id))) as ApiError).code).toBe('SERVICE_UNAVAILABLE')
    expect(server.received).toHaveLength(1)
  })

  it('a connection reset on every attempt is an ApiConnectionError with the last failure as its cause', async () => {
    server.script(reset, reset, reset, envelope(200, PROPERTY))
    const { client: c, retries } = client()
    const error = await failure(c.properties.get(PROPERTY.id)) as ApiConnectionError
    expect(error).toBeInstanceOf(ApiConnectionError)
    expect(error).not.toBeInstanceOf(ApiTimeoutError)
    expect(error.message).toBe('GET /v1/properties/{propertyId}: the connection failed (3 attempts)')
    expect(error.cause).toBeInstanceOf(Error)
    expect({ requests: server.received.length, retries: retries.length }).toEqual({ requests: 3, retries: 2 })
  })

  it('an answer that never ends is an ApiTimeoutError after timeoutMs on each attempt', async () => {
    // The server never finishes: any bound ends each attempt, however slow the machine.
    server.script(stall, stall)
    const { client: c } = client({ timeoutMs: 300, maxRetries: 1 })
    const error = await failure(c.properties.get(PROPERTY.id)) as ApiTimeoutError
    expect(error).toBeInstanceOf(ApiTimeoutError)
    expect(error.message).toBe('GET /v1/properties/{propertyId}: no answer within 300 ms (2 attempts)')
    expect(server.received).toHaveLength(2)
  })

  it("the caller's signal stops the waiting at once, with its reason, and nothing more is sent", async () => {
    server.script(problem(503, 'SERVICE_UNAVAILABLE', { retryAfter: '30' }), envelope(200, PROPERTY))
    const controller = new AbortController()
    const { client: c } = client({ onRetry: () => controller.abort(new Error('the caller gave up')) })
    const error = await failure(c.properties.get(PROPERTY.id, { signal: controller.signal })) as Error
    expect(error.message).toBe('the caller gave up')
    expect(server.received).toHaveLength(1)
  })
})

describe('access tokens of the client-credentials grant', () => {
  const oauth = { clientId: 'channel/sync', clientSecret: 'pa:ss+wo%rd', scope: ['properties:read', 'guests:read'] }

  it('asks the token endpoint with HTTP Basic (id and secret form-encoded) and the scopes, and sends the token', async () => {
    server.script(tokenAnswer(200, { access_token: 'token-1', token_type: 'Bearer', expires_in: 300 }), envelope(200, PROPERTY))
    const { client: c } = client({ apiKey: undefined, oauth: { ...oauth, tokenUrl: `${server.url}/token` } })
    await c.properties.get(PROPERTY.id)
    const [token, call] = server.received
    expect({ method: token?.method, path: token?.path, type: token?.headers['content-type'], body: token?.body }).toEqual({
      method: 'POST', path: '/token', type: 'application/x-www-form-urlencoded', body: 'grant_type=client_credentials&scope=properties%3Aread+guests%3Aread',
    })
    expect(Buffer.from((token?.headers.authorization as string).replace(/^Basic /, ''), 'base64').toString()).toBe('channel%2Fsync:pa%3Ass%2Bwo%25rd')
    expect(call?.headers.authorization).toBe('Bearer token-1')
  })

  it('refused credentials are a TokenError, not retried, and nothing reaches the API', async () => {
    server.script(tokenAnswer(401, { error: 'invalid_client', error_description: 'unknown client or wrong secret' }), envelope(200, PROPERTY))
    const { client: c } = client({ apiKey: undefined, oauth: { ...oauth, tokenUrl: `${server.url}/token` } })
    const error = await failure(c.properties.get(PROPERTY.id)) as TokenError
    expect(error).toBeInstanceOf(TokenError)
    expect({ status: error.status, error: error.error, errorDescription: error.errorDescription }).toEqual({
      status: 401, error: 'invalid_client', errorDescription: 'unknown client or wrong secret',
    })
    expect(server.received.map((r) => r.path)).toEqual(['/token'])
  })

  it('a token endpoint that fails for a moment is asked again, within the retries', async () => {
    server.script(page(503, 'busy'), reset, tokenAnswer(200, { access_token: 'token-2', token_type: 'Bearer', expires_in: 300 }), envelope(200, PROPERTY))
    const { client: c, retries } = client({ apiKey: undefined, oauth: { ...oauth, tokenUrl: `${server.url}/token` } })
    await c.properties.get(PROPERTY.id)
    expect(server.received.map((r) => r.path)).toEqual(['/token', '/token', '/token', `/v1/properties/${PROPERTY.id}`])
    expect(retries.map((r) => [r.error.name, (r.error as TokenError).status])).toEqual([['TokenError', 503], ['TokenError', null]])
  })
})

describe('paging', () => {
  const pageOf = (data: unknown[], page: number, total: number): ReturnType<typeof envelope> => envelope(200, data, { pagination: { page, perPage: 2, total } })

  it('stops at an empty page even when total promised more (items removed meanwhile)', async () => {
    server.script(pageOf([PROPERTY, PROPERTY], 1, 5), pageOf([], 2, 5), pageOf([PROPERTY], 3, 5))
    const { client: c } = client()
    const items: unknown[] = []
    for await (const property of c.properties.listAll({ perPage: 2 })) items.push(property)
    expect(items).toEqual([PROPERTY, PROPERTY])
    expect(server.received.map((r) => r.path)).toEqual(['/v1/properties?perPage=2&page=1', '/v1/properties?perPage=2&page=2'])
  })

  it('paginate refuses an answer that is not a list with meta.pagination', async () => {
    server.script(envelope(200, GUEST))
    const { client: c } = client()
    const walk = async (): Promise<void> => {
      for await (const _item of c.paginate({ path: '/v1/guests/1' })) expect.unreachable('an item of no list')
    }
    await expect(walk()).rejects.toThrow(new TypeError('/v1/guests/1 did not answer with a list and meta.pagination'))
  })
})

describe('answers without a body', () => {
  it('a 204, and the answer to a HEAD, have data and meta null', async () => {
    server.script(
      (res) => res.writeHead(204, { 'service-request-id': 'req_204' }).end(),
      (res) => res.writeHead(200, { 'content-type': 'application/json', 'content-length': '120', 'service-request-id': 'req_head' }).end(),
    )
    const { client: c } = client()
    const deleted = await c.request({ method: 'DELETE', path: '/v1/guest-flags/7' })
    expect({ status: deleted.status, data: deleted.data, meta: deleted.meta, requestId: deleted.requestId }).toEqual({ status: 204, data: null, meta: null, requestId: 'req_204' })
    const head = await c.request({ method: 'HEAD', path: '/v1/properties' })
    expect({ status: head.status, data: head.data, meta: head.meta, requestId: head.requestId }).toEqual({ status: 200, data: null, meta: null, requestId: 'req_head' })
    expect(server.received.map((r) => `${r.method} ${r.path} ${r.headers['idempotency-key']}`)).toEqual(['DELETE /v1/guest-flags/7 undefined', 'HEAD /v1/properties undefined'])
  })
})

describe('options', () => {
  it('refuses a client with both or neither credential, or a baseUrl that is not http(s)', () => {
    expect(() => new PartnerClient({ baseUrl: server.url } as ClientOptions)).toThrow('give either apiKey or oauth')
    expect(() => new PartnerClient({ baseUrl: server.url, apiKey: KEY, oauth: { tokenUrl: server.url, clientId: 'a', clientSecret: 'b' } } as unknown as ClientOptions))
      .toThrow('give either apiKey or oauth')
    expect(() => new PartnerClient({ baseUrl: 'ftp://example.com', apiKey: KEY })).toThrow('baseUrl must be an http(s) URL')
    expect(() => new PartnerClient({ baseUrl: server.url, apiKey: KEY, maxRetries: -1 })).toThrow('maxRetries must be a whole number of at least 0, not -1')
  })

  it('request takes a path, not a URL or a query string', () => {
    server.script()
    const { client: c } = client()
    for (const path of ['v1/guests', 'https://elsewhere.example/v1/guests', '/v1/guests?page=2', '/v1/guests#top']) {
      expect(() => c.request({ method: 'GET', path }), path).toThrow(`path must start with / and hold no query: ${JSON.stringify(path)}`)
    }
    expect(server.received).toEqual([])
  })
})
