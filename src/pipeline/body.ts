import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'

// Step 3 (end) of decisions 1: endpoints that take no body refuse one. Fastify does not
// read bodies of GET and HEAD, so the framing headers tell: a Content-Length above zero, or
// a chunked body that turns out to hold bytes.

export const BODY_LIMIT = 1024 * 1024

function tooLarge(): ApiError {
  return new ApiError('PAYLOAD_TOO_LARGE', `The request body exceeds ${BODY_LIMIT} bytes.`)
}

function unexpected(): ApiError {
  return new ApiError('UNEXPECTED_BODY', 'This endpoint takes no request body; send parameters in the query string.')
}

/** Step 3 (end) for a route that takes no body. */
export function bodyStage(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
  const length = request.headers['content-length']
  const chunked = request.headers['transfer-encoding'] !== undefined
  if (!chunked) {
    if (length === undefined || length === '0') return done()
    const bytes = Number(length)
    if (bytes > BODY_LIMIT) {
      // Reading on would mean taking in what we refuse; close the connection instead.
      reply.header('connection', 'close')
      return done(tooLarge())
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
    if (received > BODY_LIMIT) {
      raw.pause()
      reply.header('connection', 'close')
      finish(tooLarge())
    }
  }
  const onEnd = (): void => finish(received > 0 ? unexpected() : undefined)
  const onError = (): void => finish(new ApiError('MALFORMED_REQUEST', 'The request body could not be read.'))
  raw.on('data', onData)
  raw.on('end', onEnd)
  raw.on('error', onError)
}
