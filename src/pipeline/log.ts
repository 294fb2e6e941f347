import type { FastifyReply, FastifyRequest } from 'fastify'

// One line per request (operations, "Logs"); reqId and traceId come from the request's
// logger bindings. The Authorization header and keys are never part of it.

export function logStage(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  request.log.info({
    method: request.method,
    route: request.routeOptions.url ?? null,
    status: reply.statusCode,
    code: request.errorCode,
    durationMs: Math.round(reply.elapsedTime * 1000) / 1000,
    correlationId: request.correlationId,
    keyId: request.principal?.keyId ?? null,
    brand: request.brand?.id ?? null,
    upstreamMs: request.upstreamMs,
    cache: request.cacheResult,
  }, 'request')
  done()
}
