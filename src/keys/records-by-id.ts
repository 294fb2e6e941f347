import { LRUCache } from 'lru-cache'
import type { GrantRecord } from './grants.js'
import type { KeyRecord, KeyStore } from './store.js'

// Credentials' records by id, for work that names a credential by its id instead of presenting
// its secret: a webhook attempt reads its endpoint owner's record to decide what the owner may
// see. Reading it from Redis took two round trips per attempt; kept here, it is read again when
// a change to any credential is published (on any instance: the same messages the
// authenticator's cache follows, src/keys/record-cache.ts), when changes may have been missed
// (a lost subscription), or after `ttlMs`, whichever comes first. So a revoked or suspended
// credential's next attempt sees it as soon as this instance hears of the change, and at the
// latest after `keyCache.ttlMs`, the window the authenticator already trusts a key for.
//
// A store that hears no changes (`hearsChanges` false: one made without a subscriber) is read
// every time: nothing would tell the cache a copy had gone stale.

export type CredentialRecord = KeyRecord | GrantRecord

export interface RecordsByIdOptions {
  ttlMs: number
  maxEntries: number
  /** The clock the lifetime is counted on (tests move it). */
  now?: () => number
}

export class RecordsById {
  private readonly cache: LRUCache<string, CredentialRecord> | undefined
  /** Changes heard (and resyncs): a read under way across one is not kept. */
  private changes = 0
  /** Reads under way since the last change, by id: attempts for one owner made at once share one. */
  private readonly reading = new Map<string, Promise<CredentialRecord | null>>()

  constructor(private readonly store: KeyStore, options: RecordsByIdOptions) {
    if (!store.hearsChanges) return
    this.cache = new LRUCache({ max: options.maxEntries, ttl: options.ttlMs, ...(options.now === undefined ? {} : { perf: { now: options.now }, ttlResolution: 0 }) })
    const forget = (): void => {
      this.changes += 1
      // A change names a digest, not an id, and changes are rare (an operator's or a partner's
      // act): every record is read again, and no one joins a read begun before it.
      this.cache?.clear()
      this.reading.clear()
    }
    store.onChange(forget)
    store.onResync(forget)
  }

  /** The record of a key (`key_…`) or a grant (`cli_…`) by its id; null when none has it. */
  async get(id: string): Promise<CredentialRecord | null> {
    if (this.cache === undefined) return this.read(id)
    const kept = this.cache.get(id)
    if (kept !== undefined) return kept
    let pending = this.reading.get(id)
    if (pending === undefined) {
      const read = this.readKeeping(id)
      pending = read
      this.reading.set(id, read)
      void read.finally(() => {
        if (this.reading.get(id) === read) this.reading.delete(id)
      }).catch(() => undefined)
    }
    return pending
  }

  private read(id: string): Promise<CredentialRecord | null> {
    return id.startsWith('cli_') ? this.store.findGrantById(id) : this.store.findById(id)
  }

  /** `read`, the record kept unless a change came while it was under way (record-cache.ts, `read`, says why). No credential is kept as missing: a key's records are written in steps, and its creation is announced to no one. */
  private async readKeeping(id: string): Promise<CredentialRecord | null> {
    const changes = this.changes
    const record = await this.read(id)
    if (record !== null && changes === this.changes) this.cache?.set(id, record)
    return record
  }
}
