import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { accepted, guestEvent, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS, propertyUpdated } from '../helpers/events.js'
import { ACME_HOST, GLOBEX_HOST } from '../helpers/config.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { eventually } from '../helpers/redis.js'

// GET /v1/events and GET /v1/events/{eventId} over real sockets and real Redis: what each
// credential sees (docs/architecture.md, "Events": mode, brand, property, scope), the filters
// and their strict rules, pagination, and the retention. Every answer is checked against the
// OpenAPI document too (TestGateway.call).

type Event = Record<string, unknown> & { id: string; createdAt: string }

const SECOND = 1000

describe('reading the event log', () => {
  let t: TestGateway
  let admin: string
  // The log's clock: each publication below happens at a time of the test's choosing.
  const start = Math.floor(Date.now() / SECOND) * SECOND - 60 * SECOND
  let now = start
  let hotelA: string
  let hotelB: string
  let globexHotel: string
  const guest = randomUUID()
  /** The events published, in order: A at +1 s, B at +2 s, the guest at +3 s, A again at +4 s. */
  const live: Event[] = []
  let globexEvent: Event
  let testEvent: Event
  let allKey: string

  const at = async (seconds: number, events: unknown, token?: string): Promise<string[]> => {
    now = start + seconds * SECOND
    return accepted(await publish(admin, events, token === undefined ? {} : { token })).map((d) => d.eventId as string)
  }
  const iso = (seconds: number): string => new Date(start + seconds * SECOND).toISOString()
  const list = (key: string, query = '', host = ACME_HOST): Promise<Answer> => t.call('GET', `/v1/events${query}`, { key, host })
  const one = (key: string, id: string, host = ACME_HOST): Promise<Answer> => t.call('GET', `/v1/events/${id}`, { key, host })
  const data = (answer: Answer, pagination: { page: number; perPage: number; total: number }): Event[] => expectEnvelope(answer, pagination) as Event[]

  beforeAll(async () => {
    t = await TestGateway.start({ env: PUBLISHER_TOKENS, sandbox: true, gateway: { eventsClock: () => now } })
    admin = await listenAdmin(t.gateway)
    const acme = t.pms.hotels.filter((h) => h.chain_code === 'ACME')
    hotelA = String(acme[0]?.hotel_uuid)
    hotelB = String(acme[1]?.hotel_uuid)
    globexHotel = String(t.pms.hotels.find((h) => h.chain_code === 'GLBX')?.hotel_uuid)
    const [a1] = await at(1, hotelChanged(hotelA))
    const [b] = await at(2, hotelChanged(hotelB))
    const [g] = await at(3, guestEvent('created', guest), PUBLISHER_TOKENS.EVENTS_BOOKINGS_TOKEN)
    const [a2, x] = await at(4, [hotelChanged(hotelA, 'ACME', {}, { revision: 2 }), hotelChanged(globexHotel, 'GLBX')])
    const [test] = await at(5, hotelChanged(hotelA, 'ACME', { source: 'pms-sandbox' }), PUBLISHER_TOKENS.EVENTS_PMS_SANDBOX_TOKEN)
    live.push(
      propertyUpdated(a1 as string, iso(1), hotelA) as Event,
      propertyUpdated(b as string, iso(2), hotelB) as Event,
      { id: g as string, type: 'guest.created', createdAt: iso(3), mode: 'live', propertyId: null, object: { type: 'guest', id: guest, path: `/v1/guests/${guest}` } },
      propertyUpdated(a2 as string, iso(4), hotelA) as Event,
    )
    globexEvent = propertyUpdated(x as string, iso(4), globexHotel) as Event
    testEvent = propertyUpdated(test as string, iso(5), hotelA, 'test') as Event
    now = start + 10 * SECOND
    allKey = await t.key()
  })
  afterAll(async () => t.close())

  it('lists every event a key with every property and scope sees, oldest first, with the pagination', async () => {
    expect(data(await list(allKey), { page: 1, perPage: 20, total: 4 })).toEqual(live)
  })

  it('reads one event by its id, in any case of its ULID', async () => {
    for (const event of live) expect(expectEnvelope(await one(allKey, event.id))).toEqual(event)
    const lower = `evt_${live[0]?.id.slice(4).toLowerCase() ?? ''}`
    expect(expectEnvelope(await one(allKey, lower))).toEqual(live[0])
  })

  it('answers HEAD as GET, without the body', async () => {
    const answer = await t.call('HEAD', '/v1/events', { key: allKey })
    expect({ status: answer.statusCode, body: answer.body, type: answer.headers['content-type'] }).toEqual({ status: 200, body: '', type: 'application/json; charset=utf-8' })
  })

  describe('shows a credential only what it sees (docs/architecture.md, "Events")', () => {
    it('another brand: a key of globex sees globex\'s events, and acme\'s are not found', async () => {
      const globex = await t.key({ brand: 'globex' })
      expect(data(await list(globex, '', GLOBEX_HOST), { page: 1, perPage: 20, total: 1 })).toEqual([globexEvent])
      expectProblem(await one(globex, live[0]?.id as string, GLOBEX_HOST), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${live[0]?.id ?? ''}`, detail: `No event with id '${live[0]?.id ?? ''}' exists for this credential.` })
      expectProblem(await one(allKey, globexEvent.id), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${globexEvent.id}` })
    })

    it('another mode: a test key sees the sandbox\'s events only, and a live key none of them', async () => {
      const test = await t.key({ mode: 'test' })
      expect(data(await list(test), { page: 1, perPage: 20, total: 1 })).toEqual([testEvent])
      expectProblem(await one(test, live[0]?.id as string), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${live[0]?.id ?? ''}` })
      expectProblem(await one(allKey, testEvent.id), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${testEvent.id}` })
    })

    it('a property outside the key\'s list: its events are not listed nor found; events of no property are', async () => {
      const onlyA = await t.key({ properties: [hotelA.toUpperCase()] })
      expect(data(await list(onlyA), { page: 1, perPage: 20, total: 3 })).toEqual([live[0], live[2], live[3]])
      expectProblem(await one(onlyA, live[1]?.id as string), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${live[1]?.id ?? ''}` })
      expect(expectEnvelope(await one(onlyA, live[2]?.id as string))).toEqual(live[2])
      // Filtered by a property outside its list: nothing, not a refusal.
      expect(data(await list(onlyA, `?propertyId=${hotelB}`), { page: 1, perPage: 20, total: 0 })).toEqual([])
    })

    it('a missing scope: events of a type whose scope the key lacks are not listed nor found', async () => {
      const propertiesOnly = await t.key({ scopes: ['events:read', 'properties:read'] })
      expect(data(await list(propertiesOnly), { page: 1, perPage: 20, total: 3 })).toEqual([live[0], live[1], live[3]])
      expectProblem(await one(propertiesOnly, live[2]?.id as string), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${live[2]?.id ?? ''}` })
      expect(data(await list(propertiesOnly, '?type=guest.created'), { page: 1, perPage: 20, total: 0 })).toEqual([])
      const guestsOnly = await t.key({ scopes: ['events:read', 'guests:read'] })
      expect(data(await list(guestsOnly), { page: 1, perPage: 20, total: 1 })).toEqual([live[2]])
    })

    it('a key without events:read is refused 403 INSUFFICIENT_SCOPE, before its quota', async () => {
      const noEvents = await t.key({ scopes: ['properties:read', 'guests:read'] })
      const challenge = { 'www-authenticate': 'Bearer error="insufficient_scope", scope="events:read"' }
      expectProblem(await list(noEvents), { code: 'INSUFFICIENT_SCOPE', instance: '/v1/events', detail: "This API key lacks the scope 'events:read' that this request needs.", headers: challenge })
      expectProblem(await one(noEvents, live[0]?.id as string), { code: 'INSUFFICIENT_SCOPE', instance: `/v1/events/${live[0]?.id ?? ''}`, headers: challenge })
    })

    it('a key suspended: 403 API_KEY_SUSPENDED on the list and by id', async () => {
      const { key, id } = await t.keyWithId()
      expect((await list(key)).statusCode).toBe(200)
      await t.gateway.keyStore.setStatus(id, 'suspended')
      expect(await eventually(async () => (await list(key)).statusCode === 403, 5000)).toBe(true)
      expectProblem(await list(key), { code: 'API_KEY_SUSPENDED', instance: '/v1/events' })
      expectProblem(await one(key, live[0]?.id as string), { code: 'API_KEY_SUSPENDED', instance: `/v1/events/${live[0]?.id ?? ''}` })
    })

    it('a key of another brand than the host\'s: 403 BRAND_ACCESS_DENIED', async () => {
      expectProblem(await list(allKey, '', GLOBEX_HOST), { code: 'BRAND_ACCESS_DENIED', instance: '/v1/events' })
    })
  })

  describe('filters', () => {
    it('by type', async () => {
      expect(data(await list(allKey, '?type=property.updated'), { page: 1, perPage: 20, total: 3 })).toEqual([live[0], live[1], live[3]])
      expect(data(await list(allKey, '?type=guest.created'), { page: 1, perPage: 20, total: 1 })).toEqual([live[2]])
      expect(data(await list(allKey, '?type=guest.updated'), { page: 1, perPage: 20, total: 0 })).toEqual([])
    })

    it('by property, in any case', async () => {
      expect(data(await list(allKey, `?propertyId=${hotelA.toUpperCase()}`), { page: 1, perPage: 20, total: 2 })).toEqual([live[0], live[3]])
      expect(data(await list(allKey, `?propertyId=${hotelB}&type=property.updated`), { page: 1, perPage: 20, total: 1 })).toEqual([live[1]])
    })

    it('by time: strictly after createdAfter and strictly before createdBefore, any offset', async () => {
      expect(data(await list(allKey, `?createdAfter=${iso(2)}`), { page: 1, perPage: 20, total: 2 })).toEqual([live[2], live[3]])
      expect(data(await list(allKey, `?createdBefore=${iso(2)}`), { page: 1, perPage: 20, total: 1 })).toEqual([live[0]])
      const minusOneMilli = new Date(start + 2 * SECOND - 1).toISOString()
      expect(data(await list(allKey, `?createdAfter=${minusOneMilli}&createdBefore=${iso(3)}`), { page: 1, perPage: 20, total: 1 })).toEqual([live[1]])
      // The same instant written with an offset (its '+' encoded) and with more fraction digits.
      const local = new Date(start + 2 * SECOND + 2 * 3_600_000).toISOString().replace('Z', '+02:00')
      expect(data(await list(allKey, `?createdAfter=${encodeURIComponent(local)}`), { page: 1, perPage: 20, total: 2 })).toEqual([live[2], live[3]])
      expect(data(await list(allKey, `?createdAfter=${iso(2).replace('Z', '0001Z')}`), { page: 1, perPage: 20, total: 2 })).toEqual([live[2], live[3]])
      expect(data(await list(allKey, `?createdAfter=${iso(1).replace('.000Z', '.999999Z')}&createdBefore=${iso(2).replace('Z', '0001Z')}`), { page: 1, perPage: 20, total: 1 })).toEqual([live[1]])
      expect(data(await list(allKey, `?createdAfter=${iso(3)}&createdBefore=${iso(3)}`), { page: 1, perPage: 20, total: 0 })).toEqual([])
    })

    it('refuses a type that is no public type, naming them', async () => {
      expectProblem(await list(allKey, '?type=property.deleted'), {
        code: 'INVALID_QUERY_PARAMETER', instance: '/v1/events', detail: "Invalid query parameter 'type'.",
        errors: [{ field: 'type', code: 'INVALID_ENUM_VALUE', detail: "Must be one of 'guest.created', 'guest.updated', 'property.updated'." }],
      })
    })

    it('refuses bad values, one field error each', async () => {
      expectProblem(await list(allKey, '?propertyId=hotel-a&createdAfter=2026-02-30T00:00:00Z&createdBefore=yesterday&perPage=0'), {
        code: 'INVALID_QUERY_PARAMETER', instance: '/v1/events', detail: "Invalid query parameters 'perPage', 'propertyId', 'createdAfter', 'createdBefore'.",
        errors: [
          { field: 'perPage', code: 'OUT_OF_RANGE', detail: 'Must be between 1 and 100.' },
          { field: 'propertyId', code: 'INVALID_FORMAT', detail: 'Must be a UUID such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10.' },
          { field: 'createdAfter', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, such as 2026-11-26T12:00:00Z or 2026-11-26T13:00:00.250+01:00.' },
          { field: 'createdBefore', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, such as 2026-11-26T12:00:00Z or 2026-11-26T13:00:00.250+01:00.' },
        ],
      })
    })

    it('says so when the + of an offset came unencoded', async () => {
      expectProblem(await list(allKey, '?createdAfter=2026-11-26T12:00:00+01:00'), {
        code: 'INVALID_QUERY_PARAMETER', instance: '/v1/events', detail: "Invalid query parameter 'createdAfter'.",
        errors: [{ field: 'createdAfter', code: 'INVALID_FORMAT', detail: "Must be an RFC 3339 date-time; send the '+' of an offset as %2B, as a query string reads a bare '+' as a space." }],
      })
    })

    it('refuses a filter given twice, an empty one, and an unknown name with a suggestion', async () => {
      expectProblem(await list(allKey, `?type=guest.created&type=property.updated&createdAfter=`), {
        code: 'INVALID_QUERY_PARAMETER', instance: '/v1/events', detail: "Invalid query parameters 'type', 'createdAfter'.",
        errors: [
          { field: 'type', code: 'INVALID_FORMAT', detail: 'Give this parameter once.' },
          { field: 'createdAfter', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, such as 2026-11-26T12:00:00Z or 2026-11-26T13:00:00.250+01:00.' },
        ],
      })
      expectProblem(await list(allKey, `?created_after=${iso(1)}`), {
        code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/events', detail: "Unknown query parameter 'created_after'. 'created_after': Did you mean 'createdAfter'?",
        errors: [{ field: 'created_after', code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'createdAfter'?" }],
      })
    })
  })

  it('pages like every list: page, perPage and the true total; a page past the end is empty', async () => {
    expect(data(await list(allKey, '?perPage=3'), { page: 1, perPage: 3, total: 4 })).toEqual(live.slice(0, 3))
    expect(data(await list(allKey, '?perPage=3&page=2'), { page: 2, perPage: 3, total: 4 })).toEqual(live.slice(3))
    expect(data(await list(allKey, '?perPage=3&page=9'), { page: 9, perPage: 3, total: 4 })).toEqual([])
    expect(data(await list(allKey, '?perPage=1&page=2&type=property.updated'), { page: 2, perPage: 1, total: 3 })).toEqual([live[1]])
  })

  describe('an event id', () => {
    it.each([
      ['without its prefix', 'ULID'],
      ['with another prefix', 'EVT_'],
      ['of 25 characters', 'SHORT'],
      ['with a letter a ULID has not', 'U'],
      ['past the time a ULID can hold', '8'],
    ])('%s is 400 INVALID_PATH_PARAMETER (docs/architecture.md §D29)', async (_name, kind) => {
      const ulid = live[0]?.id.slice(4) as string
      const id = kind === 'ULID' ? ulid : kind === 'EVT_' ? `EVT_${ulid}` : kind === 'SHORT' ? `evt_${ulid.slice(1)}` : kind === 'U' ? `evt_${ulid.slice(0, 25)}U` : `evt_8${ulid.slice(1)}`
      expectProblem(await one(allKey, id), {
        code: 'INVALID_PATH_PARAMETER', instance: `/v1/events/${id}`, detail: "'eventId' is not an id of this kind.",
        errors: [{ field: 'eventId', code: 'INVALID_FORMAT', detail: 'Must be evt_ followed by 26 characters, as in the ids this API returns.' }],
      })
    })

    it('well-formed and unknown is 404 EVENT_NOT_FOUND', async () => {
      const unknown = 'evt_01ARZ3NDEKTSV4RRFFQ69G5FAV'
      expectProblem(await one(allKey, unknown), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${unknown}`, detail: `No event with id '${unknown}' exists for this credential.` })
    })
  })

  it('keeps events for events.retentionDays: older ones are neither listed nor found, and leave the indexes on the next write', async () => {
    const [kept] = await at(20, hotelChanged(hotelB))
    now = start + 30 * 86_400_000 + 15 * SECOND
    // Every event up to +10 s is past the 30 days; the one at +20 s is not.
    expect(data(await list(allKey), { page: 1, perPage: 20, total: 1 })).toEqual([propertyUpdated(kept as string, iso(20), hotelB)])
    expectProblem(await one(allKey, live[0]?.id as string), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${live[0]?.id ?? ''}` })
    const redis = t.gateway.redis as Redis
    const index = `${t.prefix}ev:{acme:live}:t:property.updated`
    expect(await redis.zcard(index)).toBe(4)
    const [next] = await at(30 * 86_400 + 16, hotelChanged(hotelA))
    expect(await redis.zrange(index, '0', '-1')).toEqual([kept?.slice(4), next?.slice(4)])
    // The indexes and records expire by themselves a retention (and an hour) after their last write.
    const ttl = await redis.pttl(index)
    expect(ttl).toBeGreaterThan(30 * 86_400_000)
    expect(ttl).toBeLessThanOrEqual(30 * 86_400_000 + 3_600_000)
    now = start + 10 * SECOND
  })
})
