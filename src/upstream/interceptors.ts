import type CircuitBreaker from 'opossum'
import type { Dispatcher } from 'undici'

// The resilience of every upstream call, as undici interceptors composed onto its pool
// (`pool.compose(...)`, innermost first): the PMS client and every declared service get the
// same timeout, retry, circuit breaker and in-flight bound. Each failure they add carries a
// stable `code`; callers branch on it (upstream/errors.ts), never on a message. The order
// and what each does: docs/architecture.md, "Upstream calls".

type Handler = Dispatcher.DispatchHandler
type Controller = Dispatcher.DispatchController
type Dispatch = Dispatcher['dispatch']
export type Interceptor = Dispatcher.DispatcherComposeInterceptor

/**
 * A call's options, with the path it is made on as its template
 * (`/partner/v1/guests/{guestId}`): what a trace names of the call, never the values that fill
 * it (a path parameter may carry an email address).
 */
export type CallOptions = Dispatcher.DispatchOptions & { pathTemplate?: string }

export const UPSTREAM_TIMEOUT = 'UPSTREAM_TIMEOUT'
/** The whole call (its body included) outlasted its bound: cut, whatever was passed on. */
export const UPSTREAM_CALL_DEADLINE = 'UPSTREAM_CALL_DEADLINE'
export const UPSTREAM_OVERLOADED = 'UPSTREAM_OVERLOADED'
/** One credential has its whole share of an upstream's calls in flight. */
export const CREDENTIAL_SHARE_FULL = 'CREDENTIAL_SHARE_FULL'
export const CIRCUIT_OPEN = 'EOPENBREAKER'

export class InterceptorError extends Error {
  constructor(readonly code: string, message: string) {
    super(message)
    this.name = 'InterceptorError'
  }
}

/** Connection failures after which nothing of the answer can have been used. */
export const CONNECTION_ERRORS: ReadonlySet<string> = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNABORTED',
])

/** A call `sendable` refused: undici would have refused it. */
export const UPSTREAM_NOT_SENDABLE = 'UPSTREAM_NOT_SENDABLE'

/**
 * Refusals of a request before any byte of it left (undici's, of an argument it does not
 * take, a header it does not send, a body that is not the length announced; and `sendable`'s):
 * they say nothing of the upstream. They are the gateway's fault, never the service's.
 */
export const NOT_SENT_ERRORS: ReadonlySet<string> = new Set([
  UPSTREAM_NOT_SENDABLE, 'UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
])

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
/** What RFC 9110 5.5 field values may not hold as undici sends them: a control character but tab. */
const UNFIT_FIELD_VALUE = /[^\t\x20-\x7e\x80-\xff]/
const REQUEST_PATH = /^\/[\u0021-\u00ff]*$/
/** Headers undici refuses to send: it frames and negotiates the connection itself. */
const UNSENDABLE_HEADERS: ReadonlySet<string> = new Set(['transfer-encoding', 'keep-alive', 'upgrade', 'expect'])
/** Headers whose value undici reads itself, checked every time. */
const READ_HEADERS: ReadonlySet<string> = new Set(['connection', 'content-length', 'host'])
/** Header names already found sendable and free of value rules: callers send the same few. */
const sendableNames = new Set<string>()
const MAX_SENDABLE_NAMES = 256

function nameProblem(name: string): string | undefined {
  if (!TOKEN.test(name)) return `header name ${JSON.stringify(name)} is not a token`
  const lower = name.toLowerCase()
  if (UNSENDABLE_HEADERS.has(lower)) return `header ${lower} is never sent`
  if (!READ_HEADERS.has(lower) && sendableNames.size < MAX_SENDABLE_NAMES) sendableNames.add(name)
  return undefined
}

