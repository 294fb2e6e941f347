import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Context, type Span, type SpanContext, type Tracer } from '@opentelemetry/api'
import { TraceState } from '@opentelemetry/core'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, ParentBasedSampler, RandomIdGenerator, SamplingDecision, type IdGenerator, type Sampler,
  type SamplingResult,
} from '@opentelemetry/sdk-trace-base'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { hostname } from 'node:os'
import { normaliseHost } from '../http/config.js'
import type { SamplerName, TracingSettings } from './config.js'
import { parseTraceparent, type TraceContext } from '../http/trace.js'
import type { Interceptor } from '../upstream/interceptors.js'
import { VERSION } from '../version.js'
import { clientSpans, spanName } from './client-spans.js'
import { BoundedBatchProcessor, CountingExporter, type ExportObserver } from './export.js'

// OpenTelemetry traces (docs/operations.md, "Tracing"): one server span per request, made by
// hand in the request's first and last hooks, and one client span per upstream call, made by an
// interceptor of the upstream's pool. No AsyncLocalStorage and no auto-instrumentation: the
// request object carries its span, and the `traceparent` header of an upstream call carries its
// parent. Built only when an endpoint is configured; otherwise there is no tracer at all and
// the hooks are the ones without tracing.

/** The last spans get this long to leave on close; an unreachable collector never holds up a shutdown. */
const CLOSE_FLUSH_MS = 2000

/**
 * Trace ids as the SDK asks for them, except that a new trace takes the id the request
 * already has (from the caller's traceparent, or the fresh one its log line carries), so the
 * span, the log line and every upstream share one trace id.
 */
class RequestIdGenerator implements IdGenerator {
  private readonly random = new RandomIdGenerator()
  /** Set just before a server span starts a trace; taken once. */
  nextTraceId: string | undefined

  generateTraceId(): string {
    const given = this.nextTraceId
    this.nextTraceId = undefined
    return given ?? this.random.generateTraceId()
  }

  generateSpanId(): string {
    return this.random.generateSpanId()
  }
}

/**
 * The trace-id ratio sampler: keeps a trace when the rightmost 48 bits of its id, read as a
 * fraction of 2^48, fall below the ratio. Those bits are random in a W3C trace id (level 2
 * makes the rightmost 7 bytes the random part) and in the ids the gateway makes; the same id
 * always gets the same decision (docs/architecture.md §D19). The SDK's own ratio sampler
 * folds all 128 bits together one character at a time, a fifth of an unsampled request's
 * tracing cost.
 */
export class RatioSampler implements Sampler {
  private readonly bound: number

  constructor(private readonly ratio: number) {
    this.bound = Math.max(0, Math.min(1, ratio)) * 2 ** 48
  }

  shouldSample(_context: Context, traceId: string): SamplingResult {
    const low = Number.parseInt(traceId.slice(20), 16)
    return { decision: low < this.bound ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD }
  }

  toString(): string {
    return `RatioSampler{${this.ratio}}`
  }
}

export function samplerOf(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'traceidratio': return new RatioSampler(ratio)
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new RatioSampler(ratio) })
  }
}

/** The span a valid `traceparent` names, as a remote parent or a link; undefined for anything else. */
export function remoteContext(traceparent: string | undefined): SpanContext | undefined {
  const parsed = parseTraceparent(traceparent)
  if (parsed === undefined) return undefined
  return { traceId: parsed.traceId, spanId: parsed.parentId as string, traceFlags: Number.parseInt(parsed.flags, 16), isRemote: true }
}

export class Tracing {
  private readonly ids = new RequestIdGenerator()
  private readonly provider: BasicTracerProvider
  private readonly tracer: Tracer

  constructor(readonly settings: TracingSettings, observer: ExportObserver) {
    const exporterOptions = { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs }
    const exporter = new CountingExporter(
      settings.protocol === 'http/json' ? new JsonExporter(exporterOptions) : new ProtobufExporter(exporterOptions),
      observer,
    )
    this.provider = new BasicTracerProvider({
      // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES (as the SDK specification has it).
      resource: resourceFromAttributes({
        ...settings.resourceAttributes,
        'service.name': settings.serviceName,
        'service.version': VERSION,
        'host.name': hostname(),
        'process.pid': process.pid,
      }),
      sampler: samplerOf(settings.sampler, settings.ratio),
      idGenerator: this.ids,
      spanProcessors: [new BoundedBatchProcessor(exporter, settings.batch, observer)],
    })
    this.tracer = this.provider.getTracer('partner-gateway', VERSION)
  }

