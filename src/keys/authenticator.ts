import { LRUCache } from 'lru-cache'
import { ApiError, unauthorized } from '../contract/errors.js'
import { digestKey, keyMode } from './format.js'
import type { Principal } from './principal.js'
import type { KeyRecord, KeyStore } from './store.js'

// The hot path of authentication: a key with a bad checksum never reaches Redis; a known
// key (or a known miss) is answered from this instance's cache; changes published by the
// key tool evict the cached copy on every instance at once.

/** Turns a presented key into its principal, or throws the 401/403/503 ApiError. */
export interface KeyVerifier {
  verify(key: string): Promise<Principal>
}

interface CachedKey {
  /** Null remembers that no such key exists. */
  record: KeyRecord | null
  principal: Principal | null
  loadedAt: number
}

export interface AuthenticatorOptions {
  ttlMs: number
  /** While the store is unreachable, a cached key keeps working this long past `ttlMs`. */
  graceMs: number
  maxEntries: number
}

function principalOf(record: KeyRecord): Principal {
  return {
    keyId: record.id,
    brand: record.brand,
    mode: record.mode,
    properties: record.properties === '*' ? 'all' : new Set(record.properties.map((p) => p.toLowerCase())),
    rateLimit: record.rateLimit,
  }
}

export class KeyAuthenticator implements KeyVerifier {
  private readonly cache: LRUCache<string, CachedKey>
  private hits = 0
  private lookups = 0

  constructor(private readonly store: KeyStore, private readonly options: AuthenticatorOptions) {
    this.cache = new LRUCache<string, CachedKey>({
      max: options.maxEntries,
      ttl: options.ttlMs,
      // A stale entry stays for `fetch` to fall back on while the store is down.
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      fetchMethod: async (digest) => {
        const record = await store.findByDigest(digest)
        return { record, principal: record === null ? null : principalOf(record), loadedAt: Date.now() }
      },
    })
    store.onChange((digest) => this.cache.delete(digest))
    store.onResync(() => this.cache.clear())
  }

  private async load(digest: string): Promise<CachedKey> {
    const status: LRUCache.Status<string, CachedKey> = {}
    const entry = await this.cache.fetch(digest, { status })
    const unavailable = (): never => {
      throw new ApiError('SERVICE_UNAVAILABLE', 'API keys cannot be checked right now; retry shortly.', { retryAfter: 1, cause: status.fetchError })
    }
    if (entry === undefined) return unavailable()
    if (status.returnedStale === true && Date.now() - entry.loadedAt > this.options.ttlMs + this.options.graceMs) return unavailable()
    return entry
  }

  async verify(key: string): Promise<Principal> {
    if (keyMode(key) === undefined) throw unauthorized('INVALID_API_KEY', 'The API key is not valid.')
    const digest = digestKey(key)
    this.lookups += 1
    let entry = this.cache.get(digest)
    if (entry === undefined) entry = await this.load(digest)
    else this.hits += 1
    const { record, principal } = entry
    if (record === null || principal === null) throw unauthorized('INVALID_API_KEY', 'The API key is not valid.')
    if (record.expiresAt !== null && Date.parse(record.expiresAt) <= Date.now()) {
      throw unauthorized('API_KEY_EXPIRED', `The API key expired at ${record.expiresAt}.`)
    }
    if (record.status === 'suspended') {
      throw new ApiError('API_KEY_SUSPENDED', 'The API key is suspended.')
    }
    return principal
  }

  get size(): number {
    return this.cache.size
  }

  get hitRatio(): number {
    return this.lookups === 0 ? 0 : Math.round((this.hits / this.lookups) * 1000) / 1000
  }
}
