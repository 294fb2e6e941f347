import { LRUCache } from 'lru-cache'

// The read cache in front of one upstream: lru-cache's `fetch` makes concurrent misses of a
// key share one load, keeps entries fresh for `ttlMs`, and, when a refresh fails, hands back
// the stale copy; this class bounds that staleness to `staleIfErrorMs` (lru-cache has no
// maximum age of its own).

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
  private hits = 0
  private reads = 0

  constructor(private readonly options: ReadCacheOptions) {
    if (options.ttlMs === 0) return
    this.cache = new LRUCache<string, Entry, Loader>({
      max: options.maxEntries,
      ttl: options.ttlMs,
      // Keep stale entries (no ttlAutopurge, no delete on a stale get) for stale-if-error.
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      fetchMethod: async (_key, _stale, { context }) => ({ value: await context(), loadedAt: Date.now() }),
    })
  }

  async get<T>(key: string, load: () => Promise<T>): Promise<{ value: T; result: CacheResult }> {
    if (this.cache === undefined) return { value: await load(), result: 'miss' }
    const status: LRUCache.Status<string, Entry, Loader> = {}
    const entry = await this.cache.fetch(key, { context: load, status })
    let result: CacheResult = status.fetch === 'hit' ? 'hit' : 'miss'
    if (entry === undefined) throw status.fetchError ?? new Error(`cache load of ${key} failed`)
    if (status.returnedStale === true) {
      if (Date.now() - entry.loadedAt > this.options.ttlMs + this.options.staleIfErrorMs) throw status.fetchError
      result = 'stale'
    }
    this.record(result)
    return { value: entry.value as T, result }
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
