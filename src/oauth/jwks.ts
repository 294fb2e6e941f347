import { createLocalJWKSet, type JSONWebKeySet, type JWK } from 'jose'
import type { Dispatcher } from 'undici'
import { request } from 'undici'

// The signing keys of one token issuer (its JWKS, RFC 7517), fetched by the gateway itself:
// at start (never waited for), every `refreshMs`, and when a token names a key id (`kid`)
// that is not among them, at most once per `cooldownMs`, one fetch shared by every request
// that waits for it. A fetch that fails keeps the last good keys, however old: an outage of
// the identity provider never refuses a token that was valid before it. (jose's remote key
// set drops its keys once they are older than its cache age, and then refuses every token
// while the provider is down; hence this. docs/architecture.md §D16)

export interface JwksOptions {
  issuer: string
  jwksUri: string
  refreshMs: number
  cooldownMs: number
  timeoutMs: number
  dispatcher: Dispatcher
  /** Each fetch's outcome, for the metric. */
  onFetch?: (issuer: string, result: 'ok' | 'error') => void
  /** A failed fetch, for the log (at most one line per failure, never per request). */
  onError?: (issuer: string, message: string) => void
}

export interface JwksStatus {
  keys: number
  fetchedAt: string | null
  lastError: string | null
  lastErrorAt: string | null
}

/** A JWKS larger than this is not one (a provider publishes a handful of keys). */
const MAX_JWKS_BYTES = 256 * 1024

class JwksError extends Error {}

/** Signing keys a JWS can be verified with: not marked for encryption. */
function signingKeys(document: unknown): JWK[] {
  if (document === null || typeof document !== 'object' || !Array.isArray((document as { keys?: unknown }).keys)) {
    throw new JwksError('the answer is not a JWKS (no "keys" array)')
  }
  const keys = ((document as { keys: unknown[] }).keys).filter((key): key is JWK =>
    key !== null && typeof key === 'object' && typeof (key as JWK).kty === 'string' && (key as JWK).use !== 'enc')
  if (keys.length === 0) throw new JwksError('the JWKS holds no signing key')
  return keys
}

export class IssuerKeys {
  /** jose's selection of a key by `kid`, `alg` and `kty`; undefined until a fetch succeeded. */
  keySet: ReturnType<typeof createLocalJWKSet> | undefined
  /** The `kid`s of the keys held. */
  kids: ReadonlySet<string> = new Set()
  /** Counts the changes of the keys held: a token that names no `kid` was verified with the keys of one version. */
  version = 0
  /** What the keys held were, to tell a change from a fetch of the same keys. */
  private published = ''
  private count = 0
  private fetchedAt: number | null = null
  private lastError: { message: string; at: number } | null = null
  private pending: Promise<void> | undefined
  /** When a request last caused a fetch (the cooldown counts from it). */
  private requestedAt = Number.NEGATIVE_INFINITY
  private readonly timer: NodeJS.Timeout

  constructor(private readonly options: JwksOptions) {
    void this.refresh()
    this.timer = setInterval(() => void this.refresh(), options.refreshMs)
    this.timer.unref()
  }

  /** Whether keys were ever fetched. */
  get ready(): boolean {
    return this.keySet !== undefined
  }

  /**
   * For a request that found no key to use (an unknown `kid`, or no keys yet): waits for the
   * fetch under way, or starts one if the cooldown allows, else answers at once.
   */
  async refetch(): Promise<void> {
    if (this.pending !== undefined) return this.pending
    const now = Date.now()
    if (now - this.requestedAt < this.options.cooldownMs) return undefined
    this.requestedAt = now
    return this.refresh()
  }

  /** Seconds until a request may cause a fetch again (at least 1): the `Retry-After` of a 503. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.requestedAt + this.options.cooldownMs - Date.now()) / 1000))
  }

  /** One fetch at a time; whoever asks meanwhile shares it. */
  refresh(): Promise<void> {
    this.pending ??= this.fetch().finally(() => {
      this.pending = undefined
    })
    return this.pending
  }

  private async fetch(): Promise<void> {
    try {
      const keys = await this.download()
      const published = JSON.stringify(keys)
      if (published !== this.published) {
        this.published = published
        this.version += 1
      }
      this.keySet = createLocalJWKSet({ keys } as JSONWebKeySet)
      this.kids = new Set(keys.flatMap((k) => (typeof k.kid === 'string' ? [k.kid] : [])))
      this.count = keys.length
      this.fetchedAt = Date.now()
      this.options.onFetch?.(this.options.issuer, 'ok')
    } catch (error) {
      const message = error instanceof JwksError ? error.message : describeFailure(error, this.options.timeoutMs)
      this.lastError = { message, at: Date.now() }
      this.options.onFetch?.(this.options.issuer, 'error')
      this.options.onError?.(this.options.issuer, message)
    }
  }

  private async download(): Promise<JWK[]> {
    // No redirect is followed (undici's request follows none): a JWKS that moved is a
    // configuration to fix, not a hop to take on the provider's word.
    const res = await request(this.options.jwksUri, {
      dispatcher: this.options.dispatcher,
      headers: { accept: 'application/jwk-set+json, application/json' },
      signal: AbortSignal.timeout(this.options.timeoutMs),
    })
    if (res.statusCode !== 200) {
      await res.body.dump()
      throw new JwksError(res.statusCode >= 300 && res.statusCode < 400 ? `answered a redirect (${res.statusCode}), which is not followed` : `answered ${res.statusCode}`)
    }
    const length = Number(res.headers['content-length'] ?? 0)
    if (length > MAX_JWKS_BYTES) {
      await res.body.dump()
      throw new JwksError(`answered ${length} bytes, more than a JWKS takes`)
    }
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length
      if (size > MAX_JWKS_BYTES) {
        res.body.destroy()
        throw new JwksError('answered more bytes than a JWKS takes')
      }
      chunks.push(chunk as Buffer)
    }
    let document: unknown
    try {
      document = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      throw new JwksError('the answer is not JSON')
    }
    return signingKeys(document)
  }

  status(): JwksStatus {
    return {
      keys: this.count,
      fetchedAt: this.fetchedAt === null ? null : new Date(this.fetchedAt).toISOString(),
      lastError: this.lastError?.message ?? null,
      lastErrorAt: this.lastError === null ? null : new Date(this.lastError.at).toISOString(),
    }
  }

  close(): void {
    clearInterval(this.timer)
  }
}

function describeFailure(error: unknown, timeoutMs: number): string {
  const e = error as { name?: string; code?: string; cause?: { code?: string } }
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return `no answer within ${timeoutMs} ms`
  const code = e.code ?? e.cause?.code
  return code === undefined ? 'the fetch failed' : `the fetch failed (${code})`
}
