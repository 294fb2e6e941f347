import { LRUCache } from 'lru-cache'
import { ApiError, unauthorized } from '../contract/errors.js'
import { digestKey, keyMode } from './format.js'
import type { KeyMode, Principal } from './principal.js'
import type { KeyRecord, KeyStore } from './store.js'

// The hot path of authentication: a key with a bad checksum never reaches Redis; a known
// key (or a known miss) is answered from this instance's cache; changes published by the
// key tool evict the cached copy on every instance at once.
//
// The checksum is public, so keys that pass it are free to invent (decisions 10). Misses are
// remembered in a small cache of their own: a flood of invented keys costs at most one
// look-up per key per `ttlMs` and never pushes a partner's key out of the known-key cache.

export interface VerifyHooks {
  /** Called just before a key that is in neither cache is looked up in the store; may throw to refuse. */
  beforeLookup?: () => void
}

/** Turns a presented key into its principal, or throws the 401/403/503 ApiError. */
export interface KeyVerifier {
  /** The principal at once when the key's record is at hand; a promise when it must be looked up. */
  verify(key: string, hooks?: VerifyHooks): Principal | Promise<Principal>
}

interface CachedKey {
  record: KeyRecord
  principal: Principal
  loadedAt: number
  /** `record.expiresAt` in epoch ms, parsed once; Infinity when it never expires. */
  expiresAtMs: number
}

export interface AuthenticatorOptions {
  ttlMs: number
  /** While the store is unreachable, a cached key keeps working this long past `ttlMs`. */
  graceMs: number
  maxEntries: number
  /** Unknown keys remembered (for `ttlMs`), apart from the known ones. */
  maxUnknown?: number
}

const DEFAULT_MAX_UNKNOWN = 10_000

function entryOf(record: KeyRecord): CachedKey {
  return {
    record,
    principal: principalOf(record),
    loadedAt: Date.now(),
    expiresAtMs: record.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(record.expiresAt),
  }
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
  /** Digests the store did not know, with no record: a few bytes each. */
  private readonly unknown: LRUCache<string, true>
  private readonly inFlight = new Map<string, Promise<CachedKey | undefined>>()
  private hits = 0
  private lookups = 0

  constructor(private readonly store: KeyStore, private readonly options: AuthenticatorOptions) {
    this.unknown = new LRUCache<string, true>({ max: options.maxUnknown ?? DEFAULT_MAX_UNKNOWN, ttl: options.ttlMs })
    this.cache = new LRUCache<string, CachedKey>({
      max: options.maxEntries,
      ttl: options.ttlMs,
      // A stale entry stays for `fetch` to fall back on while the store is down.
      noDeleteOnStaleGet: true,
      allowStaleOnFetchRejection: true,
      fetchMethod: async (digest) => {
        const record = await store.findByDigest(digest)
        if (record !== null) return entryOf(record)
        // Not cached here (undefined leaves the known-key cache alone): remembered apart.
        this.unknown.set(digest, true)
        return undefined
      },
    })
    store.onChange((digest) => {
      this.cache.delete(digest)
      this.unknown.delete(digest)
    })
    store.onResync(() => {
      this.cache.clear()
      this.unknown.clear()
    })
  }

  /**
   * The record of a key this instance does not hold: looked up outside the known-key cache
   * (whose in-flight fetches take a slot each, so a burst of invented keys would push known
   * ones out), one look-up per digest at a time.
   */
  private async lookUp(digest: string): Promise<CachedKey | undefined> {
    let pending = this.inFlight.get(digest)
    if (pending === undefined) {
      pending = (async () => {
        try {
          const record = await this.store.findByDigest(digest)
          if (record === null) {
            this.unknown.set(digest, true)
            return undefined
          }
          const entry = entryOf(record)
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
      throw new ApiError('SERVICE_UNAVAILABLE', 'API keys cannot be checked right now; retry shortly.', { retryAfter: 1, cause: error })
    }
  }

  /** The cached record of `digest`, a fresh one from the store, or undefined when the store has none. */
  private async load(digest: string): Promise<CachedKey | undefined> {
    // Not even a stale copy here: nothing to fall back on, so no slot in the known-key cache.
    if (this.cache.peek(digest, { allowStale: true }) === undefined) return this.lookUp(digest)
    const status: LRUCache.Status<string, CachedKey> = {}
    const entry = await this.cache.fetch(digest, { status })
    const unavailable = (): never => {
      throw new ApiError('SERVICE_UNAVAILABLE', 'API keys cannot be checked right now; retry shortly.', { retryAfter: 1, cause: status.fetchError })
    }
    if (entry === undefined) {
      if (status.fetchError !== undefined) return unavailable()
      // lru-cache puts back a stale copy when the store answers nothing; the key is gone.
      this.cache.delete(digest)
      return undefined
    }
    if (status.returnedStale === true && Date.now() - entry.loadedAt > this.options.ttlMs + this.options.graceMs) return unavailable()
    return entry
  }

  /**
   * The key's principal, or the 401/403/503 ApiError. Synchronous on a cache hit (most
   * requests): only a key this instance does not hold costs a promise and a look-up.
   */
  verify(key: string, hooks: VerifyHooks = {}): Principal | Promise<Principal> {
    const mode = keyMode(key)
    if (mode === undefined) throw invalidKey()
    const digest = digestKey(key)
    this.lookups += 1
    const entry = this.cache.get(digest)
    if (entry !== undefined) {
      this.hits += 1
      return admit(entry, mode)
    }
    if (this.unknown.has(digest)) {
      this.hits += 1
      throw invalidKey()
    }
    hooks.beforeLookup?.()
    return this.load(digest).then((loaded) => {
      if (loaded === undefined) throw invalidKey()
      return admit(loaded, mode)
    })
  }

  /** Known keys cached. */
  get size(): number {
    return this.cache.size
  }

  /** Unknown keys remembered. */
  get unknownSize(): number {
    return this.unknown.size
  }

  get hitRatio(): number {
    return this.lookups === 0 ? 0 : Math.round((this.hits / this.lookups) * 1000) / 1000
  }
}

function invalidKey(): ApiError {
  return unauthorized('INVALID_API_KEY', 'The API key is not valid.')
}

/** The principal of a record found for a key of `mode`, or why the key may not be used. */
function admit(entry: CachedKey, mode: KeyMode): Principal {
  const { record } = entry
  // The prefix says the mode; a record that says otherwise is not this key (decisions 9).
  if (record.mode !== mode) throw invalidKey()
  if (entry.expiresAtMs <= Date.now()) throw unauthorized('API_KEY_EXPIRED', `The API key expired at ${record.expiresAt as string}.`)
  if (record.status === 'suspended') throw new ApiError('API_KEY_SUSPENDED', 'The API key is suspended.')
  return entry.principal
}
