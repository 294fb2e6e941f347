import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { contractChecked } from '../helpers/contract.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { eventually, PrivateRedis } from '../helpers/redis.js'

// The event log while Redis cannot answer (a redis-server of the test's own): the ingest
// answers 503 and keeps nothing it did not write, so the publisher sends again; a partner's
// read is 503 too, never 500 or a hang; both work again once Redis is back.

let server: PrivateRedis
let gateway: Gateway
let admin: string
let key: string
const logs = captureLogs()
const hotel = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'

beforeAll(async () => {
  server = await PrivateRedis.start()
  const client = new Redis(server.url)
  key = (await new RedisKeyStore(client, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })).key
  client.disconnect()
  gateway = await createGateway({
    config: testConfig({ keyCache: { ttlMs: 50, graceMs: 60_000, maxEntries: 100 } }, { REDIS_URL: server.url, REDIS_PREFIX: 'gw:', ...PUBLISHER_TOKENS }),
    logger: logs.logger, properties: new MemorySource([]),
  })
  contractChecked(gateway.app)
  admin = await listenAdmin(gateway)
  expect(await eventually(async () => gateway.redis?.status === 'ready', 5000)).toBe(true)
})

afterAll(async () => {
  await gateway.app.close()
  await server.stop()
})

const list = () => gateway.app.inject({ url: '/v1/events', headers: { host: ACME_HOST, 'user-agent': 'outage/1.0', authorization: `Bearer ${key}` } })

describe('the event log without Redis', () => {
  it('answers publishers and partners 503 with Retry-After, then works again', async () => {
    accepted(await publish(admin, hotelChanged(hotel)))
    expectEnvelope(await list(), { page: 1, perPage: 20, total: 1 })
    await server.stop()
    expect(await eventually(async () => gateway.redis?.status !== 'ready', 5000)).toBe(true)
    expectProblem(await publish(admin, hotelChanged(hotel)), {
      code: 'SERVICE_UNAVAILABLE', instance: '/events', detail: 'The events could not be stored; send the same request again.', headers: { 'retry-after': '1' },
    })
    expectProblem(await list(), { code: 'SERVICE_UNAVAILABLE', instance: '/v1/events', detail: 'The event log cannot be read right now; retry shortly.', headers: { 'retry-after': '1' } })
    expect(logs.records().filter((r) => r.msg === 'events could not be written; the publisher is told to retry')).toEqual([
      expect.objectContaining({ level: 'warn', publisher: 'pms', error: expect.any(String) }),
    ])
    await server.start()
    expect(await eventually(async () => (await publish(admin, hotelChanged(hotel))).statusCode === 202, 10_000, 100)).toBe(true)
    // A server of its own without persistence: what it held before is gone (the key too), what came after is there.
    const client = new Redis(server.url)
    key = (await new RedisKeyStore(client, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })).key
    client.disconnect()
    expectEnvelope(await list(), { page: 1, perPage: 20, total: 1 })
  })
})
