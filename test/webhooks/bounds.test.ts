import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'
import { receiversClosedAfterEach } from '../helpers/receiver.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// What a partner's deliveries may cost (docs/partners.md, "Webhooks"): at most
// events.maxManualDeliveriesPerEndpoint deliveries it asked for (`test`, `redeliver`) not yet
// finished per endpoint, and a finished delivery keeps its reason alone, no stack trace.

const dataOf = (answer: Answer): Record<string, unknown> => (JSON.parse(answer.body) as { data: Record<string, unknown> }).data

describe('bounds of a partner\'s deliveries', () => {
  let t: TestGateway
  let admin: string
  let key: string
  let hotel: string
  const redis = new Redis(REDIS_URL)
  const receiver = receiversClosedAfterEach()

  beforeAll(async () => {
    t = await TestGateway.start({ env: PUBLISHER_TOKENS, config: webhookConfig({ maxManualDeliveriesPerEndpoint: 3, endpointConcurrency: 1, retrySchedule: [0.2] }) })
    admin = await listenAdmin(t.gateway)
    key = await t.key()
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
    redis.disconnect()
  })

  it('refuses a test or a redelivery beyond events.maxManualDeliveriesPerEndpoint not yet finished: 429 RATE_LIMITED with Retry-After, until some finish', async () => {
    const r = await receiver(() => 'hang')
    const endpoint = await createEndpoint(t, key, { url: r.url, eventTypes: ['property.updated'] })
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    const eventId = event?.eventId as string
    // The event's own delivery is in flight (it does not count); three tests wait behind it.
    expect(await eventually(async () => r.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const testPath = `/v1/webhook-endpoints/${endpoint.id}/test`
    for (let i = 0; i < 3; i += 1) expect((await t.call('POST', testPath, { key })).statusCode).toBe(202)
    const detail = `Webhook endpoint '${endpoint.id}' has 3 test or redelivered deliveries not yet finished, as many as it may; retry once some are delivered (GET /v1/webhook-endpoints/${endpoint.id}/deliveries shows them).`
    expectProblem(await t.call('POST', testPath, { key }), { code: 'RATE_LIMITED', instance: testPath, detail, headers: { 'retry-after': '60' } })
    const redeliverPath = `/v1/events/${eventId}/redeliver`
    expectProblem(await t.call('POST', redeliverPath, { key, body: JSON.stringify({ endpointId: endpoint.id }) }), { code: 'RATE_LIMITED', instance: redeliverPath, detail, headers: { 'retry-after': '60' } })
    // Another endpoint of the same credential has a bound of its own.
    const other = await receiver()
    const second = await createEndpoint(t, key, { url: other.url, eventTypes: ['property.updated'] })
    expect((await t.call('POST', `/v1/webhook-endpoints/${second.id}/test`, { key })).statusCode).toBe(202)
    // The endpoint answers: its deliveries finish one by one, and the partner may ask again.
    r.behaviour = () => 204
    r.answerHeld(204)
    expect(await eventually(async () => r.received.length === 4, WAIT_MS)).toBe(true)
    // Refused (with no effect) until the last of them has finished.
    let again: Answer | undefined
    expect(await eventually(async () => (again = await t.call('POST', testPath, { key })).statusCode === 202, WAIT_MS)).toBe(true)
    const testId = dataOf(again as Answer).eventId as string
    expect(await eventually(async () => r.of(testId).length === 1, WAIT_MS)).toBe(true)
    expect((await t.call('POST', redeliverPath, { key, body: JSON.stringify({ endpointId: endpoint.id }) })).statusCode).toBe(202)
    expect(await eventually(async () => r.of(eventId).length === 2, WAIT_MS)).toBe(true)
  })

  it('keeps no stack trace and no path of the gateway\'s files in a finished delivery', async () => {
    const failing = await receiver(() => 500)
    const fine = await receiver()
    const failed = await createEndpoint(t, key, { url: failing.url, eventTypes: ['property.updated'] })
    const delivered = await createEndpoint(t, key, { url: fine.url, eventTypes: ['property.updated'] })
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    const ulid = (event?.eventId as string).slice(4)
    const queue = `${t.prefix}{webhooks}:deliveries`
    // Both attempts of the schedule failed; the other endpoint's delivery succeeded.
    expect(await eventually(async () => await redis.zscore(`${queue}:failed`, `${ulid}.${failed.id}`) !== null, WAIT_MS)).toBe(true)
    expect(await eventually(async () => await redis.zscore(`${queue}:completed`, `${ulid}.${delivered.id}`) !== null, WAIT_MS)).toBe(true)
    const failedJob = await redis.hgetall(`${queue}:${ulid}.${failed.id}`)
    expect(failedJob).toMatchObject({ failedReason: 'attempt failed (HTTP 500)', stacktrace: '[]' })
    const completedJob = await redis.hgetall(`${queue}:${ulid}.${delivered.id}`)
    expect(completedJob).toMatchObject({ returnvalue: '"delivered"' })
    for (const job of [failedJob, completedJob]) {
      const text = JSON.stringify(job)
      expect(text).not.toContain(process.cwd())
      expect(text).not.toMatch(/\.(?:ts|js):\d+/)
    }
  })
})
