import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS, propertyUpdated } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { expectEnvelope } from '../helpers/problem.js'
import { ACME_HOST } from '../helpers/config.js'
import { request } from 'undici'
import { checkAnswer } from '../helpers/contract.js'

// Two instances of one gateway share one event log in Redis (docs/operations.md, "Running many
// instances"): an event published to either is read through both, and a copy sent to the other
// is recognised.

describe('two gateway instances', () => {
  let t: TestGateway
  let twin: Awaited<ReturnType<TestGateway['twin']>>
  let key: string

  beforeAll(async () => {
    t = await TestGateway.start({ env: PUBLISHER_TOKENS })
    twin = await t.twin()
    key = await t.key()
  })
  afterAll(async () => {
    await twin.close()
    await t.close()
  })

  const readTwin = async (path: string): Promise<unknown> => {
    const res = await request(`${twin.url}${path}`, { headers: { host: ACME_HOST, 'user-agent': 'twin-test/1.0', authorization: `Bearer ${key}` } })
    const answer = { statusCode: res.statusCode, headers: res.headers as Record<string, string>, body: await res.body.text() }
    checkAnswer('GET', path, answer)
    return expectEnvelope(answer, path === '/v1/events' ? { page: 1, perPage: 20, total: 2 } : undefined)
  }

  it('share one log: events of either instance are read through both, and a copy is recognised across them', async () => {
    const hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
    const first = hotelChanged(hotel)
    const [one] = accepted(await publish(await listenAdmin(t.gateway), first))
    const twinAdmin = await listenAdmin(twin.gateway)
    const [two] = accepted(await publish(twinAdmin, hotelChanged(hotel, 'ACME', {}, { revision: 2 })))
    expect(accepted(await publish(twinAdmin, first))).toEqual([{ id: first.id, eventId: one?.eventId, duplicate: true }])
    const viaFirst = expectEnvelope(await t.get('/v1/events', key), { page: 1, perPage: 20, total: 2 }) as { createdAt: string }[]
    expect(viaFirst).toEqual([
      propertyUpdated(one?.eventId as string, viaFirst[0]?.createdAt as string, hotel),
      propertyUpdated(two?.eventId as string, viaFirst[1]?.createdAt as string, hotel),
    ])
    expect(await readTwin('/v1/events')).toEqual(viaFirst)
    expect(await readTwin(`/v1/events/${two?.eventId ?? ''}`)).toEqual(viaFirst[1])
  })
})
