import { shipped } from '../helpers/declared.js'
import { Cluster } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { haRedisMissing, RedisCluster } from '../../bench/redis-ha/topology.js'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { expectProblem } from '../helpers/problem.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { eventually, testPrefix } from '../helpers/redis.js'

// Idempotency records on a Redis Cluster (docs/architecture.md, "Idempotency records"): each
// record is one key, hash-tagged by its credential, so claiming, keeping and releasing it work
// on whichever node holds its slot, and two instances on the Cluster share it.

const missing = haRedisMissing()
if (missing !== undefined) console.warn(`skipping the Cluster idempotency tests: ${missing}`)

const TOKEN = 'cluster-service-token'
const GUEST = '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}'

describe.skipIf(missing !== undefined)('Idempotency-Key records on a Redis Cluster', () => {
  let cluster: RedisCluster
  let service: MockService
  const gateways: { gateway: Gateway; url: string }[] = []
  const prefix = testPrefix()
  let key: string

  beforeAll(async () => {
    cluster = await RedisCluster.start()
    service = await new MockService({ token: TOKEN }).listen()
    for (let i = 0; i < 2; i += 1) {
      const gateway = await createGateway({
        config: testConfig({
          upstreams: { bookings: { ...shipped.upstreams.bookings, sandboxUrl: undefined } } as FileConfigInput['upstreams'],
          routes: shipped.routes as FileConfigInput['routes'],
          idempotency: { retentionHours: 1, maxBodyBytes: 65536 },
        }, { ...cluster.env, REDIS_PREFIX: prefix, UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: TOKEN }),
        logger: captureLogs('silent').logger, properties: new MemorySource([]),
      })
      await gateway.app.listen({ port: 0, host: '127.0.0.1' })
      expect(await eventually(async () => gateway.redis?.status === 'ready', 15_000)).toBe(true)
      gateways.push({ gateway, url: `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}` })
    }
    key = (await new RedisKeyStore(gateways[0]?.gateway.redis as Cluster, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
  }, 180_000)

  afterAll(async () => {
    for (const { gateway } of gateways) await gateway.app.close()
    await service?.close()
    await cluster?.stop()
  }, 30_000)

  const post = async (url: string, idempotencyKey: string, body = GUEST) => {
    const res = await request(`${url}/v1/guests`, {
      method: 'POST', body,
      headers: { host: ACME_HOST, 'user-agent': 'cluster-test/1.0', authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    })
    return { statusCode: res.statusCode, headers: res.headers as Record<string, string | undefined>, body: await res.body.text() }
  }

  /** The records on every master of the Cluster, with their time to live. */
  const records = async (): Promise<{ key: string; ttl: number }[]> => {
    const redis = gateways[0]?.gateway.redis as Cluster
    const found: { key: string; ttl: number }[] = []
    for (const node of redis.nodes('master')) {
      for (const name of await node.keys(`${prefix}idem:*`)) found.push({ key: name, ttl: await node.pttl(name) })
    }
    return found
  }

  it('claims, keeps and replays a record across two instances; refuses its reuse; it expires by itself', async () => {
    const [a, b] = gateways as unknown as [{ url: string }, { url: string }]
    const first = await post(a.url, 'cluster-key-1')
    expect(first.statusCode).toBe(201)
    const replay = await post(b.url, 'cluster-key-1')
    expect({ status: replay.statusCode, body: replay.body, replayed: replay.headers['idempotent-replayed'] }).toEqual({ status: 201, body: first.body, replayed: 'true' })
    expectProblem(await post(b.url, 'cluster-key-1', '{}'), { code: 'IDEMPOTENCY_KEY_REUSED', instance: '/v1/guests' })
    expect(service.writesOf('cluster-key-1')).toEqual({ created: 1, updated: 0 })

    const stored = await records()
    expect(stored).toHaveLength(1)
    expect(stored[0]?.key).toMatch(new RegExp(`^${prefix}idem:\\{key_[^}]+\\}:`))
    expect(stored[0]?.ttl).toBeGreaterThan(3600_000 - 60_000)
    expect(stored[0]?.ttl).toBeLessThanOrEqual(3600_000)
  }, 30_000)

  it('lets one of many concurrent requests with one key through, on both instances', async () => {
    service.setFailure({ mode: 'latency', latencyMs: 300 })
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post((gateways[i % 2] as { url: string }).url, 'cluster-key-2')))
    service.setFailure(undefined)
    expect(answers.every((a) => a.statusCode === 201 || a.statusCode === 409)).toBe(true)
    expect(answers.filter((a) => a.statusCode === 201 && a.headers['idempotent-replayed'] === undefined)).toHaveLength(1)
    expect(service.writesOf('cluster-key-2')).toEqual({ created: 1, updated: 0 })
  }, 30_000)

  it('releases the record on a 5xx of the service, so the retry is forwarded', async () => {
    service.setFailure({ mode: 'html-5xx', times: 1 })
    expect((await post((gateways[0] as { url: string }).url, 'cluster-key-3')).statusCode).toBe(503)
    expect((await post((gateways[1] as { url: string }).url, 'cluster-key-3')).statusCode).toBe(201)
    expect(service.received.filter((r) => r.headers['idempotency-key'] === 'cluster-key-3')).toHaveLength(2)
  }, 30_000)
})