function valueProblem(name: string, value: unknown): string | undefined {
  if (Array.isArray(value)) {
    for (const item of value) if (typeof item !== 'string' || UNFIT_FIELD_VALUE.test(item)) return `header ${name.toLowerCase()} has a value it cannot send`
  } else if (typeof value !== 'string' || UNFIT_FIELD_VALUE.test(value)) {
    return `header ${name.toLowerCase()} has a value it cannot send`
  }
  if (sendableNames.has(name)) return undefined
  switch (name.toLowerCase()) {
    case 'connection':
      return typeof value === 'string' && value.split(',').every((t) => TOKEN.test(t.trim())) ? undefined : 'connection header is not a list of tokens'
    case 'content-length':
      return typeof value === 'string' && /^[0-9]+$/.test(value) ? undefined : 'content-length header is not a length'
    case 'host':
      return typeof value === 'string' ? undefined : 'host header given twice'
    default:
      return undefined
  }
}

/** Why undici would refuse `options` before sending them, or undefined. */
export function unsendable(options: Dispatcher.DispatchOptions): string | undefined {
  if (typeof options.path !== 'string' || !REQUEST_PATH.test(options.path)) return 'the path is not one it can send'
  if (typeof options.method !== 'string' || !TOKEN.test(options.method)) return 'the method is not a token'
  const headers = options.headers
  if (headers === null || headers === undefined || Array.isArray(headers) || typeof (headers as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function') return undefined
  const fields = headers as Record<string, unknown>
  for (const name in fields) {
    const value = fields[name]
    if (value === undefined) continue
    const problem = (sendableNames.has(name) ? undefined : nameProblem(name)) ?? valueProblem(name, value)
    if (problem !== undefined) return problem
  }
  return undefined
}

/**
 * Refuses, before anything else sees it, a call undici would refuse: such a refusal says
 * nothing of the upstream, and undici's own (in undici 7) leaves the pool's connection marked
 * busy for good, so that a few of them stall every later call of the upstream.
 */
export function sendable(): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    const problem = unsendable(options)
    if (problem !== undefined) return refuse(handler, new InterceptorError(UPSTREAM_NOT_SENDABLE, problem))
    return dispatch(options, handler)
  }
}

export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

/**
 * Passes each call on to `inner` and tells `outer` what happens, at most one error and never
 * anything after it: several interceptors below may fail one call (a timeout aborts what a
 * retry is doing), the caller must hear of it once.
 */
class Relay implements Handler {
  controller: Controller | undefined
  settled = false
  started = false

  constructor(protected readonly outer: Handler) {}

  onRequestStart(controller: Controller, context: unknown): void {
    this.controller = controller
    this.outer.onRequestStart?.(controller, context)
  }

  onRequestUpgrade(controller: Controller, statusCode: number, headers: Record<string, string | string[]>, socket: import('node:stream').Duplex): void {
    this.outer.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: Controller, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    if (this.settled) return
    this.started = true
    this.outer.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.settled) return
    this.outer.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: Controller, trailers: Record<string, string | string[] | undefined>): void {
    if (this.settled) return
    this.settled = true
    this.outer.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: Controller, error: Error): void {
    if (this.settled) return
    this.settled = true
    this.outer.onResponseError?.(controller, error)
  }
}

/**
 * Holds the answer back until its body is complete, so a connection lost mid-body is an error
 * before any response (and can be retried). For small answers read whole (the PMS's JSON);
 * never for a stream passed on to a partner.
 */
export function buffered(): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    let status = 0
    let headers: Record<string, string | string[] | undefined> = {}
    let message: string | undefined
    const chunks: Buffer[] = []
    return dispatch(options, {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onResponseStart: (_controller, statusCode, responseHeaders, statusMessage) => {
        status = statusCode
        headers = responseHeaders
        message = statusMessage
      },
      onResponseData: (_controller, chunk) => {
        chunks.push(chunk)
      },
      onResponseEnd: (controller, trailers) => {
        handler.onResponseStart?.(controller, status, headers, message)
        if (chunks.length > 0) handler.onResponseData?.(controller, Buffer.concat(chunks))
        handler.onResponseEnd?.(controller, trailers)
      },
      onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
    })
  }
}

/**
 * Retries an idempotent call after a connection error that came before any answer, up to
 * `retries` times (with `buffered` below it, an answer counts once its body is complete). A
 * body that is a stream cannot be sent twice and is never retried (docs/architecture.md §D11).
 */
