import { Redis } from 'ioredis'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { EXPIRY_GRACE_MS, MemoryEventStore, partitionPrefix, PRESENT_FIRST, RedisEventStore, type EventStore, type NewEvent, type PageQuery } from '../../src/events/store.js'
import { UlidFactory } from '../../src/events/ulid.js'
import { prng } from '../../mocks/random.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The event log's store (docs/architecture.md, "Redis layout") against a reference computed
// here: the union of some indexes in a time range, paged, must be the same events in the same
// order whether the page is read from one index, merged from the starts of several, or found
// by the binary search of deep pages; and the memory store (the demo's) must agree.

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
})

const TYPES = ['guest.created', 'property.updated']
const PROPERTIES = ['11111111-1111-4111-8111-111111111111', '22222222-2222-4222-8222-222222222222', '33333333-3333-4333-8333-333333333333', null]
const DAY = 86_400_000
const times = { oldest: 0, retentionMs: DAY }

type Made = NewEvent

/** `count` events over `spanMs` milliseconds from `from`, many sharing a millisecond, in batches of one partition. */
async function fill(stores: EventStore[], count: number, from: number, spanMs: number, seed: number): Promise<Made[]> {
  const random = prng(seed)
  const ulids = new UlidFactory()
  const made: Made[] = []
  let now = from
  for (let i = 0; i < count; i += 1) {
    // Three times in four the same millisecond as the last, else a step forward.
    if (random() < 0.25) now += 1 + Math.floor(random() * (spanMs / count) * 4)
    const ulid = ulids.next(now)
    const type = TYPES[Math.floor(random() * TYPES.length)] as string
    const propertyId = PROPERTIES[Math.floor(random() * PROPERTIES.length)] ?? null
    made.push({ ulid: ulid.text, millis: ulid.millis, type, propertyId, record: `{}\n{"source":"pms"}` })
  }
  for (let i = 0; i < made.length; i += 100) {
    for (const store of stores) await store.append({ brand: 'acme', mode: 'live' }, made.slice(i, i + 100), times)
  }
  return made
}

type Selection = Pick<PageQuery, 'types' | 'properties' | 'withoutProperty'>

function reference(events: Made[], selection: Selection, from: number, to: number): string[] {
  const about = (propertyId: string | null): boolean => selection.properties === '*'
    || (propertyId === null ? selection.withoutProperty : selection.properties.includes(propertyId))
  return events.filter((e) => e.millis >= from && e.millis <= to && selection.types.includes(e.type) && about(e.propertyId)).map((e) => e.ulid).sort()
}

