import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EventLog } from '../../src/events/log.js'
import { RedisEventStore, type NewEvent } from '../../src/events/store.js'
import { EventTypes, type Viewer } from '../../src/events/types.js'
import { UlidFactory } from '../../src/events/ulid.js'
import { testConfig } from '../helpers/config.js'
import { commandCalls, PrivateRedis } from '../helpers/redis.js'

// What one page of /v1/events costs Redis (docs/architecture.md, "Reading a page"): the same
// for a credential of 1,000 properties as for one of 10 that sees the same events, within a
// factor of 2. Counted as the commands Redis runs for the page, scripts' commands included,
// on a Redis of this test's own (INFO commandstats), so no other test's commands count.

let server: PrivateRedis
let redis: Redis
let log: EventLog
const types = new EventTypes(testConfig().events.types)
const PUBLIC_TYPES = types.publicTypes
const WITH_EVENTS = Array.from({ length: 10 }, () => randomUUID())

beforeAll(async () => {
  server = await PrivateRedis.start()
  redis = new Redis(server.url)
  const store = new RedisEventStore(redis, 'cost:')
  log = new EventLog(store, types, { retentionDays: 30, cachedEvents: 0 })
  // 600 events of every type, about the ten properties or none.
  const ulids = new UlidFactory()
  const now = Date.now() - 60_000
  const events: NewEvent[] = Array.from({ length: 600 }, (_, i) => {
    const ulid = ulids.next(now + i * 10)
    const type = PUBLIC_TYPES[i % PUBLIC_TYPES.length] as string
    const propertyId = i % 11 === 10 ? null : WITH_EVENTS[i % 11] as string
    const json = JSON.stringify({ id: `evt_${ulid.text}`, type, createdAt: new Date(ulid.millis).toISOString(), mode: 'live', propertyId, object: { type: 'x', id: 'y', path: '/v1/x/y' } })
    return { ulid: ulid.text, millis: ulid.millis, type, propertyId, record: `${json}\n{}` }
  })
  await store.append({ brand: 'acme', mode: 'live' }, events, { oldest: 0, retentionMs: 30 * 86_400_000 })
})

afterAll(async () => {
  redis.disconnect()
  await server.stop()
})

/** The commands Redis ran for `read`, by name, scripts' own commands included. */
async function commandsOf(read: () => Promise<unknown>): Promise<Record<string, number>> {
  await redis.config('RESETSTAT')
  await read()
  return Object.fromEntries(Object.entries(await commandCalls(redis)).filter(([name]) => !name.startsWith('config') && name !== 'info'))
}

const total = (calls: Record<string, number>): number => Object.values(calls).reduce((a, b) => a + b, 0)

function viewer(properties: string[]): Viewer {
  return { brand: 'acme', mode: 'live', properties: new Set(properties), scopes: 'all' }
}

describe('a page of /v1/events', () => {
  const ten = viewer(WITH_EVENTS)
  const thousand = viewer([...WITH_EVENTS, ...Array.from({ length: 990 }, () => randomUUID())])

  it.each([
    ['the first page', {}, 1, 20],
    ['a deep page', {}, 20, 25],
    ['one type', { type: PUBLIC_TYPES[0] as string }, 2, 20],
  ])('costs Redis about the same for a credential of 1,000 properties as for one of 10: %s', async (_name, filters, page, perPage) => {
    let small: { total: number; json: string } | undefined
    let large: { total: number; json: string } | undefined
    const few = await commandsOf(async () => { small = await log.list(ten, filters, page, perPage) })
    const many = await commandsOf(async () => { large = await log.list(thousand, filters, page, perPage) })
    // The same events, and a page that is not empty.
    expect(large).toEqual(small)
    expect(JSON.parse(small?.json ?? '[]')).toHaveLength(perPage)
    expect(total(many)).toBeLessThanOrEqual(2 * total(few))
    // Its property indexes are read only for the properties that have events: none per
    // property of the list beyond them.
    expect(many.zcount ?? 0).toBeLessThanOrEqual(2 * (few.zcount ?? 0))
  })
})
