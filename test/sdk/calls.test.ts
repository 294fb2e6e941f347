import { describe, expect, it } from 'vitest'
import { ApiConnectionError, ApiError, ApiTimeoutError, PartnerClient, TokenError, type ClientOptions, type RetryInfo } from '../../sdk/src/index.js'
import { USER_AGENT } from '../../sdk/src/client.js'
import { scriptedFetch } from './helpers.js'

// What the client sends for each call, and how it counts its attempts, over a fetch that
// answers from a script (the client's edge: the requests it builds are read as fetch gets
// them). The same behaviours against a running gateway are in gateway.test.ts and
// retries.test.ts; these are the cases that need an answer a gateway does not give on cue.

const BASE = 'https://api.acme-hotels.example'
const TOKEN_URL = 'https://idp.example/oauth2/token'
const ID = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'

function problem(status: number, code: string, retryAfter?: string): Response {
  return new Response(JSON.stringify({ type: `https://docs.example/errors/${code}`, title: code, status, code, detail: `${code} detail`, requestId: 'req_1', errors: [] }), {
    status, headers: { 'content-type': 'application/problem+json', ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }) },
  })
}

function ok(data: unknown = { id: ID }): Response {
  return new Response(JSON.stringify({ data, meta: { requestId: 'req_2' } }), { status: 200, headers: { 'content-type': 'application/json', 'service-request-id': 'req_2' } })
}

function token(value: string): Response {
  return new Response(JSON.stringify({ access_token: value, token_type: 'Bearer', expires_in: 3600 }), { status: 200, headers: { 'content-type': 'application/json' } })
}

function client(fetch: typeof globalThis.fetch, options: Partial<ClientOptions> = {}): { client: PartnerClient; retries: RetryInfo[] } {
  const retries: RetryInfo[] = []
  const made = new PartnerClient({ baseUrl: BASE, apiKey: 'svc_test_key', fetch, onRetry: (info) => retries.push(info), ...options } as ClientOptions)
  return { client: made, retries }
}

describe('the client\'s options', () => {
  it('refuses a base URL that is not http(s), an empty key, and a bound that is not a whole number', () => {
    const make = (options: Partial<ClientOptions>): unknown => {
      try {
        return new PartnerClient({ baseUrl: BASE, apiKey: 'svc_test_key', ...options } as ClientOptions)
      } catch (error) {
        return `${(error as Error).name}: ${(error as Error).message}`
      }
    }
    expect(make({ baseUrl: 'ftp://api.acme-hotels.example' })).toBe('TypeError: baseUrl must be an http(s) URL, not "ftp://api.acme-hotels.example"')
    expect(make({ baseUrl: 'api.acme-hotels.example' })).toBe('TypeError: baseUrl must be an http(s) URL, not "api.acme-hotels.example"')
    expect(make({ apiKey: '' })).toBe('TypeError: apiKey is empty')
    expect(make({ timeoutMs: 0 })).toBe('TypeError: timeoutMs must be a whole number of at least 1, not 0')
    expect(make({ backoffBaseMs: -1 })).toBe('TypeError: backoffBaseMs must be a whole number of at least 0, not -1')
    expect(make({ maxRetries: 1.5 })).toBe('TypeError: maxRetries must be a whole number of at least 0, not 1.5')
    for (const baseUrl of [BASE, 'http://127.0.0.1:8080']) expect(make({ baseUrl })).toBeInstanceOf(PartnerClient)
  })
})

