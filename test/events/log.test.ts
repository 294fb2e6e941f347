import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import type { CheckedEvent } from '../../src/events/cloudevents.js'
import { EventLog, type LoggedEvent } from '../../src/events/log.js'
import { MemoryEventStore, partitionPrefix, RedisEventStore, type EventStore } from '../../src/events/store.js'
import { EventTypes, type Viewer } from '../../src/events/types.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The event log's rules over each store, without a gateway (docs/architecture.md, "Events"):
// what an ingest keeps and answers (accepted, copies whatever brand they name, dropped), what
// a credential lists and reads (its brand, mode, properties, scopes, the filters, the
// retention), and the instance's cache of events read.

const redis = new Redis(REDIS_URL)
const prefixes: string[] = []
afterAll(async () => {
  for (const prefix of prefixes) await removePrefix(redis, prefix)
  redis.disconnect()
})

const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const OTHER = '11111111-1111-4111-8111-111111111111'
const DAY = 86_400_000
const TRACE = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
const REQUEST_TRACE = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'

const types = new EventTypes([
  { type: 'property.updated', publisher: 'pms', internalType: 'hotel.changed', scope: 'properties:read', brand: 'chain', property: 'hotel', object: { type: 'property', id: 'hotel', path: '/v1/properties/{id}' } },
  { type: 'guest.created', publisher: 'pms', internalType: 'guest.new', scope: 'guests:read', brand: 'chain', object: { type: 'guest', id: 'guest', path: '/v1/guests/{id}' } },
])

function checked(index: number, id: string, type: 'property.updated' | 'guest.created' | undefined, brand = 'acme', propertyId: string | null = HOTEL, traceparent?: string): CheckedEvent {
  const objectId = type === 'guest.created' ? `g-${id}` : (propertyId ?? 'x')
  const path = type === 'guest.created' ? `/v1/guests/${objectId}` : `/v1/properties/${objectId}`
  return {
    index, id, internalType: type === undefined ? 'other.thing' : 'x', traceparent,
    mapped: type === undefined ? undefined : { type, brand, propertyId: type === 'guest.created' ? null : propertyId, object: { type: type === 'guest.created' ? 'guest' : 'property', id: objectId, path } },
  }
}

function viewer(over: Partial<Viewer> = {}): Viewer {
  return { brand: 'acme', mode: 'live', properties: 'all', scopes: 'all', ...over }
}

interface Setup { store: EventStore; log: EventLog; clock: { now: number }; seen: (LoggedEvent & { duplicate: boolean })[][] }

function setup(kind: 'redis' | 'memory', cachedEvents = 0): Setup {
  const prefix = testPrefix()
  prefixes.push(prefix)
  const store = kind === 'redis' ? new RedisEventStore(redis, prefix) : new MemoryEventStore()
  // The log's clock: a minute ago, so the stores' expiry (the real clock's) keeps what it writes.
  const clock = { now: Date.now() - 60_000 }
  const log = new EventLog(store, types, { retentionDays: 2, cachedEvents, now: () => clock.now })
  const seen: Setup['seen'] = []
  log.subscribe(async (events) => { seen.push([...events]) })
  return { store, log, clock, seen }
}

const parse = (json: string): Record<string, unknown>[] => JSON.parse(json) as Record<string, unknown>[]

