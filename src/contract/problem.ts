import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, errorCatalog, kebabCode, type ErrorCode, type FieldError } from './errors.js'
import { COMMON_HEADERS, HEADER_REQUEST_ID } from './headers.js'

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8'

/** RFC 9457 body; every field always present (contract 2.6). */
export interface ProblemDetails {
  type: string
  title: string
  status: number
  detail: string
  moreInfo: string
  instance: string
  code: ErrorCode
  errors: FieldError[]
  requestId: string
  timestamp: string
}

export function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

export function buildProblem(error: ApiError, docsUrl: string, instance: string, requestId: string): ProblemDetails {
  const spec = errorCatalog[error.code]
  return {
    type: `${docsUrl}/errors/${kebabCode(error.code)}`,
    title: spec.title,
    status: spec.status,
    detail: error.detail,
    moreInfo: spec.tip,
    instance,
    code: error.code,
    errors: error.errors,
    requestId,
    timestamp: new Date().toISOString(),
  }
}

/**
 * Sends `error` as problem+json. Self-sufficient on purpose: it also runs for requests
 * that never reached the pipeline's hooks (framework errors), so it sets the headers
 * every response carries itself.
 */
export function sendProblem(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  const docsUrl = request.brand?.docsUrl ?? request.server.gatewayConfig.docsUrl
  request.errorCode = error.code
  reply.code(error.status)
  reply.headers(COMMON_HEADERS)
  reply.header(HEADER_REQUEST_ID, request.id)
  // A correlation id is echoed on successes only (decisions 2).
  reply.removeHeader('service-correlation-id')
  if (error.headers !== undefined) reply.headers(error.headers)
  if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter))
  reply.type(PROBLEM_CONTENT_TYPE)
  const body = JSON.stringify(buildProblem(error, docsUrl, pathOf(request.url), request.id))
  // Fastify's own HEAD routes drop the body; a HEAD that matched no route is ours to trim,
  // keeping the length GET would have had (RFC 9110 9.3.2).
  // (Requests Fastify builds for framework errors lack our decorations: undefined, not null.)
  if (request.method === 'HEAD' && (request.routeUrl ?? null) === null) {
    reply.header('content-length', String(Buffer.byteLength(body)))
    return reply.send()
  }
  return reply.send(body)
}
