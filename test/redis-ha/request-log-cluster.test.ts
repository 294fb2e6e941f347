import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { haRedisMissing, RedisCluster } from '../../bench/redis-ha/topology.js'
import { parseHostPorts } from '../../src/config/process.js'
import { requestIdAt } from '../../src/http/request-id.js'
import { createRedis, type RedisClient } from '../../src/redis.js'
import type { RequestLogRecord } from '../../src/request-log/entry.js'
import { RequestLogStore } from '../../src/request-log/store.js'
import { captureLogs } from '../helpers/logs.js'
import { eventually, testPrefix } from '../helpers/redis.js'

// The request log's writes on a Redis Cluster (docs/architecture.md, "The request log"): a
// batch holds entries of many credentials, whose logs live in the slots of their credentials;
// elsewhere one script writes every log of a batch, on a Cluster each log is written in its own
// slot, and each minute's set of logs in its own, so no entry of a batch is lost to a
// cross-slot refusal.

const missing = haRedisMissing()
if (missing !== undefined) console.warn(`skipping the Cluster request log tests: ${missing}`)

// The store's clock is the real one: Redis expires the minutes' sets by its own clock, at a
// retention after their minute, so a clock of the test's making set early in the day (noon)
// found yesterday's sets gone every afternoon.
const NOW = Date.now()
const DAY = 86_400_000
const MINUTE = 60_000
/** A minute of yesterday, well inside the retention of a day: its set outlives the test by ten minutes at least. */
const YESTERDAY = Math.floor((NOW - DAY) / MINUTE) * MINUTE + 10 * MINUTE

/** An entry whose request id holds its arrival, as the gateway's ids do (src/http/request-id.ts); `n` tells it from the others of its millisecond. */
function record(n: number, credentialId: string, atMs: number): RequestLogRecord {
  return {
    id: requestIdAt(atMs, n.toString(16).padStart(20, '0')), atMs, credentialId, secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties', path: '/v1/properties', queryParameters: [],
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
    const batch = credentials.flatMap((credentialId, i) => [0, 1, 2].map((j) => record(i, credentialId, NOW - 10 + j)))
    await store.write(batch)
    for (const [i, credentialId] of credentials.entries()) {
      const page = await store.list(credentialId, 'live', {}, 1, 10)
      // Two kept of three: trimmed in its own slot.
      const [, second, third] = batch.slice(3 * i, 3 * i + 3) as [RequestLogRecord, RequestLogRecord, RequestLogRecord]
      expect([page.total, (JSON.parse(page.json) as { id: string }[]).map((e) => e.id)], credentialId).toEqual([2, [third.id, second.id]])
      expect(JSON.parse(await store.find(third.id) ?? 'null')).toMatchObject({ id: third.id, credentialId, mode: 'live' })
    }
  })

  it('notes each log in the minutes its entries arrived in, each minute\'s set written in its own slot, and finds each entry by its id', async () => {
    // A namespace of its own: each minute's set then holds these logs and nothing else.
    const namespace = `${prefix}minutes:`
    const store = new RequestLogStore(redis, namespace, { retentionDays: 1, maxPerCredential: 10 }, () => NOW)
    const batch = [record(0, 'key_minutes_a', YESTERDAY + 5), record(1, 'key_minutes_b', YESTERDAY + 6), record(2, 'key_minutes_a', NOW)]
    await store.write(batch)
    const minuteKey = (at: number): string => `${namespace}reqlog:logs:${new Date(at).toISOString().slice(0, 16)}`
    expect([(await redis.smembers(minuteKey(YESTERDAY))).sort(), await redis.smembers(minuteKey(NOW))]).toEqual([['key_minutes_a live', 'key_minutes_b live'], ['key_minutes_a live']])
    for (const r of batch) {
      const expected = { id: r.id, credentialId: r.credentialId, at: new Date(r.atMs).toISOString() }
      expect([JSON.parse(await store.get(r.credentialId, 'live', r.id) ?? 'null'), JSON.parse(await store.find(r.id) ?? 'null')], r.id).toMatchObject([expected, expected])
    }
  })
})
