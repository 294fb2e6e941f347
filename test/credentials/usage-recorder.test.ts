import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import type { Principal } from '../../src/keys/principal.js'
import { MemoryUsageStore, RedisUsageStore, UsageRecorder, type UsageBatch, type UsageStore } from '../../src/credentials/usage.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// Usage per credential without a gateway (docs/architecture.md, "Usage and last use"): the
// counting of one instance, given the time of each answer, and what each flush hands its store;
// a store that fails; the day's end; the flush timer; and the two stores. (Counts seen through
// the admin API of a running gateway: test/credentials/usage.test.ts.)
// The module's mutation run uses these (scripts/mutation.ts).

const MINUTE = 60_000
const DAY = 86_400_000
const T0 = Date.parse('2026-11-28T10:15:00.000Z')
const RETENTION = 30 * DAY

interface Written { counts: Record<string, Record<string, Record<string, number>>>; lastUsed: Record<string, { any?: number; previous?: number }>; retentionMs: number }

/** A store that keeps each batch as plain objects, and fails while told to. */
class RecordingStore implements UsageStore {
  readonly batches: Written[] = []
  failing = false
  hold: Promise<void> | undefined
  started = 0

  async write(batch: UsageBatch, retentionMs: number): Promise<void> {
    this.started += 1
    if (this.hold !== undefined) await this.hold
    if (this.failing) throw new Error('READONLY You can\'t write against a read only replica.')
    const counts: Written['counts'] = {}
    for (const [day, credentials] of batch.counts) {
      counts[day] = {}
      for (const [id, fields] of credentials) counts[day][id] = Object.fromEntries(fields)
    }
    this.batches.push({ counts, lastUsed: Object.fromEntries([...batch.lastUsed].map(([id, m]) => [id, { ...m }])), retentionMs })
  }

  async counts(): Promise<Map<string, Record<string, number>>> { return new Map() }
  async lastUse(): Promise<Map<string, { any: number | null; previous: number | null }>> { return new Map() }
  async resetPrevious(): Promise<void> {}
  async forget(): Promise<void> {}
}

function logger() {
  const lines: { level: 'warn' | 'info'; message: string; err?: unknown }[] = []
  const log = {
    warn: (obj: { err: unknown }, message: string) => { lines.push({ level: 'warn', message, err: obj.err }) },
    info: (message: string) => { lines.push({ level: 'info', message }) },
  }
  return { lines, log: log as unknown as Logger }
}

