import { Redis } from 'ioredis'
import { Pool } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiError } from '../src/contract/errors.js'
import { AuthFailureLimiter } from '../src/pipeline/abuse.js'
import { digestKey, generateKey } from '../src/keys/format.js'
import { RedisKeyStore, type SecretRecord } from '../src/keys/store.js'
import { MockIdp } from '../mocks/idp/server.js'
import { ACME_HOST } from './helpers/config.js'
import { TestGateway } from './helpers/gateway.js'
import { expectEnvelope, expectProblem } from './helpers/problem.js'
import { grantClient, oauthFor } from './helpers/oauth.js'
import { REDIS_URL } from './helpers/redis.js'

// docs/security.md, "Invented keys", over real sockets and real Redis: a flood of invented keys
// that pass the public checksum, from one client address.

const LIMIT = 150
const UNKNOWN_KEYS = 100
const FLOOD = 10_000
const ATTACKER = '203.0.113.7'
const PARTNER = '198.51.100.9'

/** The real Redis store, counting its look-ups per digest (the unit's edge). */
class CountingStore extends RedisKeyStore {
  readonly lookups = new Map<string, number>()
  // What the key authenticator reads a key's record with (a key's, or a rolled key's previous secret's).
  override async findSecret(digest: string): Promise<SecretRecord | null> {
    this.lookups.set(digest, (this.lookups.get(digest) ?? 0) + 1)
    return super.findSecret(digest)
  }
}

let t: TestGateway
let store: CountingStore
let redis: Redis
let pool: Pool
let partnerKey: string

beforeAll(async () => {
  redis = new Redis(REDIS_URL)
  t = await TestGateway.start({
    config: {
      abuse: { authFailuresPerMinute: LIMIT, trackedAddresses: 1000, unknownKeys: UNKNOWN_KEYS },
      // Both clients come through the proxy on loopback, which is the only one believed.
      trustProxy: ['127.0.0.1'],
      // A key cache smaller than the flood: the flood must still not touch it.
      keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 10 },
    },
    keyStore: (prefix) => {
      store = new CountingStore(redis, prefix)
      return store
    },
  })
  partnerKey = await t.key()
  pool = new Pool(t.url, { connections: 32 })
})

afterAll(async () => {
  await pool.close()
  await t.close()
  redis.disconnect()
})

async function get(key: string, address: string, path = '/v1/properties?perPage=1') {
  const res = await pool.request({
    path, method: 'GET',
    headers: { host: ACME_HOST, 'user-agent': 'abuse-test/1.0', authorization: `Bearer ${key}`, 'x-forwarded-for': address },
  })
  return { statusCode: res.statusCode, headers: res.headers as Record<string, string>, body: await res.body.text() }
}

describe('a flood of invented checksum-valid keys from one address (docs/security.md, "Invented keys")', () => {
  it('makes at most abuse.authFailuresPerMinute look-ups, then answers 429 at once, and never evicts a partner key', async () => {
    expectEnvelope(await get(partnerKey, PARTNER), { page: 1, perPage: 1, total: expect.any(Number) as unknown as number })
    const partnerDigest = digestKey(partnerKey)
    const statuses = new Map<number, number>()
    let last429: Awaited<ReturnType<typeof get>> | undefined
    const invented = Array.from({ length: FLOOD }, () => generateKey('live'))
    for (let i = 0; i < FLOOD; i += 200) {
      const batch = await Promise.all(invented.slice(i, i + 200).map(async (key) => get(key, ATTACKER)))
      for (const res of batch) {
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
        if (res.statusCode === 429) last429 = res
      }
      // The partner, throughout the flood: answered from the cache every time.
      expect((await get(partnerKey, PARTNER)).statusCode).toBe(200)
    }

    expect(Object.fromEntries(statuses)).toEqual({ 401: LIMIT, 429: FLOOD - LIMIT })
    const inventedLookups = [...store.lookups.entries()].filter(([digest]) => digest !== partnerDigest)
    expect(inventedLookups.reduce((sum, [, n]) => sum + n, 0)).toBe(LIMIT)
    expect(store.lookups.get(partnerDigest)).toBe(1)
    // Misses are remembered, within their own bound.
    expect(t.gateway.authenticator.unknownSize).toBe(UNKNOWN_KEYS)
    expect(t.gateway.authenticator.size).toBe(1)

    const retryAfter = Number(last429?.headers['retry-after'])
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expectProblem(last429 as NonNullable<typeof last429>, {
      code: 'RATE_LIMITED', instance: '/v1/properties',
      detail: `Too many requests with a missing or invalid API key from this address: at most ${LIMIT} a minute. Retry in ${retryAfter} seconds.`,
    })
    // The bound refuses look-ups, never a credential this instance knows to be valid: the
    // partner's cached key is served from that address too; a valid key this instance has
    // never seen needs a look-up, which is refused.
    expect((await get(partnerKey, ATTACKER)).statusCode).toBe(200)
    expect((await get(await t.key(), ATTACKER)).statusCode).toBe(429)
  })

  it('counts every 401 by code, logs the client address on every line, and counts the 429s', async () => {
    const metrics = await t.gateway.metrics.registry.metrics()
    expect(metrics).toContain(`gateway_auth_failures_total{code="INVALID_API_KEY"} ${LIMIT}`)
    expect(metrics).toContain(`gateway_rate_limited_total ${FLOOD - LIMIT + 1}`)
    const lines = t.logs.records().filter((r) => r.msg === 'request')
    expect(lines.length).toBeGreaterThan(FLOOD)
    const addresses = new Set(lines.map((l) => l.clientIp))
    expect(addresses).toEqual(new Set([ATTACKER, PARTNER]))
  })

  it('counts missing and malformed Authorization headers too', async () => {
    const address = '192.0.2.55'
    const refuse = async (authorization: string | undefined) => {
      const headers: Record<string, string> = { host: ACME_HOST, 'user-agent': 'abuse-test/1.0', 'x-forwarded-for': address }
      if (authorization !== undefined) headers.authorization = authorization
      const res = await pool.request({ path: '/v1/properties', method: 'GET', headers })
      await res.body.dump()
      return res.statusCode
    }
    const answers = []
    for (let i = 0; i < LIMIT; i += 1) answers.push(await refuse(i % 2 === 0 ? undefined : 'Basic abc'))
    expect(new Set(answers)).toEqual(new Set([401]))
    // They cost no look-up, and get 401 still; what they used up is the address's look-ups.
    expect(await refuse(undefined)).toBe(401)
    expect(await refuse(`Bearer ${generateKey('live')}`)).toBe(429)
    expect(await refuse(`Bearer ${partnerKey}`)).toBe(200)
  })
})

