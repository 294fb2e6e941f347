import { Redis } from 'ioredis'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EndpointStore, type EndpointRecord } from '../../src/webhooks/endpoints.js'
import { afterFailure, afterSuccess } from '../../src/webhooks/rules.js'
import { applyChanges, rotated } from '../../src/webhooks/body.js'
import { hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// A partner's change to an endpoint (PATCH, rotate-secret) is never undone by an attempt's
// bookkeeping made at the same moment (docs/architecture.md §D38): each writer changes the
// record as it is in Redis, by compare-and-set.

const dataOf = (answer: Answer): Record<string, unknown> => (JSON.parse(answer.body) as { data: Record<string, unknown> }).data

describe('changes to an endpoint while its deliveries run', () => {
  let t: TestGateway
  let admin: string
  let hotel: string

  beforeAll(async () => {
    t = await TestGateway.start({ env: PUBLISHER_TOKENS, config: webhookConfig({ endpointConcurrency: 8, retrySchedule: [0.05, 0.05, 0.05] }) })
    admin = await listenAdmin(t.gateway)
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
  })

  it('keeps every rotate-secret, PATCH of the URL and disable made while attempts fail and succeed around it', async () => {
    // Two of three attempts fail: each attempt's bookkeeping writes (failing since, failing no more).
    const r = await new Receiver((n) => (n % 3 === 0 ? 200 : 500)).listen()
    const key = await t.key()
    const endpoint = await createEndpoint(t, key, { url: `${r.url}/u0`, eventTypes: ['property.updated'] })
    const path = `/v1/webhook-endpoints/${endpoint.id}`
    let publishing = true
    const publisher = (async () => {
      while (publishing) {
        await publish(admin, Array.from({ length: 10 }, () => hotelChanged(hotel)))
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    })()
    /** Waits for `count` more requests than now; the last one, which began after the change before it returned. */
    const next = async (count = 12) => {
      const from = r.received.length
      expect(await eventually(async () => r.received.length >= from + count, WAIT_MS, 5)).toBe(true)
      return r.received[r.received.length - 1] as Receiver['received'][number]
    }
    try {
      await next()
      for (let i = 1; i <= 40; i += 1) {
        const answer = await t.call('POST', `${path}/rotate-secret`, { key })
        expect(answer.statusCode).toBe(200)
        const secret = dataOf(answer).secret as string
        const got = await next()
        // The partner's new secret signs: verification with it alone passes.
        expect(() => new Webhook(secret).verify(got.body, got.headers as Record<string, string>), `rotation ${i}`).not.toThrow()
      }
      for (let i = 1; i <= 40; i += 1) {
        const patched = await t.call('PATCH', path, { key, body: JSON.stringify({ url: `${r.url}/u${i}` }) })
        expect(dataOf(patched).url).toBe(`${r.url}/u${i}`)
        expect((await next()).path, `PATCH ${i}`).toBe(`/u${i}`)
        expect(dataOf(await t.get(path, key)).url).toBe(`${r.url}/u${i}`)
      }
      for (let i = 1; i <= 20; i += 1) {
        expect(dataOf(await t.call('PATCH', path, { key, body: JSON.stringify({ status: 'disabled' }) }))).toMatchObject({ status: 'disabled', disabledReason: 'partner' })
        // A test event goes even to a disabled endpoint: once it came, the attempts in flight when it was disabled have ended.
        const test = dataOf(await t.call('POST', `${path}/test`, { key })).eventId as string
        expect(await eventually(async () => r.of(test).length >= 1, WAIT_MS, 5)).toBe(true)
        expect(dataOf(await t.get(path, key)), `disable ${i}`).toMatchObject({ status: 'disabled', disabledReason: 'partner' })
        expect(dataOf(await t.call('PATCH', path, { key, body: JSON.stringify({ status: 'enabled' }) }))).toMatchObject({ status: 'enabled', disabledReason: null })
        await next(4)
      }
    } finally {
      publishing = false
      await publisher
      await r.close()
    }
  }, 180_000)
})

describe('the endpoint store\'s compare-and-set', () => {
  const redis = new Redis(REDIS_URL)
  const prefix = testPrefix()
  const store = new EndpointStore(redis, prefix)
  afterAll(async () => {
    await removePrefix(redis, prefix)
    redis.disconnect()
  })

  const record = (): EndpointRecord => ({
    id: store.newId(Date.now()), credentialId: 'key_cas', brand: 'acme', mode: 'live', url: 'https://hooks.example.com/a', eventTypes: ['property.updated'],
    description: null, status: 'enabled', disabledReason: null, createdAt: new Date(0).toISOString(), updatedAt: new Date(0).toISOString(),
    secrets: [{ sealed: 'first', expiresAt: null }], failingSince: null,
  })

  it('makes each of two changes racing on one record, whatever their order', async () => {
    for (let i = 0; i < 50; i += 1) {
      const endpoint = record()
      expect(await store.create(endpoint, 10)).toBe(true)
      const attempt = { url: endpoint.url, started: 1000, ended: 1001 }
      // The partner's changes and an attempt's bookkeeping, sent together (each reads before either writes).
      await Promise.all([
        store.update(endpoint.id, (current) => rotated(current, `second-${i}`, 2000)),
        store.update(endpoint.id, (current) => afterFailure(current, attempt, 3_600_000)),
        store.update(endpoint.id, (current) => applyChanges(current, { description: `d${i}` }, 3000)),
      ])
      const after = await store.get(endpoint.id)
      expect(after?.secrets.map((s) => s.sealed)).toEqual([`second-${i}`, 'first'])
      expect(after?.description).toBe(`d${i}`)
      await store.remove(endpoint)
    }
  })

  it('never brings back a deleted endpoint, and leaves a record changed since the attempt began as the partner made it', async () => {
    const endpoint = record()
    await store.create(endpoint, 10)
    await store.update(endpoint.id, (current) => ({ ...current, failingSince: 5 }))
    // Changed by its partner after the attempt began: the attempt's success is still recorded, its failure is not.
    await store.update(endpoint.id, (current) => applyChanges(current, { url: 'https://hooks.example.com/b' }, 10_000))
    expect(await store.update(endpoint.id, (current) => afterFailure(current, { url: endpoint.url, started: 9_000, ended: 9_500 }, 1))).toMatchObject({ status: 'enabled', url: 'https://hooks.example.com/b', failingSince: 5 })
    expect(await store.update(endpoint.id, afterSuccess)).toMatchObject({ failingSince: null })
    await store.remove(endpoint)
    expect(await store.update(endpoint.id, afterSuccess)).toBeUndefined()
    expect(await store.get(endpoint.id)).toBeUndefined()
  })
})
