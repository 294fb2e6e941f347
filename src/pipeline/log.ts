import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { Metrics } from '../admin/metrics.js'
import type { ErrorCode } from '../contract/errors.js'

// After every response: one log line (operations, "Logs"), written from the root logger with
// reqId and traceId as fields, and the request metrics. Neither ever sees a key.

const AUTH_FAILURES = new Set<ErrorCode>([
  'MISSING_AUTH_HEADER', 'INVALID_AUTH_HEADER', 'INVALID_API_KEY', 'API_KEY_EXPIRED', 'API_KEY_SUSPENDED', 'BRAND_ACCESS_DENIED',
])

export function observeStage(logger: Logger, metrics: Metrics | undefined) {
  return function observe(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const route = request.routeUrl
    const status = reply.statusCode
    const code = request.errorCode
    // From the root logger: the request's own child is made only when needed (request-logger.ts).
    logger.info({
      reqId: request.id,
      traceId: request.trace?.traceId ?? null,
      method: request.method,
      route,
      status,
      code,
      durationMs: Math.round(reply.elapsedTime * 1000) / 1000,
      correlationId: request.correlationId,
      keyId: request.principal?.keyId ?? null,
      brand: request.brand?.id ?? null,
      upstream: request.upstreamName,
      upstreamStatus: request.upstreamStatus,
      upstreamMs: request.upstreamMs === null ? null : Math.round(request.upstreamMs * 1000) / 1000,
      cache: request.cacheResult,
    }, 'request')
    if (metrics !== undefined) {
      // Unmatched paths share one label: a scanner must not mint a series per path.
      metrics.request(route ?? 'unmatched', request.method, status, code ?? '', reply.elapsedTime / 1000)
      if (code !== null && AUTH_FAILURES.has(code)) metrics.authFailure(code)
      if (code === 'RATE_LIMITED') metrics.rateLimited.inc()
    }
    done()
  }
}
