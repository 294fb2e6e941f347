import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MockService } from '../../mocks/service/server.js'
import { unsendable } from '../../src/upstream/interceptors.js'
import { Upstream } from '../../src/upstream/upstream.js'
import { eventually } from '../helpers/redis.js'

// The circuit breaker counts only what the upstream did. An upstream over a real pool to the
// stand-in service: calls undici refuses before sending (a header it never sends) must leave
// the breaker as it was, closed or half-open.

const TOKEN = 'breaker-token'
let service: MockService

beforeAll(async () => {
  service = await new MockService({ token: TOKEN }).listen()
})
afterAll(async () => service.close())
afterEach(() => {
  service.setFailure(undefined)
  service.received.length = 0
})

function upstream(): Upstream {
  return new Upstream({
    name: 'bookings', url: service.url, timeoutMs: 2000, connections: 4, retries: 1, maxInFlight: 16, buffered: false,
    breaker: { errorThresholdPercentage: 50, volumeThreshold: 4, resetTimeoutMs: 200, rollingCountTimeoutMs: 10_000 },
  })
}

const HEADERS = { 'x-service-token': TOKEN, 'x-service-brand': 'acme' }

/** A call's status, or how the upstream classifies its failure. */
async function callWith(u: Upstream, headers: Record<string, string> = {}): Promise<number | { kind: string; outcome: string }> {
  try {
    const res = await u.dispatcher.request({ origin: u.url, path: '/partner/v1/guests?perPage=1', method: 'GET', headers: { ...HEADERS, ...headers } })
    await res.body.dump()
    return res.statusCode
  } catch (error) {
    const failure = u.failure(error)
    return { kind: failure.kind, outcome: failure.outcome }
  }
}

// Headers undici never sends, and a value with a line break: each would make it refuse the call.
const REFUSED_BY_UNDICI: Record<string, string>[] = [{ expect: '100-continue' }, { 'transfer-encoding': 'chunked' }, { upgrade: 'h2c' }, { 'x-note': 'a\r\nb' }]

describe('the circuit breaker', () => {
  it('counts no call refused before sending, sends nothing, and keeps every connection of the pool usable', async () => {
    const u = upstream()
    try {
      const results = []
      for (let i = 0; i < 12; i += 1) results.push(await callWith(u, REFUSED_BY_UNDICI[i % REFUSED_BY_UNDICI.length]))
      expect(results).toEqual(Array.from({ length: 12 }, () => ({ kind: 'not-sent', outcome: 'not_sent' })))
      expect({ state: u.state, fires: u.breaker.stats.fires, failures: u.breaker.stats.failures, inFlight: u.callsInFlight }).toEqual({ state: 'closed', fires: 0, failures: 0, inFlight: 0 })
      expect(service.received).toEqual([])
      // undici's own refusal would leave each of the pool's 4 connections marked busy for good.
      expect(await callWith(u)).toBe(200)
      expect({ fires: u.breaker.stats.fires, successes: u.breaker.stats.successes }).toEqual({ fires: 1, successes: 1 })
    } finally {
      await u.close()
    }
  })

  it('leaves a half-open circuit half-open when its trial call is refused before sending, for the next call to try', async () => {
    const u = upstream()
    try {
      service.setFailure({ mode: 'html-5xx', status: 503 })
      for (let i = 0; i < 4; i += 1) expect(await callWith(u)).toBe(503)
      expect(u.state).toBe('open')
      expect(await callWith(u)).toEqual({ kind: 'unavailable', outcome: 'circuit_open' })
      expect(await eventually(async () => u.state === 'halfOpen', 10_000)).toBe(true)
      service.setFailure(undefined)
      expect(await callWith(u, { expect: '100-continue' })).toEqual({ kind: 'not-sent', outcome: 'not_sent' })
      expect(u.state).toBe('halfOpen')
      expect(await callWith(u)).toBe(200)
      expect(u.state).toBe('closed')
      // The four 503s and the trial reached the service; the refused call did not.
      expect(service.received).toHaveLength(5)
    } finally {
      await u.close()
    }
  })

  it('counts what the service did: 5xx, 429 and a refused connection', async () => {
    const u = upstream()
    try {
      service.setFailure({ mode: 'throttle', retryAfter: 1, times: 2 })
      expect([await callWith(u), await callWith(u)]).toEqual([429, 429])
      expect(u.breaker.stats.failures).toBe(2)
      const closed = new Upstream({ ...{ name: 'gone', url: 'http://127.0.0.1:9', timeoutMs: 2000, connections: 1, retries: 0, maxInFlight: 4, buffered: false },
        breaker: { errorThresholdPercentage: 50, volumeThreshold: 1, resetTimeoutMs: 10_000, rollingCountTimeoutMs: 10_000 } })
      try {
        expect(await callWith(closed)).toEqual({ kind: 'unavailable', outcome: 'connection_error' })
        expect({ state: closed.state, failures: closed.breaker.stats.failures }).toEqual({ state: 'open', failures: 1 })
      } finally {
        await closed.close()
      }
    } finally {
      await u.close()
    }
  })
})

describe('what undici would refuse to send', () => {
  const call = (path: string, headers: Record<string, unknown>, method = 'GET') => unsendable({ path, method, headers } as never)

  it('passes what the gateway sends', () => {
    expect(call('/partner/v1/guests?email=a%3Bb', { host: 'bookings:4020', 'user-agent': 'p/1.0 (é)', accept: 'application/json', 'content-length': '12', connection: 'keep-alive', 'x-b': undefined })).toBeUndefined()
  })

  it.each([
    ['/a b', {}, 'GET', 'the path is not one it can send'],
    ['partner', {}, 'GET', 'the path is not one it can send'],
    ['/a', {}, 'GE T', 'the method is not a token'],
    ['/a', { 'x y': '1' }, 'GET', 'header name "x y" is not a token'],
    ['/a', { Expect: '100-continue' }, 'GET', 'header expect is never sent'],
    ['/a', { 'x-a': 'a\nb' }, 'GET', 'header x-a has a value it cannot send'],
    ['/a', { 'x-a': 'nul\u0000' }, 'GET', 'header x-a has a value it cannot send'],
    ['/a', { 'x-a': '\u0100' }, 'GET', 'header x-a has a value it cannot send'],
    ['/a', { connection: 'close, a b' }, 'GET', 'connection header is not a list of tokens'],
    ['/a', { 'content-length': '1e3' }, 'POST', 'content-length header is not a length'],
    ['/a', { host: ['a', 'b'] }, 'GET', 'host header given twice'],
  ])('refuses %s %j %s: %s', (path, headers, method, problem) => {
    expect(call(path, headers, method)).toBe(problem)
  })
})
