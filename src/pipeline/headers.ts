import type { FastifyContextConfig, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, type FieldError } from '../contract/errors.js'
import { HEADER_CORRELATION_ID, HEADER_PROPERTY_ID } from '../contract/headers.js'

// Step 3 of decisions 1: the request headers an endpoint requires or refuses.

const USER_AGENT = /^[\x20-\x7E]{3,255}$/

/** Step 3 for an authenticated route. */
export function headerStage(config: FastifyContextConfig) {
  const takesPropertyHeader = config.takesPropertyHeader === true
  return function checkHeaders(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
    const headers = request.headers
    const userAgent = headers['user-agent']
    if (userAgent === undefined) {
      return done(new ApiError('MISSING_REQUIRED_HEADER', 'The User-Agent header is required.', {
        errors: [{ field: 'User-Agent', code: 'REQUIRED', detail: 'Send a User-Agent naming your integration, e.g. acme-channel-sync/2.3.' }],
      }))
    }
    const invalid: FieldError[] = []
    if (!USER_AGENT.test(userAgent)) {
      invalid.push({ field: 'User-Agent', code: 'INVALID_FORMAT', detail: 'Must be 3 to 255 printable ASCII characters.' })
    }
    const correlation = headers[HEADER_CORRELATION_ID]
    if (correlation !== undefined && request.correlationId === null) {
      invalid.push({ field: 'Service-Correlation-Id', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ = + / -.' })
    }
    if (invalid.length > 0) {
      return done(new ApiError('INVALID_HEADER', `Invalid ${invalid.map((e) => e.field).join(' and ')} header.`, { errors: invalid }))
    }
    if (headers[HEADER_PROPERTY_ID] !== undefined && !takesPropertyHeader) {
      return done(new ApiError('HEADER_NOT_ALLOWED', 'This endpoint takes no Service-Property-Id header.', {
        errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
      }))
    }
    done()
  }
}
