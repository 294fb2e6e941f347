import { afterEach, describe, expect, it, vi } from 'vitest'
import { ApiError } from '../../src/contract/errors.js'
import { RecordCache, type Loaded } from '../../src/keys/record-cache.js'
import type { KeyStore } from '../../src/keys/store.js'

// The record cache between its reads of the store and the changes published on the channel,
// where the order of events decides what a partner is let through with: a read cut short by a
// change, a read under way when a change is published or the subscription comes back, a wall
// clock that steps back, and many requests waiting on one read that fails. The store is a stand-in at the cache's edge (its reads are held and let go
// by the test, its change and resync listeners called by it); the whole gateway over real
// Redis is tested in test/mutation-kills/keys.test.ts.

interface Entry extends Loaded {
  status: string
}

const DIGEST = 'a'.repeat(64)
const DETAIL = 'API keys cannot be checked right now; retry shortly.'

class StandInStore {
  readonly records = new Map<string, string>()
  private changeListeners: ((digest: string) => void)[] = []
  private resyncListeners: (() => void)[] = []
  /** Reads held until the test lets them go, oldest first. */
  private held: (() => void)[] = []
  holding = false
  failing = false
  reads = 0

  readonly store = {
    onChange: (listener: (digest: string) => void) => { this.changeListeners.push(listener) },
    onResync: (listener: () => void) => { this.resyncListeners.push(listener) },
  } as unknown as KeyStore

  /** What the cache reads: the record as it was when the read reached the store, answered when the test lets it go. */
  readonly find = async (digest: string): Promise<Entry | undefined> => {
    this.reads += 1
    const status = this.records.get(digest)
    if (this.holding) await new Promise<void>((resolve) => this.held.push(resolve))
    if (this.failing) throw new Error('connection refused')
    return status === undefined ? undefined : { status, loadedAt: Date.now() }
  }

  /** Answers the reads held so far, as the store is now. */
  letGo(): void {
    this.holding = false
    for (const resolve of this.held.splice(0)) resolve()
  }

  changed(digest: string): void {
    for (const listener of this.changeListeners) listener(digest)
  }

  resynced(): void {
    for (const listener of this.resyncListeners) listener()
  }
}

function cacheOver(stand: StandInStore, ttlMs = 600_000, graceMs = 0): RecordCache<Entry> {
  return new RecordCache<Entry>(stand.store, stand.find, { ttlMs, graceMs, maxEntries: 10, maxUnknown: 10, unavailableDetail: DETAIL })
}

/** Lets the promises and timers under way run. */
const settle = async (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 10))

/** Three loads of DIGEST that wait on one read of the store, which then fails; what each got. */
async function threeOnOneFailedRead(stand: StandInStore, cache: RecordCache<Entry>): Promise<PromiseSettledResult<Entry | undefined>[]> {
  stand.failing = true
  stand.holding = true
  const waiting = [cache.load(DIGEST), cache.load(DIGEST), cache.load(DIGEST)]
  await settle()
  stand.letGo()
  return Promise.allSettled(waiting)
}

describe('the record cache, between reads and changes', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('reads a record again when a change cuts short the read a resync asked for, and never hands back the copy from before', async () => {
    const stand = new StandInStore()
    const cache = cacheOver(stand)
    stand.records.set(DIGEST, 'active')
    expect(await cache.load(DIGEST)).toMatchObject({ status: 'active' })
    stand.resynced()
    expect(cache.lookup(DIGEST)).toBeUndefined()
    stand.holding = true
    const loading = cache.load(DIGEST)
    await settle()
    // The suspension reaches the channel while the read again is under way.
    stand.records.set(DIGEST, 'suspended')
    stand.changed(DIGEST)
    stand.letGo()
    expect(await loading).toMatchObject({ status: 'suspended' })
    expect(cache.lookup(DIGEST)).toMatchObject({ status: 'suspended' })
  })

  it.each([
    // A suspension whose message is lost; the resync comes before the read's answer.
    ['the subscription comes back', (stand: StandInStore) => stand.resynced()],
    // The suspension's message comes in before the answer to a read Redis made before it.
    ['a change of its record is published', (stand: StandInStore) => stand.changed(DIGEST)],
  ])('makes a read again when %s while it is under way', async (_event, event) => {
    const stand = new StandInStore()
    const cache = cacheOver(stand)
    stand.records.set(DIGEST, 'active')
    stand.holding = true
    const first = cache.load(DIGEST)
    await settle()
    stand.records.set(DIGEST, 'suspended')
    event(stand)
    // A request after the event, while the first read is still under way.
    const second = cache.load(DIGEST)
    stand.letGo()
    expect((await Promise.all([first, second])).map((entry) => entry?.status)).toEqual(['suspended', 'suspended'])
    expect(stand.reads).toBe(2)
    expect(cache.lookup(DIGEST)).toMatchObject({ status: 'suspended' })
  })

  it('orders reads and resyncs by count, not by the wall clock, which can step back', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.parse('2026-11-25T10:00:05.000Z'))
    const stand = new StandInStore()
    const cache = cacheOver(stand)
    stand.records.set(DIGEST, 'active')
    expect(await cache.load(DIGEST)).toMatchObject({ status: 'active' })
    // The clock steps back five seconds; then a suspension is missed and the subscription resyncs.
    vi.setSystemTime(Date.parse('2026-11-25T10:00:00.000Z'))
    stand.records.set(DIGEST, 'suspended')
    stand.resynced()
    expect(cache.lookup(DIGEST)).toBeUndefined()
    expect(await cache.load(DIGEST)).toMatchObject({ status: 'suspended' })
  })

  it('refuses every request waiting on one failed read once the copy is past its grace period, not only the first', async () => {
    const stand = new StandInStore()
    const cache = cacheOver(stand, 20, 20)
    stand.records.set(DIGEST, 'active')
    expect(await cache.load(DIGEST)).toMatchObject({ status: 'active' })
    // Past its lifetime and grace period.
    await new Promise((resolve) => setTimeout(resolve, 60))
    const outcomes = await threeOnOneFailedRead(stand, cache)
    // The first load's read, then one read for the three.
    expect(stand.reads).toBe(2)
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('rejected')
      const error = (outcome as PromiseRejectedResult).reason as ApiError
      expect(error).toBeInstanceOf(ApiError)
      expect({ code: error.code, status: error.status, detail: error.detail, retryAfter: error.retryAfter })
        .toEqual({ code: 'SERVICE_UNAVAILABLE', status: 503, detail: DETAIL, retryAfter: 1 })
    }
  })

  it('serves every request waiting on one failed read from the copy held, within its grace period', async () => {
    const stand = new StandInStore()
    const cache = cacheOver(stand, 600_000, 0)
    stand.records.set(DIGEST, 'active')
    expect(await cache.load(DIGEST)).toMatchObject({ status: 'active' })
    stand.resynced()
    const outcomes = await threeOnOneFailedRead(stand, cache)
    // The first load's read, then one read again for the three.
    expect(stand.reads).toBe(2)
    expect(outcomes.map((outcome) => outcome.status === 'fulfilled' ? outcome.value?.status : outcome.reason)).toEqual(['active', 'active', 'active'])
  })
})
