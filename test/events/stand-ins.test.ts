import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HOTEL_CHANGED } from '../../mocks/pms/server.js'
import { EventPublisher } from '../../mocks/publisher.js'
import { GUEST_CREATED, GUEST_UPDATED } from '../../mocks/service/server.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import { listenAdmin, PUBLISHER_TOKENS } from '../helpers/events.js'
import { expectEnvelope } from '../helpers/problem.js'
import { freePort } from '../helpers/redis.js'

// The stand-ins publish what changes as the internal services do (the PMS's and the bookings
// service's own contracts, in mocks/): the PMS when a hotel changes through its control API,
// the service when a guest is created or changed; each change becomes an event a partner reads.

describe('the stand-ins publish their changes', () => {
  let setup: Setup
  let ingest: string

  beforeAll(async () => {
    setup = await startWithService({ env: PUBLISHER_TOKENS })
    ingest = `${await listenAdmin(setup.t.gateway)}/events`
    setup.t.pms.events.publishTo({ url: ingest, token: PUBLISHER_TOKENS.EVENTS_PMS_TOKEN, source: 'pms' })
    setup.service.events.publishTo({ url: ingest, token: PUBLISHER_TOKENS.EVENTS_BOOKINGS_TOKEN, source: 'bookings' })
  })
  afterAll(async () => setup.close())

  const events = async (query: string): Promise<Record<string, unknown>[]> => {
    const answer = await setup.t.get(`/v1/events${query}`, setup.key)
    expect(answer.statusCode).toBe(200)
    return (JSON.parse(answer.body) as { data: Record<string, unknown>[] }).data
  }

  it('the PMS: a hotel changed through its control API is published and becomes property.updated', async () => {
    const hotel = setup.t.pms.hotels.find((h) => h.chain_code === 'ACME') as Record<string, unknown>
    const id = String(hotel.hotel_uuid)
    const res = await request(`${setup.t.pms.url}/__mock/hotels/${id}`, { method: 'PATCH', body: JSON.stringify({ display_name: 'Renamed', lifecycle: 'SUSPENDED' }) })
    const answer = await res.body.json() as { hotel: Record<string, unknown>; published: { id: string; type: string; data: unknown; status: number; answer: { data: { eventId: string }[] } } }
    expect(res.statusCode).toBe(200)
    expect(answer.hotel).toMatchObject({ hotel_uuid: id, display_name: 'Renamed', lifecycle: 'SUSPENDED' })
    expect(answer.published).toEqual({
      id: expect.any(String), type: HOTEL_CHANGED, data: { hotel_uuid: id, chain_code: 'ACME', changed: ['display_name', 'lifecycle'], revision: 2 }, status: 202,
      answer: { data: [{ id: answer.published.id, eventId: expect.stringMatching(/^evt_/), duplicate: false }] },
    })
    const read = await events(`?propertyId=${id}`)
    expect(read).toEqual([{
      id: answer.published.answer.data[0]?.eventId, type: 'property.updated', createdAt: expect.any(String), mode: 'live', propertyId: id,
      object: { type: 'property', id, path: `/v1/properties/${id}` },
    }])
    // What the PMS published, in its control API.
    const sent = await request(`${setup.t.pms.url}/__mock/events`)
    expect(await sent.body.json()).toEqual([answer.published])
    // The partner reads the change where the event points.
    expect(expectEnvelope(await setup.t.get(`/v1/properties/${id}`, setup.key))).toMatchObject({ id, name: 'Renamed', status: 'inactive' })
  })

  it('the PMS: an unknown hotel is 404 and publishes nothing', async () => {
    const res = await request(`${setup.t.pms.url}/__mock/hotels/nope`, { method: 'PATCH', body: '{"display_name":"x"}' })
    expect({ status: res.statusCode, body: await res.body.json() }).toEqual({ status: 404, body: { error: 'no such hotel' } })
  })

  it('the service: a guest created and changed through the API becomes guest.created and guest.updated', async () => {
    const created = await setup.t.call('POST', '/v1/guests', { key: setup.key, body: '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}' })
    expect(created.statusCode).toBe(201)
    const guest = (JSON.parse(created.body) as { data: { id: string } }).data.id
    expect((await setup.t.call('PATCH', `/v1/guests/${guest}`, { key: setup.key, body: '{"phone":"+44 20 7946 0000"}' })).statusCode).toBe(200)
    const read = await events('?type=guest.created')
    expect(read.map((e) => e.object)).toEqual([{ type: 'guest', id: guest, path: `/v1/guests/${guest}` }])
    const updated = await events('?type=guest.updated')
    expect(updated.map((e) => [e.object, e.propertyId])).toEqual([[{ type: 'guest', id: guest, path: `/v1/guests/${guest}` }, null]])
    expect(setup.service.events.sent.map((p) => [p.type, p.data, p.status])).toEqual([
      [GUEST_CREATED, { guest_id: guest, chain_code: 'ACME' }, 202],
      [GUEST_UPDATED, { guest_id: guest, chain_code: 'ACME', changed: ['phone'] }, 202],
    ])
  })

  it('a publisher retries when the gateway cannot be reached, the same event each time', async () => {
    const publisher = new EventPublisher({ url: `http://127.0.0.1:${await freePort()}/events`, token: 'x', source: 'pms' })
    const published = await publisher.publish(HOTEL_CHANGED, { hotel_uuid: 'x' })
    expect(published).toEqual({ id: expect.any(String), type: HOTEL_CHANGED, data: { hotel_uuid: 'x' }, status: null, answer: expect.stringMatching(/ECONNREFUSED|connect/) })
    expect(await new EventPublisher(undefined).publish(HOTEL_CHANGED, {})).toBeUndefined()
  })
})
