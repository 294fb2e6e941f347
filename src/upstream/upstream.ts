import CircuitBreaker from 'opossum'
import { Pool, type Dispatcher } from 'undici'
import type { UpstreamSettings } from './config.js'
import { IDEMPOTENT_METHODS } from '../routes/policy.js'
import { UpstreamError } from './errors.js'
import {
  buffered, circuitBreaker, CIRCUIT_OPEN, CREDENTIAL_SHARE_FULL, deadline, errorCode, inFlightLimit, isUnavailableStatus, NOT_SENT_ERRORS,
  retryConnectionErrors, sendable, UPSTREAM_CALL_DEADLINE, UPSTREAM_OVERLOADED, UPSTREAM_TIMEOUT, type InFlight, type Interceptor,
} from './interceptors.js'

// One upstream (the PMS, its sandbox, each declared service and its sandbox): a keep-alive
// pool with the resilience interceptors composed onto it, its own breaker and in-flight
// bound, and one classification of its failures as the partner is to be told of them.

export type BreakerState = 'closed' | 'open' | 'halfOpen'

export interface UpstreamOptions extends UpstreamSettings {
  /** `pms`, `pmsSandbox`, `bookings`, `bookingsSandbox`: metrics, status and logs name it so. */
  name: string
  url: string
  /** Hold each answer until its body is complete (small answers read whole, retried whole). */
  buffered: boolean
  /** Bound of the whole call, its body included; default `timeoutMs` (a buffered call's deadline covers its body). */
  responseTimeoutMs?: number
  /**
   * Each credential's share of `maxInFlight`: the calls carrying one value of `credentialHeader`
   * (the gateway's own header naming the caller to a service). Without it, no share.
   */
  credentialShare?: { perCredential: number; credentialHeader: string }
  /** Tests give undici's MockAgent here; otherwise a Pool to `url`. */
  dispatcher?: Dispatcher
  /** With tracing on: makes a client span of each attempt, so it goes innermost. */
  clientSpans?: Interceptor | undefined
}

const RETRY_AFTER_CAP = 60

/** An upstream's own Retry-After in whole seconds, capped; undefined when absent or a date. */
export function retryAfterHeader(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined
  return Math.min(Number(text), RETRY_AFTER_CAP)
}

export class Upstream {
  readonly name: string
  readonly url: string
  /** The pool with timeout, retry, breaker and in-flight bound: every call goes through it. */
  readonly dispatcher: Dispatcher
  readonly breaker: CircuitBreaker<[() => Promise<void>], void>
  private readonly pool: Dispatcher
  private readonly ownsPool: boolean
  private readonly counter: InFlight = { inFlight: 0, byCredential: new Map() }
  private readonly resetTimeoutMs: number
  private readonly timeoutMs: number
  /** When the circuit last opened (opossum's own `lastTimerAt` is set once, at construction). */
  private openedAt = 0

  constructor(options: UpstreamOptions) {
    this.name = options.name
    this.url = options.url
    this.timeoutMs = options.timeoutMs
    this.resetTimeoutMs = options.breaker.resetTimeoutMs
    this.ownsPool = options.dispatcher === undefined
    this.pool = options.dispatcher ?? new Pool(options.url, {
      connections: options.connections,
      // Under common 5 s idle closes (the PMS's), so we never send on a socket being closed.
      keepAliveTimeout: 4000,
      keepAliveMaxTimeout: 4000,
      // Backstops; the deadline interceptor is the real limit to the answer's headers.
      headersTimeout: options.timeoutMs + 1000,
      // A streamed body may pause while a slow partner reads; only a long stall ends it.
      bodyTimeout: Math.max(options.timeoutMs + 1000, 30_000),
    })
    this.breaker = new CircuitBreaker((run: () => Promise<void>) => run(), {
      name: options.name,
      // The deadline interceptor times calls out; opossum's own timer would be a second one.
      timeout: false,
      errorThresholdPercentage: options.breaker.errorThresholdPercentage,
      volumeThreshold: options.breaker.volumeThreshold,
      resetTimeout: options.breaker.resetTimeoutMs,
      rollingCountTimeout: options.breaker.rollingCountTimeoutMs,
      // Only the counts are read (/status, the opening): no call's latency is kept, and no
      // window of them sorted every second.
      rollingPercentilesEnabled: false,
    })
    this.breaker.on('open', () => {
      this.openedAt = Date.now()
    })
    // Innermost first: the breaker sees each call once, retries included; the bounds count
    // calls, not attempts, and refuse theirs before the breaker could count them.
    this.dispatcher = this.pool.compose([
      ...(options.clientSpans === undefined ? [] : [options.clientSpans]),
      ...(options.buffered ? [buffered()] : []),
      retryConnectionErrors(options.retries, IDEMPOTENT_METHODS),
      deadline(options.timeoutMs, options.responseTimeoutMs ?? options.timeoutMs),
      circuitBreaker(this.breaker),
      inFlightLimit(options.maxInFlight, this.counter, options.credentialShare),
      sendable(),
    ])
  }

