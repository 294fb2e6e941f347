import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway, type Gateway } from '../src/gateway.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { ACME_HOST, testConfig } from './helpers/config.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource } from './helpers/memory-source.js'
import { expectEnvelope, expectProblem } from './helpers/problem.js'
import { eventually, keysUnder, PrivateRedis, REDIS_URL, removePrefix, testPrefix } from './helpers/redis.js'
import { contractChecked } from './helpers/contract.js'
import { oneOf, timed, type Timed } from './helpers/window.js'

// Per-key quotas shared by every instance (docs/architecture.md, "Quotas"), against real Redis.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
const store = new RedisKeyStore(redis, prefix)
const config = testConfig({ rateLimit: { enabled: true, limit: 40, windowSeconds: 3600 } }, { REDIS_URL, REDIS_PREFIX: prefix })
let a: Gateway
let b: Gateway

beforeAll(async () => {
  a = await createGateway({ config, logger: captureLogs().logger, properties: new MemorySource([]) })
  b = await createGateway({ config, logger: captureLogs().logger, properties: new MemorySource([]) })
  contractChecked(a.app)
  contractChecked(b.app)
  expect(await eventually(async () => a.redis?.status === 'ready' && b.redis?.status === 'ready', 5000)).toBe(true)
})
afterAll(async () => {
  await Promise.all([a.app.close(), b.app.close()])
  await removePrefix(redis, prefix)
  redis.disconnect()
})

async function newKey(rateLimit: number | null = null): Promise<string> {
  return (await store.create({ brand: 'acme', mode: 'live', properties: '*', rateLimit })).key
}

function call(gateway: Gateway, key: string, url = '/v1/properties') {
  return gateway.app.inject({ url, headers: { host: ACME_HOST, 'user-agent': 'ratelimit-test/1.0', authorization: `Bearer ${key}` } })
}

describe('rate limits (docs/architecture.md, "Quotas")', () => {
  it('admits exactly the quota, with the RateLimit headers, then answers 429', async () => {
    const key = await newKey(5)
    for (let i = 1; i <= 5; i += 1) {
      const { answer: res, secondsLeft } = await timed(3600, async () => call(a, key))
      expectEnvelope(res, { page: 1, perPage: 20, total: 0 })
      expect({ limit: res.headers['ratelimit-limit'], remaining: res.headers['ratelimit-remaining'], reset: res.headers['ratelimit-reset'] })
        .toEqual({ limit: '5', remaining: String(5 - i), reset: expect.stringMatching(oneOf(secondsLeft)) })
    }
    const { answer: refused, secondsLeft } = await timed(3600, async () => call(a, key))
    expectProblem(refused, {
      code: 'RATE_LIMITED', instance: '/v1/properties',
      headers: { 'ratelimit-limit': '5', 'ratelimit-remaining': '0', 'ratelimit-reset': oneOf(secondsLeft), 'retry-after': oneOf(secondsLeft) },
      detail: new RegExp(`^This API key may make 5 requests per 3600 seconds; the quota resets in (?:${secondsLeft.join('|')}) seconds\\.$`),
    })
    // One instant, one number: the two headers agree.
    expect(refused.headers['retry-after']).toBe(refused.headers['ratelimit-reset'])
  })

  it('sends the draft\'s RateLimit-Policy and RateLimit beside the three headers, as RFC 9651 structured fields', async () => {
    const key = await newKey(3)
    for (let i = 1; i <= 3; i += 1) {
      const { answer: res, secondsLeft } = await timed(3600, async () => call(a, key))
      expect(res.statusCode).toBe(200)
      expect({ policy: res.headers['ratelimit-policy'], left: res.headers.ratelimit, remaining: res.headers['ratelimit-remaining'] }).toEqual({
        policy: '"default";q=3;w=3600', left: expect.stringMatching(new RegExp(`^"default";r=${3 - i};t=(?:${secondsLeft.join('|')})$`)), remaining: String(3 - i),
      })
    }
    const { answer: refused, secondsLeft } = await timed(3600, async () => call(a, key))
    expectProblem(refused, {
      code: 'RATE_LIMITED', instance: '/v1/properties',
      headers: { 'ratelimit-policy': '"default";q=3;w=3600', ratelimit: new RegExp(`^"default";r=0;t=(?:${secondsLeft.join('|')})$`), 'retry-after': oneOf(secondsLeft) },
    })
  })

  it('takes the default quota from the config', async () => {
    const res = await call(a, await newKey())
    expect({ limit: res.headers['ratelimit-limit'], remaining: res.headers['ratelimit-remaining'] }).toEqual({ limit: '40', remaining: '39' })
  })

  it('counts the quota before checking parameters', async () => {
    const key = await newKey(1)
    expectEnvelope(await call(a, key), { page: 1, perPage: 20, total: 0 })
    expectProblem(await call(a, key, '/v1/properties?bogus=1'), { code: 'RATE_LIMITED', instance: '/v1/properties', headers: { 'ratelimit-remaining': '0' } })
  })

  it('shares one quota between two instances', async () => {
    const key = await newKey(40)
    const statuses: number[] = []
    for (let i = 0; i < 40; i += 1) statuses.push((await call(i % 2 === 0 ? a : b, key)).statusCode)
    expect(statuses.every((s) => s === 200)).toBe(true)
    expect([(await call(a, key)).statusCode, (await call(b, key)).statusCode]).toEqual([429, 429])
  })

  it('never admits past the limit under hundreds of concurrent requests on two instances', async () => {
    const key = await newKey(50)
    const results = await Promise.all(Array.from({ length: 300 }, async (_, i) => (await call(i % 2 === 0 ? a : b, key)).statusCode))
    expect({ admitted: results.filter((s) => s === 200).length, refused: results.filter((s) => s === 429).length }).toEqual({ admitted: 50, refused: 250 })
    const counters = (await keysUnder(redis, `${prefix}rl:`))
    const used = await Promise.all(counters.map(async (c) => Number(await redis.get(c))))
    expect(Math.max(...used)).toBeLessThanOrEqual(50)
  })

  it('keeps an uneven split within the limit, leaving at most a small lease unspent', async () => {
    const limit = 400
    const key = await newKey(limit)
    let admitted = 0
    for (let i = 0; i < 300; i += 1) if ((await call(a, key)).statusCode === 200) admitted += 1
    for (let i = 0; i < 150; i += 1) if ((await call(b, key)).statusCode === 200) admitted += 1
    expect(admitted).toBeLessThanOrEqual(limit)
    // What instance a leased last and did not spend: at most 1/16 of what was left then.
    expect(admitted).toBeGreaterThanOrEqual(limit - Math.ceil((limit - 300) / 16))
  })
})