describe.each(['redis', 'memory'] as const)('the event log over the %s store', (kind) => {
  it('keeps mapped events with ids and times of its own, drops unmapped ones, and tells its listeners', async () => {
    const { log, clock, seen } = setup(kind)
    const outcomes = await log.ingest('pms', 'live', [checked(0, 'a', 'property.updated', 'acme', HOTEL, TRACE), checked(1, 'b', undefined), checked(2, 'c', 'guest.created', 'globex')], REQUEST_TRACE)
    const createdAt = new Date(clock.now).toISOString()
    expect(outcomes).toEqual([
      { kind: 'accepted', index: 0, sourceId: 'a', eventId: expect.stringMatching(/^evt_[0-9A-Z]{26}$/) as string },
      { kind: 'dropped', index: 1, sourceId: 'b' },
      { kind: 'accepted', index: 2, sourceId: 'c', eventId: expect.stringMatching(/^evt_[0-9A-Z]{26}$/) as string },
    ])
    const [first, , third] = outcomes as [{ eventId: string }, unknown, { eventId: string }]
    expect(first.eventId < third.eventId).toBe(true)
    const acme = { id: first.eventId, type: 'property.updated', createdAt, mode: 'live', propertyId: HOTEL, object: { type: 'property', id: HOTEL, path: `/v1/properties/${HOTEL}` } }
    const globex = { id: third.eventId, type: 'guest.created', createdAt, mode: 'live', propertyId: null, object: { type: 'guest', id: 'g-c', path: '/v1/guests/g-c' } }
    expect(seen).toHaveLength(1)
    expect((seen[0] ?? []).sort((x, y) => x.brand.localeCompare(y.brand))).toEqual([
      { event: acme, json: JSON.stringify(acme), brand: 'acme', origin: { source: 'pms', sourceId: 'a', traceparent: TRACE }, duplicate: false },
      { event: globex, json: JSON.stringify(globex), brand: 'globex', origin: { source: 'pms', sourceId: 'c', traceparent: REQUEST_TRACE }, duplicate: false },
    ])
    expect(parse((await log.list(viewer(), {}, 1, 10)).json)).toEqual([acme])
    expect(await log.list(viewer({ brand: 'globex' }), {}, 1, 10)).toEqual({ total: 1, json: `[${JSON.stringify(globex)}]` })
    expect(await log.get(viewer(), first.eventId)).toBe(JSON.stringify(acme))
    // Without a traceparent anywhere, the origin has none.
    await log.ingest('pms', 'live', [checked(0, 'd', 'guest.created')])
    expect(seen[1]?.[0]?.origin).toEqual({ source: 'pms', sourceId: 'd' })
  })

  it('answers a copy of a (source, id) with the first one\'s event, whatever brand it names, and tells the listeners again', async () => {
    const { log, clock, seen } = setup(kind)
    const [first] = await log.ingest('pms', 'live', [checked(0, 'a', 'property.updated')]) as unknown as [{ eventId: string }]
    clock.now += 5000
    const again = await log.ingest('pms', 'live', [checked(0, 'a', 'property.updated'), checked(1, 'a', 'property.updated', 'globex')])
    expect(again).toEqual([
      { kind: 'duplicate', index: 0, sourceId: 'a', eventId: first.eventId },
      { kind: 'duplicate', index: 1, sourceId: 'a', eventId: first.eventId },
    ])
    expect(seen[1]?.map((s) => [s.brand, s.event.id, s.duplicate, s.origin])).toEqual([
      ['acme', first.eventId, true, { source: 'pms', sourceId: 'a' }], ['acme', first.eventId, true, { source: 'pms', sourceId: 'a' }],
    ])
    // The first's time, not the copy's.
    expect(seen[1]?.[0]?.event.createdAt).toBe(new Date(clock.now - 5000).toISOString())
    // Another publisher's same id is another event.
    const other = await log.ingest('crm', 'live', [checked(0, 'a', 'property.updated')])
    expect(other[0]).toMatchObject({ kind: 'accepted' })
    expect((await log.list(viewer(), {}, 1, 10)).total).toBe(2)
  })

  it('fails an ingest whose copy names an event not written yet, and completes a claimed one on retry', async () => {
    const { store, log, clock } = setup(kind)
    // A first request claims (pms, 'a') under acme, and its write fails.
    const broken: EventStore = {
      claim: (source, claims, dedupeMs) => store.claim(source, claims, dedupeMs),
      append: async () => { throw new Error('Redis went away') },
      page: (partition, query) => store.page(partition, query),
      get: (partition, ulid) => store.get(partition, ulid),
      records: (partition, ulids) => store.records(partition, ulids),
    }
    const failing = new EventLog(broken, types, { retentionDays: 2, now: () => clock.now })
    await expect(failing.ingest('pms', 'live', [checked(0, 'a', 'property.updated')])).rejects.toThrow('Redis went away')
    // A copy naming another brand cannot be answered until the first is written.
    await expect(log.ingest('pms', 'live', [checked(0, 'a', 'property.updated', 'globex')])).rejects.toThrow("the first copy of event 'a' of pms is not written yet")
    // The retry of the first writes it under the id it claimed, at the time of that id.
    clock.now += 1000
    const [retried] = await log.ingest('pms', 'live', [checked(0, 'a', 'property.updated')]) as unknown as [{ kind: string; eventId: string }]
    expect(retried.kind).toBe('accepted')
    const kept = parse((await log.list(viewer(), {}, 1, 10)).json)
    expect(kept).toEqual([expect.objectContaining({ id: retried.eventId, createdAt: new Date(clock.now - 1000).toISOString() })])
    expect(await log.ingest('pms', 'live', [checked(0, 'a', 'property.updated', 'globex')])).toEqual([{ kind: 'duplicate', index: 0, sourceId: 'a', eventId: retried.eventId }])
  })

  it('lists what a credential sees: its brand and mode, the types it has the scope of, its properties and those of none', async () => {
    const { log, clock } = setup(kind)
    await log.ingest('pms', 'live', [checked(0, 'p1', 'property.updated', 'acme', HOTEL)])
    clock.now += 10
    await log.ingest('pms', 'live', [checked(0, 'p2', 'property.updated', 'acme', OTHER)])
    clock.now += 10
    await log.ingest('pms', 'live', [checked(0, 'g1', 'guest.created')])
    clock.now += 10
    await log.ingest('pms', 'test', [checked(0, 't1', 'guest.created')])
    const ids = async (who: Viewer, filters = {}, page = 1, perPage = 10): Promise<[number, string[]]> => {
      const result = await log.list(who, filters, page, perPage)
      return [result.total, parse(result.json).map((e) => (e.object as { id: string }).id)]
    }
    expect(await ids(viewer())).toEqual([3, [HOTEL, OTHER, 'g-g1']])
    expect(await ids(viewer(), {}, 2, 2)).toEqual([3, ['g-g1']])
    expect(await ids(viewer(), {}, 1, 2)).toEqual([3, [HOTEL, OTHER]])
    expect(await ids(viewer({ mode: 'test' }))).toEqual([1, ['g-t1']])
    expect(await ids(viewer({ brand: 'globex' }))).toEqual([0, []])
    expect(await ids(viewer({ properties: new Set([OTHER]) }))).toEqual([2, [OTHER, 'g-g1']])
    expect(await ids(viewer({ scopes: new Set(['properties:read']) }))).toEqual([2, [HOTEL, OTHER]])
    expect(await ids(viewer({ scopes: new Set(['bookings:read']) }))).toEqual([0, []])
    expect(await ids(viewer(), { type: 'guest.created' })).toEqual([1, ['g-g1']])
    expect(await ids(viewer({ scopes: new Set(['properties:read']) }), { type: 'guest.created' })).toEqual([0, []])
    expect(await ids(viewer(), { propertyId: OTHER })).toEqual([1, [OTHER]])
    expect(await ids(viewer({ properties: new Set([OTHER]) }), { propertyId: OTHER })).toEqual([1, [OTHER]])
    expect(await ids(viewer({ properties: new Set([OTHER]) }), { propertyId: HOTEL })).toEqual([0, []])
    expect(await ids(viewer({ properties: new Set() }))).toEqual([1, ['g-g1']])
  })

  it('lists strictly after and before the times asked, a time between two milliseconds as its midpoint, within the retention', async () => {
    const { log, clock } = setup(kind)
    const start = clock.now
    for (const [i, id] of ['a', 'b', 'c'].entries()) {
      clock.now = start + i * 100
      await log.ingest('pms', 'live', [checked(0, id, 'guest.created')])
    }
    const ids = async (filters: object): Promise<string[]> => parse((await log.list(viewer(), filters, 1, 10)).json).map((e) => (e.object as { id: string }).id)
    expect(await ids({ createdAfter: start })).toEqual(['g-b', 'g-c'])
    expect(await ids({ createdAfter: start - 1 })).toEqual(['g-a', 'g-b', 'g-c'])
    expect(await ids({ createdAfter: start - 0.5 })).toEqual(['g-a', 'g-b', 'g-c'])
    expect(await ids({ createdAfter: start + 99.5 })).toEqual(['g-b', 'g-c'])
    expect(await ids({ createdBefore: start + 200 })).toEqual(['g-a', 'g-b'])
    expect(await ids({ createdBefore: start + 200.5 })).toEqual(['g-a', 'g-b', 'g-c'])
    expect(await ids({ createdBefore: start + 100.5 })).toEqual(['g-a', 'g-b'])
    expect(await ids({ createdAfter: start, createdBefore: start + 200 })).toEqual(['g-b'])
    expect(await ids({ createdAfter: start + 100, createdBefore: start + 101 })).toEqual([])
    // A range of one millisecond: the one event made in it.
    expect(await ids({ createdAfter: start + 99, createdBefore: start + 101 })).toEqual(['g-b'])
    expect(await log.list(viewer(), { createdAfter: start + 300, createdBefore: start }, 1, 10)).toEqual({ total: 0, json: '[]' })
    // Two days on, the first is past the retention (the reader's now, not Redis's expiry).
    clock.now = start + 2 * DAY + 50
    expect(await ids({})).toEqual(['g-b', 'g-c'])
    clock.now = start + 2 * DAY
    expect(await ids({})).toEqual(['g-a', 'g-b', 'g-c'])
  })

  it.each([0, 10])('reads one event only for a credential that sees it, and not past the retention (%i events cached)', async (cachedEvents) => {
    const { log, clock } = setup(kind, cachedEvents)
    const [made] = await log.ingest('pms', 'live', [checked(0, 'a', 'property.updated')]) as unknown as [{ eventId: string }]
    const json = await log.get(viewer(), made.eventId)
    expect(parse(`[${json as string}]`)[0]).toMatchObject({ id: made.eventId, propertyId: HOTEL })
    expect(await log.get(viewer(), made.eventId.toLowerCase())).toBe(json)
    expect(await log.get(viewer({ brand: 'globex' }), made.eventId)).toBeUndefined()
    expect(await log.get(viewer({ mode: 'test' }), made.eventId)).toBeUndefined()
    expect(await log.get(viewer({ properties: new Set([OTHER]) }), made.eventId)).toBeUndefined()
    expect(await log.get(viewer({ scopes: new Set(['guests:read']) }), made.eventId)).toBeUndefined()
    expect(await log.get(viewer(), 'evt_01JZZZZZZZZZZZZZZZZZZZZZZZ')).toBeUndefined()
    clock.now += 2 * DAY
    expect(await log.get(viewer(), made.eventId)).toBe(json)
    clock.now += 1
    expect(await log.get(viewer(), made.eventId)).toBeUndefined()
  })
})