  get state(): BreakerState {
    return this.breaker.opened ? 'open' : this.breaker.halfOpen ? 'halfOpen' : 'closed'
  }

  /** Whole seconds until the open circuit lets a trial call through (at least 1); 0 when not open. */
  retryAfterSeconds(): number {
    if (!this.breaker.opened) return 0
    const remaining = this.openedAt + this.resetTimeoutMs - Date.now()
    return Math.max(1, Math.ceil(remaining / 1000))
  }

  get callsInFlight(): number {
    return this.counter.inFlight
  }

  /** Calls in flight of one credential (the value of the share's credential header). */
  callsInFlightOf(credential: string): number {
    return this.counter.byCredential.get(credential) ?? 0
  }

  /** A call that failed without an answer, as the partner is to be told (docs/architecture.md, "Upstream failures"). */
  failure(error: unknown): UpstreamError {
    if (error instanceof UpstreamError) return error
    const code = errorCode(error)
    if (code === CIRCUIT_OPEN) return new UpstreamError('unavailable', 'circuit_open', `${this.name}: circuit open`, this.retryAfterSeconds())
    if (code === UPSTREAM_OVERLOADED) return new UpstreamError('unavailable', 'overloaded', `${this.name}: ${(error as Error).message}`, 1)
    if (code === CREDENTIAL_SHARE_FULL) return new UpstreamError('share-full', 'share_full', `${this.name}: ${(error as Error).message}`, 1)
    // The call never left: the gateway's fault, not the upstream's (and not counted against it).
    if (code !== undefined && NOT_SENT_ERRORS.has(code)) return new UpstreamError('not-sent', 'not_sent', `${this.name}: call refused before sending: ${(error as Error).message}`)
    if (code === UPSTREAM_CALL_DEADLINE) return new UpstreamError('unavailable', 'timeout', `${this.name}: ${(error as Error).message}`, 1)
    if (code === UPSTREAM_TIMEOUT || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return new UpstreamError('unavailable', 'timeout', `${this.name}: no answer within ${this.timeoutMs} ms`, 1)
    }
    return new UpstreamError('unavailable', 'connection_error', `${this.name}: ${(error as Error).message}`, 1)
  }

  /** An answer that means the upstream is unavailable (5xx, 429), or undefined. */
  unavailableAnswer(status: number, headers: Record<string, string | string[] | undefined>): UpstreamError | undefined {
    if (!isUnavailableStatus(status)) return undefined
    const own = status === 429 || status === 503 ? retryAfterHeader(headers['retry-after']) : undefined
    return new UpstreamError('unavailable', status === 429 ? 'throttled' : 'server_error', `${this.name}: answered ${status}`, own ?? 1)
  }

  /** Seconds a partner should wait after `error`: to half-open while the circuit is open (docs/architecture.md, "Upstream failures"). */
  retryAfterOf(error: UpstreamError): number {
    return this.state === 'open' ? this.retryAfterSeconds() : error.retryAfter ?? 1
  }

  async close(): Promise<void> {
    this.breaker.shutdown()
    if (this.ownsPool) await this.pool.close()
  }
}
