import { LRUCache } from 'lru-cache'
import { ApiError } from '../contract/errors.js'
import type { KeyStore } from './store.js'

// The records that say what a credential may do (API keys, the grants of token clients),
// cached on each instance by their digest. A known record (or a known miss) is answered from
// memory; changes published by the key tool evict the cached copy on every instance at once.
//
// Misses are remembered in a small cache of their own: a flood of invented credentials costs
// at most one look-up per digest per `ttlMs` and never pushes a partner's record out of the
// known-record cache (docs/security.md, "Invented keys"). While the store is
// unreachable, a cached record keeps working for `graceMs` past its lifetime; a record never
// seen is answered 503 (docs/architecture.md §D9).
//
// When changes may have been missed (the subscription was lost), every record held is read
// again before its next use rather than dropped: a read the store cannot answer yet (in a
// Cluster failover, the subscription can be back before every slot answers this instance's
// reads) falls back on the held copy, as it would while the store is down.

export interface RecordCacheOptions {
  ttlMs: number
  /** While the store is unreachable, a cached record keeps working this long past `ttlMs`. */
  graceMs: number
  maxEntries: number
  /** Unknown digests remembered (for `ttlMs`), apart from the known ones. */
  maxUnknown: number
  /** The problem detail of the 503 when the store cannot answer and nothing may be served. */
  unavailableDetail: string
}

/** What a cache keeps for a record: anything, stamped with when it was read from the store. */
export interface Loaded {
  loadedAt: number
}

/** `lookup`'s answer for a digest the store is known not to have. */
export const UNKNOWN = Symbol('unknown')

export class RecordCache<E extends Loaded> {
  private readonly cache: LRUCache<string, E>
  /** Digests the store did not know, with no record: a few bytes each. */
  private readonly unknown: LRUCache<string, true>
  private readonly inFlight = new Map<string, Promise<E | undefined>>()
  /** When changes were last possibly missed: a record loaded then or before is read again before its next use. */
  private resyncedAt = Number.NEGATIVE_INFINITY
  private hits = 0
  private lookups = 0

  /** `find` reads the record of a digest from the store; undefined when it has none. */
  constructor(store: KeyStore, private readonly find: (digest: string) => Promise<E | undefined>, private readonly options: RecordCacheOptions) {
    this.unknown = new LRUCache<string, true>({ max: options.maxUnknown, ttl: options.ttlMs })
    this.cache = new LRUCache<string, E>({
      max: options.maxEntries,
      ttl: options.ttlMs,
      // A stale entry stays for `fetch` to fall back on while the store is down.
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      fetchMethod: async (digest) => {
        const entry = await find(digest)
        if (entry !== undefined) return entry
        // Not cached here (undefined leaves the known-record cache alone): remembered apart.
        this.unknown.set(digest, true)
        return undefined
      },
    })
    store.onChange((digest) => {
      this.cache.delete(digest)
      this.unknown.delete(digest)
    })
    store.onResync(() => {
      this.resyncedAt = Date.now()
      this.unknown.clear()
    })
  }

  /** The fresh record of `digest`, UNKNOWN when the store is known not to have it, undefined when it must be looked up. */
  lookup(digest: string): E | typeof UNKNOWN | undefined {
    this.lookups += 1
    const entry = this.cache.get(digest)
    if (entry !== undefined && entry.loadedAt > this.resyncedAt) {
      this.hits += 1
      return entry
    }
    if (this.unknown.has(digest)) {
      this.hits += 1
      return UNKNOWN
    }
    return undefined
  }

  /**
   * The record of a digest this instance does not hold: looked up outside the known-record
   * cache (whose in-flight fetches take a slot each, so a burst of invented digests would push
   * known ones out), one look-up per digest at a time.
   */
  private async lookUp(digest: string): Promise<E | undefined> {
    let pending = this.inFlight.get(digest)
    if (pending === undefined) {
      pending = (async () => {
        try {
          const entry = await this.find(digest)
          if (entry === undefined) {
            this.unknown.set(digest, true)
            return undefined
          }
          this.cache.set(digest, entry)
          return entry
        } finally {
          this.inFlight.delete(digest)
        }
      })()
      this.inFlight.set(digest, pending)
    }
    try {
      return await pending
    } catch (error) {
      throw new ApiError('SERVICE_UNAVAILABLE', this.options.unavailableDetail, { retryAfter: 1, cause: error })
    }
  }

  /** The cached record of `digest`, a fresh one from the store, or undefined when the store has none. */
  async load(digest: string): Promise<E | undefined> {
    // Not even a stale copy here: nothing to fall back on, so no slot in the known-record cache.
    const held = this.cache.peek(digest, { allowStale: true })
    if (held === undefined) return this.lookUp(digest)
    const status: LRUCache.Status<string, E> = {}
    // A fresh copy from before a resync is read again; if the store cannot answer, lru-cache
    // hands back the held copy (allowStaleOnFetchRejection), marked as stale.
    const entry = await this.cache.fetch(digest, { status, forceRefresh: held.loadedAt <= this.resyncedAt })
    const unavailable = (): never => {
      throw new ApiError('SERVICE_UNAVAILABLE', this.options.unavailableDetail, { retryAfter: 1, cause: status.fetchError })
    }
    if (entry === undefined) {
      if (status.fetchError !== undefined) return unavailable()
      // lru-cache puts back a stale copy when the store answers nothing; the record is gone.
      this.cache.delete(digest)
      return undefined
    }
    if (status.returnedStale === true && Date.now() - entry.loadedAt > this.options.ttlMs + this.options.graceMs) return unavailable()
    return entry
  }

  /** Known records cached. */
  get size(): number {
    return this.cache.size
  }

  /** Unknown digests remembered. */
  get unknownSize(): number {
    return this.unknown.size
  }

  get hitRatio(): number {
    return this.lookups === 0 ? 0 : Math.round((this.hits / this.lookups) * 1000) / 1000
  }
}
