import { connect } from 'node:net'
import { Readable } from 'node:stream'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import type { Hotel } from '../../mocks/pms/data.js'
import { roomsOf } from '../../mocks/service/data.js'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { digestKey } from '../../src/keys/format.js'
import { RedisKeyStore, type SecretRecord } from '../../src/keys/store.js'
import { ACME_HOST, GLOBEX_HOST } from '../helpers/config.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { grantClient, oauthFor } from '../helpers/oauth.js'
import { expectProblem, TIMESTAMP } from '../helpers/problem.js'
import { REDIS_URL } from '../helpers/redis.js'
import { oneOf, secondsBetween, timed } from '../helpers/window.js'

// Rules of the request pipeline that a partner sees (docs/architecture.md, "Order of checks";
// docs/security.md, "Invented keys"): step 3's body framing (415 with the exact detail for a
// missing, other or non-UTF-8 Content-Type, 413 by Content-Length with `Connection: close`, no
// body on GET or DELETE, chunked bodies), the per-address allowance of 401s and the 429 past
// it, which look-ups spend that allowance, the answers of authentication for API keys and
// access tokens, the quota's headers and 429, test keys on a route without a sandbox
// (TEST_MODE_UNAVAILABLE), and the property scope's 403 or 404.
//
// Each test builds its own gateway (and stand-ins): a route's stages are composed when the
// gateway is built (bodyStage, testModeStage, propertyScopeStage, the limiter of 401s), and
// mutation testing counts code run in a file-level beforeAll as static, testing its changes
// against no test that could notice them (stryker.config.mjs, ignoreStatic). Over real sockets,
// with real Redis; the shipped routes of config/default.json, in front of the stand-in service.

const UA = 'pipeline-checks/1.0'
const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}'

/** A request over a real socket with exactly these headers (besides Host and User-Agent) and body. */
async function send(s: Setup, method: string, path: string, headers: Record<string, string>, body?: string | Readable): Promise<Answer> {
  const res = await request(`${s.t.url}${path}`, { method: method as 'GET', headers: { host: ACME_HOST, 'user-agent': UA, ...headers }, body: body ?? null })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

/**
 * Writes `head` (a request head, no body) on a new connection and resolves with the first
 * answer once it is complete: the body a head announces is never sent, so the answer must come
 * from the head alone.
 */
function headOnly(s: Setup, head: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(s.t.url).port), '127.0.0.1', () => socket.write(head))
    let buffered = Buffer.alloc(0)
    const parse = (): Answer | undefined => {
      const end = buffered.indexOf('\r\n\r\n')
      if (end < 0) return undefined
      const [status = '', ...lines] = buffered.subarray(0, end).toString('latin1').split('\r\n')
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
      const length = Number(headers['content-length'] ?? 0)
      if (buffered.length < end + 4 + length) return undefined
      return { statusCode: Number(status.split(' ')[1]), headers, body: buffered.subarray(end + 4, end + 4 + length).toString('utf8') }
    }
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      const answer = parse()
      if (answer !== undefined) {
        socket.destroy()
        resolve(answer)
      }
    })
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`connection closed before a whole answer: ${buffered.toString('latin1')}`)))
  })
}

function rawHead(method: string, path: string, key: string, lines: string[]): string {
  return [`${method} ${path} HTTP/1.1`, `Host: ${ACME_HOST}`, `User-Agent: ${UA}`, `Authorization: Bearer ${key}`, ...lines, '', ''].join('\r\n')
}

