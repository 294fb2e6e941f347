import { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { RedisKeyStore } from '../../src/keys/store.js'
import { accepted, guestEvent, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { Receiver } from '../helpers/receiver.js'
import { commandCalls, eventually, PrivateRedis } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// Deliveries waiting for a busy endpoint (docs/architecture.md §D37) cost Redis nothing until
// a lease frees: they sleep, and an attempt that ends wakes the next. Each gateway here has a
// Redis server of its own, so that every command Redis serves is on the deliveries' account.

/** Every command the server has served (INFO commandstats: commands called from scripts included). */
async function commandsServed(redis: Redis): Promise<number> {
  return Object.values(await commandCalls(redis)).reduce((sum, calls) => sum + calls, 0)
}

/** `count` events of the PMS about one hotel, published in batches. */
async function publishMany(admin: string, hotel: string, count: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < count; i += 100) {
    const answer = await publish(admin, Array.from({ length: Math.min(100, count - i) }, () => hotelChanged(hotel)))
    ids.push(...accepted(answer).map((a) => a.eventId as string))
  }
  return ids
}

describe('deliveries waiting for a busy endpoint', () => {
  let redis: PrivateRedis
  let client: Redis
  const gateways: TestGateway[] = []
  const receivers: Receiver[] = []

  beforeAll(async () => {
    redis = await PrivateRedis.start()
    client = new Redis(redis.url)
  })
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()))
    await Promise.all(gateways.splice(0).map((g) => g.close()))
  })
  afterAll(async () => {
    client.disconnect()
    await redis.stop()
  })

  async function start(events: Parameters<typeof webhookConfig>[0], hooks: { sleepMs?: () => number } = {}): Promise<{ t: TestGateway; admin: string; key: string; hotel: string }> {
    const t = await TestGateway.start({ env: { ...PUBLISHER_TOKENS, REDIS_URL: redis.url }, config: webhookConfig(events), gateway: { webhookHooks: hooks } })
    gateways.push(t)
    const { key } = await new RedisKeyStore(client, t.prefix).create({ brand: 'acme', mode: 'live', properties: '*' })
    return { t, admin: await listenAdmin(t.gateway), key, hotel: String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid) }
  }

  async function receiver(behaviour?: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
    const r = await new Receiver(behaviour).listen()
    receivers.push(r)
    return r
  }

  it('keeps 1,000 deliveries behind an endpoint that never answers under 200 Redis commands a second, and another endpoint\'s deliveries going', async () => {
    // The attempts in flight hang longer than the measurement: no lease frees meanwhile.
    const { t, admin, key, hotel } = await start({ endpointConcurrency: 2, deliveryTimeoutMs: 60_000 })
    const hanging = await receiver(() => 'hang')
    const other = await receiver()
    await createEndpoint(t, key, { url: hanging.url, eventTypes: ['property.updated'] })
    await createEndpoint(t, key, { url: other.url, eventTypes: ['guest.created'] })
    await publishMany(admin, hotel, 1000)
    const deliveries = t.gateway.deliveries
    expect(await eventually(async () => hanging.received.length === 2 && (await deliveries?.backlog())?.pending === 1000, WAIT_MS, 200)).toBe(true)
    // Every delivery has found the endpoint busy once, and gone to wait.
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const before = { commands: await commandsServed(client), at: performance.now() }
    await new Promise((resolve) => setTimeout(resolve, 10_000))
    const perSecond = (await commandsServed(client) - before.commands) / ((performance.now() - before.at) / 1000)
    expect(perSecond).toBeLessThanOrEqual(200)
    expect(hanging.received).toHaveLength(2)
    // Meanwhile another endpoint's delivery goes out.
    const [guest] = accepted(await publish(admin, guestEvent('created', 'g-1'), { token: PUBLISHER_TOKENS.EVENTS_BOOKINGS_TOKEN }))
    expect(await eventually(async () => other.of(guest?.eventId as string).length === 1, WAIT_MS)).toBe(true)
  }, 120_000)

  it('wakes a waiting delivery when a lease frees: 20 deliveries through one lease, one at a time, no polling', async () => {
    const { t, admin, key, hotel } = await start({ endpointConcurrency: 1 })
    let open = 0
    let mostOpen = 0
    const slow = await receiver()
    // Each request is answered 300 ms after it came; the receiver counts how many are open at once.
    slow.behaviour = () => {
      open += 1
      mostOpen = Math.max(mostOpen, open)
      return 'hang'
    }
    const answer = setInterval(() => {
      open -= slow.answerHeld(204)
    }, 300)
    try {
      await createEndpoint(t, key, { url: slow.url, eventTypes: ['property.updated'] })
      const before = await commandsServed(client)
      const ids = await publishMany(admin, hotel, 20)
      expect(await eventually(async () => ids.every((id) => slow.of(id).length === 1), 60_000, 100)).toBe(true)
      expect(mostOpen).toBe(1)
      // A delivery that polled its endpoint (issue: 200-400 ms, ~37 commands a time) would cost hundreds each.
      const perDelivery = (await commandsServed(client) - before) / ids.length
      expect(perDelivery).toBeLessThanOrEqual(200)
    } finally {
      clearInterval(answer)
    }
  }, 120_000)

  it('wakes a waiting delivery by itself when its wake-up was lost with the instance that held the lease', async () => {
    // A lease held by an instance that died: nobody releases it, it lapses in 2 s.
    const { t, admin, key, hotel } = await start({ endpointConcurrency: 1 }, { sleepMs: () => 1000 })
    const r = await receiver()
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    await client.zadd(`${t.prefix}{webhooks}:slot:${endpoint.id}`, Date.now() + 2000, 'a-job-of-a-dead-instance')
    const [id] = await publishMany(admin, hotel, 1)
    expect(await eventually(async () => r.of(id as string).length === 1, WAIT_MS)).toBe(true)
  })
})
