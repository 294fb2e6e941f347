import { MockAgent } from 'undici'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { UpstreamError, type UpstreamOutcome } from '../../src/upstream/errors.js'
import { PmsClient } from '../../src/upstream/pms-client.js'
import { Upstream, type UpstreamOptions } from '../../src/upstream/upstream.js'

// The PMS client at its edge: undici's MockAgent stands in for the network (nock does not
// see undici's own dispatchers).

const ORIGIN = 'http://pms.test'
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const context = { requestId: 'req_1', trace: { traceId: TRACE, parentId: '00f067aa0ba902b7', flags: '01', tracestate: 'vendor=a' } }
const HOTEL = { hotel_uuid: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', chain_code: 'ACME' }

let agent: MockAgent
let outcomes: UpstreamOutcome[]

beforeEach(() => {
  agent = new MockAgent()
  agent.disableNetConnect()
  outcomes = []
})
afterEach(async () => {
  agent.assertNoPendingInterceptors()
  await agent.close()
})

/** The PMS client on an upstream with the PMS's resilience, over the mock agent. */
function client(overrides: Partial<UpstreamOptions> = {}): PmsClient {
  const upstream = new Upstream({
    name: 'pms', url: ORIGIN, timeoutMs: 200, connections: 4, retries: 1, maxInFlight: 16, buffered: true,
    breaker: { errorThresholdPercentage: 50, volumeThreshold: 4, resetTimeoutMs: 30_000, rollingCountTimeoutMs: 10_000 },
    dispatcher: agent, ...overrides,
  })
  return new PmsClient({ upstream, token: 'secret-token', observe: (outcome) => outcomes.push(outcome) })
}

const pool = () => agent.get(ORIGIN)
const path = `/internal/v3/hotels/${HOTEL.hotel_uuid}`

async function failure(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(() => undefined, (e: unknown) => e)
  expect(error).toBeInstanceOf(UpstreamError)
  return error as UpstreamError
}

describe('PMS client', () => {
  it('sends the token, the request id and the trace with a new span', async () => {
    let seen: Record<string, string> = {}
    pool().intercept({ path, method: 'GET' }).reply(200, (options) => {
      seen = options.headers as Record<string, string>
      return HOTEL
    })
    expect(await client().getHotel(HOTEL.hotel_uuid, context)).toEqual(HOTEL)
    expect(seen).toMatchObject({ 'x-pms-service-token': 'secret-token', 'x-request-id': 'req_1', tracestate: 'vendor=a' })
    expect(seen.traceparent).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`))
    expect(seen.traceparent).not.toContain('00f067aa0ba902b7')
    expect(outcomes).toEqual(['success'])
  })

  it('returns undefined for a 404 on a hotel', async () => {
    pool().intercept({ path, method: 'GET' }).reply(404, { error_code: 'HOTEL_NOT_FOUND', message: 'x' })
    expect(await client().getHotel(HOTEL.hotel_uuid, context)).toBeUndefined()
    expect(outcomes).toEqual(['not_found'])
  })

  it.each([
    [502, 'text/html', '<html>bad gateway</html>'],
    [503, 'text/html', '<html>unavailable</html>'],
    [504, 'text/html', '<html>timeout</html>'],
    [500, 'application/json', '{"error_code":"INTERNAL","message":"NullPointerException"}'],
  ])('treats %i as unavailable', async (status, type, body) => {
    pool().intercept({ path, method: 'GET' }).reply(status, body, { headers: { 'content-type': type } })
    const error = await failure(client().getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome, retryAfter: error.retryAfter }).toEqual({ kind: 'unavailable', outcome: 'server_error', retryAfter: 1 })
  })

  it("passes on the PMS's Retry-After of a 429, capped at 60", async () => {
    pool().intercept({ path, method: 'GET' }).reply(429, { error_code: 'THROTTLED' }, { headers: { 'retry-after': '7' } })
    pool().intercept({ path, method: 'GET' }).reply(429, { error_code: 'THROTTLED' }, { headers: { 'retry-after': '3600' } })
    const c = client()
    expect((await failure(c.getHotel(HOTEL.hotel_uuid, context))).retryAfter).toBe(7)
    const capped = await failure(c.getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: capped.kind, outcome: capped.outcome, retryAfter: capped.retryAfter }).toEqual({ kind: 'unavailable', outcome: 'throttled', retryAfter: 60 })
  })

  it.each([
    [200, 'OK build 9f8e', 'text/plain'],
    [401, '{"error_code":"UNAUTHENTICATED"}', 'application/json'],
    [403, '{"error_code":"FORBIDDEN"}', 'application/json'],
    [400, '{"error_code":"BAD_REQUEST"}', 'application/json'],
  ])('treats %i with %s as a bad response', async (status, body, type) => {
    pool().intercept({ path, method: 'GET' }).reply(status, body, { headers: { 'content-type': type } })
    const error = await failure(client().getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome }).toEqual({ kind: 'bad-response', outcome: 'bad_response' })
  })

  it('reads a record that starts with a byte order mark, and refuses an empty 200', async () => {
    pool().intercept({ path, method: 'GET' }).reply(200, `\uFEFF${JSON.stringify(HOTEL)}`, { headers: { 'content-type': 'application/json' } })
    pool().intercept({ path, method: 'GET' }).reply(200, '', { headers: { 'content-type': 'application/json' } })
    const c = client()
    expect(await c.getHotel(HOTEL.hotel_uuid, context)).toEqual(HOTEL)
    const error = await failure(c.getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome, message: error.message }).toEqual({ kind: 'bad-response', outcome: 'bad_response', message: 'pms: 200 body is not JSON' })
    expect(outcomes).toEqual(['success', 'bad_response'])
  })

  it('retries a read once after a connection reset', async () => {
    pool().intercept({ path, method: 'GET' }).replyWithError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }))
    pool().intercept({ path, method: 'GET' }).reply(200, HOTEL)
    expect(await client().getHotel(HOTEL.hotel_uuid, context)).toEqual(HOTEL)
  })

  it('gives up after the configured retries', async () => {
    pool().intercept({ path, method: 'GET' }).replyWithError(Object.assign(new Error('reset'), { code: 'ECONNRESET' })).times(2)
    const error = await failure(client().getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome }).toEqual({ kind: 'unavailable', outcome: 'connection_error' })
  })

  it('times out a slow answer', async () => {
    pool().intercept({ path, method: 'GET' }).reply(200, HOTEL).delay(1000)
    const error = await failure(client({ timeoutMs: 50 }).getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome }).toEqual({ kind: 'unavailable', outcome: 'timeout' })
  })

  it('opens the circuit on failures, not on 404s, and says when it half-opens', async () => {
    const c = client()
    pool().intercept({ path, method: 'GET' }).reply(404, {}).times(6)
    for (let i = 0; i < 6; i += 1) await c.getHotel(HOTEL.hotel_uuid, context)
    expect(c.upstream.state).toBe('closed')
    pool().intercept({ path, method: 'GET' }).reply(503, '<html/>').persist()
    for (let i = 0; i < 20 && c.upstream.state === 'closed'; i += 1) await c.getHotel(HOTEL.hotel_uuid, context).catch(() => undefined)
    // 6 answered 404s count as successes: the 7th failure is the first above 50 %.
    expect(c.upstream.state).toBe('open')
    expect(outcomes.filter((o) => o === 'server_error')).toHaveLength(7)
    const error = await failure(c.getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome, retryAfter: error.retryAfter }).toEqual({ kind: 'unavailable', outcome: 'circuit_open', retryAfter: 30 })
    expect(outcomes.filter((o) => o === 'server_error')).toHaveLength(7)
    await c.upstream.close()
  })

  it('refuses at once beyond the calls it may have in flight', async () => {
    pool().intercept({ path, method: 'GET' }).reply(200, HOTEL).delay(50).times(2)
    const c = client({ maxInFlight: 2 })
    const first = [c.getHotel(HOTEL.hotel_uuid, context), c.getHotel(HOTEL.hotel_uuid, context)]
    const error = await failure(c.getHotel(HOTEL.hotel_uuid, context))
    expect({ kind: error.kind, outcome: error.outcome }).toEqual({ kind: 'unavailable', outcome: 'overloaded' })
    expect(await Promise.all(first)).toEqual([HOTEL, HOTEL])
  })

  it('refuses a list body without results as a bad response', async () => {
    pool().intercept({ path: '/internal/v3/hotels?chain_code=ACME', method: 'GET' }).reply(200, { items: [] })
    const error = await failure(client().listHotels({ chain_code: 'ACME' }, context))
    expect(error.kind).toBe('bad-response')
  })
})
