import CircuitBreaker from 'opossum'
import { Pool, type Dispatcher } from 'undici'
import type { TraceContext } from '../pipeline/trace.js'
import { outgoingTraceparent } from '../pipeline/trace.js'
import { UpstreamError, type UpstreamOutcome } from './errors.js'
import { pmsListSchema } from './pms-record.js'

// The PMS client: an undici Pool (keep-alive shorter than the PMS's 5 s idle close), one
// retry of a read after a connection error, an opossum circuit breaker that counts only
// real upstream failures, and a bound on calls in flight beyond which it answers at once.

export interface PmsClientOptions {
  /** `pms` or `pmsSandbox`: metrics, status and logs name the upstream by it. */
  name: string
  url: string
  token: string
  timeoutMs: number
  connections: number
  retries: number
  maxInFlight: number
  breaker: {
    errorThresholdPercentage: number
    volumeThreshold: number
    resetTimeoutMs: number
    rollingCountTimeoutMs: number
  }
  /** Tests give undici's MockAgent here; otherwise a Pool to `url`. */
  dispatcher?: Dispatcher
  /** Told of every call: metrics. */
  observe?: (outcome: UpstreamOutcome, seconds: number) => void
}

export interface CallContext {
  requestId: string
  trace: TraceContext | null
}

export interface HotelList {
  results: unknown[]
  total_count: number
}

export type BreakerState = 'closed' | 'open' | 'halfOpen'

interface Call {
  path: string
  context: CallContext
  abort: AbortController
}

const CONNECTION_ERRORS = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNABORTED'])
const RETRY_AFTER_CAP = 60

function retryAfterHeader(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined
  return Math.min(Number(text), RETRY_AFTER_CAP)
}

export class PmsClient {
  private readonly dispatcher: Dispatcher
  private readonly ownsDispatcher: boolean
  readonly breaker: CircuitBreaker<[Call], unknown>
  private inFlight = 0
  /** When the circuit last opened. */
  private openedAt = 0

  constructor(private readonly options: PmsClientOptions) {
    this.ownsDispatcher = options.dispatcher === undefined
    this.dispatcher = options.dispatcher ?? new Pool(options.url, {
      connections: options.connections,
      // Under the PMS's 5 s idle close, so we never send on a socket it is closing.
      keepAliveTimeout: 4000,
      keepAliveMaxTimeout: 4000,
      // Backstops; the breaker's timeout is the deadline and aborts the call.
      headersTimeout: options.timeoutMs + 1000,
      bodyTimeout: options.timeoutMs + 1000,
    })
    this.breaker = new CircuitBreaker((call: Call) => this.send(call), {
      name: options.name,
      timeout: options.timeoutMs,
      errorThresholdPercentage: options.breaker.errorThresholdPercentage,
      volumeThreshold: options.breaker.volumeThreshold,
      resetTimeout: options.breaker.resetTimeoutMs,
      rollingCountTimeout: options.breaker.rollingCountTimeoutMs,
      // Only an unavailable PMS counts against the circuit: a 404 is an answer, and a bad
      // response is the PMS's bug, not its absence.
      errorFilter: (error: unknown) => !(error instanceof UpstreamError && error.kind === 'unavailable'),
    })
    // The timeout event carries the call's arguments (missing from @types/opossum): abort
    // exactly that request rather than leave it to finish unheard.
    ;(this.breaker as unknown as NodeJS.EventEmitter).on('timeout', (_error: unknown, _latency: unknown, args: [Call]) => {
      args[0].abort.abort()
    })
    // opossum's own `lastTimerAt` is set once, when the breaker is built, not on each open
    // (its _startTimer runs at construction): keep the time ourselves.
    this.breaker.on('open', () => {
      this.openedAt = Date.now()
    })
  }

  get name(): string {
    return this.options.name
  }

  /** A hotel record, or undefined when the PMS does not know the id. */
  async getHotel(id: string, context: CallContext): Promise<unknown> {
    return this.call(`/internal/v3/hotels/${encodeURIComponent(id)}`, context)
  }

  async listHotels(query: Record<string, string>, context: CallContext): Promise<HotelList> {
    const body = await this.call(`/internal/v3/hotels?${new URLSearchParams(query).toString()}`, context)
    const parsed = pmsListSchema.safeParse(body)
    if (!parsed.success) throw new UpstreamError('bad-response', 'bad_response', `${this.name}: list body breaks the contract`)
    return parsed.data
  }