function principal(keyId: string, previousSecret = false): Principal {
  return { keyId, kind: 'apiKey', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all', ...(previousSecret ? { previousSecret: true as const } : {}) }
}

const KEY = principal('key_a')
const ROLLED_OLD = principal('key_b', true)
const ROLLED_NEW = principal('key_b')
const ROUTE = 'GET /v1/properties/{propertyId}'

function recorder(flushMs = 10_000) {
  const store = new RecordingStore()
  const { lines, log } = logger()
  return { store, lines, recorder: new UsageRecorder(store, { flushMs, retentionMs: RETENTION, logger: log }) }
}

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

describe('the usage recorder', () => {
  it('counts each answer by UTC day, credential, route and status class, 429s apart', async () => {
    const { store, recorder: r } = recorder()
    for (const status of [200, 204, 299, 300, 304, 399, 400, 404, 499, 429, 429, 500, 503]) r.count(KEY, ROUTE, status, T0)
    r.count(KEY, 'GET /v1/credential', 200, T0 + 1000)
    r.count(ROLLED_NEW, ROUTE, 200, T0 + 2000)
    await r.flush()
    expect(store.batches).toEqual([{
      counts: {
        '2026-11-28': {
          key_a: {
            [`${ROUTE}|2xx`]: 3, [`${ROUTE}|3xx`]: 3, [`${ROUTE}|4xx`]: 3, [`${ROUTE}|429`]: 2, [`${ROUTE}|5xx`]: 2, 'GET /v1/credential|2xx': 1,
          },
          key_b: { [`${ROUTE}|2xx`]: 1 },
        },
      },
      lastUsed: { key_a: { any: T0 }, key_b: { any: T0 } },
      retentionMs: RETENTION,
    }])
  })

  it('notes the minute last used, and the previous secret\'s only when a request came with it', async () => {
    const { store, recorder: r } = recorder()
    r.count(KEY, ROUTE, 200, T0 + 59_999)
    r.count(ROLLED_OLD, ROUTE, 200, T0 + 30_000)
    r.count(ROLLED_NEW, ROUTE, 200, T0 + 2 * MINUTE + 1)
    await r.flush()
    expect(store.batches[0]?.lastUsed).toEqual({ key_a: { any: T0 }, key_b: { any: T0 + 2 * MINUTE, previous: T0 } })
  })

  it('writes nothing when nothing was counted, and each minute last used once', async () => {
    const { store, recorder: r } = recorder()
    await r.flush()
    expect(store.started).toBe(0)
    r.count(ROLLED_OLD, ROUTE, 200, T0)
    await r.flush()
    await r.flush()
    expect(store.batches).toHaveLength(1)
    // Same minute again: counts go, the minute does not.
    r.count(ROLLED_OLD, ROUTE, 200, T0 + 10_000)
    await r.flush()
    expect(store.batches[1]).toEqual({ counts: { '2026-11-28': { key_b: { [`${ROUTE}|2xx`]: 1 } } }, lastUsed: {}, retentionMs: RETENTION })
    // A later minute by the new secret: only `any` is due.
    r.count(ROLLED_NEW, ROUTE, 404, T0 + MINUTE)
    await r.flush()
    expect(store.batches[2]).toEqual({ counts: { '2026-11-28': { key_b: { [`${ROUTE}|4xx`]: 1 } } }, lastUsed: { key_b: { any: T0 + MINUTE } }, retentionMs: RETENTION })
    // A later minute by the previous secret: both are due.
    r.count(ROLLED_OLD, ROUTE, 200, T0 + 3 * MINUTE)
    await r.flush()
    expect(store.batches[3]?.lastUsed).toEqual({ key_b: { any: T0 + 3 * MINUTE, previous: T0 + 3 * MINUTE } })
    // Nothing new since: nothing written.
    await r.flush()
    expect(store.batches).toHaveLength(4)
  })

  it('writes only a previous secret\'s minute when only it is newer than what was written', async () => {
    const { store, recorder: r } = recorder()
    r.count(ROLLED_NEW, ROUTE, 200, T0 + 5 * MINUTE)
    await r.flush()
    // An answer counted late (its minute before the one written) by the previous secret.
    r.count(ROLLED_OLD, ROUTE, 200, T0)
    await r.flush()
    expect(store.batches[1]?.lastUsed).toEqual({ key_b: { previous: T0 } })
  })

  it('keeps the counts of a flush that fails, logs it once, and logs when writes work again', async () => {
    const { store, lines, recorder: r } = recorder()
    store.failing = true
    r.count(KEY, ROUTE, 200, T0)
    r.count(KEY, ROUTE, 200, T0)
    await r.flush()
    r.count(KEY, ROUTE, 200, T0 + MINUTE)
    r.count(KEY, ROUTE, 500, T0 + MINUTE)
    await r.flush()
    expect(store.batches).toEqual([])
    expect(lines).toEqual([{ level: 'warn', message: 'usage counts could not be written to Redis; they are kept for the next flush', err: expect.objectContaining({ message: 'READONLY You can\'t write against a read only replica.' }) as unknown }])
    store.failing = false
    r.count(KEY, ROUTE, 200, T0 + 2 * MINUTE)
    await r.flush()
    expect(store.batches).toEqual([{
      counts: { '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 4, [`${ROUTE}|5xx`]: 1 } } },
      lastUsed: { key_a: { any: T0 + 2 * MINUTE } },
      retentionMs: RETENTION,
    }])
    expect(lines.slice(1)).toEqual([{ level: 'info', message: 'usage counts are written to Redis again' }])
    r.count(KEY, ROUTE, 200, T0 + 3 * MINUTE)
    await r.flush()
    expect(lines).toHaveLength(2)
  })

  it('keeps a failed flush\'s minute last used due until it is written', async () => {
    const { store, recorder: r } = recorder()
    store.failing = true
    r.count(ROLLED_OLD, ROUTE, 200, T0)
    await r.flush()
    store.failing = false
    await r.flush()
    expect(store.batches).toEqual([{
      counts: { '2026-11-28': { key_b: { [`${ROUTE}|2xx`]: 1 } } }, lastUsed: { key_b: { any: T0, previous: T0 } }, retentionMs: RETENTION,
    }])
  })

  it('keeps failed counts of two days apart, and adds them to those counted since', async () => {
    const { store, recorder: r } = recorder()
    const midnight = Date.parse('2026-11-29T00:00:00.000Z')
    store.failing = true
    r.count(KEY, ROUTE, 200, midnight - 1)
    r.count(principal('key_c'), ROUTE, 200, midnight)
    await r.flush()
    store.failing = false
    r.count(KEY, ROUTE, 200, midnight + 1)
    r.count(principal('key_c'), ROUTE, 200, midnight + 2)
    await r.flush()
    expect(store.batches[0]?.counts).toEqual({
      '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 1 } },
      '2026-11-29': { key_c: { [`${ROUTE}|2xx`]: 2 }, key_a: { [`${ROUTE}|2xx`]: 1 } },
    })
  })

  it('counts an answer at midnight UTC on the new day, and each later one on its own day', async () => {
    const { store, recorder: r } = recorder()
    const midnight = Date.parse('2026-11-29T00:00:00.000Z')
    r.count(KEY, ROUTE, 200, midnight - 1)
    r.count(KEY, ROUTE, 200, midnight)
    r.count(KEY, ROUTE, 200, midnight + DAY - 1)
    r.count(KEY, ROUTE, 200, midnight + DAY + 5)
    await r.flush()
    expect(store.batches[0]?.counts).toEqual({
      '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 1 } },
      '2026-11-29': { key_a: { [`${ROUTE}|2xx`]: 2 } },
      '2026-11-30': { key_a: { [`${ROUTE}|2xx`]: 1 } },
    })
  })

  it('counts after a flush into the next batch, on the same day', async () => {
    const { store, recorder: r } = recorder()
    r.count(KEY, ROUTE, 200, T0)
    await r.flush()
    r.count(KEY, ROUTE, 200, T0 + 1)
    await r.flush()
    expect(store.batches.map((b) => b.counts)).toEqual([
      { '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 1 } } },
      { '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 1 } } },
    ])
  })

  it('runs one flush at a time: a second waits for the first, then writes what came since', async () => {
    const { store, recorder: r } = recorder()
    let release = () => {}
    store.hold = new Promise<void>((resolve) => { release = resolve })
    r.count(KEY, ROUTE, 200, T0)
    const first = r.flush()
    r.count(KEY, ROUTE, 500, T0)
    const second = r.flush()
    await Promise.resolve()
    await Promise.resolve()
    expect(store.started).toBe(1)
    release()
    await Promise.all([first, second])
    expect(store.batches.map((b) => b.counts)).toEqual([
      { '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 1 } } },
      { '2026-11-28': { key_a: { [`${ROUTE}|5xx`]: 1 } } },
    ])
  })

  it('flushes every flushMs once started, once per interval even when started twice, and at close', async () => {
    vi.useFakeTimers({ now: T0 })
    const every = vi.spyOn(globalThis, 'setInterval')
    const { store, recorder: r } = recorder(5000)
    r.start()
    r.start()
    expect(every).toHaveBeenCalledTimes(1)
    r.count(KEY, ROUTE, 200)
    await vi.advanceTimersByTimeAsync(4999)
    expect(store.batches).toHaveLength(0)
    await vi.advanceTimersByTimeAsync(1)
    expect(store.batches).toEqual([{ counts: { '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 1 } } }, lastUsed: { key_a: { any: T0 } }, retentionMs: RETENTION }])
    r.count(KEY, ROUTE, 200)
    await r.close()
    expect(store.batches).toHaveLength(2)
    r.count(KEY, ROUTE, 200)
    await vi.advanceTimersByTimeAsync(60_000)
    expect(store.batches).toHaveLength(2)
    // Started again after close: a new timer.
    r.start()
    expect(every).toHaveBeenCalledTimes(2)
    await vi.advanceTimersByTimeAsync(5000)
    expect(store.batches).toHaveLength(3)
    await r.close()
  })
})

describe('the memory store', () => {
  it('adds counts by credential and day, and keeps the latest minute last used', async () => {
    const store = new MemoryUsageStore()
    const day = new Map([['key_a', new Map([['GET /v1/credential|2xx', 2]])]])
    await store.write({ counts: new Map([['2026-11-28', day]]), lastUsed: new Map([['key_a', { any: T0 + MINUTE }]]) })
    await store.write({
      counts: new Map([['2026-11-28', new Map([['key_a', new Map([['GET /v1/credential|2xx', 3], ['GET /v1/credential|429', 1]])]])]]),
      lastUsed: new Map([['key_a', { any: T0, previous: T0 }], ['key_b', { previous: T0 }]]),
    })
    expect(await store.counts('key_a', ['2026-11-27', '2026-11-28'])).toEqual(new Map([
      ['2026-11-27', {}], ['2026-11-28', { 'GET /v1/credential|2xx': 5, 'GET /v1/credential|429': 1 }],
    ]))
    expect(await store.counts('key_z', ['2026-11-28'])).toEqual(new Map([['2026-11-28', {}]]))
    expect(await store.lastUse(['key_a', 'key_b', 'key_z'])).toEqual(new Map([
      ['key_a', { any: T0 + MINUTE, previous: T0 }], ['key_b', { any: null, previous: T0 }], ['key_z', { any: null, previous: null }],
    ]))
    await store.resetPrevious('key_a')
    await store.resetPrevious('key_z')
    await store.forget('key_b')
    expect(await store.lastUse(['key_a', 'key_b'])).toEqual(new Map([['key_a', { any: T0 + MINUTE, previous: null }], ['key_b', { any: null, previous: null }]]))
  })
})

describe('the Redis store', () => {
  const redis = new Redis(REDIS_URL)
  const prefix = testPrefix()
  const store = new RedisUsageStore(redis, prefix)

  afterAll(async () => {
    await removePrefix(redis, prefix)
    redis.disconnect()
  })

  it('writes the minutes given, each only when later than the one stored', async () => {
    await store.write({ counts: new Map(), lastUsed: new Map([['key_p', { previous: T0 }], ['key_q', { any: T0 }], ['key_r', {}]]) }, RETENTION)
    expect(await store.lastUse(['key_p', 'key_q', 'key_r'])).toEqual(new Map([
      ['key_p', { any: null, previous: T0 }], ['key_q', { any: T0, previous: null }], ['key_r', { any: null, previous: null }],
    ]))
    await store.write({ counts: new Map(), lastUsed: new Map([['key_p', { any: T0, previous: T0 - MINUTE }]]) }, RETENTION)
    expect((await store.lastUse(['key_p'])).get('key_p')).toEqual({ any: T0, previous: T0 })
    expect(await redis.exists(`${prefix}lastused:{key_r}`)).toBe(0)
  })

  it('reads a day without counts as none, and fails a write that Redis refuses', async () => {
    expect(await store.counts('key_s', ['2026-11-28'])).toEqual(new Map([['2026-11-28', {}]]))
    await redis.set(`${prefix}usage:{key_s}:2026-11-28`, 'not a hash')
    const batch: UsageBatch = { counts: new Map([['2026-11-28', new Map([['key_s', new Map([['GET /v1/credential|2xx', 1]])]])]]), lastUsed: new Map() }
    await expect(store.write(batch, RETENTION)).rejects.toThrow(/WRONGTYPE/)
  })
})
