import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { haRedisMissing, RedisCluster } from '../../bench/redis-ha/topology.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { keyTool } from '../helpers/oauth.js'
import { eventually } from '../helpers/redis.js'
import { createGateway, type Gateway } from '../../src/gateway.js'

// Credentials over their life on a Redis Cluster (docs/architecture.md, "Redis layout"): a
// roll writes several keys in several slots in a safe order, an update one key, usage one
// pipeline per credential (its keys share a hash tag), the audit trail one key per write; each
// reaches a running gateway through the Cluster's pub/sub.

const missing = haRedisMissing()
if (missing !== undefined) console.warn(`skipping the Cluster credentials tests: ${missing}`)

describe.skipIf(missing !== undefined)('credentials over their life on a Redis Cluster', () => {
  let cluster: RedisCluster
  let gateway: Gateway

  beforeAll(async () => {
    cluster = await RedisCluster.start()
    gateway = await createGateway({
      config: testConfig({ keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } }, cluster.env),
      logger: captureLogs('silent').logger, properties: new MemorySource([]),
    })
    expect(await eventually(async () => gateway.redis?.status === 'ready', 15_000)).toBe(true)
  }, 180_000)

  afterAll(async () => {
    await gateway?.app.close()
    await cluster?.stop()
  }, 30_000)

  const call = (key: string, path = '/v1/properties') => gateway.app.inject({
    url: path, headers: { host: ACME_HOST, 'user-agent': 'cluster-test/1.0', authorization: `Bearer ${key}` },
  })

  it('rolls, updates, counts and audits a key, each change reaching the running gateway', async () => {
    const env = cluster.env
    const made = await keyTool(env, 'create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json')
    const { id, key } = JSON.parse(made.out[0] as string) as { id: string; key: string }
    expect(await eventually(async () => (await call(key)).statusCode === 200, 5000)).toBe(true)

    const rolled = await keyTool(env, 'roll', id, '--overlap', '1h', '--json')
    const { secret } = JSON.parse(rolled.out[0] as string) as { secret: string }
    expect((await call(secret)).statusCode).toBe(200)
    expect((await call(key)).statusCode).toBe(200)
    expect((await keyTool(env, 'end-overlap', id)).code).toBe(0)
    expect(await eventually(async () => (await call(key)).statusCode === 401, 5000)).toBe(true)

    expect((await keyTool(env, 'update', id, '--allow-ips', '10.0.0.0/8')).code).toBe(0)
    expect(await eventually(async () => (await call(secret)).statusCode === 403, 5000)).toBe(true)
    expect(JSON.parse((await call(secret)).body)).toMatchObject({ code: 'IP_NOT_ALLOWED' })
    expect((await keyTool(env, 'update', id, '--any-ip')).code).toBe(0)
    expect(await eventually(async () => (await call(secret)).statusCode === 200, 5000)).toBe(true)

    await gateway.usage.flush()
    const usage = JSON.parse((await keyTool(env, 'usage', id, '--days', '1', '--json')).out[0] as string) as { totals: Record<string, number> }
    expect(usage.totals.total).toBeGreaterThanOrEqual(5)
    const trail = JSON.parse((await keyTool(env, 'audit', '--id', id, '--json')).out[0] as string) as { action: string }[]
    expect(trail.map((e) => e.action)).toEqual(['update', 'update', 'end-overlap', 'roll', 'create'])

    expect((await keyTool(env, 'revoke', id)).code).toBe(0)
    expect(await eventually(async () => (await call(secret)).statusCode === 401, 5000)).toBe(true)
  }, 60_000)
})