export function retryConnectionErrors(retries: number, methods: ReadonlySet<string>): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    const retryable = retries > 0 && methods.has(options.method) && !isStream(options.body)
    if (!retryable) return dispatch(options, handler)
    return new RetriedCall(dispatch, options, handler, retries).send()
  }
}

/**
 * A call's handler that passes every event on to the next one: the per-call classes of the
 * interceptors below change only the events they act on.
 */
class Forward implements Handler {
  constructor(protected readonly outer: Handler) {}

  onRequestStart(controller: Controller, context: unknown): void {
    this.outer.onRequestStart?.(controller, context)
  }

  onResponseStart(controller: Controller, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    this.outer.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    this.outer.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: Controller, trailers: Record<string, string | string[] | undefined>): void {
    this.outer.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: Controller, error: Error): void {
    this.outer.onResponseError?.(controller, error)
  }
}

/**
 * One call and its attempts: the handler of each attempt, and the controller the caller holds
 * across them (aborting it aborts whichever attempt is running). One object per call.
 */
class RetriedCall extends Forward {
  private attempt = 0
  private started = false
  private abortedBy: Error | undefined
  private current: Controller | undefined
  /** Once an answer has begun, its bytes may be on their way to a partner: never again. */
  private answered = false

  constructor(
    private readonly dispatch: Dispatch,
    private readonly options: Dispatcher.DispatchOptions,
    outer: Handler,
    private readonly retries: number,
  ) {
    super(outer)
  }

  send(): boolean {
    return this.dispatch(this.options, this)
  }

  // The controller the caller holds.
  abort(reason: Error): void {
    this.abortedBy = reason
    this.current?.abort(reason)
  }

  pause(): void {
    this.current?.pause()
  }

  resume(): void {
    this.current?.resume()
  }

  get aborted(): boolean {
    return this.abortedBy !== undefined
  }

  get paused(): boolean {
    return this.current?.paused ?? false
  }

  get reason(): Error | null {
    return this.abortedBy ?? null
  }

  // The handler of each attempt.
  override onRequestStart(controller: Controller, context: unknown): void {
    this.current = controller
    if (this.abortedBy !== undefined) controller.abort(this.abortedBy)
    else if (!this.started) {
      // The first attempt that leaves (an earlier one may have failed to connect).
      this.started = true
      this.outer.onRequestStart?.(this as unknown as Controller, context)
    }
  }

  override onResponseStart(controller: Controller, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    this.answered = true
    this.outer.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  override onResponseError(controller: Controller, error: Error): void {
    const code = errorCode(error)
    if (!this.answered && this.abortedBy === undefined && this.attempt < this.retries && code !== undefined && CONNECTION_ERRORS.has(code)) {
      this.attempt += 1
      this.send()
      return
    }
    this.outer.onResponseError?.(controller, error)
  }
}

/** A controller for a call refused before it was sent: there is nothing to abort. */
function refusedController(reason: Error): Controller {
  return { abort: () => undefined, pause: () => undefined, resume: () => undefined, aborted: true, paused: false, reason } as unknown as Controller
}

/** Fails a call at once, without sending it (on the next tick, as a real failure would). */
function refuse(handler: Handler, error: Error): true {
  queueMicrotask(() => {
    const controller = refusedController(error)
    handler.onRequestStart?.(controller, {})
    handler.onResponseError?.(controller, error)
  })
  return true
}

function isStream(body: unknown): boolean {
  return body !== null && typeof body === 'object' && typeof (body as { pipe?: unknown }).pipe === 'function'
}

/**
 * The deadlines of a call: `timeoutMs` to its answer's headers (with `buffered` below it: to
 * the end of its body), failing it with UPSTREAM_TIMEOUT; and `callTimeoutMs` from the call to
 * the end of its body, however slowly the upstream sends or the caller reads (a paused body
 * pauses undici's own body timeout), failing it with UPSTREAM_CALL_DEADLINE. Either way the
 * call is aborted: its connection is closed and every bound it holds is freed at once.
 */
export function deadline(timeoutMs: number, callTimeoutMs = timeoutMs): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => dispatch(options, new TimedCall(handler, timeoutMs, callTimeoutMs))
}