describe('each typed call', () => {
  // Name, call, method, URL sent, the template the client names it by, the JSON body sent (none: empty).
  const calls: [string, (c: PartnerClient) => Promise<unknown>, string, string, string, string?][] = [
    ['credential', (c) => c.credential(), 'GET', '/v1/credential', '/v1/credential'],
    ['properties.list', (c) => c.properties.list({ perPage: 5 }), 'GET', '/v1/properties?perPage=5', '/v1/properties'],
    ['properties.get', (c) => c.properties.get(ID), 'GET', `/v1/properties/${ID}`, '/v1/properties/{propertyId}'],
    ['events.list', (c) => c.events.list({ perPage: 5 }), 'GET', '/v1/events?perPage=5', '/v1/events'],
    ['events.get', (c) => c.events.get('evt_1'), 'GET', '/v1/events/evt_1', '/v1/events/{eventId}'],
    ['requestLogs.list', (c) => c.requestLogs.list({ status: 404 } as never), 'GET', '/v1/request-logs?status=404', '/v1/request-logs'],
    ['requestLogs.get', (c) => c.requestLogs.get('req_9'), 'GET', '/v1/request-logs/req_9', '/v1/request-logs/{requestId}'],
    ['webhookEndpoints.list', (c) => c.webhookEndpoints.list({ perPage: 5 }), 'GET', '/v1/webhook-endpoints?perPage=5', '/v1/webhook-endpoints'],
    ['webhookEndpoints.create', (c) => c.webhookEndpoints.create({ url: 'https://hooks.example/a', eventTypes: ['property.updated'] }), 'POST', '/v1/webhook-endpoints', '/v1/webhook-endpoints',
      '{"url":"https://hooks.example/a","eventTypes":["property.updated"]}'],
    ['webhookEndpoints.get', (c) => c.webhookEndpoints.get('we_1'), 'GET', '/v1/webhook-endpoints/we_1', '/v1/webhook-endpoints/{endpointId}'],
    ['webhookEndpoints.update', (c) => c.webhookEndpoints.update('we_1', { status: 'enabled' } as never), 'PATCH', '/v1/webhook-endpoints/we_1', '/v1/webhook-endpoints/{endpointId}', '{"status":"enabled"}'],
    ['webhookEndpoints.delete', (c) => c.webhookEndpoints.delete('we_1'), 'DELETE', '/v1/webhook-endpoints/we_1', '/v1/webhook-endpoints/{endpointId}'],
    ['webhookEndpoints.rotateSecret', (c) => c.webhookEndpoints.rotateSecret('we_1'), 'POST', '/v1/webhook-endpoints/we_1/rotate-secret', '/v1/webhook-endpoints/{endpointId}/rotate-secret'],
    ['webhookEndpoints.test', (c) => c.webhookEndpoints.test('we_1'), 'POST', '/v1/webhook-endpoints/we_1/test', '/v1/webhook-endpoints/{endpointId}/test'],
    ['webhookEndpoints.deliveries', (c) => c.webhookEndpoints.deliveries('we_1', { perPage: 5 }), 'GET', '/v1/webhook-endpoints/we_1/deliveries?perPage=5', '/v1/webhook-endpoints/{endpointId}/deliveries'],
    ['webhookEndpoints.redeliver', (c) => c.webhookEndpoints.redeliver('evt_1', 'we_1'), 'POST', '/v1/events/evt_1/redeliver', '/v1/events/{eventId}/redeliver', '{"endpointId":"we_1"}'],
    ['webhookEndpoints.recover', (c) => c.webhookEndpoints.recover('we_1', { since: '2026-12-01T00:00:00Z' } as never), 'POST', '/v1/webhook-endpoints/we_1/recover', '/v1/webhook-endpoints/{endpointId}/recover',
      '{"since":"2026-12-01T00:00:00Z"}'],
    ['webhookEndpoints.recoveries', (c) => c.webhookEndpoints.recoveries('we_1', { perPage: 5 }), 'GET', '/v1/webhook-endpoints/we_1/recoveries?perPage=5', '/v1/webhook-endpoints/{endpointId}/recoveries'],
    ['webhookEndpoints.recovery', (c) => c.webhookEndpoints.recovery('we_1', 'wr_1'), 'GET', '/v1/webhook-endpoints/we_1/recoveries/wr_1', '/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}'],
    ['webhookEndpoints.cancelRecovery', (c) => c.webhookEndpoints.cancelRecovery('we_1', 'wr_1'), 'DELETE', '/v1/webhook-endpoints/we_1/recoveries/wr_1', '/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}'],
    ['guests.list', (c) => c.guests.list({ perPage: 5 } as never), 'GET', '/v1/guests?perPage=5', '/v1/guests'],
    ['guests.create', (c) => c.guests.create({ name: 'Ada' } as never), 'POST', '/v1/guests', '/v1/guests', '{"name":"Ada"}'],
    ['guests.get', (c) => c.guests.get('g_1'), 'GET', '/v1/guests/g_1', '/v1/guests/{guestId}'],
    ['guests.update', (c) => c.guests.update('g_1', { name: 'Ada' } as never), 'PATCH', '/v1/guests/g_1', '/v1/guests/{guestId}', '{"name":"Ada"}'],
    ['rooms.list', (c) => c.rooms.list(ID), 'GET', '/v1/rooms', '/v1/rooms'],
  ]

  for (const [name, call, method, url, path, body] of calls) {
    it(`${name}: ${method} ${url}, with the key, the client's name and what it accepts, its template in the retry`, async () => {
      const { fetch, seen } = scriptedFetch(problem(503, 'SERVICE_UNAVAILABLE', '0'), ok())
      const { client: c, retries } = client(fetch)
      const answer = await call(c) as { status: number; data: unknown; requestId: string | null }
      expect({ status: answer.status, data: answer.data, requestId: answer.requestId }).toEqual({ status: 200, data: { id: ID }, requestId: 'req_2' })
      expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([`${method} ${BASE}${url}`, `${method} ${BASE}${url}`])
      expect(seen.map((s) => [s.headers.authorization, s.headers['user-agent'], s.headers.accept, s.headers['service-property-id']])).toEqual([
        ['Bearer svc_test_key', USER_AGENT, 'application/json', name === 'rooms.list' ? ID : undefined], ['Bearer svc_test_key', USER_AGENT, 'application/json', name === 'rooms.list' ? ID : undefined],
      ])
      expect(retries.map((r) => ({ method: r.method, path: r.path, retry: r.retry, delayMs: r.delayMs, code: (r.error as ApiError).code }))).toEqual([
        { method, path, retry: 1, delayMs: 0, code: 'SERVICE_UNAVAILABLE' },
      ])
      expect(seen.map((s) => s.body)).toEqual([body ?? '', body ?? ''])
      if (method === 'POST' || method === 'PATCH') {
        expect(seen[0]?.headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/)
        expect(seen[1]?.headers['idempotency-key']).toBe(seen[0]?.headers['idempotency-key'])
      } else {
        expect(seen.map((s) => s.headers['idempotency-key'])).toEqual([undefined, undefined])
      }
    })
  }

  it('sends the client\'s name as User-Agent on a typed call even when the call\'s headers give another', async () => {
    const { fetch, seen } = scriptedFetch(ok(), ok(), ok())
    const { client: c } = client(fetch)
    const options = { headers: { 'user-agent': 'partner-app/2.0' } }
    await c.credential(options)
    await c.webhookEndpoints.create({ url: 'https://hooks.example/a', eventTypes: ['property.updated'] }, options)
    await c.guests.create({ name: 'Ada' } as never, options)
    expect(seen.map((s) => s.headers['user-agent'])).toEqual([USER_AGENT, USER_AGENT, USER_AGENT])
  })

  it('an answer whose body is JSON null is data null, without meta', async () => {
    const { fetch } = scriptedFetch(new Response('null', { status: 200, headers: { 'content-type': 'application/json', 'service-request-id': 'req_3' } }))
    const answer = await client(fetch).client.credential()
    expect({ status: answer.status, data: answer.data, meta: answer.meta, requestId: answer.requestId }).toEqual({ status: 200, data: null, meta: null, requestId: 'req_3' })
  })

  it('health sends no credential', async () => {
    const { fetch, seen } = scriptedFetch(new Response('{"status":"ok"}', { status: 200, headers: { 'content-type': 'application/json' } }))
    const answer = await client(fetch).client.health()
    expect({ status: answer.status, data: answer.data }).toEqual({ status: 200, data: { status: 'ok' } })
    expect(seen.map((s) => [s.method, s.url, s.headers.authorization])).toEqual([['GET', `${BASE}/v1/health`, undefined]])
  })

  it('a list in the query goes comma-separated, as one parameter', async () => {
    const { fetch, seen } = scriptedFetch(ok([]))
    await client(fetch).client.request({ method: 'GET', path: '/v1/things', query: { ids: ['a', 'b'], page: 2 } })
    expect(seen.map((s) => s.url)).toEqual([`${BASE}/v1/things?ids=a,b&page=2`])
  })

  it('sends Service-Correlation-Id only when one is given', async () => {
    const { fetch, seen } = scriptedFetch(ok(), ok())
    await client(fetch).client.credential()
    await client(fetch, { correlationId: 'batch-7' }).client.credential()
    expect(seen.map((s) => s.headers['service-correlation-id'])).toEqual([undefined, 'batch-7'])
  })
})

