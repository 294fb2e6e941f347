import type { Logger } from 'pino'
import type { QuotaStore } from './store.js'

// A per-key fixed-window limit shared by every instance (docs/architecture.md, "Quotas";
// docs/architecture.md §D8), exact and cheap: an instance leases a small batch of the key's
// remaining quota in one atomic Redis call and spends it locally. The batch shrinks to 1 as the
// quota runs out, so the instances together never admit more than the limit, and little quota
// sits unspent in one instance while another is refused. Concurrent requests of one key share a
// lease in flight.

export interface Verdict {
  allowed: boolean
  limit: number
  /** Requests left in the window, as far as this instance knows. */
  remaining: number
  /** Seconds until the window resets. */
  resetSeconds: number
}

interface KeyWindow {
  window: number
  /** Leased and not yet spent here. */
  local: number
  /** The counter in Redis after this instance's last lease. */
  used: number
  exhausted: boolean
  pending: Promise<void> | undefined
}

export interface RateLimiterOptions {
  windowSeconds: number
  /** Largest batch leased at once. */
  maxBatch?: number
  logger: Logger
  /** A request let through because the store could not answer. */
  onFailOpen?: () => void
  /** Quota of `keyId` granted to this instance by one lease. */
  onLease?: (keyId: string, granted: number) => void
}

/** Part of what is left that one lease may take: 1/16, so ~16 instances share the tail fairly. */
const LEASE_SHARE = 16

export class RateLimiter {
  private readonly windows = new Map<string, KeyWindow>()
  private readonly windowMs: number
  private readonly maxBatch: number
  private failingOpen = false

  constructor(private readonly store: QuotaStore, private readonly options: RateLimiterOptions) {
    this.windowMs = options.windowSeconds * 1000
    this.maxBatch = options.maxBatch ?? 500
  }

  /** The verdict for one request of `keyId`; undefined when the store failed (fail open). */
  /**
   * The verdict for one request of `keyId`; undefined when the store failed (fail open).
   * At once while this instance holds a lease of the key's quota (most requests), or knows
   * it is spent; a promise only when it must lease more from the store.
   */
  take(keyId: string, limit: number): Verdict | undefined | Promise<Verdict | undefined> {
    const now = Date.now()
    const window = Math.floor(now / this.windowMs)
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * this.windowMs - now) / 1000))
    let state = this.windows.get(keyId)
    if (state === undefined || state.window !== window) {
      state = { window, local: 0, used: 0, exhausted: false, pending: undefined }
      this.windows.set(keyId, state)
      this.forgetOldWindows(window)
    }
    return this.spend(state, keyId, limit, resetSeconds)
  }

  private spend(state: KeyWindow, keyId: string, limit: number, resetSeconds: number): Verdict | Promise<Verdict | undefined> {
    if (state.local > 0) {
      state.local -= 1
      return { allowed: true, limit, remaining: Math.max(0, limit - state.used + state.local), resetSeconds }
    }
    if (state.exhausted) return { allowed: false, limit, remaining: 0, resetSeconds }
    if (state.pending === undefined) {
      state.pending = this.lease(state, keyId, limit).finally(() => {
        state.pending = undefined
      })
    }
    // Concurrent requests of one key share the lease in flight, then spend from it.
    return state.pending.then(() => {
      this.recovered()
      return this.spend(state, keyId, limit, resetSeconds)
    }, (error: unknown) => {
      this.failOpen(error)
      return undefined
    })
  }

  private async lease(state: KeyWindow, keyId: string, limit: number): Promise<void> {
    const left = limit - state.used
    const batch = Math.max(1, Math.min(this.maxBatch, Math.floor(left / LEASE_SHARE)))
    const { granted, used } = await this.store.lease(keyId, state.window, limit, batch, this.windowMs + 1000)
    state.used = used
    state.local += granted
    this.options.onLease?.(keyId, granted)
    if (granted === 0) state.exhausted = true
  }

  /** Redis could not answer: the request goes through uncounted (docs/architecture.md §D9). */
  private failOpen(error: unknown): void {
    this.options.onFailOpen?.()
    // Once per incident, not once per request.
    if (!this.failingOpen) this.options.logger.error({ err: { message: (error as Error).message } }, 'rate limiter failing open: Redis cannot answer')
    this.failingOpen = true
  }

  private recovered(): void {
    if (!this.failingOpen) return
    this.failingOpen = false
    this.options.logger.info('rate limiter enforcing again')
  }

  // Keys seen in an earlier window are dropped lazily, once their window is over.
  private lastSweep = 0
  private forgetOldWindows(window: number): void {
    if (window === this.lastSweep) return
    this.lastSweep = window
    for (const [key, state] of this.windows) if (state.window < window) this.windows.delete(key)
  }
}
