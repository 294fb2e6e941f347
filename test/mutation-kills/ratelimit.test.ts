import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { MemoryKeyStore, RedisKeyStore } from '../../src/keys/store.js'
import { ACME_HOST, DOCS_URL, testConfig } from '../helpers/config.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { eventually, PrivateRedis, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// Rules of the per-key quota that mutation testing found undefended: the seconds a client is
// told to wait, and the limiter enforcing again once Redis is back. Over real sockets.

const WINDOW_SECONDS = 3600

/**
 * The seconds left, at `ms`, in the fixed window of WINDOW_SECONDS it falls in (windows start
 * at multiples of their length since the Unix epoch), rounded up: what RateLimit-Reset says.
 */
function secondsLeft(ms: number): number {
  const windowMs = WINDOW_SECONDS * 1000
  const end = (Math.floor(ms / windowMs) + 1) * windowMs
  return Math.ceil((end - ms) / 1000)
}

async function call(url: string, key: string) {
  const res = await request(`${url}/v1/properties`, { headers: { host: ACME_HOST, 'user-agent': 'mutation-kills/1.0', authorization: `Bearer ${key}` } })
  return { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
}

async function listen(gateway: Gateway): Promise<string> {
  await gateway.app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}`
}

describe('the seconds to the end of the window', () => {
  const prefix = testPrefix()
  const redis = new Redis(REDIS_URL)
  let gateway: Gateway
  let url: string

  beforeAll(async () => {
    gateway = await createGateway({
      config: testConfig({ rateLimit: { enabled: true, limit: 2, windowSeconds: WINDOW_SECONDS } }, { REDIS_URL, REDIS_PREFIX: prefix }),
      logger: captureLogs().logger, properties: new MemorySource([]),
    })
    expect(await eventually(async () => gateway.redis?.status === 'ready', 5000)).toBe(true)
    url = await listen(gateway)
  })
  afterAll(async () => {
    await gateway.app.close()
    await removePrefix(redis, prefix)
    redis.disconnect()
  })

  it('are what is left of the fixed window, in RateLimit-Reset, RateLimit, Retry-After and the detail of the 429', async () => {
    const key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
    const answers = []
    const before = Date.now()
    for (let i = 0; i < 3; i += 1) answers.push(await call(url, key))
    const after = Date.now()
    // A window that ends between the two readings (once an hour) allows any value between.
    const bounds = [secondsLeft(before), secondsLeft(after)]
    const lowest = Math.min(...bounds)
    const highest = Math.max(...bounds)

    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 429])
    expect(answers.map((a) => a.headers['ratelimit-remaining'])).toEqual(['1', '0', '0'])
    for (const answer of answers) {
      const reset = Number(answer.headers['ratelimit-reset'])
      expect(reset).toBeGreaterThanOrEqual(lowest)
      expect(reset).toBeLessThanOrEqual(highest)
      expect(answer.headers['ratelimit-limit']).toBe('2')
      expect(answer.headers['ratelimit-policy']).toBe(`"default";q=2;w=${WINDOW_SECONDS}`)
      expect(answer.headers.ratelimit).toBe(`"default";r=${answer.headers['ratelimit-remaining'] as string};t=${reset}`)
    }
    const refused = answers[2] as (typeof answers)[number]
    const wait = refused.headers['ratelimit-reset'] as string
    expect(refused.headers['retry-after']).toBe(wait)
    expect(refused.headers['content-type']).toBe('application/problem+json; charset=utf-8')
    expect(JSON.parse(refused.body)).toEqual({
      type: `${DOCS_URL}/errors/rate-limited`,
      title: 'Too many requests',
      status: 429,
      detail: `This API key may make 2 requests per ${WINDOW_SECONDS} seconds; the quota resets in ${wait} seconds.`,
      moreInfo: 'Wait the seconds given in `Retry-After`, and pace requests using the RateLimit-* headers of each response.',
      instance: '/v1/properties',
      code: 'RATE_LIMITED',
      errors: [],
      requestId: refused.headers['service-request-id'],
      timestamp: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    })
  })
})

describe('a burst of one key on one instance', () => {
  const prefix = testPrefix()
  const redis = new Redis(REDIS_URL)
  const config = testConfig({ rateLimit: { enabled: true, limit: 1000, windowSeconds: WINDOW_SECONDS } }, { REDIS_URL, REDIS_PREFIX: prefix })
  let a: Gateway
  let b: Gateway
  let urlA: string
  let urlB: string

  beforeAll(async () => {
    a = await createGateway({ config, logger: captureLogs().logger, properties: new MemorySource([]) })
    b = await createGateway({ config, logger: captureLogs().logger, properties: new MemorySource([]) })
    expect(await eventually(async () => a.redis?.status === 'ready' && b.redis?.status === 'ready', 5000)).toBe(true)
    urlA = await listen(a)
    urlB = await listen(b)
  })
  afterAll(async () => {
    await Promise.all([a.app.close(), b.app.close()])
    await removePrefix(redis, prefix)
    redis.disconnect()
  })

  it('shares the lease in flight, so it does not lock away the quota another instance needs', async () => {
    const limit = 100
    const key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: limit })).key
    const burst = await Promise.all(Array.from({ length: 10 }, async () => (await call(urlA, key)).statusCode))
    expect(burst).toEqual(Array.from({ length: 10 }, () => 200))
    let admitted = 0
    for (let i = 0; i < limit; i += 1) if ((await call(urlB, key)).statusCode === 200) admitted += 1
    // A holds at most what it leased last and did not spend: a sixteenth of what was left then
    // (the README's "Rate limits"), so at most a sixteenth of the quota.
    expect(admitted).toBeLessThanOrEqual(limit - 10)
    expect(admitted).toBeGreaterThanOrEqual(limit - 10 - Math.floor(limit / 16))
  })
})

describe('Redis down, then back, then down again', () => {
  it('enforces the quota again once Redis answers, says so once, and logs the next outage again', async () => {
    const server = await PrivateRedis.start()
    const logs = captureLogs()
    const gateway = await createGateway({
      config: testConfig({ keyCache: { ttlMs: 60_000, graceMs: 600_000, maxEntries: 10 }, rateLimit: { enabled: true, limit: 3, windowSeconds: WINDOW_SECONDS } },
        { REDIS_URL: server.url, REDIS_PREFIX: 'gw:' }),
      logger: logs.logger, properties: new MemorySource([]),
    })
    try {
      const admin = new Redis(server.url)
      const key = (await new RedisKeyStore(admin, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })).key
      admin.disconnect()
      expect(await eventually(async () => gateway.redis?.status === 'ready', 5000)).toBe(true)
      const url = await listen(gateway)
      const messages = () => logs.records().map((r) => r.msg).filter((m) => typeof m === 'string' && m.startsWith('rate limiter'))

      expect((await call(url, key)).headers['ratelimit-remaining']).toBe('2')

      await server.stop()
      expect(await eventually(async () => gateway.redis?.status !== 'ready', 5000)).toBe(true)
      const open = await call(url, key)
      expect(open.statusCode).toBe(200)
      expect(open.headers['ratelimit-remaining']).toBeUndefined()
      expect(messages()).toEqual(['rate limiter failing open: Redis cannot answer'])
      // The operator is told why, from the client's error, never with a key in it.
      const failing = logs.records().find((r) => r.msg === 'rate limiter failing open: Redis cannot answer')
      expect(failing?.level).toBe('error')
      expect(failing?.err).toMatchObject({ message: expect.stringMatching(/\S/) })
      expect(JSON.stringify(failing)).not.toContain(key)

      // A fresh server, empty: the key is created there again, under a new id.
      await server.start()
      expect(await eventually(async () => gateway.redis?.status === 'ready', 10_000)).toBe(true)
      const admin2 = new Redis(server.url)
      const key2 = (await new RedisKeyStore(admin2, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })).key
      admin2.disconnect()
      const enforced = await call(url, key2)
      expect(enforced.statusCode).toBe(200)
      expect(enforced.headers['ratelimit-remaining']).toBe('2')
      expect(messages()).toEqual(['rate limiter failing open: Redis cannot answer', 'rate limiter enforcing again'])
      expect((await call(url, key2)).headers['ratelimit-remaining']).toBe('1')
      expect(messages()).toHaveLength(2)

      await server.stop()
      expect(await eventually(async () => gateway.redis?.status !== 'ready', 5000)).toBe(true)
      const again = await call(url, key2)
      expect(again.statusCode).toBe(200)
      expect(again.headers['ratelimit-remaining']).toBeUndefined()
      expect(messages()).toEqual([
        'rate limiter failing open: Redis cannot answer', 'rate limiter enforcing again', 'rate limiter failing open: Redis cannot answer',
      ])
    } finally {
      await gateway.app.close()
      await server.stop()
    }
  })
})

describe('without Redis (the demo, counting in its own memory)', () => {
  it('admits the quota of each key apart, then answers 429', async () => {
    const keyStore = new MemoryKeyStore()
    const gateway = await createGateway({
      config: testConfig({ rateLimit: { enabled: true, limit: 2, windowSeconds: WINDOW_SECONDS } }),
      logger: captureLogs().logger, properties: new MemorySource([]), keyStore,
    })
    try {
      expect(gateway.redis).toBeUndefined()
      const url = await listen(gateway)
      const first = (await keyStore.create({ brand: 'acme', mode: 'live', properties: '*' })).key
      const second = (await keyStore.create({ brand: 'acme', mode: 'live', properties: '*' })).key
      const answers = [await call(url, first), await call(url, first), await call(url, first), await call(url, second)]
      expect(answers.map((a) => [a.statusCode, a.headers['ratelimit-remaining']])).toEqual([[200, '1'], [200, '0'], [429, '0'], [200, '1']])
      expect(JSON.parse((answers[2] as (typeof answers)[number]).body)).toMatchObject({ status: 429, code: 'RATE_LIMITED' })
    } finally {
      await gateway.app.close()
    }
  })
})
