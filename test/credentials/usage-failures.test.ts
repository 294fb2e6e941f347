import type { Logger } from 'pino'
import { describe, expect, it } from 'vitest'
import type { Principal } from '../../src/keys/principal.js'
import { MemoryUsageStore, UsageRecorder, type UsageBatch, type UsageStore } from '../../src/credentials/usage.js'

// Usage per credential without a gateway, where test/credentials/usage-recorder.test.ts does not
// look: the warning of the first flush that fails, answers counted while a flush that then fails
// is under way, and a minute last used by the previous secret that a later write does not
// carry. The module's mutation run uses these (scripts/mutation.ts).

const MINUTE = 60_000
const T0 = Date.parse('2026-11-28T10:15:00.000Z')
const RETENTION = 30 * 86_400_000
const ROUTE = 'GET /v1/properties/{propertyId}'
const KEY: Principal = { keyId: 'key_a', kind: 'apiKey', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all' }
const WARNING = 'usage counts could not be written to Redis; they are kept for the next flush'

/** A store whose writes wait for `release` while held, and fail while `failing`. */
class HeldStore implements UsageStore {
  readonly batches: Record<string, Record<string, Record<string, number>>>[] = []
  failing = false
  private held: Promise<void> | undefined
  release: () => void = () => {}

  hold(): void {
    this.held = new Promise((resolve) => { this.release = resolve })
  }

  async write(batch: UsageBatch): Promise<void> {
    if (this.held !== undefined) await this.held
    this.held = undefined
    if (this.failing) throw new Error('READONLY You can\'t write against a read only replica.')
    this.batches.push(Object.fromEntries([...batch.counts].map(([day, credentials]) => [day, Object.fromEntries([...credentials].map(([id, fields]) => [id, Object.fromEntries(fields)]))])))
  }

  async counts(): Promise<Map<string, Record<string, number>>> { return new Map() }
  async lastUse(): Promise<Map<string, { any: number | null; previous: number | null }>> { return new Map() }
  async resetPrevious(): Promise<void> {}
  async forget(): Promise<void> {}
}

function recorder() {
  const store = new HeldStore()
  const lines: { level: string; message: string }[] = []
  const logger = {
    warn: (_obj: unknown, message: string) => { lines.push({ level: 'warn', message }) },
    info: (message: string) => { lines.push({ level: 'info', message }) },
  } as unknown as Logger
  return { store, lines, recorder: new UsageRecorder(store, { flushMs: 10_000, retentionMs: RETENTION, logger }) }
}

describe('the usage recorder when a flush fails', () => {
  it('warns at the first flush that fails', async () => {
    const { store, lines, recorder: r } = recorder()
    store.failing = true
    r.count(KEY, ROUTE, 200, T0)
    await r.flush()
    expect(lines).toEqual([{ level: 'warn', message: WARNING }])
  })

  it('adds the counts of a failed flush to those counted while it was under way', async () => {
    const { store, recorder: r } = recorder()
    store.failing = true
    store.hold()
    r.count(KEY, ROUTE, 200, T0)
    const failed = r.flush()
    // Counted while the write waits: the same day and credential as the batch that will fail.
    r.count(KEY, ROUTE, 200, T0 + MINUTE)
    store.release()
    await failed
    store.failing = false
    r.count(KEY, ROUTE, 500, T0 + 2 * MINUTE)
    await r.flush()
    expect(store.batches).toEqual([{ '2026-11-28': { key_a: { [`${ROUTE}|2xx`]: 2, [`${ROUTE}|5xx`]: 1 } } }])
  })
})

describe('the memory store', () => {
  it('keeps the previous secret\'s minute when a later write carries none', async () => {
    const store = new MemoryUsageStore()
    await store.write({ counts: new Map(), lastUsed: new Map([['key_a', { any: T0, previous: T0 }]]) })
    await store.write({ counts: new Map(), lastUsed: new Map([['key_a', { any: T0 + MINUTE }]]) })
    expect(await store.lastUse(['key_a'])).toEqual(new Map([['key_a', { any: T0 + MINUTE, previous: T0 }]]))
  })
})
