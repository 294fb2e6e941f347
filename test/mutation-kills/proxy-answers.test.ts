import { connect } from 'node:net'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import type { Failure } from '../../mocks/service/server.js'
import { ACME_HOST } from '../helpers/config.js'
import type { Answer } from '../helpers/gateway.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import { grantClient, oauthFor } from '../helpers/oauth.js'
import { expectProblem, TIMESTAMP } from '../helpers/problem.js'
import { exchangeAfterContinue, type RawResponse } from '../helpers/raw.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'

// Rules of the declared routes' answers that mutation testing found undefended
// (docs/architecture.md, "What the partner receives" and "The pass-through's bounds"): which
// status, Content-Type, Content-Length and Content-Encoding of a service's answer pass (a 2xx
// must be JSON and not announced empty, but for HEAD; a 3xx JSON, empty, a HEAD's or a 304;
// a 4xx problem+json, from 400 on), that a 204 says neither type nor length, what the log says
// of a refused answer, the 100 a partner announcing a body gets, the record of a keyed request
// (an answer of exactly `maxBodyBytes` is kept; a service failing mid-answer frees it), the
// reason an operator reads for an answer cut short, and the concurrency refusal of an access
// token. The service answers what each test sets (the stand-in's `exact` mode gives answers of
// a misbehaving service); every request goes over real sockets.
//
// Each test builds its own gateway: code run in a file-level beforeAll counts as static for
// mutation testing (see stryker.config.mjs), so a rule it breaks while a gateway is built
// would fail no test here.

/** A success envelope as the service writes one. */
const ENVELOPE = '{"data":[],"meta":{"requestId":"req_0123456789abcdef0123456789abcdef","timestamp":"2026-01-02T03:04:05.678Z"}}'
const PROBLEM_JSON = 'application/problem+json; charset=utf-8'
const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann.lee@example.com"}'

/**
 * A request over a real socket, read whole. Not through TestGateway.call: the answers of a
 * misbehaving service that pass are the service's own, which the gateway's OpenAPI document
 * does not describe.
 */
