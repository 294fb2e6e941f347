import { shipped } from '../helpers/declared.js'
import { Readable } from 'node:stream'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { ApiError } from '../../src/contract/errors.js'
import type { PropertySource } from '../../src/properties/source.js'
import { ACME_HOST, DOCS_URL } from '../helpers/config.js'
import { checkAnswer } from '../helpers/contract.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { oauthFor } from '../helpers/oauth.js'
import { expectProblem } from '../helpers/problem.js'

// Rules of the error handler that mutation testing found undefended: which detail a framework
// error gets, and how a failure is logged (a 503 is a warning, a 500 an error with its cause,
// and neither leaks into the answer); a failure that carries an HTTP status of its own is still
// our 500; a framework refusal other than the named ones is 400 MALFORMED_REQUEST; a body too
// large for the route is 413 with its own detail; a quote is cut at 200 characters even after
// an emoji; a refused answer carries no correlation id, even one set before the service failed;
// a challenge replaces, not drops, what RFC 6750 does not allow. Over real sockets; the
// property source is the test's own, at the edge of the unit, so that it can fail on demand.

/** Property ids: the PMS's are UUIDs. */
const BOOM = '0b00b000-0000-4000-8000-000000000001'
const DOWN = '0d0d0d0d-0000-4000-8000-000000000002'
const RESET = '0e0e0e0e-0000-4000-8000-000000000003'
const STRING = '05050505-0000-4000-8000-000000000004'
const NULL = '0a0a0a0a-0000-4000-8000-000000000005'
const CODED = '0c0c0c0c-0000-4000-8000-000000000006'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** Fails `get` with what the id says: an unexpected exception or the PMS being unavailable. */
const failing: PropertySource = {
  async get(id) {
    if (id === BOOM) throw new TypeError('boom at the source')
    // A system error carries a code of its own, which is no framework error's.
    if (id === RESET) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
    // What a careless library may throw: not an Error at all.
    if (id === STRING) throw 'a thrown string' as unknown as Error
    if (id === NULL) throw null as unknown as Error
    // An error with a code and an HTTP status of its own, as Fastify's and its plugins' are.
    if (id === CODED) throw Object.assign(new Error('reply failed'), { code: 'FST_REPLY_FROM_INTERNAL_SERVER_ERROR', statusCode: 500 })
    throw new ApiError('SERVICE_UNAVAILABLE', 'The property system is unavailable.', { retryAfter: 5 })
  },
  async listActive() {
    return { items: [], total: 0 }
  },
}

let t: TestGateway
let key: string

beforeAll(async () => {
  t = await TestGateway.start({ gateway: { properties: failing } })
  key = await t.key()
})
afterAll(async () => {
  await t.close()
})

function body(answer: { body: string }): Record<string, unknown> {
  return JSON.parse(answer.body) as Record<string, unknown>
}