describe('the event store', () => {
  it('pages the union of indexes alike by one index, by merging and by binary search, as the memory store does', async () => {
    const base = Date.now() - 60_000
    const merging = new RedisEventStore(redis, prefix, 1_000_000)
    const searching = new RedisEventStore(redis, prefix, 0)
    // Every list asks first which properties have events: fewer than the list, or more.
    const asking = new RedisEventStore(redis, prefix, 1_000_000, 0)
    const memory = new MemoryEventStore()
    const events = await fill([merging, memory], 600, base, 30_000, 7)
    const random = prng(11)
    const listed = (count: number): string[] => PROPERTIES.slice(0, count) as string[]
    const selections: Selection[] = [
      { types: ['property.updated'], properties: '*', withoutProperty: false },
      { types: TYPES, properties: '*', withoutProperty: false },
      { types: ['property.updated'], properties: listed(1), withoutProperty: true },
      { types: TYPES, properties: listed(2), withoutProperty: true },
      // Properties without events among them (a credential of many properties).
      { types: TYPES, properties: [...listed(2), 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb'], withoutProperty: true },
      // More than PRESENT_FIRST: which of them have events is asked first.
      { types: TYPES, properties: [...Array.from({ length: PRESENT_FIRST }, (_, i) => `cccccccc-cccc-4ccc-8ccc-${String(i).padStart(12, '0')}`), ...listed(3)], withoutProperty: true },
      { types: ['guest.created'], properties: [PROPERTIES[2] as string], withoutProperty: false },
      { types: TYPES, properties: [], withoutProperty: true },
      { types: TYPES, properties: [], withoutProperty: false },
      { types: ['no.such'], properties: '*', withoutProperty: false },
    ]
    let compared = 0
    for (const selection of selections) {
      for (let round = 0; round < 12; round += 1) {
        const from = round % 3 === 0 ? 0 : base + Math.floor(random() * 15_000)
        const to = round % 4 === 0 ? Number.MAX_SAFE_INTEGER : from + Math.floor(random() * 20_000)
        const expected = reference(events, selection, from, to)
        const limit = 1 + Math.floor(random() * 40)
        const offset = round % 5 === 0 ? expected.length + 3 : Math.floor(random() * Math.max(1, expected.length))
        const page = expected.slice(offset, offset + limit)
        for (const store of [merging, searching, asking, memory]) {
          expect(await store.page({ brand: 'acme', mode: 'live' }, { ...selection, from, to, offset, limit })).toEqual({ total: expected.length, ulids: page })
          compared += 1
        }
      }
    }
    expect(compared).toBe(selections.length * 12 * 4)
  })

  it('claims a (source, id) once, whatever brand it names: a later claim gets the first one\'s brand and ulid', async () => {
    for (const store of [new RedisEventStore(redis, prefix), new MemoryEventStore()]) {
      const source = `pms-${Math.random().toString(36).slice(2, 8)}`
      const first = { dedupe: 'same', brand: 'acme', ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E2' }
      expect(await store.claim(source, [first, { ...first, brand: 'globex', ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E3' }, { dedupe: 'other', brand: 'globex', ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E4' }], DAY))
        .toEqual([undefined, { brand: 'acme', ulid: first.ulid }, undefined])
      expect(await store.claim(source, [{ ...first, ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E5' }], DAY)).toEqual([{ brand: 'acme', ulid: first.ulid }])
      // Another publisher's event of the same id is its own.
      expect(await store.claim(`${source}-b`, [first], DAY)).toEqual([undefined])
      expect(await store.claim(source, [], DAY)).toEqual([])
    }
  })

  it('keeps an id once: a second write of it gets the first record and stores nothing', async () => {
    for (const store of [new RedisEventStore(redis, prefix), new MemoryEventStore()]) {
      const partition = { brand: 'globex', mode: 'test' } as const
      const first: NewEvent = { ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1F2', millis: Date.now(), type: 'property.updated', propertyId: null, record: '{"n":1}\n{}' }
      // A copy that names another property is not indexed under it.
      const copy: NewEvent = { ...first, propertyId: PROPERTIES[0] as string, record: '{"n":2}\n{}' }
      expect(await store.append(partition, [first, copy], times)).toEqual([
        { kind: 'stored', ulid: first.ulid }, { kind: 'duplicate', ulid: first.ulid, record: '{"n":1}\n{}' },
      ])
      const all: Omit<PageQuery, 'types'> = { properties: '*', withoutProperty: false, from: 0, to: Number.MAX_SAFE_INTEGER, offset: 0, limit: 10 }
      expect(await store.page(partition, { ...all, types: ['property.updated'] })).toEqual({ total: 1, ulids: [first.ulid] })
      expect(await store.page(partition, { ...all, types: ['property.updated'], properties: [PROPERTIES[0] as string] })).toEqual({ total: 0, ulids: [] })
      expect(await store.records(partition, [first.ulid, '01JDZ8Q3W4X5Y6Z7A8B9C0D1F3'])).toEqual(['{"n":1}\n{}', null])
    }
  })

  it('shares no key across partitions: every key of one partition holds its {brand:mode} hash tag, a publisher\'s copy records its own', async () => {
    const own = testPrefix()
    const store = new RedisEventStore(redis, own)
    const event: NewEvent = { ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E4', millis: Date.now(), type: 'guest.created', propertyId: PROPERTIES[0] as string, record: '{}\n{}' }
    await store.claim('pms', [{ dedupe: 'k', brand: 'acme', ulid: event.ulid }], DAY)
    await store.append({ brand: 'acme', mode: 'live' }, [event], times)
    const keys = (await redis.keys(`${own}*`)).sort()
    expect(keys).toEqual([
      `${own}ev:{acme:live}:e:${event.ulid}`, `${own}ev:{acme:live}:p:guest.created:${PROPERTIES[0] as string}`, `${own}ev:{acme:live}:ps`,
      `${own}ev:{acme:live}:t:guest.created`, `${own}ev:{src:pms}:d:k`,
    ])
    await removePrefix(redis, own)
  })
})

describe('the event store\'s retention', () => {
  const all: Omit<PageQuery, 'types'> = { properties: '*', withoutProperty: false, from: 0, to: Number.MAX_SAFE_INTEGER, offset: 0, limit: 10 }

  it('pages events in ULID order whatever order they were written in (a retry writes the id it claimed earlier)', async () => {
    for (const store of [new RedisEventStore(redis, `${prefix}order:`), new MemoryEventStore()]) {
      const partition = { brand: 'acme', mode: 'live' } as const
      const ulids = new UlidFactory()
      const now = Date.now()
      const [earlier, later] = [ulids.next(now), ulids.next(now)]
      const made = (ulid: typeof earlier): NewEvent => ({ ulid: ulid.text, millis: ulid.millis, type: 'guest.created', propertyId: null, record: '{}\n{}' })
      await store.append(partition, [made(later)], times)
      await store.append(partition, [made(earlier)], times)
      expect(await store.page(partition, { ...all, types: ['guest.created'] })).toEqual({ total: 2, ulids: [earlier.text, later.text] })
    }
  })

  it('drops from the indexes, as it appends, the events older than the oldest kept, and keeps one of that very time', async () => {
    for (const store of [new RedisEventStore(redis, `${prefix}oldest:`), new MemoryEventStore()]) {
      const partition = { brand: 'acme', mode: 'live' } as const
      const ulids = new UlidFactory()
      const at = Date.now() - 10
      const made = (millis: number): NewEvent => { const ulid = ulids.next(millis); return { ulid: ulid.text, millis: ulid.millis, type: 'guest.created', propertyId: null, record: '{}\n{}' } }
      const [old, edge, fresh] = [made(at), made(at + 1), made(at + 2)]
      await store.append(partition, [old, edge], times)
      await store.append(partition, [fresh], { ...times, oldest: at + 1 })
      expect(await store.page(partition, { ...all, types: ['guest.created'] })).toEqual({ total: 2, ulids: [edge.ulid, fresh.ulid] })
    }
  })

  it('keeps an event an hour past its retention (the grace), and its indexes as long', async () => {
    for (const namespace of [`${prefix}grace:`, undefined]) {
      const store = namespace === undefined ? new MemoryEventStore() : new RedisEventStore(redis, namespace)
      const partition = { brand: 'acme', mode: 'live' } as const
      // Past the retention by half the grace.
      const ulid = new UlidFactory().next(Date.now() - DAY - EXPIRY_GRACE_MS / 2)
      const event: NewEvent = { ulid: ulid.text, millis: ulid.millis, type: 'guest.created', propertyId: null, record: '{"n":1}\n{}' }
      await store.append(partition, [event], times)
      expect(await store.records(partition, [event.ulid])).toEqual(['{"n":1}\n{}'])
      expect(await store.get(partition, event.ulid)).toBe('{"n":1}\n{}')
      if (namespace !== undefined) {
        const ttl = await redis.pttl(`${partitionPrefix(namespace, partition)}t:guest.created`)
        expect(ttl > DAY && ttl <= DAY + EXPIRY_GRACE_MS).toBe(true)
      }
    }
  })
})

describe('the memory store\'s clock', () => {
  afterEach(() => { vi.useRealTimers() })
  const at = 1_700_000_000_000

  it('forgets a copy record once its lifetime is over', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(at)
    const store = new MemoryEventStore()
    const claim = { dedupe: 'k', brand: 'acme', ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E2' }
    expect(await store.claim('pms', [claim], 1000)).toEqual([undefined])
    vi.setSystemTime(at + 999)
    expect(await store.claim('pms', [{ ...claim, ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E3' }], 1000)).toEqual([{ brand: 'acme', ulid: claim.ulid }])
    vi.setSystemTime(at + 1000)
    expect(await store.claim('pms', [{ ...claim, ulid: '01JDZ8Q3W4X5Y6Z7A8B9C0D1E4' }], 1000)).toEqual([undefined])
  })

  it('lists and reads an event until its expiry, the retention and the grace after its time, and not from then on', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(at)
    const store = new MemoryEventStore()
    const partition = { brand: 'acme', mode: 'live' } as const
    const event: NewEvent = { ulid: new UlidFactory().next(at).text, millis: at, type: 'guest.created', propertyId: null, record: '{}\n{}' }
    const retention = { oldest: 0, retentionMs: 1000 }
    await store.append(partition, [event], retention)
    const query: PageQuery = { types: ['guest.created'], properties: '*', withoutProperty: false, from: 0, to: Number.MAX_SAFE_INTEGER, offset: 0, limit: 10 }
    vi.setSystemTime(at + 1000 + EXPIRY_GRACE_MS - 1)
    expect(await store.page(partition, query)).toEqual({ total: 1, ulids: [event.ulid] })
    expect(await store.get(partition, event.ulid)).toBe('{}\n{}')
    vi.setSystemTime(at + 1000 + EXPIRY_GRACE_MS)
    expect(await store.page(partition, query)).toEqual({ total: 0, ulids: [] })
    expect(await store.get(partition, event.ulid)).toBeNull()
  })
})

describe('event ids', () => {
  it('are 26 Crockford base32 characters naming their millisecond, counted up within one', () => {
    const ulids = new UlidFactory()
    // The example of the ULID specification: 1469918176385 is 01ARYZ6S41.
    expect(new UlidFactory().next(1_469_918_176_385).text.slice(0, 10)).toBe('01ARYZ6S41')
    const a = ulids.next(1_700_000_000_000)
    const b = ulids.next(1_700_000_000_000)
    const c = ulids.next(1_700_000_000_001)
    for (const id of [a, b, c]) expect(id.text).toMatch(/^[0-7][0-9A-HJKMNP-TV-Z]{25}$/)
    expect([a.millis, b.millis, c.millis]).toEqual([1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001])
    expect(a.text < b.text && b.text < c.text).toBe(true)
  })

  it('never go back when the clock does', () => {
    const ulids = new UlidFactory()
    const a = ulids.next(1_700_000_000_500)
    const b = ulids.next(1_700_000_000_000)
    expect(b.millis).toBe(1_700_000_000_500)
    expect(a.text < b.text).toBe(true)
  })
})