describe('the log\'s cache of events read', () => {
  it('reads from the store only the events of a page it has not cached, each in its place', async () => {
    const store = new MemoryEventStore()
    const writer = new EventLog(store, types, { retentionDays: 2 })
    await writer.ingest('pms', 'live', [checked(0, 'a', 'guest.created'), checked(1, 'b', 'guest.created'), checked(2, 'c', 'guest.created')])
    const all = parse((await writer.list(viewer(), {}, 1, 3)).json)
    expect(all.map((e) => (e.object as { id: string }).id)).toEqual(['g-a', 'g-b', 'g-c'])
    // Another instance, whose cache comes to hold the middle event only.
    const reader = new EventLog(store, types, { retentionDays: 2, cachedEvents: 10 })
    expect(parse((await reader.list(viewer(), {}, 2, 1)).json)).toEqual([all[1]])
    expect(parse((await reader.list(viewer(), {}, 1, 3)).json)).toEqual(all)
  })

  it('keeps the JSON of events read, so one gone from Redis is still listed; without a cache it is left out', async () => {
    for (const cached of [10, 0]) {
      const prefix = testPrefix()
      prefixes.push(prefix)
      const log = new EventLog(new RedisEventStore(redis, prefix), types, { retentionDays: 2, cachedEvents: cached })
      await log.ingest('pms', 'live', [checked(0, 'a', 'guest.created'), checked(1, 'b', 'guest.created')])
      const before = parse((await log.list(viewer(), {}, 1, 10)).json).map((e) => e.id)
      expect(before).toHaveLength(2)
      expect(await redis.del(`${partitionPrefix(prefix, { brand: 'acme', mode: 'live' })}e:${(before[0] as string).slice(4)}`)).toBe(1)
      const after = await log.list(viewer(), {}, 1, 10)
      expect(parse(after.json).map((e) => e.id)).toEqual(cached > 0 ? before : before.slice(1))
    }
  })

  it('reads an event asked for by many at once once; keeps neither a miss nor a failed read', async () => {
    const prefix = testPrefix()
    prefixes.push(prefix)
    const store = new RedisEventStore(redis, prefix)
    const writer = new EventLog(store, types, { retentionDays: 2 })
    const [made] = await writer.ingest('pms', 'live', [checked(0, 'a', 'guest.created')]) as unknown as [{ eventId: string }]
    const recordKey = `${partitionPrefix(prefix, { brand: 'acme', mode: 'live' })}e:${made.eventId.slice(4)}`
    const record = await redis.get(recordKey) as string
    // The store at the log's edge, its reads counted, and failing while told to.
    let reads = 0
    let failing = false
    const counted = Object.assign(Object.create(store) as RedisEventStore, {
      get: async (...args: Parameters<RedisEventStore['get']>) => {
        reads += 1
        if (failing) throw new Error('connection refused')
        return store.get(...args)
      },
    })
    const log = new EventLog(counted, types, { retentionDays: 2, cachedEvents: 10 })
    expect(await redis.del(recordKey)).toBe(1)
    expect(await log.get(viewer(), made.eventId)).toBeUndefined()
    await redis.set(recordKey, record)
    failing = true
    await expect(log.get(viewer(), made.eventId)).rejects.toThrow('connection refused')
    failing = false
    const json = await writer.get(viewer(), made.eventId)
    expect(json).toBeDefined()
    reads = 0
    expect(await Promise.all(Array.from({ length: 16 }, () => log.get(viewer(), made.eventId)))).toEqual(Array.from({ length: 16 }, () => json))
    expect(await log.get(viewer(), made.eventId)).toBe(json)
    expect(reads).toBe(1)
  })

  it('keeps an event read by its id under the brand and mode it was found in; without a cache, one gone from Redis is gone', async () => {
    for (const cached of [10, 0]) {
      const prefix = testPrefix()
      prefixes.push(prefix)
      const log = new EventLog(new RedisEventStore(redis, prefix), types, { retentionDays: 2, cachedEvents: cached })
      const [made] = await log.ingest('pms', 'live', [checked(0, 'a', 'guest.created')]) as unknown as [{ eventId: string }]
      const json = await log.get(viewer(), made.eventId)
      expect(parse(`[${json as string}]`)[0]).toMatchObject({ id: made.eventId, type: 'guest.created' })
      expect(await redis.del(`${partitionPrefix(prefix, { brand: 'acme', mode: 'live' })}e:${made.eventId.slice(4)}`)).toBe(1)
      expect(await log.get(viewer(), made.eventId)).toBe(cached > 0 ? json : undefined)
      // Another brand or mode asking for the same id finds nothing, cached or not.
      expect(await log.get(viewer({ brand: 'globex' }), made.eventId)).toBeUndefined()
      expect(await log.get(viewer({ mode: 'test' }), made.eventId)).toBeUndefined()
    }
  })
})