  /**
   * Starts the request's server span: the caller's traceparent is its parent, or it starts
   * the request's own fresh trace. From then on the request's trace names this span as the
   * parent of its upstream calls, and carries its sampled flag.
   */
  startServerSpan(request: FastifyRequest): void {
    const context = request.trace as TraceContext
    let parent: Context = ROOT_CONTEXT
    if (context.parentId === undefined) {
      this.ids.nextTraceId = context.traceId
    } else {
      parent = trace.setSpanContext(ROOT_CONTEXT, {
        traceId: context.traceId,
        spanId: context.parentId,
        traceFlags: Number.parseInt(context.flags, 16),
        isRemote: true,
        ...(context.tracestate === undefined ? {} : { traceState: new TraceState(context.tracestate) }),
      })
    }
    const method = request.method
    const span = this.tracer.startSpan(spanName(method), { kind: SpanKind.SERVER }, parent)
    this.ids.nextTraceId = undefined
    const own = span.spanContext()
    context.spanId = own.spanId
    context.flags = (own.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'
    request.span = span
    if (!span.isRecording()) return
    // The stable HTTP server conventions; never the path or the query string (either may carry
    // what a span must not: an email address, a key pasted into the path) but the route's
    // template, at the end; never a header but the User-Agent.
    span.setAttribute('http.request.method', spanName(method) === method ? method : '_OTHER')
    if (spanName(method) !== method) span.setAttribute('http.request.method_original', method)
    span.setAttribute('url.scheme', request.protocol)
    span.setAttribute('client.address', request.ip)
    const agent = request.headers['user-agent']
    if (typeof agent === 'string') span.setAttribute('user_agent.original', agent)
    // What the partner quotes to support: the answer's Service-Request-Id.
    span.setAttribute('gateway.request_id', request.id)
  }

  /** Ends the request's server span with what was answered. */
  endServerSpan(request: FastifyRequest, reply: FastifyReply): void {
    const span = request.span as Span
    if (span.isRecording()) {
      // A partner that went away before any answer was written got none: no status to record.
      const status = reply.raw.headersSent ? reply.statusCode : 0
      // A declared route by its declared path, a built-in one as `/v1/properties/{propertyId}`.
      const route = request.routeUrl === null ? undefined : request.routeOptions.config.policy?.path
      if (route !== undefined) {
        span.updateName(`${spanName(request.method)} ${route}`)
        span.setAttribute('http.route', route)
      }
      if (status !== 0) span.setAttribute('http.response.status_code', status)
      if (status >= 400) span.setAttribute('error.type', request.errorCode ?? String(status))
      // A 4xx is the caller's mistake, not a failure of the server (HTTP semantic conventions).
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
      // The host only when it is one of a brand's: the Host header is the partner's to write.
      if (request.brand !== null) {
        span.setAttribute('server.address', normaliseHost(request.host))
        span.setAttribute('gateway.brand', request.brand.id)
      }
      if (request.principal !== null) span.setAttribute('gateway.credential_id', request.principal.keyId)
      if (request.cacheResult !== null) span.setAttribute('gateway.cache', request.cacheResult)
    }
    span.end()
  }

  /** The interceptor that makes a client span of each call to `upstream` (each attempt, retries included). */
  clientSpans(upstream: string): Interceptor {
    return clientSpans(this.tracer, upstream)
  }

  /**
   * A server span of work outside the public pipeline (the ingest of events on the admin
   * port): a child of the caller's `traceparent` when it sent a valid one, else the root of a
   * new trace. The caller sets its attributes and ends it.
   */
  startSpan(name: string, traceparent: string | undefined): Span {
    const parent = remoteContext(traceparent)
    return this.tracer.startSpan(name, { kind: SpanKind.SERVER }, parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent))
  }

  /**
   * A client span of one webhook delivery attempt: the root of its own trace (an attempt may
   * come hours after the event), linked to the trace the publisher sent the event with, when it
   * sent one. The caller sets its attributes and ends it.
   */
  startLinkedClientSpan(name: string, traceparent: string | undefined): Span {
    const linked = remoteContext(traceparent)
    return this.tracer.startSpan(name, { kind: SpanKind.CLIENT, root: true, links: linked === undefined ? [] : [{ context: linked }] }, ROOT_CONTEXT)
  }

  /** Exports what is left, for at most CLOSE_FLUSH_MS, and stops. */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      this.provider.shutdown().catch(() => undefined),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, CLOSE_FLUSH_MS)
      }),
    ])
    clearTimeout(timer)
  }
}
