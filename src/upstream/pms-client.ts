import type { TraceContext } from '../http/trace.js'
import { outgoingTraceHeaders } from '../http/trace.js'
import { CONNECTION_ERRORS } from './interceptors.js'
import { UpstreamError, type UpstreamOutcome } from './errors.js'
import { pmsListSchema } from './pms-record.js'
import type { Upstream } from './upstream.js'

// The PMS client: what is particular to the PMS (its paths, its token header, what its 404
// means, the shape of a list) on top of an Upstream, which brings the timeout, retry,
// breaker and in-flight bound every upstream has.

export interface PmsClientOptions {
  upstream: Upstream
  token: string
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

const HOTEL_PATH = '/internal/v3/hotels/'

export class PmsClient {
  readonly upstream: Upstream

  constructor(private readonly options: PmsClientOptions) {
    this.upstream = options.upstream
  }

  get name(): string {
    return this.upstream.name
  }

  /** A hotel record, or undefined when the PMS does not know the id. */
  async getHotel(id: string, context: CallContext): Promise<unknown> {
    return this.call(`${HOTEL_PATH}${encodeURIComponent(id)}`, context)
  }

  async listHotels(query: Record<string, string>, context: CallContext): Promise<HotelList> {
    const body = await this.call(`/internal/v3/hotels?${new URLSearchParams(query).toString()}`, context)
    const parsed = pmsListSchema.safeParse(body)
    if (!parsed.success) throw new UpstreamError('bad-response', 'bad_response', `${this.name}: list body breaks the contract`)
    return parsed.data
  }

  private async call(path: string, context: CallContext): Promise<unknown> {
    const started = performance.now()
    try {
      const result = await this.send(path, context)
      this.observe(result === undefined ? 'not_found' : 'success', started)
      return result
    } catch (error) {
      const failure = this.upstream.failure(error)
      this.observe(failure.outcome, started)
      throw failure
    }
  }

  private observe(outcome: UpstreamOutcome, started: number): void {
    this.options.observe?.(outcome, (performance.now() - started) / 1000)
  }

  private async send(path: string, context: CallContext): Promise<unknown> {
    const headers: Record<string, string> = {
      'x-pms-service-token': this.options.token,
      'x-request-id': context.requestId,
      accept: 'application/json',
      ...(context.trace === null ? {} : outgoingTraceHeaders(context.trace)),
    }
    const response = await this.upstream.dispatcher.request({ origin: this.upstream.url, path, method: 'GET', headers })
    const status = response.statusCode
    if (status === 404 && path.startsWith(HOTEL_PATH)) {
      await response.body.dump()
      return undefined
    }
    if (status >= 200 && status < 300) {
      try {
        return await response.body.json()
      } catch (error) {
        const code = (error as { code?: string }).code
        if (code !== undefined && CONNECTION_ERRORS.has(code)) throw error
        throw new UpstreamError('bad-response', 'bad_response', `${this.name}: ${status} body is not JSON`)
      }
    }
    await response.body.dump()
    const unavailable = this.upstream.unavailableAnswer(status, response.headers)
    if (unavailable !== undefined) throw unavailable
    throw new UpstreamError('bad-response', 'bad_response', `${this.name}: answered ${status}`)
  }
}
