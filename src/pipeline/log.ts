import type { FastifyReply, FastifyRequest } from 'fastify'
import { hostname } from 'node:os'
import pino, { type Logger } from 'pino'
import type { Metrics } from '../admin/metrics.js'
import type { ErrorCode } from '../contract/errors.js'
import type { UsageRecorder } from '../credentials/usage.js'
import { entryOf } from '../request-log/entry.js'
import type { RequestLogWriter } from '../request-log/writer.js'
import { REQUEST_LOG_PATHS, type RoutePolicy } from '../routes/policy.js'
import type { Tracing } from '../tracing/tracing.js'
import { maybeQuoted, maybeQuotedPlain, quoted, roundedText } from '../json-string.js'

// After every response: one log line (docs/operations.md, "Logs"), the request metrics and,
// when tracing is on, the end of the request's server span. None ever sees a key. The line is
// the one pino would write (level, time, pid, hostname, the fields, msg), written by hand for
// its fixed fields and to the logger's own destination: pino's generic serialiser, which walks
// every field of every line, was a tenth of a cached request's CPU, and a compiled serialiser
// (fast-json-stringify) still checked each field's type at run time (docs/performance.md).

/** The line, ending in a newline: the fields in the order pino's line has them. */
export function serializeLine(line: RequestLine): string {
  // The host's name quoted once; a trace id is hex; the durations are whole thousandths (roundedText).
  return `{"level":"info","time":${line.time},"pid":${line.pid},"hostname":${line.hostname === HOSTNAME ? HOSTNAME_JSON : quoted(line.hostname)},"reqId":${quoted(line.reqId)}`
    + `,"traceId":${maybeQuotedPlain(line.traceId)},"clientIp":${maybeQuoted(line.clientIp)},"method":${quoted(line.method)}`
    + `,"route":${maybeQuoted(line.route)},"status":${line.status},"code":${maybeQuoted(line.code)},"durationMs":${roundedText(line.durationMs, 3)}`
    + `,"correlationId":${maybeQuoted(line.correlationId)},"keyId":${maybeQuoted(line.keyId)},"brand":${maybeQuoted(line.brand)}`
    + `,"upstream":${maybeQuoted(line.upstream)},"upstreamStatus":${line.upstreamStatus ?? 'null'},"upstreamMs":${line.upstreamMs === null ? 'null' : roundedText(line.upstreamMs, 3)}`
    + `,"upstreamCut":${maybeQuoted(line.upstreamCut)},"cache":${maybeQuoted(line.cache)},"idempotency":${maybeQuoted(line.idempotency)},"msg":"request"}\n`
}

export interface RequestLine {
  level: 'info'
  time: number
  pid: number
  hostname: string
  reqId: string
  traceId: string | null
  clientIp: string | null
  method: string
  route: string | null
  status: number
  code: string | null
  durationMs: number
  correlationId: string | null
  keyId: string | null
  brand: string | null
  upstream: string | null
  upstreamStatus: number | null
  upstreamMs: number | null
  upstreamCut: string | null
  cache: string | null
  /** What the Idempotency-Key's record did (stored, replayed, in_use, reused, released). */
  idempotency: string | null
  msg: 'request'
}

const PID = process.pid
const HOSTNAME = hostname()
const HOSTNAME_JSON = quoted(HOSTNAME)

const AUTH_FAILURES = new Set<ErrorCode>([
  'MISSING_AUTH_HEADER', 'INVALID_AUTH_HEADER', 'INVALID_API_KEY', 'API_KEY_EXPIRED', 'API_KEY_SUSPENDED', 'BRAND_ACCESS_DENIED',
  'INVALID_ACCESS_TOKEN', 'ACCESS_TOKEN_EXPIRED', 'CLIENT_NOT_REGISTERED', 'CLIENT_SUSPENDED', 'INSUFFICIENT_SCOPE',
])

/**
 * The status logged and counted for a request whose partner went away before any answer was
 * written: nginx's 499 ("client closed request"), which operators' tools already know. A
 * partner never receives it.
 */
export const PARTNER_CLOSED_STATUS = 499

/**
 * `<METHOD> <route template>`, the route of a credential's usage, made once per route and
 * method. A partner route served in the partner portal is counted under the portal's path, so
 * a partner tells its integration's calls from its portal's.
 */
