import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import { BODY_METHODS, DEFAULT_BODY_BYTES, type RoutePolicy } from '../routes/policy.js'

// Step 3 (end) of the order of checks (docs/architecture.md, "Order of checks"): whether the
// request may carry a body, judged from its framing headers. A body a route takes is read
// later, by its content parser, which runs after the key is checked; a route's methods without
// a body refuse one.

function tooLarge(limit: number): ApiError {
  return new ApiError('PAYLOAD_TOO_LARGE', `The request body exceeds ${limit} bytes.`)
}

function unexpected(): ApiError {
  return new ApiError('UNEXPECTED_BODY', 'This endpoint takes no request body; send parameters in the query string.')
}

const JSON_MEDIA_TYPE = 'application/json'
/** application/json with no parameter or `charset=utf-8` (any case, quoted or not): the only body a service receives. */
const UTF8_JSON = /^application\/json[ \t]*(?:;[ \t]*charset[ \t]*=[ \t]*(?:utf-8|"utf-8")[ \t]*)?$/i

/** Step 3 (end) for a route: what its body methods may send, and nothing on the others. */
export function bodyStage(policy: RoutePolicy) {
  const limit = policy.body === 'none' ? undefined : policy.body.maxBytes
  return function checkBody(request: FastifyRequest, reply: FastifyReply): void {
    if (limit === undefined || !BODY_METHODS.has(request.method)) return refuseBody(request, reply)
    const length = request.headers['content-length']
    const chunked = request.headers['transfer-encoding'] !== undefined
    const empty = !chunked && (length === undefined || length === '0')
    const type = request.headers['content-type']
    // No body and no type: the service gets the call with no body. A type is held to the rule
    // even on an empty body: the service would otherwise receive it as JSON.
    if (empty && type === undefined) return
    const media = (type ?? '').split(';')[0]?.trim().toLowerCase()
    if (media !== JSON_MEDIA_TYPE) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Request bodies must be ${JSON_MEDIA_TYPE}; the Content-Type was ${type === undefined ? 'missing' : `'${quoteInput(type)}'`}.`)
    }
    // Another charset (utf-7, latin1) or parameter would reach the service as the partner wrote it.
    if (!UTF8_JSON.test(type as string)) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Request bodies must be ${JSON_MEDIA_TYPE} in UTF-8, with no parameter but charset=utf-8; the Content-Type was '${quoteInput(type as string)}'.`)
    }
    if (!chunked && Number(length) > limit) {
      // Reading on would mean taking in what we refuse; close the connection instead.
      reply.header('connection', 'close')
      throw tooLarge(limit)
    }
  }
}

/**
 * A request that may carry no body. Fastify does not read bodies of GET and HEAD, so the
 * framing headers tell. A chunked one is refused at once, unread (docs/security.md, "Slow
 * clients"): waiting for its end would let a client hold the connection open before any key is
 * checked. Its connection closes, since the unread body cannot be told from the next request.
 */
function refuseBody(request: FastifyRequest, reply: FastifyReply): void {
  if (request.headers['transfer-encoding'] !== undefined) {
    reply.header('connection', 'close')
    throw unexpected()
  }
  const length = request.headers['content-length']
  if (length === undefined || length === '0') return
  const bytes = Number(length)
  if (bytes > DEFAULT_BODY_BYTES) {
    reply.header('connection', 'close')
    throw tooLarge(DEFAULT_BODY_BYTES)
  }
  if (bytes > 0) throw unexpected()
}