describe('framework errors', () => {
  it('answers a path with broken percent-encoding with 400 MALFORMED_REQUEST that says so', async () => {
    const answer = await t.get('/v1/properties/%zz', key)
    expect(answer.statusCode).toBe(400)
    expect(answer.headers['retry-after']).toBeUndefined()
    expect(answer.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(body(answer)).toEqual({
      type: `${DOCS_URL}/errors/malformed-request`,
      title: 'Malformed request',
      status: 400,
      detail: 'The request path is not valid percent-encoding.',
      moreInfo: 'The request is not valid HTTP/1.1 (bad percent-encoding, header syntax or framing); check how your client builds the request line and headers.',
      instance: '/v1/properties/%zz',
      code: 'MALFORMED_REQUEST',
      errors: [],
      requestId: answer.headers['service-request-id'],
      timestamp: expect.stringMatching(TIMESTAMP),
    })
  })
})

describe('failures and their log lines', () => {
  it('answers an unexpected exception with a 500 that names nothing, and logs it as an error with its cause', async () => {
    const answer = await t.get(`/v1/properties/${BOOM}`, key)
    expect(answer.statusCode).toBe(500)
    expect(answer.headers['retry-after']).toBeUndefined()
    expect(body(answer)).toEqual({
      type: `${DOCS_URL}/errors/internal-error`,
      title: 'Internal server error',
      status: 500,
      detail: 'An unexpected error occurred; it has been logged.',
      moreInfo: 'Retry later; if it persists, contact partner support and quote the requestId.',
      instance: `/v1/properties/${BOOM}`,
      code: 'INTERNAL_ERROR',
      errors: [],
      requestId: answer.headers['service-request-id'],
      timestamp: expect.stringMatching(TIMESTAMP),
    })
    expect(answer.body).not.toContain('boom at the source')
    const lines = t.logs.records().filter((r) => r.msg === 'request failed' && r.reqId === answer.headers['service-request-id'])
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: 'error', code: 'INTERNAL_ERROR', err: { type: 'TypeError', message: 'boom at the source' } })
  })

  it('answers anything else thrown (a system error, a string, null, an error with a 500 of its own) with the same 500 problem', async () => {
    const answers = await Promise.all([RESET, STRING, NULL, CODED].map(async (id) => t.get(`/v1/properties/${id}`, key)))
    for (const [i, id] of [RESET, STRING, NULL, CODED].entries()) {
      const answer = answers[i] as (typeof answers)[number]
      expect(answer.statusCode).toBe(500)
      expect(answer.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(body(answer)).toEqual({
        type: `${DOCS_URL}/errors/internal-error`,
        title: 'Internal server error',
        status: 500,
        detail: 'An unexpected error occurred; it has been logged.',
        moreInfo: 'Retry later; if it persists, contact partner support and quote the requestId.',
        instance: `/v1/properties/${id}`,
        code: 'INTERNAL_ERROR',
        errors: [],
        requestId: answer.headers['service-request-id'],
        timestamp: expect.stringMatching(TIMESTAMP),
      })
    }
  })

  it('answers the PMS being unavailable with its 503 and Retry-After, and logs it as a warning', async () => {
    const answer = await t.get(`/v1/properties/${DOWN}`, key)
    expect(answer.statusCode).toBe(503)
    expect(answer.headers['retry-after']).toBe('5')
    expect(body(answer)).toEqual({
      type: `${DOCS_URL}/errors/service-unavailable`,
      title: 'Service unavailable',
      status: 503,
      detail: 'The property system is unavailable.',
      moreInfo: 'Retry after the seconds given in `Retry-After`, with exponential backoff if it persists.',
      instance: `/v1/properties/${DOWN}`,
      code: 'SERVICE_UNAVAILABLE',
      errors: [],
      requestId: answer.headers['service-request-id'],
      timestamp: expect.stringMatching(TIMESTAMP),
    })
    const lines = t.logs.records().filter((r) => r.msg === 'request failed' && r.reqId === answer.headers['service-request-id'])
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: 'warn', code: 'SERVICE_UNAVAILABLE', err: { message: 'The property system is unavailable.' } })
  })
})

describe('field errors past the twentieth', () => {
  const names = (n: number): string[] => Array.from({ length: n }, (_, i) => `p${String(i + 1).padStart(2, '0')}`)
  const query = (n: number): string => names(n).map((name) => `${name}=1`).join('&')

  it('lists twenty and says how many more there are, in the singular and the plural', async () => {
    const answers = await Promise.all([20, 21, 22].map(async (n) => t.get(`/v1/properties?${query(n)}`, key)))
    expect(answers.map((a) => a.statusCode)).toEqual([400, 400, 400])
    const bodies = answers.map((a) => body(a) as { code: string; detail: string; errors: { field: string }[] })
    for (const b of bodies) {
      expect(b.code).toBe('UNKNOWN_QUERY_PARAMETER')
      expect(b.errors.map((e) => e.field)).toEqual(names(20))
    }
    expect(bodies[0]?.detail).not.toContain('more field error')
    expect(bodies[1]?.detail).toMatch(/\. 1 more field error is not listed\.$/)
    expect(bodies[2]?.detail).toMatch(/\. 2 more field errors are not listed\.$/)
  })
})

describe('the correlation id', () => {
  it('is echoed on a success that sent one, and on no other answer', async () => {
    const echoed = await t.get('/v1/properties', key, { 'service-correlation-id': 'order-4711' })
    const without = await t.get('/v1/properties', key)
    const refused = await t.get('/v1/properties?nope=1', key, { 'service-correlation-id': 'order-4712' })
    expect([echoed.statusCode, without.statusCode, refused.statusCode]).toEqual([200, 200, 400])
    expect(echoed.headers['service-correlation-id']).toBe('order-4711')
    expect(without.headers['service-correlation-id']).toBeUndefined()
    expect(refused.headers['service-correlation-id']).toBeUndefined()
  })
})