const usageRoutes = new WeakMap<RoutePolicy, Record<string, string>>()

function usageRouteOf(policy: RoutePolicy, method: string, portalPath: string | undefined): string {
  if (portalPath !== undefined) return `${method} ${portalPath}`
  let labels = usageRoutes.get(policy)
  if (labels === undefined) {
    labels = {}
    for (const name of [...policy.methods, 'HEAD']) labels[name] = `${name} ${policy.path}`
    usageRoutes.set(policy, labels)
  }
  return labels[method] ?? `${method} ${policy.path}`
}

export function observeStage(logger: Logger, metrics: Metrics | undefined, tracing?: Tracing, usage?: UsageRecorder, requestLog?: Pick<RequestLogWriter, 'add'>) {
  const destination = (logger as unknown as Record<symbol, { write(line: string): void }>)[pino.symbols.streamSym] as { write(line: string): void }
  return function observe(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    // Once per request, however it ended (docs/operations.md, "Logs"): the answer finished, or
    // the partner went away and the work for it ended since.
    if (request.observed) return done()
    request.observed = true
    const route = request.routeUrl
    const status = reply.raw.headersSent ? reply.statusCode : PARTNER_CLOSED_STATUS
    const code = request.errorCode
    // Read once for the line and the request log's entry: each read of `ip` goes through the
    // socket's getters (and, behind trusted proxies, parses X-Forwarded-For).
    const clientIp = request.ip ?? null
    // Fastify's `elapsedTime` reads the clock at each read: read once, beside the time, for the
    // line, the metrics and the entry, whose arrival is their difference.
    const elapsed = reply.elapsedTime
    const now = Date.now()
    if (logger.isLevelEnabled('info')) {
      destination.write(serializeLine({
        level: 'info',
        time: now,
        pid: PID,
        hostname: HOSTNAME,
        reqId: request.id,
        traceId: request.trace?.traceId ?? null,
        // The client's address (through the proxies `trustProxy` believes): who to block.
        clientIp,
        method: request.method,
        route,
        status,
        code,
        durationMs: Math.round(elapsed * 1000) / 1000,
        correlationId: request.correlationId,
        keyId: request.principal?.keyId ?? null,
        brand: request.brand?.id ?? null,
        upstream: request.upstreamName,
        upstreamStatus: request.upstreamStatus,
        upstreamMs: request.upstreamMs === null ? null : Math.round(request.upstreamMs * 1000) / 1000,
        upstreamCut: request.upstreamCut,
        cache: request.cacheResult,
        idempotency: request.idempotency,
        msg: 'request',
      }))
    }
    if (metrics !== undefined) {
      // Unmatched paths share one label: a scanner must not mint a series per path.
      metrics.request(route ?? 'unmatched', request.method, status, code ?? '', elapsed / 1000)
      if (code !== null && AUTH_FAILURES.has(code)) metrics.authFailure(code)
      if (code === 'RATE_LIMITED') metrics.rateLimited.inc()
    }
    const principal = request.principal
    const counted = usage !== undefined && principal !== null
    const logged = requestLog !== undefined && (principal !== null || request.refusedCredential !== null)
    if (counted || logged) {
      // Read once: Fastify builds `routeOptions` anew at each read, an object of a dozen fields.
      const { policy, portal } = request.routeOptions.config
      // A partner route served in the partner portal is named by the portal's path.
      const portalPath = portal?.kind === 'session' ? portal.path : undefined
      // The credential's usage, once a credential was found (docs/architecture.md, "Usage and
      // last use"): by route template and the status logged, counted in memory.
      if (counted && policy !== undefined) usage.count(principal, usageRouteOf(policy, request.method, portalPath), status)
      // The credential's request log (docs/architecture.md, "The request log"): its entry kept in
      // memory for the next write, once a credential was found or a known one refused; never
      // for the log's own routes, which a partner polling its log would fill.
      if (logged && (policy === undefined || !REQUEST_LOG_PATHS.has(policy.path))) {
        const entry = entryOf(request, elapsed, status, policy === undefined ? null : portalPath ?? policy.path, now, clientIp)
        if (entry !== null) requestLog.add(entry)
      }
    }
    // Set only when tracing is on (the request-context stage started it).
    if (request.span !== null) tracing?.endServerSpan(request, reply)
    done()
  }
}