async function send(s: Setup, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const res = await request(`${s.t.url}${path}`, {
    method: method as 'GET',
    headers: { host: ACME_HOST, 'user-agent': 'answers-test/1.0', authorization: `Bearer ${s.key}`, ...headers },
    body,
  })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

/** The service's next answer, exactly as given. */
function answers(s: Setup, failure: Omit<Failure, 'mode' | 'times'>): void {
  s.service.setFailure({ mode: 'exact', times: 1, ...failure })
}

async function metrics(s: Setup): Promise<string> {
  await s.t.gateway.admin.ready()
  return (await s.t.gateway.admin.inject({ url: '/metrics' })).body
}

/** The request log line of the first request whose answer was cut, once written. */
async function cutLine(s: Setup): Promise<Record<string, unknown> | undefined> {
  const line = (): Record<string, unknown> | undefined => s.t.logs.records().find((r) => r.msg === 'request' && typeof r.upstreamCut === 'string')
  expect(await eventually(async () => line() !== undefined, 15_000)).toBe(true)
  return line()
}

const internalError = { code: 'INTERNAL_ERROR' as const, instance: '/v1/guests', detail: 'An unexpected error occurred; it has been logged.' }

describe('which answers of a service pass', () => {
  it.each(['identity', ''])('passes a JSON answer whose Content-Encoding is %j: no encoding at all', async (encoding) => {
    const s = await startWithService()
    try {
      answers(s, { status: 200, headers: { 'content-type': 'application/json', 'content-encoding': encoding, 'content-length': String(ENVELOPE.length) }, body: ENVELOPE })
      const res = await send(s, 'GET', '/v1/guests')
      expect({ status: res.statusCode, type: res.headers['content-type'], encoding: res.headers['content-encoding'], body: JSON.parse(res.body) as unknown })
        .toEqual({ status: 200, type: 'application/json', encoding: undefined, body: JSON.parse(ENVELOPE) as unknown })
    } finally {
      await s.close()
    }
  })

  it('refuses a 2xx that sends its Content-Type twice, even when the first is JSON, and logs what the service did', async () => {
    const s = await startWithService()
    try {
      answers(s, { status: 200, headers: { 'content-type': ['application/json; charset=utf-8', 'text/html'], 'content-length': String(ENVELOPE.length) }, body: ENVELOPE })
      expectProblem(await send(s, 'GET', '/v1/guests'), internalError)
      const failed = s.t.logs.records().filter((r) => r.msg === 'request failed')
      expect(failed.map((r) => ({ level: r.level, code: r.code, err: r.err }))).toEqual([{
        level: 'error', code: 'INTERNAL_ERROR',
        err: expect.objectContaining({ type: 'UpstreamError', message: 'bookings: answered 200 with application/json; charset=utf-8,text/html' }),
      }])
    } finally {
      await s.close()
    }
  })

  it('refuses a 4xx that sends its Content-Type twice, even when the first is problem+json', async () => {
    const s = await startWithService()
    try {
      const problem = '{"type":"about:blank","title":"Conflict","status":409}'
      answers(s, { status: 409, headers: { 'content-type': [PROBLEM_JSON, 'text/html'], 'content-length': String(problem.length) }, body: problem })
      expectProblem(await send(s, 'GET', '/v1/guests'), internalError)
    } finally {
      await s.close()
    }
  })

  it('passes a 300 announced empty, as a 3xx with no body, not as a 2xx', async () => {
    const s = await startWithService()
    try {
      answers(s, { status: 300, headers: { 'content-length': '0' } })
      const res = await send(s, 'GET', '/v1/guests')
      expect({ status: res.statusCode, length: res.headers['content-length'], body: res.body }).toEqual({ status: 300, length: '0', body: '' })
    } finally {
      await s.close()
    }
  })

  it('passes a HEAD answered 200 JSON announced empty: a HEAD announces the length of GET\'s', async () => {
    const s = await startWithService()
    try {
      answers(s, { status: 200, headers: { 'content-type': 'application/json', 'content-length': '0' } })
      const res = await send(s, 'HEAD', '/v1/guests')
      expect({ status: res.statusCode, type: res.headers['content-type'], length: res.headers['content-length'], body: res.body })
        .toEqual({ status: 200, type: 'application/json', length: '0', body: '' })
    } finally {
      await s.close()
    }
  })

  it('passes a 400 problem+json on with the partner\'s path as its instance, and refuses a 400 announced empty: from 400 on, only a problem passes', async () => {
    const s = await startWithService()
    try {
      s.service.setFailure({ mode: 'problem-4xx', status: 400, times: 1 })
      const passed = await send(s, 'GET', '/v1/guests')
      expect({ status: passed.statusCode, type: passed.headers['content-type'], body: JSON.parse(passed.body) as unknown }).toEqual({
        status: 400, type: PROBLEM_JSON,
        body: {
          type: 'https://developer.example.com/errors/bad-request', title: 'Bad request', status: 400, detail: 'The guest was changed by another request.',
          moreInfo: 'Check the request against the API reference.', instance: '/v1/guests', code: 'BAD_REQUEST', errors: [],
          requestId: passed.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP),
        },
      })
      answers(s, { status: 400, headers: { 'content-length': '0' } })
      expectProblem(await send(s, 'GET', '/v1/guests'), internalError)
    } finally {
      await s.close()
    }
  })

  it('passes a 304 with neither type nor body', async () => {
    const s = await startWithService()
    try {
      answers(s, { status: 304 })
      const res = await send(s, 'GET', '/v1/guests')
      expect({ status: res.statusCode, type: res.headers['content-type'], body: res.body }).toEqual({ status: 304, type: undefined, body: '' })
    } finally {
      await s.close()
    }
  })

  it('refuses a 302 with an HTML body, but passes it to a HEAD, which gets no body', async () => {
    const s = await startWithService()
    try {
      const html = '<p>moved</p>'
      const redirect = { status: 302, headers: { 'content-type': 'text/html', location: '/partner/v1/guests', 'content-length': String(html.length) }, body: html }
      answers(s, redirect)
      expectProblem(await send(s, 'GET', '/v1/guests'), internalError)
      answers(s, redirect)
      const head = await send(s, 'HEAD', '/v1/guests')
      expect({ status: head.statusCode, type: head.headers['content-type'], length: head.headers['content-length'], location: head.headers.location, body: head.body })
        .toEqual({ status: 302, type: 'text/html', length: '12', location: '/v1/guests', body: '' })
    } finally {
      await s.close()
    }
  })

  it('says neither type nor length on a 204, whatever the service said (RFC 9110 8.6)', async () => {
    const s = await startWithService()
    try {
      answers(s, { status: 204, headers: { 'content-type': 'application/json', 'content-length': '0' } })
      const res = await send(s, 'GET', '/v1/guests')
      expect({ status: res.statusCode, type: res.headers['content-type'], length: res.headers['content-length'], body: res.body })
        .toEqual({ status: 204, type: undefined, length: undefined, body: '' })
    } finally {
      await s.close()
    }
  })
})