describe('requestLogs.listAll', () => {
  function page(ids: string[], total: number, perPage: number): Response {
    return new Response(JSON.stringify({ data: ids.map((id) => ({ id })), meta: { requestId: 'req_p', pagination: { page: 1, perPage, total } } }), {
      status: 200, headers: { 'content-type': 'application/json' },
    })
  }
  const query = (url: string): Record<string, string> => Object.fromEntries(new URL(url).searchParams)

  it('pins the pages at now (createdBefore), the same for every page, from the first, 100 a page', async () => {
    const { fetch, seen } = scriptedFetch(page(Array.from({ length: 100 }, (_, i) => `req_${i}`), 101, 100), page(['req_100'], 101, 100))
    const before = new Date().toISOString()
    const ids: string[] = []
    for await (const entry of client(fetch).client.requestLogs.listAll({ status: 404 } as never)) ids.push(entry.id)
    const after = new Date().toISOString()
    expect(ids).toEqual(Array.from({ length: 101 }, (_, i) => `req_${i}`))
    const [first] = seen.map((s) => query(s.url))
    const pinned = first?.createdBefore ?? ''
    expect(pinned >= before && pinned <= after).toBe(true)
    expect(seen.map((s) => query(s.url))).toEqual([
      { perPage: '100', createdBefore: pinned, status: '404', page: '1' },
      { perPage: '100', createdBefore: pinned, status: '404', page: '2' },
    ])
  })

  it('keeps a createdBefore, a perPage and a first page given, and walks the pages until total', async () => {
    const { fetch, seen } = scriptedFetch(page(['req_5', 'req_6'], 7, 2), page(['req_7'], 7, 2))
    const ids: string[] = []
    for await (const entry of client(fetch).client.requestLogs.listAll({ createdBefore: '2026-12-01T00:00:00.000Z', perPage: 2, page: 3 } as never)) ids.push(entry.id)
    expect(ids).toEqual(['req_5', 'req_6', 'req_7'])
    expect(seen.map((s) => query(s.url))).toEqual([
      { perPage: '2', createdBefore: '2026-12-01T00:00:00.000Z', page: '3' },
      { perPage: '2', createdBefore: '2026-12-01T00:00:00.000Z', page: '4' },
    ])
  })
})

