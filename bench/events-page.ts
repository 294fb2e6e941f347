import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { EventLog } from '../src/events/log.js'
import { RedisEventStore, type NewEvent } from '../src/events/store.js'
import { EventTypes, type Viewer } from '../src/events/types.js'
import { UlidFactory } from '../src/events/ulid.js'
import type { EventTypeConfig } from '../src/events/config.js'

// What a page of /v1/events costs Redis for a credential of 10 properties and for one of
// 1,000 that sees the same events (docs/architecture.md §D48): Redis's own time for the
// page's commands (INFO commandstats, `usec` of the scripts and the MGET), on a Redis of the
// bench's own, the first page and a deep one (page 50 of 20, which merges its indexes); the
// median of seven rounds of each side, taken in turn.

export interface EventsPageCost {
  events: number
  /** Redis µs per page: [first page, deep page], for 10 and for 1,000 properties. */
  ten: [number, number]
  thousand: [number, number]
}

export async function eventsPageCost(redisUrl: string, types: readonly EventTypeConfig[], pages = 50): Promise<EventsPageCost> {
  const redis = new Redis(redisUrl)
  try {
    const eventTypes = new EventTypes(types)
    const store = new RedisEventStore(redis, 'bench-page:')
    const log = new EventLog(store, eventTypes, { retentionDays: 30, cachedEvents: 0 })
    const properties = Array.from({ length: 10 }, () => randomUUID())
    const ulids = new UlidFactory()
    const start = Date.now() - 600_000
    const publicTypes = eventTypes.publicTypes
    // 3,000 events of the types, about the ten properties or none.
    const events: NewEvent[] = Array.from({ length: 3000 }, (_, i) => {
      const ulid = ulids.next(start + i * 10)
      const type = publicTypes[i % publicTypes.length] as string
      const propertyId = i % 11 === 10 ? null : properties[i % 11] as string
      const json = JSON.stringify({ id: `evt_${ulid.text}`, type, createdAt: new Date(ulid.millis).toISOString(), mode: 'live', propertyId, object: { type: 'property', id: 'x', path: '/v1/properties/x' } })
      return { ulid: ulid.text, millis: ulid.millis, type, propertyId, record: `${json}\n{}` }
    })
    for (let i = 0; i < events.length; i += 100) await store.append({ brand: 'acme', mode: 'live' }, events.slice(i, i + 100), { oldest: 0, retentionMs: 30 * 86_400_000 })
    const viewer = (list: string[]): Viewer => ({ brand: 'acme', mode: 'live', properties: new Set(list), scopes: 'all' })
    // Rounds of the two sides in turn, the median of each side's rounds: a shared machine's
    // stalls fall on both, and on few rounds.
    const round = async (who: Viewer, page: number): Promise<number> => {
      await redis.config('RESETSTAT')
      for (let i = 0; i < pages; i += 1) await log.list(who, {}, page, 20)
      const info = await redis.info('commandstats')
      return [...info.matchAll(/^cmdstat_(evalsha|eval|mget):calls=\d+,usec=(\d+)/gm)].reduce((sum, m) => sum + Number(m[2]), 0) / pages
    }
    const median = (values: number[]): number => Math.round(([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number) * 10) / 10
    const ten = viewer(properties)
    const thousand = viewer([...properties, ...Array.from({ length: 990 }, () => randomUUID())])
    const result: EventsPageCost = { events: events.length, ten: [0, 0], thousand: [0, 0] }
    for (const [slot, page] of [[0, 1], [1, 50]] as const) {
      await log.list(ten, {}, page, 20)
      await log.list(thousand, {}, page, 20)
      const sides: [number[], number[]] = [[], []]
      for (let r = 0; r < 7; r += 1) {
        sides[0].push(await round(ten, page))
        sides[1].push(await round(thousand, page))
      }
      result.ten[slot] = median(sides[0])
      result.thousand[slot] = median(sides[1])
    }
    return result
  } finally {
    redis.disconnect()
  }
}