/** Writes `head`, then `body` once the gateway answered 100 Continue; resolves with every response, interim ones included, when the gateway closes. */
function exchange(s: Setup, head: string, body?: string): Promise<RawResponse[]> {
  return exchangeAfterContinue(Number(new URL(s.t.url).port), head, body)
}

describe('Expect: 100-continue', () => {
  it('answers 100 Continue to a body announced chunked, then forwards it', async () => {
    const s = await startWithService()
    try {
      const head = `POST /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${s.key}\r\n`
        + 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n'
      const body = `${Buffer.byteLength(GUEST).toString(16)}\r\n${GUEST}\r\n0\r\n\r\n`
      const [interim, final] = await exchange(s, head, body)
      expect(interim).toEqual({ statusCode: 100, headers: {}, body: '' })
      expect(final?.statusCode).toBe(201)
      expect(s.service.received.map((r) => ({ method: r.method, body: r.body }))).toEqual([{ method: 'POST', body: GUEST }])
    } finally {
      await s.close()
    }
  })

  it('sends no 100 to a POST announcing an empty body: there is nothing to wait for', async () => {
    const s = await startWithService()
    try {
      const head = `POST /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer ${s.key}\r\n`
        + 'Content-Type: application/json\r\nContent-Length: 0\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n'
      const responses = await exchange(s, head)
      expect(responses.map((r) => r.statusCode)).toEqual([400])
      expectProblem(responses[0] as Answer, { code: 'MALFORMED_JSON', instance: '/v1/guests', detail: 'The request body is not well-formed JSON.' })
    } finally {
      await s.close()
    }
  })
})

describe('the record of a keyed request', () => {
  it('keeps the answer to a keyed POST without a body, and replays it to the retry', async () => {
    const s = await startWithService()
    try {
      const headers = { 'idempotency-key': `no-body-${process.pid}-${Date.now()}` }
      const first = await send(s, 'POST', '/v1/guests', headers)
      expect(first.statusCode).toBe(400)
      const replay = await send(s, 'POST', '/v1/guests', headers)
      expect({ status: replay.statusCode, replayed: replay.headers['idempotent-replayed'], body: replay.body }).toEqual({ status: 400, replayed: 'true', body: first.body })
      expect(s.service.received).toHaveLength(1)
    } finally {
      await s.close()
    }
  })

  it('keeps an answer of exactly maxBodyBytes, and replays it to the retry', async () => {
    const s = await startWithService({ config: { idempotency: { maxBodyBytes: ENVELOPE.length } } })
    try {
      const headers = { 'idempotency-key': `exact-size-${process.pid}-${Date.now()}`, 'content-type': 'application/json' }
      answers(s, { status: 201, headers: { 'content-type': 'application/json', 'content-length': String(ENVELOPE.length) }, body: ENVELOPE })
      const first = await send(s, 'POST', '/v1/guests', headers, GUEST)
      expect({ status: first.statusCode, body: first.body }).toEqual({ status: 201, body: ENVELOPE })
      const replay = await send(s, 'POST', '/v1/guests', headers, GUEST)
      expect({ status: replay.statusCode, replayed: replay.headers['idempotent-replayed'], body: replay.body }).toEqual({ status: 201, replayed: 'true', body: ENVELOPE })
      expect(s.service.received).toHaveLength(1)
    } finally {
      await s.close()
    }
  })

  it('answers 503 to a keyed request whose service fails mid-answer, and frees its record for the retry', async () => {
    const s = await startWithService()
    try {
      const headers = { 'idempotency-key': `reset-${process.pid}-${Date.now()}`, 'content-type': 'application/json' }
      s.service.setFailure({ mode: 'reset', times: 1 })
      expectProblem(await send(s, 'POST', '/v1/guests', headers, GUEST), {
        code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', detail: 'The service is temporarily unavailable; retry in 1 second.', headers: { 'retry-after': '1' },
      })
      expect(await metrics(s)).toMatch(/^gateway_upstream_calls_cut_total\{upstream="bookings",reason="upstream_error"\} 1$/m)
      const retry = await send(s, 'POST', '/v1/guests', headers, GUEST)
      expect({ status: retry.statusCode, replayed: retry.headers['idempotent-replayed'] }).toEqual({ status: 201, replayed: undefined })
      expect(s.service.received).toHaveLength(2)
    } finally {
      await s.close()
    }
  })
})