function expire(call: TimedCall): void {
  call.expire()
}

/**
 * One call under its deadlines. One timer: it first fires at the earlier deadline; a call
 * answered by then is given what is left of its whole-call bound, so a call that ends in time
 * (nearly all) sets and clears a single timer.
 */
class TimedCall extends Relay {
  private readonly since = performance.now()
  private timer: NodeJS.Timeout

  constructor(outer: Handler, private readonly timeoutMs: number, private readonly callTimeoutMs: number) {
    super(outer)
    this.timer = setTimeout(expire, Math.min(timeoutMs, callTimeoutMs), this)
  }

  expire(): void {
    if (this.settled) return
    if (!this.started) {
      this.fail(new InterceptorError(UPSTREAM_TIMEOUT, `no answer within ${this.timeoutMs} ms`))
      return
    }
    const left = this.callTimeoutMs - (performance.now() - this.since)
    if (left > 0) this.timer = setTimeout(expire, left, this)
    else this.fail(new InterceptorError(UPSTREAM_CALL_DEADLINE, `not over within ${this.callTimeoutMs} ms`))
  }

  private fail(error: InterceptorError): void {
    super.onResponseError(this.controller as Controller, error)
    this.controller?.abort(error)
  }

  override onResponseEnd(controller: Controller, trailers: Record<string, string | string[] | undefined>): void {
    clearTimeout(this.timer)
    super.onResponseEnd(controller, trailers)
  }

  override onResponseError(controller: Controller, error: Error): void {
    clearTimeout(this.timer)
    super.onResponseError(controller, error)
  }
}

/** An answer that means the upstream is not available: it counts against the circuit. */
export function isUnavailableStatus(status: number): boolean {
  return status >= 500 || status === 429
}

/**
 * The circuit breaker (opossum keeps the statistics and the state). It counts only what the
 * upstream did (docs/architecture.md §D12): a call is recorded once it is about to leave on a
 * connection, or once it fails in a way that is the upstream's (no connection, a reset, a
 * timeout); it counts as failed when it errs before its answer or is answered 5xx or 429, as a
 * success otherwise. A call undici refused before sending (NOT_SENT_ERRORS) is never recorded:
 * opossum's errorFilter would have counted it a success, which also closes a half-open circuit.
 *
 * While the circuit is open, calls fail at once with EOPENBREAKER and never reach the
 * upstream. Half-open, one call at a time is let through as the trial; which one is decided
 * here, so that a trial refused before sending leaves the circuit half-open for the next.
 */
export function circuitBreaker(breaker: CircuitBreaker<[() => Promise<void>], void>): Interceptor {
  const trials = { inFlight: false }
  return (dispatch: Dispatch) => (options, handler) => {
    let trial = false
    if (!breaker.closed) {
      if (!breaker.halfOpen || !breaker.pendingClose) {
        // Open: opossum refuses the call (never running it) and counts the rejection.
        breaker.fire(() => Promise.resolve()).catch(() => undefined)
        return refuse(handler, new InterceptorError(CIRCUIT_OPEN, 'circuit open'))
      }
      if (trials.inFlight) return refuse(handler, new InterceptorError(CIRCUIT_OPEN, 'circuit half-open: its trial call is in flight'))
      trials.inFlight = trial = true
    }
    return dispatch(options, new BreakerCall(handler, breaker, trials, trial))
  }
}

type Verdict = { resolve: () => void; reject: (error: Error) => void }

/** One call as the breaker sees it. */
class BreakerCall extends Forward {
  private verdict: Verdict | undefined
  private recorded = false

  constructor(
    outer: Handler,
    private readonly breaker: CircuitBreaker<[() => Promise<void>], void>,
    private readonly trials: { inFlight: boolean },
    private trial: boolean,
  ) {
    super(outer)
  }

