import { ApiError, unauthorized, type RefusedCredential } from '../contract/errors.js'
import { compileAllowList, type AddressMatcher } from './addresses.js'
import { digestKey, KEY_LENGTH, keyMode, prefixMode } from './format.js'
import type { KeyMode, Principal, Scopes } from './principal.js'
import { RecordCache, UNKNOWN } from './record-cache.js'
import type { KeyRecord, KeyStore, SecretRecord } from './store.js'

// The hot path of authentication: a key with a bad checksum never reaches Redis; a known
// key (or a known miss) is answered from this instance's cache (record-cache.ts), which the
// key tool's changes evict on every instance at once.
//
// The checksum is public, so keys that pass it are free to invent (docs/security.md, "Invented
// keys"). Misses are remembered apart from known keys: a flood of invented keys costs at most
// one look-up per key per `ttlMs` and never pushes a partner's key out of the known-key cache.

export interface VerifyHooks {
  /** Called just before a credential that is in no cache is looked up or checked; may throw to refuse. */
  beforeLookup?: () => void
}

/** Turns a presented credential into its principal, or refuses it with the 401/403/503 ApiError. */
export interface KeyVerifier {
  /**
   * The principal at once when the credential's record is at hand; a promise when it must be
   * looked up (rejected with its refusal). A refusal decided at once may be returned rather
   * than thrown (an invalid or unknown key), which spares V8 a throw's message and walk of the
   * stack (docs/performance.md, "The key check's and the property check's refusals returned").
   */
  verify(key: string, hooks?: VerifyHooks): Principal | ApiError | Promise<Principal>
}

interface CachedKey {
  record: KeyRecord
  principal: Principal
  loadedAt: number
  /** `record.expiresAt` in epoch ms, parsed once; Infinity when it never expires. */
  expiresAtMs: number
  /** For a rolled key's previous secret: when the key was rolled, and when that secret stops working (epoch ms). */
  previous?: { rolledAt: string; expiresAt: string; expiresAtMs: number }
}

export interface AuthenticatorOptions {
  ttlMs: number
  /** While the store is unreachable, a cached key keeps working this long past `ttlMs`. */
  graceMs: number
  maxEntries: number
  /** Unknown keys remembered (for `ttlMs`), apart from the known ones. */
  maxUnknown?: number
}

export const DEFAULT_MAX_UNKNOWN = 10_000

/** `"*"` (every scope, also of routes added later) or the listed ones. */
export function scopesOf(stored: readonly string[] | '*'): Scopes {
  return stored === '*' ? 'all' : new Set(stored)
}

/** The compiled allow-list of a record's `allowedIps` (docs/architecture.md, "Allowed addresses"); undefined: anywhere. */
export function allowedFromOf(allowedIps: readonly string[] | null): { allowedFrom?: AddressMatcher } {
  return allowedIps === null ? {} : { allowedFrom: compileAllowList(allowedIps) }
}

function entryOf(found: SecretRecord): CachedKey {
  const { record, previous } = found
  const expiresAtMs = record.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(record.expiresAt)
  const previousEnds = previous === undefined ? undefined : { ...previous, expiresAtMs: Date.parse(previous.expiresAt) }
  return {
    record,
    principal: principalOf(record, expiresAtMs, previousEnds),
    loadedAt: Date.now(),
    expiresAtMs,
    ...(previousEnds === undefined ? {} : { previous: previousEnds }),
  }
}

/** The principal of a key's current secret (the partner portal's session stands in for it). */
export function keyPrincipal(record: KeyRecord): Principal {
  return principalOf(record, record.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(record.expiresAt), undefined)
}

function principalOf(record: KeyRecord, expiresAtMs: number, previous: CachedKey['previous']): Principal {
  // The secret presented stops working at the key's expiry, or a previous secret's at the end of its overlap if sooner.
  const ends = previous !== undefined && previous.expiresAtMs < expiresAtMs ? { ms: previous.expiresAtMs, at: previous.expiresAt } : { ms: expiresAtMs, at: record.expiresAt }
  return {
    keyId: record.id,
    kind: 'apiKey',
    brand: record.brand,
    mode: record.mode,
    properties: record.properties === '*' ? 'all' : new Set(record.properties.map((p) => p.toLowerCase())),
    rateLimit: record.rateLimit,
    scopes: scopesOf(record.scopes),
    ...allowedFromOf(record.allowedIps),
    ...(ends.at === null ? {} : { expiresAtMs: ends.ms, expiresAt: ends.at }),
    ...(previous === undefined ? {} : { previousSecret: true as const }),
  }
}