describe('partners behind the address of a junk sender (docs/security.md, "Findings of the review of wave 3", 2)', () => {
  const idp = new MockIdp({ clients: [{ clientId: 'nat-partner', secret: 'nat-partner-secret' }] })
  let g: TestGateway
  let nat: Pool

  beforeAll(async () => {
    await idp.listen()
    g = await TestGateway.start({ config: { oauth: oauthFor(idp), trustProxy: ['127.0.0.1'] } })
    await grantClient({ REDIS_URL, REDIS_PREFIX: g.prefix }, idp, 'nat-partner', '--scopes', 'properties:read')
    nat = new Pool(g.url, { connections: 16 })
  })

  afterAll(async () => {
    await nat.close()
    await g.close()
    await idp.close()
  })

  const from = async (address: string, authorization: string): Promise<number> => {
    const res = await nat.request({
      path: '/v1/properties?perPage=1', method: 'GET',
      headers: { host: ACME_HOST, 'user-agent': 'abuse-test/1.0', authorization, 'x-forwarded-for': address },
    })
    await res.body.dump()
    return res.statusCode
  }

  it('never refuses a key or a token the instance knows to be valid, after 600 junk requests from their address', async () => {
    const address = '192.0.2.77'
    const [first, second] = [await g.key(), await g.key()]
    const token = idp.issue('nat-partner', ['properties:read'])
    // Each used once: the keys are in the key cache, the token's verification is remembered.
    for (const credential of [first, second, token]) expect(await from('198.51.100.20', `Bearer ${credential}`)).toBe(200)
    const junk = await Promise.all(Array.from({ length: 600 }, async () => from(address, 'Bearer nope')))
    expect(new Set(junk)).toEqual(new Set([401]))
    for (const credential of [first, second, token]) expect(await from(address, `Bearer ${credential}`)).toBe(200)
    // What the address may no longer do is make this instance look up a credential it does not know.
    expect(await from(address, `Bearer ${await g.key()}`)).toBe(429)
  })
})

describe('the per-address minute (docs/security.md, "Invented keys")', () => {
  // The limiter on a clock of the test's own: a minute passes without waiting for one.
  const refusal = (limiter: AuthFailureLimiter, address: string): unknown => {
    try {
      limiter.check(address)
      return 'admitted'
    } catch (error) {
      const { code, status, retryAfter } = error as ApiError
      return { code, status, retryAfter }
    }
  }

  it('answers 429 from the failure over the allowance until the minute of the first failure ends, then admits again', () => {
    let now = 1_000_000
    const limiter = new AuthFailureLimiter({ perMinute: 3, trackedAddresses: 100, now: () => now })
    limiter.add('192.0.2.9')
    now += 10_000
    limiter.add('192.0.2.9')
    expect(refusal(limiter, '192.0.2.9')).toBe('admitted')
    limiter.add('192.0.2.9')
    // 50 s of the minute left.
    expect(refusal(limiter, '192.0.2.9')).toEqual({ code: 'RATE_LIMITED', status: 429, retryAfter: 50 })
    expect(refusal(limiter, '192.0.2.10')).toBe('admitted')
    now += 49_500
    expect(refusal(limiter, '192.0.2.9')).toEqual({ code: 'RATE_LIMITED', status: 429, retryAfter: 1 })
    // Just past the end of that minute.
    now += 501
    expect(refusal(limiter, '192.0.2.9')).toBe('admitted')
    // A new minute, counted from its own first failure.
    limiter.add('192.0.2.9')
    expect(refusal(limiter, '192.0.2.9')).toBe('admitted')
  })
})