  private record(): Verdict | undefined {
    if (this.recorded) return this.verdict
    this.recorded = true
    // Admitted while closed, but the circuit opened meanwhile: no longer the breaker's to count.
    if (!this.breaker.closed && !this.trial) return undefined
    this.breaker.fire(() => new Promise<void>((resolve, reject) => { this.verdict = { resolve, reject } })).catch(() => undefined)
    return this.verdict
  }

  private settled(): void {
    if (this.trial) this.trials.inFlight = this.trial = false
  }

  override onRequestStart(controller: Controller, context: unknown): void {
    // The request is about to leave: what follows is the upstream's doing.
    this.record()
    this.outer.onRequestStart?.(controller, context)
  }

  override onResponseStart(controller: Controller, statusCode: number, headers: Record<string, string | string[] | undefined>, message?: string): void {
    const outcome = this.record()
    if (isUnavailableStatus(statusCode)) outcome?.reject(new InterceptorError('UPSTREAM_STATUS', `answered ${statusCode}`))
    else outcome?.resolve()
    this.settled()
    this.outer.onResponseStart?.(controller, statusCode, headers, message)
  }

  override onResponseError(controller: Controller, error: Error): void {
    const code = errorCode(error)
    if (this.recorded || code === undefined || !NOT_SENT_ERRORS.has(code)) this.record()?.reject(error)
    this.settled()
    this.outer.onResponseError?.(controller, error)
  }
}

/** What the in-flight bound counts; /status shows it. */
export interface InFlight {
  inFlight: number
  /** Calls in flight per credential, for the credentials that have any. */
  readonly byCredential: Map<string, number>
}

/**
 * At most `max` calls in flight, and at most `perCredential` of them for one credential (the
 * value of `credentialHeader` in the call's headers; calls without it have no share). Over the
 * share, a call fails at once with CREDENTIAL_SHARE_FULL; over the bound, with
 * UPSTREAM_OVERLOADED: one caller cannot fill the bound alone (docs/architecture.md §D13). Both
 * are released the moment the call ends, is cut or fails.
 */
export function inFlightLimit(max: number, counter: InFlight, share?: { perCredential: number; credentialHeader: string }): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    const credential = share === undefined ? undefined : credentialOf(options.headers, share.credentialHeader)
    const held = credential === undefined ? 0 : counter.byCredential.get(credential) ?? 0
    if (share !== undefined && credential !== undefined && held >= share.perCredential) {
      return refuse(handler, new InterceptorError(CREDENTIAL_SHARE_FULL, `${held} calls of one credential in flight`))
    }
    if (counter.inFlight >= max) return refuse(handler, new InterceptorError(UPSTREAM_OVERLOADED, `${counter.inFlight} calls in flight`))
    counter.inFlight += 1
    if (credential !== undefined) counter.byCredential.set(credential, held + 1)
    return dispatch(options, new BoundedCall(handler, counter, credential))
  }
}

/** One call holding its place in the bound (and its credential's share) until it ends, is cut or fails. */
class BoundedCall extends Forward {
  private released = false

  constructor(outer: Handler, private readonly counter: InFlight, private readonly credential: string | undefined) {
    super(outer)
  }

  private release(): void {
    if (this.released) return
    this.released = true
    const counter = this.counter
    counter.inFlight -= 1
    const credential = this.credential
    if (credential === undefined) return
    const left = (counter.byCredential.get(credential) ?? 1) - 1
    if (left === 0) counter.byCredential.delete(credential)
    else counter.byCredential.set(credential, left)
  }

  override onResponseEnd(controller: Controller, trailers: Record<string, string | string[] | undefined>): void {
    this.release()
    this.outer.onResponseEnd?.(controller, trailers)
  }

  override onResponseError(controller: Controller, error: Error): void {
    this.release()
    this.outer.onResponseError?.(controller, error)
  }
}

/** A header of a call's (an object, as the gateway's callers give them), or undefined. */
function credentialOf(headers: Dispatcher.DispatchOptions['headers'], name: string): string | undefined {
  if (headers === null || headers === undefined || Array.isArray(headers) || typeof (headers as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function') return undefined
  const value = (headers as Record<string, unknown>)[name]
  return typeof value === 'string' ? value : undefined
}