function acmeLive(t: TestGateway): string[] {
  return t.pms.hotels.filter((h: Hotel) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE').map((h) => String(h.hotel_uuid))
}

describe('step 3: the body a route takes (docs/architecture.md, "Order of checks")', () => {
  it('forwards a JSON body of exactly the route\'s body.maxBytes, its media type in any case, and refuses one byte more by its Content-Length alone, closing the connection', async () => {
    const s = await startWithService()
    try {
      const key = await s.t.key()
      // 65536 bytes: the shipped body.maxBytes of POST /v1/guests.
      const body = `{"firstName":"Ann","lastName":"Lee","email":"ann@example.com","note":"${'x'.repeat(65536 - 72)}"}`
      expect(Buffer.byteLength(body)).toBe(65536)
      s.service.setFailure({ mode: 'no-content', times: 1 })
      const taken = await send(s, 'POST', '/v1/guests', { authorization: `Bearer ${key}`, 'content-type': 'Application/JSON; Charset="UTF-8"' }, body)
      expect({ status: taken.statusCode, body: taken.body }).toEqual({ status: 204, body: '' })
      expect(s.service.received.map((r) => ({ method: r.method, path: r.path, type: r.headers['content-type'], body: r.body })))
        .toEqual([{ method: 'POST', path: '/partner/v1/guests', type: 'application/json', body }])

      const refused = await headOnly(s, rawHead('POST', '/v1/guests', key, ['Content-Type: application/json', 'Content-Length: 65537']))
      expectProblem(refused, { code: 'PAYLOAD_TOO_LARGE', instance: '/v1/guests', detail: 'The request body exceeds 65536 bytes.', headers: { connection: 'close' } })
      expect(s.service.received).toHaveLength(1)
    } finally {
      await s.close()
    }
  })

  it('forwards a body whose media type has white space before its charset, as the media type rule allows', async () => {
    const s = await startWithService()
    try {
      const key = await s.t.key()
      s.service.setFailure({ mode: 'no-content', times: 1 })
      const taken = await send(s, 'POST', '/v1/guests', { authorization: `Bearer ${key}`, 'content-type': 'application/json ; charset=utf-8' }, GUEST)
      expect({ status: taken.statusCode, body: taken.body }).toEqual({ status: 204, body: '' })
      expect(s.service.received.map((r) => ({ method: r.method, path: r.path, type: r.headers['content-type'], body: r.body })))
        .toEqual([{ method: 'POST', path: '/partner/v1/guests', type: 'application/json', body: GUEST }])
    } finally {
      await s.close()
    }
  })

  it('answers a body without a Content-Type 415 saying the type was missing, whether its length is announced or it is chunked', async () => {
    const s = await startWithService()
    try {
      const key = await s.t.key()
      const missing = { code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests', detail: 'Request bodies must be application/json; the Content-Type was missing.' } as const
      expectProblem(await send(s, 'POST', '/v1/guests', { authorization: `Bearer ${key}` }, GUEST), missing)
      expectProblem(await send(s, 'POST', '/v1/guests', { authorization: `Bearer ${key}` }, Readable.from([Buffer.from(GUEST)])), missing)
      expectProblem(await send(s, 'POST', '/v1/guests', { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, GUEST), {
        code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests', detail: "Request bodies must be application/json; the Content-Type was 'text/plain'.",
      })
      expectProblem(await send(s, 'POST', '/v1/guests', { authorization: `Bearer ${key}`, 'content-type': 'application/json; charset=iso-8859-1' }, GUEST), {
        code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/v1/guests',
        detail: "Request bodies must be application/json in UTF-8, with no parameter but charset=utf-8; the Content-Type was 'application/json; charset=iso-8859-1'.",
      })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('forwards a POST with no body and no Content-Type, whether it says Content-Length: 0 or nothing', async () => {
    const s = await startWithService()
    try {
      const key = await s.t.key()
      s.service.setFailure({ mode: 'no-content', times: 2 })
      const zero = await headOnly(s, rawHead('POST', '/v1/guests', key, ['Content-Length: 0']))
      const none = await headOnly(s, rawHead('POST', '/v1/guests', key, []))
      expect([zero, none].map((a) => ({ status: a.statusCode, body: a.body, type: a.headers['content-type'] })))
        .toEqual([{ status: 204, body: '', type: undefined }, { status: 204, body: '', type: undefined }])
      expect(s.service.received.map((r) => ({ method: r.method, path: r.path, type: r.headers['content-type'], body: r.body })))
        .toEqual([{ method: 'POST', path: '/partner/v1/guests', type: undefined, body: '' }, { method: 'POST', path: '/partner/v1/guests', type: undefined, body: '' }])
    } finally {
      await s.close()
    }
  })

  it('refuses a body on GET 400 up to 1 MiB announced and 413 past it, closing the connection then, and serves a GET that announces zero bytes', async () => {
    const s = await startWithService()
    try {
      const key = await s.t.key()
      expectProblem(await headOnly(s, rawHead('GET', '/v1/guests', key, ['Content-Length: 1048576'])), {
        code: 'UNEXPECTED_BODY', instance: '/v1/guests', detail: 'This endpoint takes no request body; send parameters in the query string.',
      })
      expectProblem(await headOnly(s, rawHead('GET', '/v1/guests', key, ['Content-Length: 1048577'])), {
        code: 'PAYLOAD_TOO_LARGE', instance: '/v1/guests', detail: 'The request body exceeds 1048576 bytes.', headers: { connection: 'close' },
      })
      expectProblem(await headOnly(s, rawHead('GET', '/v1/properties', key, ['Transfer-Encoding: chunked'])), {
        code: 'UNEXPECTED_BODY', instance: '/v1/properties', detail: 'This endpoint takes no request body; send parameters in the query string.', headers: { connection: 'close' },
      })
      expect(s.service.received).toEqual([])
      // Zero bytes, however the number is written, is no body.
      const served = await headOnly(s, rawHead('GET', '/v1/guests?perPage=1', key, ['Content-Length: 00']))
      const guests = s.service.guestsOf('acme')
      expect({ status: served.statusCode, body: JSON.parse(served.body) as unknown }).toEqual({
        status: 200,
        body: { data: guests.slice(0, 1), meta: { requestId: served.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 1, total: guests.length } } },
      })
    } finally {
      await s.close()
    }
  })
})

describe('test keys and the property of a request (docs/architecture.md, "Test mode", "Order of checks" step 7)', () => {
  it('refuses a test key 403 TEST_MODE_UNAVAILABLE on a route one of whose upstreams has no sandbox, and sends it to the sandbox where every upstream has one', async () => {
    // The bookings service has a sandbox, the PMS none: /v1/rooms reads both.
    const s = await startWithService({ sandbox: true })
    try {
      const testKey = await s.t.key({ mode: 'test' })
      const propertyId = acmeLive(s.t)[0] as string
      expectProblem(await send(s, 'GET', '/v1/rooms', { authorization: `Bearer ${testKey}`, 'service-property-id': propertyId }), {
        code: 'TEST_MODE_UNAVAILABLE', instance: '/v1/rooms', detail: 'This endpoint has no sandbox: test keys (svc_test_) cannot use it; use a live key.',
      })
      const sandbox = s.sandbox as MockService
      const guests = sandbox.guestsOf('acme')
      const served = await send(s, 'GET', '/v1/guests?perPage=2', { authorization: `Bearer ${testKey}` })
      expect({ status: served.statusCode, body: JSON.parse(served.body) as unknown }).toEqual({
        status: 200,
        body: { data: guests.slice(0, 2), meta: { requestId: served.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 2, total: guests.length } } },
      })
      expect(sandbox.received.map((r) => r.path)).toEqual(['/partner/v1/guests?perPage=2'])

      // A live key on the same route is served from live data.
      const live = await send(s, 'GET', '/v1/rooms?perPage=3', { authorization: `Bearer ${await s.t.key()}`, 'service-property-id': propertyId })
      const rooms = roomsOf(propertyId, 1) ?? []
      expect({ status: live.statusCode, body: JSON.parse(live.body) as unknown }).toEqual({
        status: 200,
        body: { data: rooms.slice(0, 3), meta: { requestId: live.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 3, total: rooms.length } } },
      })
      expect(s.service.received.map((r) => r.path)).toEqual([`/partner/v1/properties/${propertyId}/rooms?perPage=3`])
    } finally {
      await s.close()
    }
  })

  it('refuses a test key 403 TEST_MODE_UNAVAILABLE on routes whose service has no sandbox though the PMS has one, before any upstream is called', async () => {
    const s = await startWithService({ pmsSandbox: true })
    try {
      const testKey = await s.t.key({ mode: 'test' })
      const sandboxProperty = String((s.t.sandbox as TestGateway['pms']).hotels.find((h: Hotel) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)
      const refusal = { code: 'TEST_MODE_UNAVAILABLE', detail: 'This endpoint has no sandbox: test keys (svc_test_) cannot use it; use a live key.' } as const
      expectProblem(await send(s, 'GET', '/v1/guests', { authorization: `Bearer ${testKey}` }), { ...refusal, instance: '/v1/guests' })
      expectProblem(await send(s, 'GET', '/v1/rooms', { authorization: `Bearer ${testKey}`, 'service-property-id': sandboxProperty }), { ...refusal, instance: '/v1/rooms' })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it.each([
    [403, 'PROPERTY_ACCESS_DENIED', (id: string) => `Your API key is not authorised for property '${id}'.`],
    [404, 'PROPERTY_NOT_FOUND', (id: string) => `No property with id '${id}' exists for this brand.`],
  ] as const)('answers a key naming a property it may not use with accessDeniedStatus %i on a property-scoped route, and serves its own property', async (status, code, detail) => {
    const s = await startWithService({ config: { accessDeniedStatus: status } })
    try {
      const [own, other] = acmeLive(s.t) as [string, string]
      const key = await s.t.key({ properties: [own] })
      expectProblem(await send(s, 'GET', '/v1/rooms', { authorization: `Bearer ${key}`, 'service-property-id': other }), { code, instance: '/v1/rooms', detail: detail(other) })
      expect(s.service.received).toEqual([])
      const served = await send(s, 'GET', '/v1/rooms?perPage=1', { authorization: `Bearer ${key}`, 'service-property-id': own })
      const rooms = roomsOf(own, 1) ?? []
      expect({ status: served.statusCode, body: JSON.parse(served.body) as unknown }).toEqual({
        status: 200,
        body: { data: rooms.slice(0, 1), meta: { requestId: served.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 1, total: rooms.length } } },
      })
    } finally {
      await s.close()
    }
  })
})

describe('step 4 and 5: who is calling, and their quota', () => {
  it('answers a request without Authorization 401 MISSING_AUTH_HEADER telling how to send the key, and a key of another brand 403 naming the key', async () => {
    const s = await startWithService()
    try {
      expectProblem(await send(s, 'GET', '/v1/guests', {}), {
        code: 'MISSING_AUTH_HEADER', instance: '/v1/guests', detail: 'Send the header `Authorization: Bearer <API key>`.', headers: { 'www-authenticate': 'Bearer' },
      })
      expectProblem(await send(s, 'GET', '/v1/guests', { authorization: `Bearer ${await s.t.key({ brand: 'globex' })}` }), {
        code: 'BRAND_ACCESS_DENIED', instance: '/v1/guests', detail: `This API key belongs to another brand; it cannot be used at host '${ACME_HOST}'.`,
      })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('names the client of an access token, not an API key, when it refuses the token for its brand or over its quota, with the quota headers', async () => {
    const idp = await new MockIdp().listen()
    const s = await startWithService({ config: { oauth: oauthFor(idp) } })
    try {
      expect(await s.t.gateway.tokens.ready(5000)).toBe(true)
      const env = { REDIS_URL, REDIS_PREFIX: s.t.prefix }
      await grantClient(env, idp, 'globex-client', '--brand', 'globex')
      expectProblem(await send(s, 'GET', '/v1/guests', { authorization: `Bearer ${idp.issue('globex-client', ['guests:read'])}` }), {
        code: 'BRAND_ACCESS_DENIED', instance: '/v1/guests',
        detail: `The client of this access token is registered for another brand; it cannot be used at host '${ACME_HOST}'.`,
      })
      expect((await send(s, 'GET', '/v1/guests', { host: GLOBEX_HOST, authorization: `Bearer ${idp.issue('globex-client', ['guests:read'])}` })).statusCode).toBe(200)

      await grantClient(env, idp, 'limited-client', '--rate-limit', '1')
      const token = idp.issue('limited-client', ['guests:read'])
      const first = await send(s, 'GET', '/v1/guests', { authorization: `Bearer ${token}` })
      expect({ status: first.statusCode, limit: first.headers['ratelimit-limit'], remaining: first.headers['ratelimit-remaining'], policy: first.headers['ratelimit-policy'] })
        .toEqual({ status: 200, limit: '1', remaining: '0', policy: '"default";q=1;w=60' })
      // The shipped config's window: 60 s.
      const { answer: refused, secondsLeft } = await timed(60, async () => send(s, 'GET', '/v1/guests', { authorization: `Bearer ${token}` }))
      expectProblem(refused, {
        code: 'RATE_LIMITED', instance: '/v1/guests',
        detail: new RegExp(`^The client of this access token may make 1 requests per 60 seconds; the quota resets in (?:${secondsLeft.join('|')}) seconds\\.$`),
        headers: {
          'retry-after': oneOf(secondsLeft), 'ratelimit-limit': '1', 'ratelimit-remaining': '0', 'ratelimit-reset': oneOf(secondsLeft),
          'ratelimit-policy': '"default";q=1;w=60', ratelimit: new RegExp(`^"default";r=0;t=(?:${secondsLeft.join('|')})$`),
        },
      })
      // The seconds in the detail, Retry-After and the reset are one number.
      expect(JSON.parse(refused.body).detail).toContain(`resets in ${String(refused.headers['retry-after'])} seconds`)
      expect(refused.headers['ratelimit-reset']).toBe(refused.headers['retry-after'])
      expect(s.service.received.map((r) => r.headers['x-service-brand'])).toEqual(['globex', 'acme'])
    } finally {
      await s.close()
      await idp.close()
    }
  })
})

/** The real Redis key store, holding the look-up of chosen keys until the test lets it go (the unit's edge). */
class HeldStore extends RedisKeyStore {
  private readonly held = new Map<string, { reached: () => void; released: Promise<void> }>()

  /** Holds the next look-up of `key`: resolves `reached` once it waits; it goes on when `release` is called. */
  hold(key: string): { reached: Promise<void>; release: () => void } {
    let release = (): void => {}
    const released = new Promise<void>((resolve) => { release = resolve })
    let reached = (): void => {}
    const reachedPromise = new Promise<void>((resolve) => { reached = resolve })
    this.held.set(digestKey(key), { reached, released })
    return { reached: reachedPromise, release }
  }

  override async findSecret(digest: string): Promise<SecretRecord | null> {
    const held = this.held.get(digest)
    if (held !== undefined) {
      this.held.delete(digest)
      held.reached()
      await held.released
    }
    return super.findSecret(digest)
  }
}

describe('the per-address allowance of 401s (docs/security.md, "Invented keys")', () => {
  /** The gateway believes X-Forwarded-For from loopback: each test's clients have their own addresses. */
  const abuse = (perMinute: number, trackedAddresses: number): Partial<FileConfigInput> => ({
    abuse: { authFailuresPerMinute: perMinute, trackedAddresses, unknownKeys: 1000 }, trustProxy: ['127.0.0.1'],
  })
  const from = (address: string, key?: string): Record<string, string> => ({ 'x-forwarded-for': address, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) })

  it('answers a look-up from an address past its 401s of the minute 429 with the seconds left in the minute of its first failure, while a key it holds and other addresses are answered', async () => {
    const s = await startWithService({ config: abuse(2, 1000) })
    try {
      const address = '192.0.2.21'
      // A partner's key, known to this instance from a request of another address.
      const held = await s.t.key()
      expect((await send(s, 'GET', '/v1/guests', from('192.0.2.23', held))).statusCode).toBe(200)
      const firstAt = Date.now()
      const first = await send(s, 'GET', '/v1/guests', from(address))
      const firstDone = Date.now()
      expect([first.statusCode, (await send(s, 'GET', '/v1/guests', from(address, 'svc_live_nope'))).statusCode]).toEqual([401, 401])
      const refusedAt = Date.now()
      // A key this instance must look up.
      const refused = await send(s, 'GET', '/v1/guests', from(address, await s.t.key()))
      const refusedDone = Date.now()
      // Counted from the first failure: what is left of its minute, in whole seconds (a
      // millisecond of slack for the two clocks' rounding).
      const seconds = secondsBetween(60_000 - (refusedDone - firstAt) - 1, 60_000 - (refusedAt - firstDone) + 1)
      expectProblem(refused, {
        code: 'RATE_LIMITED', instance: '/v1/guests',
        detail: new RegExp(`^Too many requests with a missing or invalid API key from this address: at most 2 a minute\\. Retry in (?:${seconds.join('|')}) seconds\\.$`),
        headers: { 'retry-after': oneOf(seconds) },
      })
      expect(JSON.parse(refused.body).detail).toContain(`Retry in ${String(refused.headers['retry-after'])} seconds.`)
      // What costs no look-up is answered as ever; the key this instance holds is served.
      expectProblem(await send(s, 'GET', '/v1/guests', from(address)), { code: 'MISSING_AUTH_HEADER', instance: '/v1/guests' })
      expect((await send(s, 'GET', '/v1/guests', from(address, held))).statusCode).toBe(200)
      expectProblem(await send(s, 'GET', '/v1/guests', from('192.0.2.22')), { code: 'MISSING_AUTH_HEADER', instance: '/v1/guests' })
      expect(s.service.received).toHaveLength(2)
    } finally {
      await s.close()
    }
  })

  it('gives back the look-up of a key that turns out valid or suspended: only refused credentials spend the allowance', async () => {
    const s = await startWithService({ config: abuse(1, 1000) })
    const redis = new Redis(REDIS_URL)
    try {
      const address = '192.0.2.31'
      const store = new RedisKeyStore(redis, s.t.prefix)
      const suspended = await s.t.keyWithId()
      await store.setStatus(suspended.id, 'suspended')
      // Each new key is looked up in Redis, reserving one failure while it runs.
      expect((await send(s, 'GET', '/v1/guests', from(address, await s.t.key()))).statusCode).toBe(200)
      expect((await send(s, 'GET', '/v1/guests', from(address, await s.t.key()))).statusCode).toBe(200)
      expectProblem(await send(s, 'GET', '/v1/guests', from(address, suspended.key)), { code: 'API_KEY_SUSPENDED', instance: '/v1/guests', detail: 'The API key is suspended.' })
      // Now known to this instance: refused without a look-up, and still no failure spent.
      expectProblem(await send(s, 'GET', '/v1/guests', from(address, suspended.key)), { code: 'API_KEY_SUSPENDED', instance: '/v1/guests', detail: 'The API key is suspended.' })
      // The one failure of the minute, then a look-up is refused.
      expectProblem(await send(s, 'GET', '/v1/guests', from(address)), { code: 'MISSING_AUTH_HEADER', instance: '/v1/guests' })
      expectProblem(await send(s, 'GET', '/v1/guests', from(address, await s.t.key())), { code: 'RATE_LIMITED', instance: '/v1/guests' })
      expect(s.service.received).toHaveLength(2)
    } finally {
      await s.close()
      redis.disconnect()
    }
  })

  it('serves a valid key whose look-up ends after its address was forgotten, and never gives the address more than its allowance', async () => {
    const redis = new Redis(REDIS_URL)
    let store: HeldStore | undefined
    // One address tracked at a time: a failure of another address forgets the first.
    const s = await startWithService({ config: abuse(1, 1), keyStore: (prefix) => (store = new HeldStore(redis, prefix)) })
    try {
      const held = store as HeldStore
      const [a, b] = ['192.0.2.41', '192.0.2.42']
      const [key1, key2, key3] = [await s.t.key(), await s.t.key(), await s.t.key()]
      const guests = (key?: string, address = a): Promise<Answer> => send(s, 'GET', '/v1/guests?perPage=1', from(address, key))

      // A look-up of a's runs while b's failure forgets a; it ends with a forgotten.
      const hold1 = held.hold(key1)
      const firstAnswer = guests(key1)
      await hold1.reached
      expect((await guests(undefined, b)).statusCode).toBe(401)
      hold1.release()
      const first = await firstAnswer

      // Another look-up of a's runs while a is forgotten and counted again from nothing by a
      // third look-up, which ends first.
      const hold3 = held.hold(key3)
      const third = guests(key3)
      await hold3.reached
      expect((await guests(undefined, b)).statusCode).toBe(401)
      expect((await guests(key2)).statusCode).toBe(200)
      hold3.release()

      const all = s.service.guestsOf('acme')
      for (const answer of [first, await third]) {
        expect({ status: answer.statusCode, body: JSON.parse(answer.body) as unknown }).toEqual({
          status: 200,
          body: { data: all.slice(0, 1), meta: { requestId: answer.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 1, total: all.length } } },
        })
      }
      // a has its one failure of the minute, no more: then a look-up is refused.
      expectProblem(await guests(), { code: 'MISSING_AUTH_HEADER', instance: '/v1/guests' })
      expectProblem(await guests(await s.t.key()), { code: 'RATE_LIMITED', instance: '/v1/guests' })
    } finally {
      await s.close()
      redis.disconnect()
    }
  })
})
