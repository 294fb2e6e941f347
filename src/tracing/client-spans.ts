import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Span, type SpanContext, type Tracer } from '@opentelemetry/api'
import { TraceState } from '@opentelemetry/core'
import type { Dispatcher } from 'undici'
import { parseTraceparent } from '../http/trace.js'
import type { CallOptions, Interceptor } from '../upstream/interceptors.js'

// A client span per upstream call, as an undici interceptor innermost on the upstream's pool,
// so it sees each attempt on the wire (a retry is a span of its own) and nothing that never
// left: a call refused by the breaker or the in-flight bound, a cached or coalesced read. Its
// parent is the span named by the call's own `traceparent` (the request's server span, put
// there by the caller), and the `traceparent` the upstream receives names this span instead.

type Handler = Dispatcher.DispatchHandler
type Controller = Dispatcher.DispatchController
type Headers = Dispatcher.DispatchOptions['headers']

// HTTP semantic conventions: a method outside the registry is `_OTHER`, and its span `HTTP`.
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH', 'QUERY'])

/** A span's name for `method`: the method, or `HTTP` for one outside the registry. */
export function spanName(method: string): string {
  return KNOWN_METHODS.has(method) ? method : 'HTTP'
}

function headerOf(headers: Headers, name: string): string | undefined {
  if (headers === null || headers === undefined) return undefined
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) if (String(headers[i]).toLowerCase() === name) return String(headers[i + 1])
    return undefined
  }
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const [key, value] of headers as Iterable<[string, string | string[] | undefined]>) if (key.toLowerCase() === name && typeof value === 'string') return value
    return undefined
  }
  const value = (headers as Record<string, string | string[] | undefined>)[name]
  return typeof value === 'string' ? value : undefined
}

function withHeader(headers: Headers, name: string, value: string): Record<string, string | string[] | undefined> | string[] {
  if (Array.isArray(headers)) {
    const out: string[] = []
    for (let i = 0; i + 1 < headers.length; i += 2) if (String(headers[i]).toLowerCase() !== name) out.push(String(headers[i]), String(headers[i + 1]))
    out.push(name, value)
    return out
  }
  const out: Record<string, string | string[] | undefined> = {}
  const entries = headers === null || headers === undefined ? []
    : typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function' ? headers as Iterable<[string, string | string[] | undefined]>
      : Object.entries(headers as Record<string, string | string[] | undefined>)
  for (const [key, v] of entries) if (key.toLowerCase() !== name) out[key] = v
  out[name] = value
  return out
}

interface Target { address: string; port: number; origin: string }

function errorType(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === 'string') return code
  const name = (error as { name?: unknown } | null)?.name
  return typeof name === 'string' && name !== 'Error' ? name : '_OTHER'
}

/** Passes every event on and ends the span at the end of the answer or at its failure. */
class ClientSpanHandler implements Handler {
  private ended = false

  constructor(private readonly outer: Handler, private readonly span: Span) {}

  onRequestStart(controller: Controller, context: unknown): void {
    this.outer.onRequestStart?.(controller, context)
  }

  onRequestUpgrade(controller: Controller, statusCode: number, headers: Record<string, string | string[]>, socket: import('node:stream').Duplex): void {
    this.outer.onRequestUpgrade?.(controller, statusCode, headers, socket)
  }

  onResponseStart(controller: Controller, statusCode: number, headers: Record<string, string | string[] | undefined>, statusMessage?: string): void {
    if (!this.ended && this.span.isRecording()) {
      this.span.setAttribute('http.response.status_code', statusCode)
      // For a client span every 4xx and 5xx is an error (HTTP semantic conventions).
      if (statusCode >= 400) {
        this.span.setAttribute('error.type', String(statusCode))
        this.span.setStatus({ code: SpanStatusCode.ERROR })
      }
    }
    this.outer.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    this.outer.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: Controller, trailers: Record<string, string | string[] | undefined>): void {
    this.end()
    this.outer.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: Controller, error: Error): void {
    this.fail(error)
    this.outer.onResponseError?.(controller, error)
  }

  /** Ends the span as failed: its code names the failure, never its message (it may quote the upstream). */
  fail(error: unknown): void {
    if (!this.ended && this.span.isRecording()) {
      this.span.setAttribute('error.type', errorType(error))
      this.span.setStatus({ code: SpanStatusCode.ERROR })
    }
    this.end()
  }

  private end(): void {
    if (this.ended) return
    this.ended = true
    this.span.end()
  }
}

export function clientSpans(tracer: Tracer, upstream: string): Interceptor {
  // The retry interceptor sends the same options again: seen before means a retry.
  const attempts = new WeakSet<object>()
  const targets = new Map<string, Target>()
  const targetOf = (origin: Dispatcher.DispatchOptions['origin']): Target | undefined => {
    const key = typeof origin === 'string' ? origin : origin?.toString()
    if (key === undefined) return undefined
    let target = targets.get(key)
    if (target === undefined) {
      const url = new URL(key)
      target = { address: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)), origin: url.origin }
      targets.set(key, target)
    }
    return target
  }
  return (dispatch) => (options, handler) => {
    const parent = parseTraceparent(headerOf(options.headers, 'traceparent'))
    // Every call the gateway makes for a request carries its traceparent; one without is not traced.
    if (parent === undefined) return dispatch(options, handler)
    const retry = attempts.has(options)
    attempts.add(options)
    const state = headerOf(options.headers, 'tracestate')
    const parentContext: SpanContext = {
      traceId: parent.traceId, spanId: parent.parentId as string, traceFlags: Number.parseInt(parent.flags, 16), isRemote: false,
      ...(state === undefined ? {} : { traceState: new TraceState(state) }),
    }
    const method = options.method
    const span = tracer.startSpan(spanName(method), { kind: SpanKind.CLIENT }, trace.setSpanContext(ROOT_CONTEXT, parentContext))
    if (span.isRecording()) {
      const target = targetOf(options.origin)
      const template = (options as CallOptions).pathTemplate
      span.setAttribute('http.request.method', spanName(method) === method ? method : '_OTHER')
      if (target !== undefined) {
        span.setAttribute('server.address', target.address)
        span.setAttribute('server.port', target.port)
        // The path as its template, never the values in it or the query string: either may
        // carry what a span must not (an email address, a key pasted into a path).
        if (template !== undefined) {
          span.setAttribute('url.full', `${target.origin}${template}`)
          span.setAttribute('url.template', template)
        }
      }
      span.setAttribute('gateway.upstream', upstream)
      if (retry) span.setAttribute('gateway.retry', true)
    }
    const own = span.spanContext()
    const traceparent = `00-${own.traceId}-${own.spanId}-${(own.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'}`
    const spanHandler = new ClientSpanHandler(handler, span)
    try {
      return dispatch({ ...options, headers: withHeader(options.headers, 'traceparent', traceparent) }, spanHandler)
    } catch (error) {
      spanHandler.fail(error)
      throw error
    }
  }
}
