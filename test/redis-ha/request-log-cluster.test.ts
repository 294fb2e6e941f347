import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { haRedisMissing, RedisCluster } from '../../bench/redis-ha/topology.js'
import { parseHostPorts } from '../../src/config/process.js'
import { createRedis, type RedisClient } from '../../src/redis.js'
import type { RequestLogRecord } from '../../src/request-log/entry.js'
import { RequestLogStore } from '../../src/request-log/store.js'
import { captureLogs } from '../helpers/logs.js'
import { eventually, testPrefix } from '../helpers/redis.js'

// The request log's writes on a Redis Cluster (docs/architecture.md, "The request log"): a
// batch holds entries of many credentials, whose logs live in the slots of their credentials;
// elsewhere one script writes every log of a batch and the request id index of its entries, on
// a Cluster each log is written in its own slot and each day's index in its own, so no entry of
// a batch is lost to a cross-slot refusal.

const missing = haRedisMissing()
if (missing !== undefined) console.warn(`skipping the Cluster request log tests: ${missing}`)

const NOW = Math.floor(Date.now() / 86_400_000) * 86_400_000 + 12 * 3_600_000
const DAY = 86_400_000

function record(id: string, credentialId: string, atMs: number): RequestLogRecord {
  return {
    id, atMs, credentialId, secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties', path: '/v1/properties', queryParameters: [],
    status: 200, code: null, durationMs: 1.5, cache: null, idempotencyKey: null, replayed: false, clientIp: '127.0.0.1', userAgent: 'x/1', traceId: null,
  }
}

describe.skipIf(missing !== undefined)('the request log on a Redis Cluster', () => {
  let cluster: RedisCluster
  let redis: RedisClient
  const prefix = testPrefix()

  beforeAll(async () => {
    cluster = await RedisCluster.start()
    redis = createRedis({ url: cluster.env.REDIS_URL as string, clusterNodes: parseHostPorts(cluster.env.REDIS_CLUSTER_NODES as string), name: 'test', logger: captureLogs('silent').logger })
    expect(await eventually(async () => redis.status === 'ready', 15_000)).toBe(true)
  }, 180_000)

  afterAll(async () => {
    redis?.disconnect()
    await cluster?.stop()
  }, 30_000)

  it('writes a batch of many credentials\' entries, each log in its own slot, every entry found', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 1, maxPerCredential: 2 }, () => NOW)
    // Twelve credentials: their hash tags fall on slots of all three masters.
    const credentials = Array.from({ length: 12 }, (_, i) => `key_cluster${i}`)
    const batch = credentials.flatMap((credentialId, i) => [0, 1, 2].map((j) => record(`req_c${i}_${j}`, credentialId, NOW - 10 + j)))
    await store.write(batch)
    for (const [i, credentialId] of credentials.entries()) {
      const page = await store.list(credentialId, 'live', {}, 1, 10)
      // Two kept of three: trimmed in its own slot.
      expect([page.total, (JSON.parse(page.json) as { id: string }[]).map((e) => e.id)], credentialId).toEqual([2, [`req_c${i}_2`, `req_c${i}_1`]])
      expect(JSON.parse(await store.find(`req_c${i}_2`) ?? 'null')).toMatchObject({ id: `req_c${i}_2`, credentialId, mode: 'live' })
    }
  })

  it('indexes each request id on the day it arrived, each day\'s index written in its own slot', async () => {
    // A namespace of its own: each day's index then holds these entries and nothing else.
    const namespace = `${prefix}days:`
    const store = new RequestLogStore(redis, namespace, { retentionDays: 1, maxPerCredential: 10 }, () => NOW)
    const batch = [record('req_days_0', 'key_days_a', NOW - DAY + 5), record('req_days_1', 'key_days_b', NOW - DAY + 6), record('req_days_2', 'key_days_a', NOW)]
    await store.write(batch)
    const dayKey = (at: number): string => `${namespace}reqlog:ids:${new Date(at).toISOString().slice(0, 10)}`
    expect([await redis.hgetall(dayKey(NOW - DAY)), await redis.hgetall(dayKey(NOW))]).toEqual([
      { req_days_0: `key_days_a live ${NOW - DAY + 5}`, req_days_1: `key_days_b live ${NOW - DAY + 6}` },
      { req_days_2: `key_days_a live ${NOW}` },
    ])
    for (const r of batch) expect(JSON.parse(await store.get(r.credentialId, 'live', r.id) ?? 'null'), r.id).toMatchObject({ id: r.id, credentialId: r.credentialId, at: new Date(r.atMs).toISOString() })
  })
})
