import type { Dispatcher } from 'undici'
import type { TraceContext } from '../http/trace.js'
import { outgoingTraceHeaders } from '../http/trace.js'
import { CONNECTION_ERRORS, errorCode, type CallOptions } from './interceptors.js'
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

const LIST_PATH = '/internal/v3/hotels'
const HOTEL_PATH = `${LIST_PATH}/`
/** The hotel path as a trace names it: the id is a value, not part of the route. */
const HOTEL_TEMPLATE = `${LIST_PATH}/{hotel_uuid}`

export class PmsClient {
  readonly upstream: Upstream

  constructor(private readonly options: PmsClientOptions) {
    this.upstream = options.upstream
  }

  get name(): string {
    return this.upstream.name
  }

  /** A hotel record, or undefined when the PMS does not know the id. */
  getHotel(id: string, context: CallContext): Promise<unknown> {
    return this.call(`${HOTEL_PATH}${encodeURIComponent(id)}`, true, context, HOTEL_TEMPLATE)
  }

  async listHotels(query: Record<string, string>, context: CallContext): Promise<HotelList> {
    const body = await this.call(`${LIST_PATH}?${new URLSearchParams(query).toString()}`, false, context, LIST_PATH)
    const parsed = pmsListSchema.safeParse(body)
    if (!parsed.success) throw new UpstreamError('bad-response', 'bad_response', `${this.name}: list body breaks the contract`)
    return parsed.data
  }

  /** One call straight to the upstream's dispatcher; the promise settles once, with the body parsed or the failure classified. */
  private call(path: string, hotel: boolean, context: CallContext, pathTemplate: string): Promise<unknown> {
    const headers: Record<string, string> = {
      'x-pms-service-token': this.options.token,
      'x-request-id': context.requestId,
      accept: 'application/json',
    }
    if (context.trace !== null) Object.assign(headers, outgoingTraceHeaders(context.trace))
    return new Promise((resolve, reject) => {
      const call = new PmsCall(this, hotel, resolve, reject)
      try {
        const options: CallOptions = { origin: this.upstream.url, path, pathTemplate, method: 'GET', headers }
        this.upstream.dispatcher.dispatch(options, call)
      } catch (error) {
        call.onResponseError(undefined, error as Error)
      }
    })
  }

  /** Tells `observe` of a call that ended as `outcome`. */
  observed(outcome: UpstreamOutcome, started: number): void {
    this.options.observe?.(outcome, (performance.now() - started) / 1000)
  }
}

/**
 * One PMS call and undici's handler of its answer: the body's chunks collected and parsed once
 * at its end, with no stream and no promise but the caller's (the answers are small JSON,
 * read whole anyway).
 */
class PmsCall implements Dispatcher.DispatchHandler {
  private readonly started = performance.now()
  private status = 0
  private headers: Record<string, string | string[] | undefined> = {}
  /** The body's chunks, kept only for a 2xx: any other answer is judged by its status. */
  private chunks: Buffer[] | undefined
  private size = 0
  private settled = false

  constructor(
    private readonly client: PmsClient,
    /** A hotel by its id, whose 404 means the PMS does not know it. */
    private readonly hotel: boolean,
    private readonly resolve: (value: unknown) => void,
    private readonly reject: (error: unknown) => void,
  ) {}

  onRequestStart(): void {}

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.status = statusCode
    this.headers = headers
    if (statusCode >= 200 && statusCode < 300) this.chunks = []
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.chunks === undefined) return
    this.chunks.push(chunk)
    this.size += chunk.length
  }

  onResponseEnd(): void {
    if (this.chunks === undefined) {
      this.answered()
      return
    }
    let body: unknown
    try {
      body = JSON.parse(utf8Text(this.chunks, this.size))
    } catch {
      this.fail(new UpstreamError('bad-response', 'bad_response', `${this.client.name}: ${this.status} body is not JSON`))
      return
    }
    this.succeed('success', body)
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (this.status === 0) {
      this.fail(error)
      return
    }
    // The answer had begun. A 2xx cut short is no JSON document (a lost connection is still
    // one); any other answer is judged by its status alone, whatever became of its body.
    if (this.chunks === undefined) {
      this.answered()
      return
    }
    const code = errorCode(error)
    this.fail(code !== undefined && CONNECTION_ERRORS.has(code) ? error : new UpstreamError('bad-response', 'bad_response', `${this.client.name}: ${this.status} body is not JSON`))
  }

  /** An answer that is not a 2xx: a hotel unknown, or a failure. */
  private answered(): void {
    const status = this.status
    if (status === 404 && this.hotel) {
      this.succeed('not_found', undefined)
      return
    }
    const upstream = this.client.upstream
    this.fail(upstream.unavailableAnswer(status, this.headers) ?? new UpstreamError('bad-response', 'bad_response', `${this.client.name}: answered ${status}`))
  }

  private succeed(outcome: 'success' | 'not_found', value: unknown): void {
    if (this.settled) return
    this.settled = true
    this.client.observed(outcome, this.started)
    this.resolve(value)
  }

  private fail(error: unknown): void {
    if (this.settled) return
    this.settled = true
    const failure = this.client.upstream.failure(error)
    this.client.observed(failure.outcome, this.started)
    this.reject(failure)
  }
}

/** The body as text, as undici's `body.json()` reads it: UTF-8, a byte order mark skipped. */
function utf8Text(chunks: Buffer[], size: number): string {
  if (size === 0) return ''
  const buffer = chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks, size)
  const start = buffer.length > 2 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0
  return buffer.toString('utf8', start)
}
