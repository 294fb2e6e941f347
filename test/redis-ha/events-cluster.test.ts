import type { Cluster } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { haRedisMissing, RedisCluster } from '../../bench/redis-ha/topology.js'
import { generateHotels } from '../../mocks/pms/data.js'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { ACME_HOST, GLOBEX_HOST, testConfig } from '../helpers/config.js'
import { checkAnswer } from '../helpers/contract.js'
import { accepted, guestEvent, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { eventually, testPrefix } from '../helpers/redis.js'

// The event log on a Redis Cluster (docs/architecture.md, "Redis layout"): every key of one
// brand and mode shares the hash tag `{brand:mode}`, and a publisher's copy records the tag
// `{src:<source>}`, so the claim, append and page scripts each touch one slot, whichever node
// holds it, and two instances on the Cluster share one log.

const missing = haRedisMissing()
if (missing !== undefined) console.warn(`skipping the Cluster event log tests: ${missing}`)

describe.skipIf(missing !== undefined)('the event log on a Redis Cluster', () => {
  let cluster: RedisCluster
  const instances: { gateway: Gateway; url: string; admin: string }[] = []
  const prefix = testPrefix()
  const hotels = generateHotels()
  const acme = hotels.filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid))
  const globex = String(hotels.find((h) => h.chain_code === 'GLBX')?.hotel_uuid)
  let acmeKey: string
  let onlyOne: string
  let globexKey: string

  beforeAll(async () => {
    cluster = await RedisCluster.start()
    for (let i = 0; i < 2; i += 1) {
      const gateway = await createGateway({
        config: testConfig({}, { ...cluster.env, REDIS_PREFIX: prefix, ...PUBLISHER_TOKENS }),
        logger: captureLogs('silent').logger, properties: new MemorySource([]),
      })
      await gateway.app.listen({ port: 0, host: '127.0.0.1' })
      expect(await eventually(async () => gateway.redis?.status === 'ready', 15_000)).toBe(true)
      instances.push({ gateway, url: `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}`, admin: await listenAdmin(gateway) })
    }
    const store = new RedisKeyStore(instances[0]?.gateway.redis as Cluster, prefix)
    acmeKey = (await store.create({ brand: 'acme', mode: 'live', properties: '*' })).key
    onlyOne = (await store.create({ brand: 'acme', mode: 'live', properties: [acme[0] as string] })).key
    globexKey = (await store.create({ brand: 'globex', mode: 'live', properties: '*' })).key
  }, 180_000)

  afterAll(async () => {
    for (const { gateway } of instances) await gateway.app.close()
    await cluster?.stop()
  }, 30_000)

  const read = async (url: string, key: string, path: string, host = ACME_HOST): Promise<{ statusCode: number; data: { id: string }[]; total: number }> => {
    const res = await request(`${url}${path}`, { headers: { host, 'user-agent': 'cluster-test/1.0', authorization: `Bearer ${key}` } })
    const answer = { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
    checkAnswer('GET', path, answer)
    const body = JSON.parse(answer.body) as { data: { id: string }[]; meta: { pagination?: { total: number } } }
    return { statusCode: answer.statusCode, data: Array.isArray(body.data) ? body.data : [body.data], total: body.meta.pagination?.total ?? 1 }
  }

  /** Every event key on the Cluster's masters. */
  const keys = async (): Promise<string[]> => {
    const found: string[] = []
    for (const node of (instances[0]?.gateway.redis as Cluster).nodes('master')) found.push(...await node.keys(`${prefix}ev:*`))
    return found.sort()
  }

  it('appends through one instance and pages through the other, for brands on different slots', async () => {
    const [a, b] = instances as unknown as [{ url: string; admin: string }, { url: string; admin: string }]
    const batch = [...acme.slice(0, 60).map((id) => hotelChanged(id)), hotelChanged(globex, 'GLBX')]
    const ids = accepted(await publish(a.admin, batch)).map((d) => d.eventId as string)
    const guest = accepted(await publish(b.admin, guestEvent('created', '5e0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'), { token: PUBLISHER_TOKENS.EVENTS_BOOKINGS_TOKEN }))
    const acmeIds = [...ids.slice(0, 60), guest[0]?.eventId as string]
    // Merged from the indexes of every type, paged.
    const pages: string[] = []
    for (let page = 1; page <= 7; page += 1) {
      const answer = await read(b.url, acmeKey, `/v1/events?perPage=10&page=${page}`)
      expect({ status: answer.statusCode, total: answer.total }).toEqual({ status: 200, total: 61 })
      pages.push(...answer.data.map((e) => e.id))
    }
    expect(pages).toEqual(acmeIds)
    // A key of one property: many indexes of one slot in one script.
    expect((await read(a.url, onlyOne, '/v1/events')).data.map((e) => e.id)).toEqual([ids[0], guest[0]?.eventId])
    expect((await read(a.url, globexKey, '/v1/events', GLOBEX_HOST)).data.map((e) => e.id)).toEqual([ids[60]])
    expect((await read(a.url, acmeKey, `/v1/events/${ids[30] as string}`)).data.map((e) => e.id)).toEqual([ids[30]])

    // A deep page (past the merge window of 1,000): found by the binary search of counts.
    const more: string[] = []
    for (let i = 0; i < 10; i += 1) more.push(...accepted(await publish(a.admin, acme.slice(0, 50).flatMap((id) => [hotelChanged(id), hotelChanged(id)]))).map((d) => d.eventId as string))
    const all = [...acmeIds, ...more]
    const deep = await read(b.url, acmeKey, '/v1/events?perPage=100&page=10')
    expect({ total: deep.total, ids: deep.data.map((e) => e.id) }).toEqual({ total: 1061, ids: all.slice(900, 1000) })
    const deeper = await read(a.url, acmeKey, '/v1/events?perPage=100&page=11')
    expect({ total: deeper.total, ids: deeper.data.map((e) => e.id) }).toEqual({ total: 1061, ids: all.slice(1000) })

    const stored = await keys()
    const tags = ['{acme:live}', '{globex:live}', '{src:pms}', '{src:bookings}'].map((tag) => `${prefix}ev:${tag}:`)
    expect(stored.filter((k) => !tags.some((tag) => k.startsWith(tag)))).toEqual([])
    expect(stored.filter((k) => k.startsWith(`${prefix}ev:{globex:live}:`))).toHaveLength(4)
  }, 60_000)

  it('recognises a copy sent to the other instance', async () => {
    const [a, b] = instances as unknown as [{ admin: string }, { admin: string }]
    const event = hotelChanged(acme[1] as string)
    const [first] = accepted(await publish(a.admin, event))
    expect(accepted(await publish(b.admin, event))).toEqual([{ id: event.id, eventId: first?.eventId, duplicate: true }])
  }, 30_000)
})