export class KeyAuthenticator implements KeyVerifier {
  private readonly records: RecordCache<CachedKey>

  constructor(store: KeyStore, options: AuthenticatorOptions) {
    this.records = new RecordCache<CachedKey>(store, async (digest) => {
      const found = await store.findSecret(digest)
      return found === null ? undefined : entryOf(found)
    }, { ...options, maxUnknown: options.maxUnknown ?? DEFAULT_MAX_UNKNOWN, unavailableDetail: 'API keys cannot be checked right now; retry shortly.' })
  }

  /**
   * The key's principal, or the 401/403/503 ApiError. Synchronous on a cache hit (most
   * requests): only a key this instance does not hold costs a promise and a look-up. A key of
   * no known form, or one remembered as unknown, is refused by returning its 401; the other
   * refusals of a key at hand (another mode, expired, suspended) are thrown.
   */
  verify(key: string, hooks: VerifyHooks = {}): Principal | ApiError | Promise<Principal> {
    // Only a key of a key's length is hashed: no long token is.
    if (key.length !== KEY_LENGTH) return invalidKey()
    const digest = digestKey(key)
    const entry = this.records.lookup(digest)
    if (entry === UNKNOWN) return invalidKey()
    // Found by its digest, the key is one the store issued: its form and checksum need no
    // check (0.5 µs a request: docs/performance.md, "The key check of a key held"), and its
    // prefix names its mode.
    if (entry !== undefined) return admit(entry, prefixMode(key))
    // A key of no known form never reaches Redis.
    const mode = keyMode(key)
    if (mode === undefined) return invalidKey()
    // A key this instance holds, if only a copy past its lifetime, is known to be valid: its
    // refresh is no look-up the per-address bound refuses (docs/security.md, "Invented keys").
    if (!this.records.holds(digest)) hooks.beforeLookup?.()
    return this.records.load(digest).then((loaded) => {
      if (loaded === undefined) throw invalidKey()
      return admit(loaded, mode)
    })
  }

  /** Known keys cached. */
  get size(): number {
    return this.records.size
  }

  /** Unknown keys remembered. */
  get unknownSize(): number {
    return this.records.unknownSize
  }

  get hitRatio(): number {
    return this.records.hitRatio
  }
}

function invalidKey(): ApiError {
  return unauthorized('INVALID_API_KEY', 'The API key is not valid.')
}

/** The principal of a record found for a key of `mode`, or why the key may not be used. */
function admit(entry: CachedKey, mode: KeyMode): Principal {
  const { record } = entry
  // The prefix says the mode; a record that says otherwise is not this key
  // (docs/architecture.md, "Test mode").
  if (record.mode !== mode) throw invalidKey()
  const now = Date.now()
  // A refusal of a key the gateway knows joins that key's request log (docs/architecture.md §D57).
  const { previous } = entry
  const known: RefusedCredential = { id: record.id, mode: record.mode, secret: previous === undefined ? 'current' : 'previous' }
  if (entry.expiresAtMs <= now) throw unauthorized('API_KEY_EXPIRED', `The API key expired at ${record.expiresAt as string}.`, known)
  // A rolled key's previous secret works until its overlap ends (docs/architecture.md, "Rolling a key").
  if (previous !== undefined && previous.expiresAtMs <= now) {
    throw unauthorized('API_KEY_EXPIRED', `The API key was rolled at ${previous.rolledAt}; this secret of it stopped working at ${previous.expiresAt}. Use its new secret.`, known)
  }
  if (record.status === 'suspended') throw new ApiError('API_KEY_SUSPENDED', 'The API key is suspended.', { credential: known })
  return entry.principal
}