describe('quoting what the partner sent', () => {
  it('cuts a quote at 200 characters, an emoji before the cut counting as its two', async () => {
    // U+1F600 is two UTF-16 code units; 198 letters after it fill the 200.
    const name = `\u{1F600}${'a'.repeat(250)}`
    const answer = await t.get(`/v1/properties?${encodeURIComponent(name)}=1`, key)
    expectProblem(answer, {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/properties',
      detail: `Unknown query parameter '\u{1F600}${'a'.repeat(198)}…'.`,
      errors: [{ field: name, code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter; this endpoint accepts 'page', 'perPage'." }],
    })
  })
})

describe('framework refusals and failures on forwarded routes', () => {
  const SERVICE_TOKEN = 'svc-contract-kills-token'
  let routed: TestGateway
  let service: MockService
  let routedKey: string

  beforeAll(async () => {
    service = await new MockService({ token: SERVICE_TOKEN }).listen()
    routed = await TestGateway.start({
      config: { upstreams: { bookings: { ...shipped.upstreams.bookings, sandboxUrl: undefined } } as FileConfigInput['upstreams'], routes: shipped.routes },
      env: { UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    })
    routedKey = await routed.key()
  })
  afterAll(async () => {
    await routed.close()
    await service.close()
  })

  it('answers a chunked body past the route\'s limit 413 PAYLOAD_TOO_LARGE, saying the body is too large', async () => {
    // 70 KiB of a JSON string, sent chunked: its length is known only once read, past the 64 KiB of /v1/guests.
    async function* chunks(): AsyncGenerator<Buffer> {
      yield Buffer.from('"')
      for (let i = 0; i < 70; i += 1) yield Buffer.alloc(1024, 0x61)
      yield Buffer.from('"')
    }
    const before = service.received.length
    const res = await request(`${routed.url}/v1/guests`, {
      method: 'POST', body: Readable.from(chunks()),
      headers: { host: ACME_HOST, 'user-agent': 'mutation-kills/1.0', authorization: `Bearer ${routedKey}`, 'content-type': 'application/json' },
    })
    const answer: Answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
    checkAnswer('POST', '/v1/guests', answer, routed.gateway.app.gatewayConfig)
    expectProblem(answer, { code: 'PAYLOAD_TOO_LARGE', instance: '/v1/guests', detail: 'The request body is too large.' })
    expect(service.received).toHaveLength(before)
  })

  it.each(['application/xml', 'text/plain'])('answers an empty POST announced as %s 415, as it would with a body', async (type) => {
    const before = service.received.length
    const answer = await routed.call('POST', '/v1/guests', { key: routedKey, headers: { 'content-type': type, 'content-length': '0' } })
    expectProblem(answer, { code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests', detail: `Request bodies must be application/json; the Content-Type was '${type}'.` })
    expect(service.received).toHaveLength(before)
  })

  it('answers a keyed write whose answer the service cuts 503 without the correlation id of the success it began as', async () => {
    service.setFailure({ mode: 'reset', times: 1 })
    const answer = await routed.call('POST', '/v1/guests', {
      key: routedKey, body: '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}',
      headers: { 'idempotency-key': `cut-${process.pid}-${Date.now()}`, 'service-correlation-id': 'order-4713' },
    })
    // The service's answer began as a 200, which set the correlation id, then broke off.
    expectProblem(answer, {
      code: 'SERVICE_UNAVAILABLE', instance: '/v1/guests', headers: { 'retry-after': '1' },
      detail: 'The service is temporarily unavailable; retry in 1 second.',
    })
  })
})

describe('the challenge of a refused access token', () => {
  const idp = new MockIdp({ clients: [{ clientId: 'channel-sync', secret: 'channel-sync-secret' }] })
  let oauth: TestGateway

  beforeAll(async () => {
    await idp.listen()
    // An audience with a letter outside what RFC 6750 allows in a challenge.
    oauth = await TestGateway.start({ config: { oauth: oauthFor(idp, {}, { audience: 'partner-api-zürich' }) } })
    expect(await oauth.gateway.tokens.ready(5000)).toBe(true)
  })
  afterAll(async () => {
    await oauth.close()
    await idp.close()
  })

  it('has a space where the detail has a character RFC 6750 does not allow; the body keeps the detail whole', async () => {
    const token = idp.mint({ claims: { client_id: 'channel-sync', scope: 'properties:read', aud: 'billing-api' } })
    const detail = "The access token is not for this API: its audience (aud) must include 'partner-api-zürich'."
    expectProblem(await oauth.get('/v1/properties', token), {
      code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail,
      headers: { 'www-authenticate': 'Bearer error="invalid_token", error_description="The access token is not for this API: its audience (aud) must include \'partner-api-z rich\'."' },
    })
  })
})
