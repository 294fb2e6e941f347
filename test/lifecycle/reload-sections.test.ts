import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { loadConfig } from '../../src/config.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { grantClient, invalidTokenChallenge, oauthFor } from '../helpers/oauth.js'
import { expectProblem } from '../helpers/problem.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { ConfigFile, reloadAt, shipped, shippedWith } from '../helpers/reload.js'

// The sections a reload changes besides the routes (docs/operations.md, "Changing the
// configuration"), each over real sockets: a brand, an event type, a token issuer.

const INITECH_HOST = 'api.initech-inns.example'
const initech = { id: 'initech', chainCode: 'INIT', hosts: [INITECH_HOST] }
const closed = {
  type: 'property.closed', publisher: 'pms', internalType: 'com.example.pms.hotel.closed', scope: 'properties:read', brand: 'chain_code', property: 'hotel_uuid',
  object: { type: 'property', id: 'hotel_uuid', path: '/v1/properties/{id}' },
}
const shippedEvents = shipped.events as { types: unknown[] }
const dataOf = (answer: Answer): unknown => (JSON.parse(answer.body) as { data: unknown }).data

describe('a reload changes', () => {
  const file = new ConfigFile()
  const idp = new MockIdp({ clients: [{ clientId: 'reload-client', secret: 'reload-client-secret' }] })
  let t: TestGateway
  let admin: string
  // The file as it stands: each test's reload adds to it.
  let content: Record<string, unknown> = shippedWith()

  async function reloadWith(change: Record<string, unknown>): Promise<void> {
    content = { ...content, ...change }
    file.write(content)
    const answer = await reloadAt(admin)
    expect(answer).toEqual({ statusCode: 200, body: { data: { changed: true, hash: expect.any(String), loadedAt: expect.any(String) }, meta: expect.any(Object) } })
  }

  beforeAll(async () => {
    await idp.listen()
    file.write(content)
    const env = { ...PUBLISHER_TOKENS, CONFIG_FILE: file.path }
    t = await TestGateway.start({ env, gateway: { reload: { load: () => loadConfig({ ...env, REDIS_URL }), text: file.text } } })
    admin = await listenAdmin(t.gateway)
  })
  afterAll(async () => {
    await t.close()
    await idp.close()
    file.remove()
  })

  it('the brands: a brand added answers on its host, and events of its chain are accepted', async () => {
    const key = await t.key({ brand: 'initech' })
    const before = await t.call('GET', '/v1/properties', { key, host: INITECH_HOST })
    expect(before.statusCode).toBe(404)
    const hotel = t.pms.hotels.find((h) => h.chain_code === 'INIT' && h.lifecycle === 'LIVE')
    const refused = await publish(admin, hotelChanged(String(hotel?.hotel_uuid), 'INIT'))
    expect({ status: refused.statusCode, body: JSON.parse(refused.body) as unknown }).toMatchObject({
      status: 400, body: { code: 'INVALID_EVENT', errors: [{ field: 'data.chain_code', code: 'NOT_ALLOWED', detail: 'Names no brand of this gateway (`brands[].chainCode`).' }] },
    })

    await reloadWith({ brands: [...shipped.brands as unknown[], initech] })
    const after = await t.call('GET', '/v1/properties?perPage=100', { key, host: INITECH_HOST })
    expect(after.statusCode).toBe(200)
    const ids = (dataOf(after) as { id: string }[]).map((p) => p.id).sort()
    expect(ids).toEqual(t.pms.hotels.filter((h) => h.chain_code === 'INIT' && h.lifecycle === 'LIVE').map((h) => String(h.hotel_uuid)).sort())
    const [event] = accepted(await publish(admin, hotelChanged(String(hotel?.hotel_uuid), 'INIT')))
    expect(event).toEqual({ id: expect.any(String), eventId: expect.stringMatching(/^evt_/), duplicate: false })
    const read = await t.call('GET', `/v1/events/${event?.eventId as string}`, { key, host: INITECH_HOST })
    expect({ status: read.statusCode, type: (dataOf(read) as { type: string }).type }).toEqual({ status: 200, type: 'property.updated' })
  })

  it('the event types: a type added is accepted at ingest and readable at /v1/events', async () => {
    const key = await t.key()
    const hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
    const send = async (): Promise<string | null> => {
      const [event] = accepted(await publish(admin, hotelChanged(hotel, 'ACME', { type: closed.internalType })))
      return event?.eventId ?? null
    }
    // Unmapped: accepted and dropped.
    expect(await send()).toBeNull()
    expectProblem(await t.get('/v1/events?type=property.closed', key), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/events',
      errors: [{ field: 'type', code: 'INVALID_ENUM_VALUE', detail: "Must be one of 'guest.created', 'guest.updated', 'property.updated'." }],
    })

    await reloadWith({ events: { ...shippedEvents, types: [...shippedEvents.types, closed] } })
    const eventId = await send()
    expect(eventId).toMatch(/^evt_/)
    const one = await t.get(`/v1/events/${eventId as string}`, key)
    expect({ status: one.statusCode, data: dataOf(one) }).toEqual({
      status: 200,
      data: { id: eventId, type: 'property.closed', createdAt: expect.any(String), mode: 'live', propertyId: hotel, object: { type: 'property', id: hotel, path: `/v1/properties/${hotel}` } },
    })
    const list = await t.get('/v1/events?type=property.closed', key)
    expect({ status: list.statusCode, ids: (dataOf(list) as { id: string }[]).map((e) => e.id) }).toEqual({ status: 200, ids: [eventId] })
  })

  it('the token issuers: an issuer added has its tokens accepted, and removed, refused again', async () => {
    await grantClient({ REDIS_URL, REDIS_PREFIX: t.prefix }, idp, 'reload-client')
    const token = idp.issue('reload-client', ['properties:read'])
    const before = await t.get('/v1/properties', token)
    expectProblem(before, { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties' })

    // The other oauth settings as they were: only the issuers change.
    await reloadWith({ oauth: oauthFor(idp, { verifiedTokens: 100000 }) })
    const served = await t.get('/v1/properties?perPage=1', token)
    expect(served.statusCode).toBe(200)

    await reloadWith({ oauth: shippedWith().oauth })
    const refused = await t.get('/v1/properties', token)
    expectProblem(refused, { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties' })
    expect(refused.headers['www-authenticate']).toBe(invalidTokenChallenge('This API takes API keys; it accepts no access tokens.'))
  })

  it('the request log: switched off, no request is kept and /v1/request-logs answers 404; on again, requests are kept again', async () => {
    const { key } = await t.keyWithId()
    const requestIdOf = (answer: Answer): string => answer.headers['service-request-id'] as string
    const logged = async (count: number): Promise<string[]> => {
      let ids: string[] = []
      await eventually(async () => {
        const page = await t.get('/v1/request-logs', key)
        ids = page.statusCode === 200 ? (dataOf(page) as { id: string }[]).map((e) => e.id) : []
        return ids.length >= count
      }, 15_000, 100)
      return ids
    }
    const requestLogStatus = async (): Promise<boolean> => (await (await request(`${admin}/status`)).body.json() as { requestLog: { enabled: boolean } }).requestLog.enabled
    const kept = await t.get('/v1/properties?perPage=1', key)
    expect({ status: kept.statusCode, logged: await logged(1), enabled: await requestLogStatus() }).toEqual({ status: 200, logged: [requestIdOf(kept)], enabled: true })

    await reloadWith({ requestLog: { enabled: false } })
    const notKept = await t.get('/v1/properties?perPage=2', key)
    expect(notKept.statusCode).toBe(200)
    expectProblem(await t.get('/v1/request-logs', key), { code: 'ROUTE_NOT_FOUND', instance: '/v1/request-logs' })
    expect(await requestLogStatus()).toBe(false)

    await reloadWith({ requestLog: { enabled: true } })
    const keptAgain = await t.get('/v1/properties?perPage=3', key)
    expect(keptAgain.statusCode).toBe(200)
    // The request made while the log was off came before this one, so would have been written with it or before it.
    expect({ logged: await logged(2), enabled: await requestLogStatus() }).toEqual({ logged: [requestIdOf(keptAgain), requestIdOf(kept)], enabled: true })
  })
})
