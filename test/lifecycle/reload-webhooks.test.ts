import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig, type FileConfigInput } from '../../src/config.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'
import { receiversClosedAfterEach } from '../helpers/receiver.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { ConfigFile, reloadAt, shippedWith } from '../helpers/reload.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// Webhooks across a reload (docs/operations.md, "Changing the configuration"): a delivery in
// flight is not lost, and a webhook setting a reload changes holds from the next delivery.

const dataOf = (answer: Answer): unknown => (JSON.parse(answer.body) as { data: unknown }).data

describe('webhooks across a reload', () => {
  const file = new ConfigFile()
  const receiver = receiversClosedAfterEach()
  let t: TestGateway
  let admin: string
  let key: string
  let hotel: string
  // Long enough for a reload on a busy machine while an attempt is held open.
  // Retries enough for a second of failures (retrySchedule needs a restart: it is the same throughout).
  const events = webhookConfig({ deliveryTimeoutMs: 30_000, retrySchedule: [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3] }).events as NonNullable<FileConfigInput['events']>
  const content = (change: Record<string, unknown> = {}): Record<string, unknown> => shippedWith({ events, ...change })

  beforeAll(async () => {
    file.write(content())
    const env = { ...PUBLISHER_TOKENS, CONFIG_FILE: file.path }
    t = await TestGateway.start({
      env, config: { events },
      gateway: { reload: { load: () => loadConfig({ ...env, REDIS_URL }), text: file.text } },
    })
    admin = await listenAdmin(t.gateway)
    key = await t.key()
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
    file.remove()
  })

  it('loses no delivery in flight: the attempt held open during the reload ends, and its retry is made', async () => {
    const r = await receiver((n) => (n === 1 ? 'hang' : 200))
    const endpoint = await createEndpoint(t, key, { url: `${r.url}/hooks`, eventTypes: ['property.updated'] })
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    const eventId = event?.eventId as string
    // The first attempt is in flight: the receiver holds it open.
    expect(await eventually(async () => r.of(eventId).length === 1, WAIT_MS)).toBe(true)

    file.write(content({ rateLimit: { limit: 500 } }))
    const reloaded = await reloadAt(admin)
    expect(reloaded).toEqual({ statusCode: 200, body: { data: { changed: true, hash: expect.any(String), loadedAt: expect.any(String) }, meta: expect.any(Object) } })

    // The attempt that began before the reload gets its answer; the 503 makes a retry.
    expect(r.answerHeld(503)).toBe(1)
    expect(await eventually(async () => r.of(eventId).length === 2, WAIT_MS)).toBe(true)
    const [first, second] = r.of(eventId)
    expect({ paths: [first?.path, second?.path], sameBody: first?.body === second?.body, id: second?.headers['webhook-id'] })
      .toEqual({ paths: ['/hooks', '/hooks'], sameBody: true, id: eventId })
    const path = `/v1/webhook-endpoints/${endpoint.id}/deliveries`
    expect(await eventually(async () => (dataOf(await t.get(path, key)) as unknown[]).length === 2, WAIT_MS)).toBe(true)
    expect(dataOf(await t.get(path, key))).toEqual([
      { eventId, attempt: 2, at: expect.any(String), status: 200, outcome: 'delivered', durationMs: expect.any(Number) },
      { eventId, attempt: 1, at: expect.any(String), status: 503, outcome: 'failed', durationMs: expect.any(Number) },
    ])
  })

  it('takes a changed webhook setting from the next delivery: events.disableAfterHours', async () => {
    const r = await receiver(() => 500)
    // About a second of failures now disables an endpoint; it took 120 hours.
    file.write(content({ events: { ...events, disableAfterHours: 0.0003 } }))
    expect((await reloadAt(admin)).statusCode).toBe(200)
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    accepted(await publish(admin, hotelChanged(hotel)))
    const path = `/v1/webhook-endpoints/${endpoint.id}`
    expect(await eventually(async () => (dataOf(await t.get(path, key)) as { status: string }).status === 'disabled', WAIT_MS)).toBe(true)
    expect(dataOf(await t.get(path, key))).toMatchObject({ status: 'disabled', disabledReason: 'failing' })
    expect(r.received.length).toBeGreaterThan(1)
  })

  it('takes a changed webhook setting from the next request: events.maxEndpointsPerCredential', async () => {
    file.write(content({ events: { ...events, disableAfterHours: 0.0003, maxEndpointsPerCredential: 1 } }))
    expect((await reloadAt(admin)).statusCode).toBe(200)
    const own = await t.key()
    await createEndpoint(t, own, { url: 'http://127.0.0.1:9/one', eventTypes: ['property.updated'] })
    const second = await t.call('POST', '/v1/webhook-endpoints', { key: own, body: JSON.stringify({ url: 'http://127.0.0.1:9/two', eventTypes: ['property.updated'] }) })
    expectProblem(second, {
      code: 'WEBHOOK_ENDPOINT_LIMIT_REACHED', instance: '/v1/webhook-endpoints',
      detail: 'This credential has 1 webhook endpoints, as many as it may; delete one first.',
    })
  })
})
