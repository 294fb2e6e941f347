import type { FastifyReply, FastifyRequest } from 'fastify'
import fastJson from 'fast-json-stringify'
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

// The body of every error, serialised by a compiled function (fast-json-stringify) rather
// than JSON.stringify: rejections must be cheap (bench/README.md).
const string = { type: 'string' } as const
/** The JSON schema of a problem body; the serialiser and the OpenAPI document (src/docs) share it. */
export const problemJsonSchema = {
  type: 'object',
  properties: {
    type: string, title: string, status: { type: 'integer' }, detail: string, moreInfo: string, instance: string, code: string,
    errors: {
      type: 'array',
      items: { type: 'object', properties: { field: string, code: string, detail: string }, required: ['field', 'code', 'detail'] },
    },
    requestId: string, timestamp: string,
  },
  required: ['type', 'title', 'status', 'detail', 'moreInfo', 'instance', 'code', 'errors', 'requestId', 'timestamp'],
} as const
export const serializeProblem = fastJson({ ...problemJsonSchema, required: [...problemJsonSchema.required] }) as (problem: ProblemDetails) => string

// `type` links, built once per docs URL and code.
const typeLinks = new Map<string, string>()
function typeLink(docsUrl: string, code: ErrorCode): string {
  const key = `${docsUrl} ${code}`
  let link = typeLinks.get(key)
  if (link === undefined) {
    link = `${docsUrl}/errors/${kebabCode(code)}`
    typeLinks.set(key, link)
  }
  return link
}

export function buildProblem(error: ApiError, docsUrl: string, instance: string, requestId: string): ProblemDetails {
  const spec = errorCatalog[error.code]
  return {
    type: typeLink(docsUrl, error.code),
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
  const body = serializeProblem(buildProblem(error, docsUrl, pathOf(request.url), request.id))
  // Fastify's own HEAD routes drop the body; a HEAD that matched no route is ours to trim,
  // keeping the length GET would have had (RFC 9110 9.3.2).
  // (Requests Fastify builds for framework errors lack our decorations: undefined, not null.)
  if (request.method === 'HEAD' && (request.routeUrl ?? null) === null) {
    reply.header('content-length', String(Buffer.byteLength(body)))
    return reply.send()
  }
  return reply.send(body)
}