describe('why an answer was cut, as an operator reads it', () => {
  it('says partner_closed when the partner goes away mid-answer', async () => {
    const s = await startWithService({ bookings: { responseTimeoutMs: 600_000 }, config: { server: { writeIdleTimeoutMs: 600_000 } } })
    try {
      s.service.setFailure({ mode: 'stall', times: 1 })
      await new Promise<void>((resolve, reject) => {
        const socket = connect(Number(new URL(s.t.url).port), '127.0.0.1', () => {
          socket.write(`GET /v1/guests HTTP/1.1\r\nHost: ${ACME_HOST}\r\nUser-Agent: leaver/1.0\r\nAuthorization: Bearer ${s.key}\r\n\r\n`)
        })
        let received = ''
        socket.on('data', (chunk: Buffer) => {
          received += chunk.toString('latin1')
          // The answer has begun (its head and first bytes are in): the partner leaves.
          if (received.includes('{"data":[')) socket.destroy()
        })
        socket.on('error', reject)
        socket.on('close', () => resolve())
      })
      expect(await cutLine(s)).toMatchObject({ route: '/v1/guests', status: 200, upstream: 'bookings', upstreamStatus: 200, upstreamCut: 'partner_closed' })
      expect(await metrics(s)).toMatch(/^gateway_upstream_calls_cut_total\{upstream="bookings",reason="partner_closed"\} 1$/m)
    } finally {
      await s.close()
    }
  })

  it('says upstream_error when the service fails mid-answer', async () => {
    const s = await startWithService()
    try {
      s.service.setFailure({ mode: 'reset', times: 1 })
      const res = await request(`${s.t.url}/v1/guests`, { headers: { host: ACME_HOST, 'user-agent': 'reader/1.0', authorization: `Bearer ${s.key}` } })
      expect(res.statusCode).toBe(200)
      await expect(res.body.text()).rejects.toThrow()
      expect(await cutLine(s)).toMatchObject({ route: '/v1/guests', status: 200, upstream: 'bookings', upstreamStatus: 200, upstreamCut: 'upstream_error' })
      expect(await metrics(s)).toMatch(/^gateway_upstream_calls_cut_total\{upstream="bookings",reason="upstream_error"\} 1$/m)
    } finally {
      await s.close()
    }
  })
})

describe('the concurrency share of an access token', () => {
  const idp = new MockIdp()
  beforeAll(async () => {
    await idp.listen()
  })
  afterAll(async () => {
    await idp.close()
  })

  it('names the client of the access token in the 429 of a full share', async () => {
    const s = await startWithService({ bookings: { maxInFlight: 8, maxInFlightPerCredential: 1 }, config: { oauth: oauthFor(idp) } })
    const held = new AbortController()
    try {
      expect(await s.t.gateway.tokens.ready(5000)).toBe(true)
      await grantClient({ REDIS_URL, REDIS_PREFIX: s.t.prefix }, idp, 'share-client', '--scopes', 'guests:read')
      const token = idp.mint({ claims: { client_id: 'share-client', scope: 'guests:read' } })
      const headers = { host: ACME_HOST, 'user-agent': 'token-test/1.0', authorization: `Bearer ${token}` }
      // The token's one call waits at the service.
      s.service.setFailure({ mode: 'latency', latencyMs: 15_000, times: 1 })
      const waiting = request(`${s.t.url}/v1/guests?perPage=1`, { headers, signal: held.signal }).catch(() => undefined)
      const bookings = s.t.gateway.services.get('bookings').live.upstream
      expect(await eventually(async () => s.service.received.length === 1 && bookings.callsInFlight === 1, 10_000)).toBe(true)
      const res = await request(`${s.t.url}/v1/guests?perPage=1`, { headers })
      expectProblem({ statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }, {
        code: 'RATE_LIMITED', instance: '/v1/guests', headers: { 'retry-after': '1' },
        detail: 'The client of this access token has as many calls in flight to this service as it may (a concurrency bound, apart from the quota); retry in 1 second.',
      })
      held.abort()
      await waiting
    } finally {
      held.abort()
      await s.close()
    }
  })
})
