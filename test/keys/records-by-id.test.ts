import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { RecordsById } from '../../src/keys/records-by-id.js'
import { RedisKeyStore, type KeyRecord, type KeyStore } from '../../src/keys/store.js'
import { eventually, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// Credentials' records by id, as webhook attempts read their endpoints' owners: over real Redis,
// a record kept until a change to any credential is heard on the channel, or its lifetime ends;
// a store that hears no changes read every time. The orders a real Redis cannot be made to
// show on demand (a read under way across a change, a resync) run over a stand-in store at
// the cache's edge.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
const subscribers: Redis[] = []
/** Changes are made through a store of their own, as the key tool and the admin API make them. */
const admin = new RedisKeyStore(redis, prefix)
const options = { ttlMs: 600_000, maxEntries: 10 }

afterAll(async () => {
  await removePrefix(redis, prefix)
  for (const subscriber of subscribers) subscriber.disconnect()
  redis.disconnect()
})

/** A store that hears the channel, subscribed before it is used; `heard()` resolves at the next change it hears. */
async function hearingStore(): Promise<{ store: RedisKeyStore; heard: () => Promise<void> }> {
  const store = new RedisKeyStore(redis, prefix, () => {
    const subscriber = new Redis(REDIS_URL)
    subscribers.push(subscriber)
    return subscriber
  })
  let next: (() => void) | undefined
  store.onChange(() => next?.())
  const channel = `${prefix}keys:changed`
  const subscribed = await eventually(async () => {
    const [, count] = await redis.pubsub('NUMSUB', channel) as [string, number]
    return count >= subscribers.length
  }, 10_000)
  expect(subscribed).toBe(true)
  return { store, heard: () => new Promise<void>((resolve) => { next = resolve }) }
}

/** Changes a key's status in Redis without announcing it: what a cache that kept the record does not see. */
async function quietly(record: KeyRecord, status: string): Promise<void> {
  expect(await redis.hset(`${prefix}key:${record.digest}`, 'status', status)).toBe(0)
}

describe('credentials by id over Redis', () => {
  it('reads a record once, until a change to any credential is heard', async () => {
    const { store, heard } = await hearingStore()
    const records = new RecordsById(store, options)
    const { record } = await admin.create({ brand: 'acme', mode: 'live', properties: '*' })
    const other = (await admin.create({ brand: 'acme', mode: 'live', properties: '*' })).record
    expect(await records.get(record.id)).toEqual(record)
    await quietly(record, 'suspended')
    expect(await records.get(record.id)).toEqual(record)
    // A change to another credential: every record is read again.
    const change = heard()
    await admin.setStatus(other.id, 'suspended')
    await change
    expect(await records.get(record.id)).toEqual({ ...record, status: 'suspended' })
  })

  it('reads a grant by its client id the same way', async () => {
    const { store, heard } = await hearingStore()
    const records = new RecordsById(store, options)
    const grant = await admin.createGrant({ issuer: 'https://idp.example.com/realms/partners', clientId: `sync-${prefix}`, brand: 'acme', mode: 'live', properties: '*' })
    expect(grant.id.startsWith('cli_')).toBe(true)
    expect(await records.get(grant.id)).toEqual(grant)
    const change = heard()
    await admin.setGrantStatus(grant.id, 'suspended')
    await change
    expect(await records.get(grant.id)).toEqual({ ...grant, status: 'suspended' })
  })

  it('reads a record again once its lifetime ends', async () => {
    const { store } = await hearingStore()
    let now = 1_000_000
    const records = new RecordsById(store, { ...options, ttlMs: 10_000, now: () => now })
    const { record } = await admin.create({ brand: 'acme', mode: 'live', properties: '*' })
    expect(await records.get(record.id)).toEqual(record)
    await quietly(record, 'suspended')
    now += 10_000
    expect(await records.get(record.id)).toEqual(record)
    now += 1
    expect(await records.get(record.id)).toEqual({ ...record, status: 'suspended' })
  })

  it('keeps no credential as missing', async () => {
    const { store } = await hearingStore()
    const records = new RecordsById(store, options)
    const { record } = await admin.create({ brand: 'acme', mode: 'live', properties: '*' })
    const idKey = `${prefix}keyid:${record.id}`
    expect(await redis.del(idKey)).toBe(1)
    expect(await records.get(record.id)).toBeNull()
    await redis.set(idKey, record.digest)
    expect(await records.get(record.id)).toEqual(record)
  })

  it('reads every time from a store that hears no changes', async () => {
    const records = new RecordsById(admin, options)
    const { record } = await admin.create({ brand: 'acme', mode: 'live', properties: '*' })
    expect(await records.get(record.id)).toEqual(record)
    await quietly(record, 'suspended')
    expect(await records.get(record.id)).toEqual({ ...record, status: 'suspended' })
  })
})

/** A store at the cache's edge: its reads answered when the test lets them go, its listeners called by the test. */
class StandInStore {
  status = 'active'
  reads = 0
  private held: (() => void)[] = []
  holding = false
  changed: (() => void)[] = []
  resynced: (() => void)[] = []

  readonly store = {
    hearsChanges: true,
    onChange: (listener: () => void) => { this.changed.push(listener) },
    onResync: (listener: () => void) => { this.resynced.push(listener) },
    findById: async (id: string) => {
      this.reads += 1
      const status = this.status
      if (this.holding) await new Promise<void>((resolve) => this.held.push(resolve))
      return { id, status }
    },
  } as unknown as KeyStore

  letGo(): void {
    this.holding = false
    for (const resolve of this.held.splice(0)) resolve()
  }
}

describe('credentials by id between reads and changes', () => {
  it('uses a read under way across a change once, and reads again next time', async () => {
    const stand = new StandInStore()
    const records = new RecordsById(stand.store, options)
    stand.holding = true
    const before = records.get('key_a')
    stand.status = 'suspended'
    for (const listener of stand.changed) listener()
    stand.letGo()
    expect(await before).toEqual({ id: 'key_a', status: 'active' })
    expect(await records.get('key_a')).toEqual({ id: 'key_a', status: 'suspended' })
    expect(await records.get('key_a')).toEqual({ id: 'key_a', status: 'suspended' })
    expect(stand.reads).toBe(2)
  })

  it('shares a read under way among the attempts made at once, but not with one asking after a change', async () => {
    const stand = new StandInStore()
    const records = new RecordsById(stand.store, options)
    stand.holding = true
    const together = [records.get('key_a'), records.get('key_a')]
    expect(stand.reads).toBe(1)
    stand.status = 'suspended'
    for (const listener of stand.changed) listener()
    const after = records.get('key_a')
    expect(stand.reads).toBe(2)
    stand.letGo()
    expect(await Promise.all(together)).toEqual([{ id: 'key_a', status: 'active' }, { id: 'key_a', status: 'active' }])
    expect(await after).toEqual({ id: 'key_a', status: 'suspended' })
    // The read begun after the change is the one kept.
    expect(await records.get('key_a')).toEqual({ id: 'key_a', status: 'suspended' })
    expect(stand.reads).toBe(2)
  })

  it('reads every record again after a resync (changes may have been missed)', async () => {
    const stand = new StandInStore()
    const records = new RecordsById(stand.store, options)
    expect(await records.get('key_a')).toEqual({ id: 'key_a', status: 'active' })
    stand.status = 'suspended'
    expect(await records.get('key_a')).toEqual({ id: 'key_a', status: 'active' })
    for (const listener of stand.resynced) listener()
    expect(await records.get('key_a')).toEqual({ id: 'key_a', status: 'suspended' })
    expect(stand.reads).toBe(2)
  })
})
