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
  /**
   * Resyncs so far, and changes published: a read under way across either is made again.
   * Counts, not times, so that a step of the wall clock cannot reorder a read and a resync.
   */
  private resyncs = 0
  private changes = 0
  /** The resync count when each record was read: one read before the last resync is read again before its next use. */
  private readonly readAt = new WeakMap<E, number>()
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
      // Undefined leaves the known-record cache alone: a miss is remembered apart.
      fetchMethod: async (digest) => this.readRemembering(digest),
    })
    store.onChange((digest) => {
      this.changes += 1
      this.cache.delete(digest)
      this.unknown.delete(digest)
    })
    store.onResync(() => {
      this.resyncs += 1
      this.unknown.clear()
    })
  }

  /**
   * The store's record of `digest`. A read under way when a change is published, or when
   * changes may have been missed, can carry what the store held before it (Redis may have
   * answered the read first, and the answer come in after the message, over the other
   * connection): it is made again.
   */
  private async read(digest: string): Promise<E | undefined> {
    for (;;) {
      const { resyncs, changes } = this
      const entry = await this.find(digest)
      if (resyncs === this.resyncs && changes === this.changes) {
        if (entry !== undefined) this.readAt.set(entry, resyncs)
        return entry
      }
    }
  }

  /** `read`, a digest the store does not know remembered as unknown. */
  private async readRemembering(digest: string): Promise<E | undefined> {
    const entry = await this.read(digest)
    if (entry === undefined) this.unknown.set(digest, true)
    return entry
  }

  /** Whether a record was read since the last resync. */
  private sinceResync(entry: E): boolean {
    return this.readAt.get(entry) === this.resyncs
  }

  private unavailable(cause: unknown): ApiError {
    return new ApiError('SERVICE_UNAVAILABLE', this.options.unavailableDetail, { retryAfter: 1, cause })
  }

  /** The fresh record of `digest`, UNKNOWN when the store is known not to have it, undefined when it must be looked up. */
  lookup(digest: string): E | typeof UNKNOWN | undefined {
    this.lookups += 1
    const entry = this.cache.get(digest)
    if (entry !== undefined && this.sinceResync(entry)) {
      this.hits += 1
      return entry
    }
    if (this.unknown.has(digest)) {
      this.hits += 1
      return UNKNOWN
    }
    return undefined
  }

  /** Whether this instance holds a copy of the record of `digest`, fresh or not. */
  holds(digest: string): boolean {
    return this.cache.peek(digest, { allowStale: true }) !== undefined
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
          const entry = await this.readRemembering(digest)
          if (entry !== undefined) this.cache.set(digest, entry)
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
      throw this.unavailable(error)
    }
  }

  /** The cached record of `digest`, a fresh one from the store, or undefined when the store has none. */
  async load(digest: string): Promise<E | undefined> {
    // Not even a stale copy here: nothing to fall back on, so no slot in the known-record cache.
    const held = this.cache.peek(digest, { allowStale: true })
    if (held === undefined) return this.lookUp(digest)
    const status: LRUCache.Status<string, E> = {}
    // A copy still within its lifetime but from before a resync is read again too.
    const entry = await this.cache.fetch(digest, { status, forceRefresh: !this.sinceResync(held) })
    if (entry === undefined) {
      // Not reached while lru-cache hands back the held copy on a failed read; were it not to,
      // a failure must stay a 503, never become an unknown key.
      if (status.fetchError !== undefined) throw this.unavailable(status.fetchError)
      // lru-cache puts back a stale copy when the store answers nothing; the record is gone.
      this.cache.delete(digest)
      return undefined
    }
    // lru-cache hands back the held copy when the read fails or is cut short
    // (allowStaleOnFetchRejection), to every request that waited on that read; only the one
    // that started it is told why (`status`), so the copy itself says. A read cut short by a
    // change of the record or by its eviction left the copy out of the cache: the record is
    // read again, outside it.
    if (this.cache.peek(digest, { allowStale: true }) !== entry) return this.lookUp(digest)
    const age = Date.now() - entry.loadedAt
    if (this.sinceResync(entry) && age <= this.options.ttlMs) return entry
    // The store could not answer: the copy serves until its grace period ends.
    if (age > this.options.ttlMs + this.options.graceMs) throw this.unavailable(status.fetchError)
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