describe('the window', () => {
  // Short, so that the test sees one end; long enough that three calls fit in one window on a
  // slow, loaded machine (a third call in the same window is the refusal the test reads).
  const WINDOW_SECONDS = 4
  let g: Gateway
  const windowPrefix = testPrefix()
  beforeAll(async () => {
    g = await createGateway({
      config: testConfig({ rateLimit: { enabled: true, limit: 2, windowSeconds: WINDOW_SECONDS } }, { REDIS_URL, REDIS_PREFIX: windowPrefix }),
      logger: captureLogs().logger, properties: new MemorySource([]),
    })
    contractChecked(g.app)
    expect(await eventually(async () => g.redis?.status === 'ready', 5000)).toBe(true)
  })
  afterAll(async () => {
    await g.app.close()
    await removePrefix(redis, windowPrefix)
  })

  it('says how long until the window ends, and admits again once it has', async () => {
    const key = (await new RedisKeyStore(redis, windowPrefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
    // Two requests a window are admitted; the first refusal comes with the third call of a
    // window (more calls when windows end between them: calls are not timed to windows).
    let refused: Timed<Awaited<ReturnType<typeof call>>> | undefined
    for (let i = 0; i < 20 && refused === undefined; i += 1) {
      const attempt = await timed(WINDOW_SECONDS, async () => call(g, key))
      if (attempt.answer.statusCode === 429) refused = attempt
    }
    expect(refused?.answer.statusCode).toBe(429)
    const { answer, secondsLeft } = refused as Timed<Awaited<ReturnType<typeof call>>>
    expectProblem(answer, {
      code: 'RATE_LIMITED', instance: '/v1/properties',
      headers: { 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': oneOf(secondsLeft), 'retry-after': oneOf(secondsLeft) },
    })
    expect(await eventually(async () => (await call(g, key)).statusCode === 200, 3 * WINDOW_SECONDS * 1000, 100)).toBe(true)
  })
})

describe('Redis down', () => {
  it('lets traffic through, counts it, and logs once', async () => {
    const server = await PrivateRedis.start()
    const logs = captureLogs()
    const g = await createGateway({
      config: testConfig({ keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 10 }, rateLimit: { enabled: true, limit: 3, windowSeconds: 3600 } },
        { REDIS_URL: server.url, REDIS_PREFIX: 'gw:' }),
      logger: logs.logger, properties: new MemorySource([]),
    })
    contractChecked(g.app)
    try {
      const adminRedis = new Redis(server.url)
      const key = (await new RedisKeyStore(adminRedis, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })).key
      adminRedis.disconnect()
      expect(await eventually(async () => g.redis?.status === 'ready', 5000)).toBe(true)
      expect((await call(g, key)).headers['ratelimit-remaining']).toBe('2')

      await server.stop()
      expect(await eventually(async () => g.redis?.status !== 'ready', 5000)).toBe(true)
      const answers = await Promise.all(Array.from({ length: 10 }, async () => call(g, key)))
      for (const res of answers) {
        expectEnvelope(res, { page: 1, perPage: 20, total: 0 })
        expect(res.headers['ratelimit-limit']).toBeUndefined()
      }
      const metrics = await g.metrics.registry.getSingleMetricAsString('gateway_rate_limiter_fail_open_total')
      expect(metrics).toContain('gateway_rate_limiter_fail_open_total 10')
      expect(logs.records().filter((r) => r.msg === 'rate limiter failing open: Redis cannot answer')).toHaveLength(1)
    } finally {
      await g.app.close()
      await server.stop()
    }
  })
})

describe('metrics', () => {
  it('counts every 429 in gateway_rate_limited_total', async () => {
    const key = await newKey(1)
    await call(a, key)
    const before = await a.metrics.registry.getSingleMetricAsString('gateway_rate_limited_total')
    await call(a, key)
    await call(a, key)
    const after = await a.metrics.registry.getSingleMetricAsString('gateway_rate_limited_total')
    const value = (text: string) => Number(/gateway_rate_limited_total (\d+)/.exec(text)?.[1] ?? 0)
    expect(value(after) - value(before)).toBe(2)
  })
})