describe('attempts', () => {
  it('retries without an onRetry to tell', async () => {
    const { fetch, seen } = scriptedFetch(problem(503, 'SERVICE_UNAVAILABLE', '0'), ok())
    const c = new PartnerClient({ baseUrl: BASE, apiKey: 'svc_test_key', fetch })
    expect((await c.credential()).status).toBe(200)
    expect(seen).toHaveLength(2)
  })

  it('a key refused as a token is not a token to fetch again: the error, after one attempt', async () => {
    const { fetch, seen } = scriptedFetch(problem(401, 'INVALID_ACCESS_TOKEN'))
    const error = await client(fetch).client.credential().catch((e: unknown) => e) as ApiError
    expect({ name: error.name, status: error.status, code: error.code, attempts: seen.length }).toEqual({ name: 'ApiError', status: 401, code: 'INVALID_ACCESS_TOKEN', attempts: 1 })
  })

  const oauth = { tokenUrl: TOKEN_URL, clientId: 'client-1', clientSecret: 'secret-1' }

  it('with a token: a call sent without one (health) is not tried again for a refused token, nor is another status than 401', async () => {
    const { fetch, seen } = scriptedFetch(problem(401, 'INVALID_ACCESS_TOKEN'), token('t1'), problem(403, 'INVALID_ACCESS_TOKEN'))
    const { client: c } = client(fetch, { apiKey: undefined, oauth })
    expect(((await c.health().catch((e: unknown) => e)) as ApiError).status).toBe(401)
    expect(((await c.credential().catch((e: unknown) => e)) as ApiError).status).toBe(403)
    expect(seen.map((s) => `${s.method} ${s.url} ${s.headers.authorization ?? '-'}`)).toEqual([
      `GET ${BASE}/v1/health -`, `POST ${TOKEN_URL} Basic ${Buffer.from('client-1:secret-1').toString('base64')}`, `GET ${BASE}/v1/credential Bearer t1`,
    ])
  })

  it('the new token after an expired one is not counted among the retries', async () => {
    const { fetch, seen } = scriptedFetch(token('t1'), problem(401, 'ACCESS_TOKEN_EXPIRED'), token('t2'), problem(503, 'SERVICE_UNAVAILABLE', '0'), problem(503, 'SERVICE_UNAVAILABLE', '0'), ok())
    const { client: c, retries } = client(fetch, { apiKey: undefined, oauth })
    expect((await c.credential()).status).toBe(200)
    expect(retries.map((r) => r.retry)).toEqual([1, 2])
    expect(seen.filter((s) => s.url.startsWith(BASE)).map((s) => s.headers.authorization)).toEqual(['Bearer t1', 'Bearer t2', 'Bearer t2', 'Bearer t2'])
  })

  it('no answer: a connection error naming the call and how many attempts it took; a timeout keeps its cause', async () => {
    const reset = (): Promise<Response> => Promise.reject(new TypeError('fetch failed', { cause: new Error('ECONNRESET') }))
    const once = await client(scriptedFetch(reset).fetch, { maxRetries: 0 }).client.credential().catch((e: unknown) => e) as ApiConnectionError
    expect({ name: once.name, message: once.message }).toEqual({ name: 'ApiConnectionError', message: 'GET /v1/credential: the connection failed' })
    const thrice = await client(scriptedFetch(reset, reset, reset).fetch, { backoffBaseMs: 0 }).client.credential().catch((e: unknown) => e) as ApiConnectionError
    expect(thrice.message).toBe('GET /v1/credential: the connection failed (3 attempts)')
    const health = await client(scriptedFetch(reset).fetch, { maxRetries: 0 }).client.health().catch((e: unknown) => e) as ApiConnectionError
    expect(health.message).toBe('GET /v1/health: the connection failed')

    // An answer that never comes: the attempt's own deadline ends it.
    const hang = (request: Request): Promise<Response> => new Promise((_resolve, reject) => request.signal.addEventListener('abort', () => reject(new TypeError('aborted', { cause: request.signal.reason }))))
    const late = await client(scriptedFetch(hang).fetch, { maxRetries: 0, timeoutMs: 1 }).client.credential().catch((e: unknown) => e) as ApiTimeoutError
    const cause = late.cause as Error
    expect({ name: late.name, message: late.message, cause: cause.message, why: (cause.cause as Error).name }).toEqual({
      name: 'ApiTimeoutError', message: 'GET /v1/credential: no answer within 1 ms', cause: 'aborted', why: 'TimeoutError',
    })
  })

  it('a token endpoint that answers 503 is a TokenError retried like any other', async () => {
    const { fetch } = scriptedFetch(new Response('', { status: 503 }), token('t1'), ok())
    const { client: c, retries } = client(fetch, { apiKey: undefined, oauth, backoffBaseMs: 0 })
    expect((await c.credential()).status).toBe(200)
    expect(retries.map((r) => [r.retry, r.error instanceof TokenError, r.error.message])).toEqual([[1, true, 'the token endpoint answered 503']])
  })
})