  private async call(path: string, context: CallContext): Promise<unknown> {
    const started = performance.now()
    if (this.inFlight >= this.options.maxInFlight) {
      this.observe('overloaded', started)
      throw new UpstreamError('unavailable', 'overloaded', `${this.name}: ${this.inFlight} calls in flight`, 1)
    }
    this.inFlight += 1
    try {
      const result = await this.breaker.fire({ path, context, abort: new AbortController() })
      this.observe(result === undefined ? 'not_found' : 'success', started)
      return result
    } catch (error) {
      const failure = this.classify(error)
      this.observe(failure.outcome, started)
      throw failure
    } finally {
      this.inFlight -= 1
    }
  }

  private observe(outcome: UpstreamOutcome, started: number): void {
    this.options.observe?.(outcome, (performance.now() - started) / 1000)
  }

  private classify(error: unknown): UpstreamError {
    if (error instanceof UpstreamError) return error
    const code = (error as { code?: string }).code
    if (code === 'EOPENBREAKER') return new UpstreamError('unavailable', 'circuit_open', `${this.name}: circuit open`, this.retryAfterSeconds())
    if (code === 'ETIMEDOUT') return new UpstreamError('unavailable', 'timeout', `${this.name}: no answer within ${this.options.timeoutMs} ms`, 1)
    return new UpstreamError('unavailable', 'connection_error', `${this.name}: ${(error as Error).message}`, 1)
  }

  /** One request, with up to `retries` more after a connection error (GET is idempotent). */
  private async send(call: Call): Promise<unknown> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.sendOnce(call)
      } catch (error) {
        const code = (error as { code?: string }).code
        if (attempt >= this.options.retries || code === undefined || !CONNECTION_ERRORS.has(code) || call.abort.signal.aborted) {
          throw this.toUpstreamError(error)
        }
      }
    }
  }

  private toUpstreamError(error: unknown): unknown {
    const code = (error as { code?: string }).code
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return new UpstreamError('unavailable', 'timeout', `${this.name}: ${code}`, 1)
    }
    return error
  }

  private async sendOnce(call: Call): Promise<unknown> {
    const headers: Record<string, string> = {
      'x-pms-service-token': this.options.token,
      'x-request-id': call.context.requestId,
      accept: 'application/json',
    }
    if (call.context.trace !== null) {
      headers.traceparent = outgoingTraceparent(call.context.trace)
      if (call.context.trace.tracestate !== undefined) headers.tracestate = call.context.trace.tracestate
    }
    const response = await this.dispatcher.request({
      origin: this.options.url,
      path: call.path,
      method: 'GET',
      headers,
      signal: call.abort.signal,
    })
    const status = response.statusCode
    if (status === 404 && call.path.startsWith('/internal/v3/hotels/')) {
      await response.body.dump()
      return undefined
    }
    if (status >= 200 && status < 300) {
      try {
        return await response.body.json()
      } catch (error) {
        if ((error as { code?: string }).code !== undefined && CONNECTION_ERRORS.has((error as { code: string }).code)) throw error
        throw new UpstreamError('bad-response', 'bad_response', `${this.name}: ${status} body is not JSON`)
      }
    }
    await response.body.dump()
    if (status === 429 || status === 503) {
      throw new UpstreamError('unavailable', status === 429 ? 'throttled' : 'server_error', `${this.name}: answered ${status}`,
        retryAfterHeader(response.headers['retry-after']) ?? 1)
    }
    if (status >= 500) throw new UpstreamError('unavailable', 'server_error', `${this.name}: answered ${status}`, 1)
    throw new UpstreamError('bad-response', 'bad_response', `${this.name}: answered ${status}`)
  }

  get state(): BreakerState {
    return this.breaker.opened ? 'open' : this.breaker.halfOpen ? 'halfOpen' : 'closed'
  }

  /** Whole seconds until the open circuit lets a trial call through (at least 1). */
  retryAfterSeconds(): number {
    if (!this.breaker.opened) return 0
    const remaining = this.openedAt + this.options.breaker.resetTimeoutMs - Date.now()
    return Math.max(1, Math.ceil(remaining / 1000))
  }

  get callsInFlight(): number {
    return this.inFlight
  }

  async close(): Promise<void> {
    this.breaker.shutdown()
    if (this.ownsDispatcher) await this.dispatcher.close()
  }
}
