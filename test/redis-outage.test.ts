import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway, type Gateway } from '../src/gateway.js'
import { generateKey } from '../src/keys/format.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { ACME_HOST, testConfig } from './helpers/config.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource } from './helpers/memory-source.js'
import { expectEnvelope, expectProblem } from './helpers/problem.js'
import { eventually, PrivateRedis } from './helpers/redis.js'
import { contractChecked } from './helpers/contract.js'

// Redis stopped and started again under a running gateway (its own redis-server, so the
// shared one other tests use stays up).

let server: PrivateRedis
let gateway: Gateway
let knownKey: string
const logs = captureLogs()

beforeAll(async () => {
  server = await PrivateRedis.start()
  const config = testConfig({ keyCache: { ttlMs: 50, graceMs: 60_000, maxEntries: 100 } }, { REDIS_URL: server.url, REDIS_PREFIX: 'gw:' })
  const admin = new Redis(server.url)
  const created = await new RedisKeyStore(admin, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })
  admin.disconnect()
  knownKey = created.key
  gateway = await createGateway({ config, logger: logs.logger, properties: new MemorySource([]) })
  contractChecked(gateway.app)
  await gateway.app.ready()
  expect(await eventually(async () => gateway.redis?.status === 'ready', 5000)).toBe(true)
})

afterAll(async () => {
  await gateway.app.close()
  await server.stop()
})

const health = () => gateway.app.inject({ url: '/v1/health' })
const call = (key: string) => gateway.app.inject({ url: '/v1/properties', headers: { host: ACME_HOST, 'user-agent': 'outage/1.0', authorization: `Bearer ${key}` } })

describe('Redis going away and coming back', () => {
  it('turns health unhealthy, keeps cached keys working, refuses unknown ones with 503, and recovers', async () => {
    expectEnvelope(await call(knownKey), { page: 1, perPage: 20, total: 0 })
    // Let the cached copy go stale, so only the grace period keeps it working.
    await new Promise((r) => setTimeout(r, 100))

    await server.stop()
    expect(await eventually(async () => (await health()).statusCode === 503, 5000)).toBe(true)
    const down = await health()
    expect({ status: down.statusCode, body: down.body, retryAfter: down.headers['retry-after'] })
      .toEqual({ status: 503, body: '{"status":"unhealthy"}', retryAfter: '1' })
    // The operator's view says why: unhealthy, Redis down.
    const report = JSON.parse((await gateway.admin.inject({ url: '/status' })).body) as Record<string, unknown>
    expect({ status: report.status, failing: report.failing, redis: report.redis })
      .toEqual({ status: 'unhealthy', failing: ['redis'], redis: { status: 'down', latencyMs: null, mode: 'single' } })

    expectEnvelope(await call(knownKey), { page: 1, perPage: 20, total: 0 })
    expectProblem(await call(generateKey('live')), {
      code: 'SERVICE_UNAVAILABLE', instance: '/v1/properties', headers: { 'retry-after': '1' },
      detail: 'API keys cannot be checked right now; retry shortly.',
    })

    await server.start()
    expect(await eventually(async () => (await health()).statusCode === 200, 10_000)).toBe(true)
    expect((await health()).body).toBe('{"status":"ok"}')
    const recovered = JSON.parse((await gateway.admin.inject({ url: '/status' })).body) as { status: string; failing?: string[]; redis: { status: string } }
    expect({ status: recovered.status, failing: recovered.failing, redis: recovered.redis.status }).toEqual({ status: 'ok', failing: undefined, redis: 'up' })
    expectProblem(await call(generateKey('live')), { code: 'INVALID_API_KEY', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' } })
    const incidents = logs.records().filter((r) => r.msg === 'redis unreachable' && r.redis === 'gateway')
    expect(incidents).toHaveLength(1)
  })
})
