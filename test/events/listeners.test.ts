import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LoggedEvent } from '../../src/events/log.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'

// Listeners of the event log (docs/architecture.md, "Events"): what deliveries hook into. They
// see each event an ingest request stored, and each copy it was sent, before the publisher is
// answered; one that fails makes the request a 503, and the publisher's retry hands the same
// events over again, as copies.

describe('listeners of the event log', () => {
  let t: TestGateway
  let admin: string
  const seen: (LoggedEvent & { duplicate: boolean })[][] = []
  let failNext = false

  beforeAll(async () => {
    t = await TestGateway.start({ env: PUBLISHER_TOKENS })
    admin = await listenAdmin(t.gateway)
    t.gateway.events.subscribe(async (events) => {
      seen.push([...events])
      if (failNext) {
        failNext = false
        throw new Error('the listener failed')
      }
    })
  })
  afterAll(async () => t.close())

  it('sees the stored events with their brand and origin, then a copy of one as a duplicate', async () => {
    const hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const event = hotelChanged(hotel, 'ACME', { traceparent })
    const unmapped = hotelChanged(hotel, 'ACME', { type: 'com.example.pms.unknown' })
    const [first] = accepted(await publish(admin, [event, unmapped]))
    const json = await t.get(`/v1/events/${first?.eventId ?? ''}`, await t.key())
    const publicEvent = (JSON.parse(json.body) as { data: Record<string, unknown> }).data
    expect(seen.at(-1)).toEqual([{
      event: publicEvent, json: JSON.stringify(publicEvent), brand: 'acme', origin: { source: 'pms', sourceId: event.id, traceparent }, duplicate: false,
    }])
    accepted(await publish(admin, event))
    expect(seen.at(-1)).toEqual([{ event: publicEvent, json: JSON.stringify(publicEvent), brand: 'acme', origin: { source: 'pms', sourceId: event.id, traceparent }, duplicate: true }])
  })

  it('fails the request when it fails, and sees the events again when the publisher retries', async () => {
    const hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
    const event = hotelChanged(hotel)
    failNext = true
    expectProblem(await publish(admin, event), { code: 'SERVICE_UNAVAILABLE', instance: '/events', headers: { 'retry-after': '1' } })
    const failed = seen.at(-1)
    const [retried] = accepted(await publish(admin, event))
    expect(retried?.duplicate).toBe(true)
    expect(seen.at(-1)?.map((e) => ({ id: e.event.id, duplicate: e.duplicate }))).toEqual([{ id: retried?.eventId, duplicate: true }])
    expect(failed?.map((e) => ({ id: e.event.id, duplicate: e.duplicate }))).toEqual([{ id: retried?.eventId, duplicate: false }])
  })
})
