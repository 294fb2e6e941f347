import type CircuitBreaker from 'opossum'
import type { Dispatcher } from 'undici'

// The resilience of every upstream call, as undici interceptors composed onto its pool
// (`pool.compose(...)`, innermost first): the PMS client and every declared service get the
// same timeout, retry, circuit breaker and in-flight bound. Each failure they add carries a
// stable `code`; callers branch on it (upstream/errors.ts), never on a message.

type Handler = Dispatcher.DispatchHandler
type Controller = Dispatcher.DispatchController
type Dispatch = Dispatcher['dispatch']
export type Interceptor = Dispatcher.DispatcherComposeInterceptor

export const UPSTREAM_TIMEOUT = 'UPSTREAM_TIMEOUT'
export const UPSTREAM_OVERLOADED = 'UPSTREAM_OVERLOADED'
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

function errorCode(error: unknown): string | undefined {
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
 * body that is a stream cannot be sent twice and is never retried.
 */
export function retryConnectionErrors(retries: number, methods: ReadonlySet<string>): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    const retryable = retries > 0 && methods.has(options.method) && !isStream(options.body)
    if (!retryable) return dispatch(options, handler)
    let attempt = 0
    let aborted: Error | undefined
    let current: Controller | undefined
    // Once an answer has begun, its bytes may be on their way to a partner: never again.
    let answered = false
    // What the caller holds across attempts: aborting it aborts whichever attempt is running.
    const outer = {
      abort: (reason: Error) => {
        aborted = reason
        current?.abort(reason)
      },
      pause: () => current?.pause(),
      resume: () => current?.resume(),
      get aborted() { return aborted !== undefined },
      get paused() { return current?.paused ?? false },
      get reason() { return aborted ?? null },
    } as unknown as Controller
    const send = (): boolean => dispatch(options, {
      onRequestStart: (controller, context) => {
        current = controller
        if (aborted !== undefined) controller.abort(aborted)
        else if (attempt === 0) handler.onRequestStart?.(outer, context)
      },
      onResponseStart: (controller, statusCode, headers, statusMessage) => {
        answered = true
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
      },
      onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
      onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
      onResponseError: (controller, error) => {
        const code = errorCode(error)
        if (!answered && aborted === undefined && attempt < retries && code !== undefined && CONNECTION_ERRORS.has(code)) {
          attempt += 1
          send()
          return
        }
        handler.onResponseError?.(controller, error)
      },
    })
    return send()
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
 * A deadline from the call to its answer's headers (with `buffered` below it: to the end of
 * its body). Past it the call is aborted and fails with UPSTREAM_TIMEOUT.
 */
export function deadline(timeoutMs: number): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    const relay = new Relay(handler)
    const timer = setTimeout(() => {
      if (relay.started || relay.settled) return
      const error = new InterceptorError(UPSTREAM_TIMEOUT, `no answer within ${timeoutMs} ms`)
      relay.onResponseError(relay.controller as Controller, error)
      relay.controller?.abort(error)
    }, timeoutMs)
    const clear = (): void => clearTimeout(timer)
    return dispatch(options, {
      onRequestStart: (controller, context) => relay.onRequestStart(controller, context),
      onResponseStart: (controller, statusCode, headers, message) => {
        clear()
        relay.onResponseStart(controller, statusCode, headers, message)
      },
      onResponseData: (controller, chunk) => relay.onResponseData(controller, chunk),
      onResponseEnd: (controller, trailers) => {
        clear()
        relay.onResponseEnd(controller, trailers)
      },
      onResponseError: (controller, error) => {
        clear()
        relay.onResponseError(controller, error)
      },
    })
  }
}

/** An answer that means the upstream is not available: it counts against the circuit. */
export function isUnavailableStatus(status: number): boolean {
  return status >= 500 || status === 429
}

/**
 * The circuit breaker (opossum keeps the statistics). A call counts as failed when it errs
 * before its answer or is answered 5xx or 429; any other answer counts as a success. While
 * the circuit is open, calls fail at once with EOPENBREAKER and never reach the upstream.
 */
export function circuitBreaker(breaker: CircuitBreaker<[() => Promise<void>], void>): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    let settle: { resolve: () => void; reject: (error: Error) => void } | undefined
    const outcome = breaker.fire(() => new Promise<void>((resolve, reject) => {
      settle = { resolve, reject }
    }))
    let refused: Error | undefined
    outcome.catch((error: unknown) => {
      if (errorCode(error) === CIRCUIT_OPEN) refused = error as Error
    })
    // opossum calls the action synchronously when it lets the call through.
    if (settle === undefined) return refuse(handler, refused ?? new InterceptorError(CIRCUIT_OPEN, 'circuit open'))
    const verdict = settle
    return dispatch(options, {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onResponseStart: (controller, statusCode, headers, message) => {
        if (isUnavailableStatus(statusCode)) verdict.reject(new InterceptorError('UPSTREAM_STATUS', `answered ${statusCode}`))
        else verdict.resolve()
        handler.onResponseStart?.(controller, statusCode, headers, message)
      },
      onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
      onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
      onResponseError: (controller, error) => {
        verdict.reject(error)
        handler.onResponseError?.(controller, error)
      },
    })
  }
}

/** At most `max` calls in flight; more fail at once with UPSTREAM_OVERLOADED. */
export function inFlightLimit(max: number, counter: { inFlight: number }): Interceptor {
  return (dispatch: Dispatch) => (options, handler) => {
    if (counter.inFlight >= max) return refuse(handler, new InterceptorError(UPSTREAM_OVERLOADED, `${counter.inFlight} calls in flight`))
    counter.inFlight += 1
    let released = false
    const release = (): void => {
      if (!released) counter.inFlight -= 1
      released = true
    }
    return dispatch(options, {
      onRequestStart: (controller, context) => handler.onRequestStart?.(controller, context),
      onResponseStart: (controller, statusCode, headers, message) => handler.onResponseStart?.(controller, statusCode, headers, message),
      onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
      onResponseEnd: (controller, trailers) => {
        release()
        handler.onResponseEnd?.(controller, trailers)
      },
      onResponseError: (controller, error) => {
        release()
        handler.onResponseError?.(controller, error)
      },
    })
  }
}
