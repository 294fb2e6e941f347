import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import { BODY_METHODS, DEFAULT_BODY_BYTES, type RoutePolicy } from '../routes/policy.js'

// Step 3 (end) of decisions 1 and routes.md: whether the request may carry a body, judged
// from its framing headers. A body a route takes is read later, by its content parser, which
// runs after the key is checked; a route's methods without a body refuse one.

function tooLarge(limit: number): ApiError {
  return new ApiError('PAYLOAD_TOO_LARGE', `The request body exceeds ${limit} bytes.`)
}

function unexpected(): ApiError {
  return new ApiError('UNEXPECTED_BODY', 'This endpoint takes no request body; send parameters in the query string.')
}

const JSON_MEDIA_TYPE = 'application/json'

/** Step 3 (end) for a route: what its body methods may send, and nothing on the others. */
export function bodyStage(policy: RoutePolicy) {
  const limit = policy.body === 'none' ? undefined : policy.body.maxBytes
  return function checkBody(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
    if (limit === undefined || !BODY_METHODS.has(request.method)) return refuseBody(request, reply, done)
    const length = request.headers['content-length']
    const chunked = request.headers['transfer-encoding'] !== undefined
    if (!chunked && (length === undefined || length === '0')) return done()
    const type = request.headers['content-type']
    const media = (type ?? '').split(';')[0]?.trim().toLowerCase()
    if (media !== JSON_MEDIA_TYPE) {
      return done(new ApiError('UNSUPPORTED_MEDIA_TYPE', `Request bodies must be ${JSON_MEDIA_TYPE}; the Content-Type was ${type === undefined ? 'missing' : `'${type}'`}.`))
    }
    if (!chunked && Number(length) > limit) {
      // Reading on would mean taking in what we refuse; close the connection instead.
      reply.header('connection', 'close')
      return done(tooLarge(limit))
    }
    done()
  }
}

/** A request that may carry no body. Fastify does not read bodies of GET and HEAD, so the framing headers tell. */
function refuseBody(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
  const length = request.headers['content-length']
  const chunked = request.headers['transfer-encoding'] !== undefined
  if (!chunked) {
    if (length === undefined || length === '0') return done()
    const bytes = Number(length)
    if (bytes > DEFAULT_BODY_BYTES) {
      reply.header('connection', 'close')
      return done(tooLarge(DEFAULT_BODY_BYTES))
    }
    return done(bytes > 0 ? unexpected() : undefined)
  }
  // Chunked: only reading tells whether the body is empty.
  let received = 0
  const raw = request.raw
  const finish = (error?: Error): void => {
    raw.removeListener('data', onData)
    raw.removeListener('end', onEnd)
    raw.removeListener('error', onError)
    done(error)
  }
  const onData = (chunk: Buffer): void => {
    received += chunk.length
    if (received > DEFAULT_BODY_BYTES) {
      raw.pause()
      reply.header('connection', 'close')
      finish(tooLarge(DEFAULT_BODY_BYTES))
    }
  }
  const onEnd = (): void => finish(received > 0 ? unexpected() : undefined)
  const onError = (): void => finish(new ApiError('MALFORMED_REQUEST', 'The request body could not be read.'))
  raw.on('data', onData)
  raw.on('end', onEnd)
  raw.on('error', onError)
}
