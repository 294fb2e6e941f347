import { LRUCache } from 'lru-cache'
import { ApiError } from '../contract/errors.js'

// 401 answers counted per client address (docs/security.md, "Invented keys"). An address over
// its allowance answers 429 RATE_LIMITED at once, before any key look-up, until its minute
// ends. A look-up of a key this instance does not know counts as a failure while it runs (and
// stays one if the key is refused), so a burst of concurrent requests cannot slip past the
// bound. Counted in memory, per instance, bounded in the addresses it tracks.

const MINUTE_MS = 60_000

export interface AuthFailureOptions {
  perMinute: number
  trackedAddresses: number
  /** The clock minutes are measured on, in milliseconds; `performance.now` unless given (tests). */
  now?: () => number
}

export class AuthFailureLimiter {
  // Each address's count lives for the minute that began with its first failure.
  private readonly counts: LRUCache<string, { count: number }>

  constructor(private readonly options: AuthFailureOptions) {
    const clock = options.now === undefined ? {} : { perf: { now: options.now }, ttlResolution: 0 }
    this.counts = new LRUCache({ max: options.trackedAddresses, ttl: MINUTE_MS, noUpdateTTL: true, ttlAutopurge: false, ...clock })
  }

  /** Throws 429 when `address` has used up its failures for the minute. */
  check(address: string): void {
    const entry = this.counts.get(address)
    if (entry !== undefined && entry.count >= this.options.perMinute) throw this.refusal(address)
  }

  /** Reserves a failure for a key look-up about to reach the store; throws 429 when none is left. */
  reserve(address: string): void {
    this.check(address)
    this.add(address)
  }

  /** Counts one failure. */
  add(address: string): void {
    const entry = this.counts.get(address)
    if (entry === undefined) this.counts.set(address, { count: 1 })
    else entry.count += 1
  }

  /** Gives back a reservation whose look-up found a valid key. */
  release(address: string): void {
    const entry = this.counts.get(address)
    if (entry !== undefined && entry.count > 0) entry.count -= 1
  }

  private refusal(address: string): ApiError {
    const seconds = Math.max(1, Math.ceil(this.counts.getRemainingTTL(address) / 1000))
    return new ApiError('RATE_LIMITED',
      `Too many requests with a missing or invalid API key from this address: at most ${this.options.perMinute} a minute. Retry in ${seconds} seconds.`,
      { retryAfter: seconds })
  }
}
