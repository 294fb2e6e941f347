import { LRUCache } from 'lru-cache'

// The read cache in front of one upstream: lru-cache's `fetch` makes concurrent misses of a
// key share one load, keeps entries fresh for `ttlMs`, and, when a refresh fails, hands back
// the stale copy; this class bounds that staleness to `staleIfErrorMs` (lru-cache has no
// maximum age of its own). It holds answers, never an access decision (docs/architecture.md §D10).
//
// A failed load rejects every request that shared it, but lru-cache hands the error (and the
// "stale" verdict) only to the request that started the load: the others find neither in
// their status. So the error is kept beside the cache until the key loads again, and a stale
// copy is told by its age, not by the status.

export type CacheResult = 'hit' | 'miss' | 'stale'

interface Entry {
  value: unknown
  loadedAt: number
}

type Loader = () => Promise<unknown>

export interface ReadCacheOptions {
  ttlMs: number
  staleIfErrorMs: number
  maxEntries: number
  /** Told of every read: gateway_cache_requests_total. */
  observe?: (result: CacheResult) => void
}

export class ReadCache {
  private readonly cache: LRUCache<string, Entry, Loader> | undefined
  /** The last failed load of each key, for every request that shared it. */
  private readonly failures: LRUCache<string, { error: unknown }> | undefined
  private hits = 0
  private reads = 0

  constructor(private readonly options: ReadCacheOptions) {
    if (options.ttlMs === 0) return
    const failures = new LRUCache<string, { error: unknown }>({ max: options.maxEntries })
    this.failures = failures
    this.cache = new LRUCache<string, Entry, Loader>({
      max: options.maxEntries,
      ttl: options.ttlMs,
      // Keep stale entries (no ttlAutopurge, no delete on a stale get) for stale-if-error.
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      fetchMethod: async (key, _stale, { context }) => {
        try {
          const value = await context()
          failures.delete(key)
          return { value, loadedAt: Date.now() }
        } catch (error) {
          failures.set(key, { error })
          throw error
        }
      },
    })
  }

  async get<T>(key: string, load: () => Promise<T>): Promise<{ value: T; result: CacheResult }> {
    if (this.cache === undefined) return { value: await load(), result: 'miss' }
    const status: LRUCache.Status<string, Entry, Loader> = {}
    const entry = await this.cache.fetch(key, { context: load, status })
    let result: CacheResult = status.fetch === 'hit' ? 'hit' : 'miss'
    const failure = (): unknown => status.fetchError ?? this.failures?.get(key)?.error ?? new Error(`cache load of ${key} failed`)
    if (entry === undefined) throw failure()
    const age = Date.now() - entry.loadedAt
    if (status.returnedStale === true || (result === 'miss' && age > this.options.ttlMs)) {
      if (age > this.options.ttlMs + this.options.staleIfErrorMs) throw failure()
      result = 'stale'
    }
    this.record(result)
    return { value: entry.value as T, result }
  }

  /**
   * The value of `key` when the cache holds it fresh, counted as `get` counts a hit; undefined
   * when it does not (absent, stale or still loading: `get` decides those). A value is never
   * undefined. A hit read here costs its caller none of `get`'s promises, nor the turns of the
   * microtask queue each of them takes (docs/performance.md, "A cache hit answered at once").
   */
  fresh(key: string): unknown {
    const entry = this.cache?.get(key)
    if (entry === undefined) return undefined
    this.record('hit')
    return entry.value
  }

  private record(result: CacheResult): void {
    this.reads += 1
    if (result === 'hit') this.hits += 1
    this.options.observe?.(result)
  }

  get entries(): number {
    return this.cache?.size ?? 0
  }

  get hitRatio(): number {
    return this.reads === 0 ? 0 : Math.round((this.hits / this.reads) * 1000) / 1000
  }
}
