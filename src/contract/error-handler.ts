import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from './errors.js'
import { sendProblem } from './problem.js'

// Every error leaves through here as complete problem+json: ours, Fastify's own and
// unexpected exceptions. A 500 says nothing of what failed; the log line does.

function fromFramework(error: FastifyError): ApiError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('PAYLOAD_TOO_LARGE', 'The request body is too large.')
    case 'FST_ERR_BAD_URL':
      return new ApiError('MALFORMED_REQUEST', 'The request path is not valid percent-encoding.')
    default:
      if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
        return new ApiError('MALFORMED_REQUEST', 'The request could not be understood.')
      }
      return undefined
  }
}

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error
  if (error !== null && typeof error === 'object' && 'code' in error) {
    const mapped = fromFramework(error as FastifyError)
    if (mapped !== undefined) return mapped
  }
  return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred; it has been logged.', { cause: error })
}

export function errorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const apiError = toApiError(error)
  // A 503 is the PMS's or Redis's trouble, expected in bursts; a 500 is ours to fix.
  if (apiError.status === 503) request.log.warn({ err: apiError.cause ?? apiError, code: apiError.code }, 'request failed')
  else if (apiError.status >= 500) request.log.error({ err: apiError.cause ?? apiError, code: apiError.code }, 'request failed')
  return sendProblem(request, reply, apiError)
}
