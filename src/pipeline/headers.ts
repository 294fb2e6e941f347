import type { FastifyRequest } from 'fastify'
import { ApiError, type FieldError } from '../contract/errors.js'
import { HEADER_CORRELATION_ID, HEADER_PROPERTY_ID } from '../contract/headers.js'
import type { Scope } from '../routes/policy.js'

// Step 3 of decisions 1 (and routes.md): the request headers a route requires or refuses.
// `Service-Property-Id` is required on property-scoped routes and refused on brand-wide ones.

export const USER_AGENT = /^[\x20-\x7E]{3,255}$/
export const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

function listed(fields: string[]): string {
  return fields.join(' and ')
}

/** Step 3 for a route that takes a key, with its scope. */
export function headerStage(scope: Scope) {
  const needsProperty = scope === 'property'
  return function checkHeaders(request: FastifyRequest): void {
    const headers = request.headers
    const userAgent = headers['user-agent']
    const propertyId = headers[HEADER_PROPERTY_ID]
    const missing: FieldError[] = []
    if (userAgent === undefined) {
      missing.push({ field: 'User-Agent', code: 'REQUIRED', detail: 'Send a User-Agent naming your integration, e.g. acme-channel-sync/2.3.' })
    }
    if (needsProperty && propertyId === undefined) {
      missing.push({ field: 'Service-Property-Id', code: 'REQUIRED', detail: 'Send the id of the property this request is about, as listed by GET /v1/properties.' })
    }
    if (missing.length > 0) {
      const names = missing.map((e) => e.field)
      throw new ApiError('MISSING_REQUIRED_HEADER', `The ${listed(names)} header${names.length > 1 ? 's are' : ' is'} required.`, { errors: missing })
    }
    const invalid: FieldError[] = []
    if (userAgent !== undefined && !USER_AGENT.test(userAgent)) {
      invalid.push({ field: 'User-Agent', code: 'INVALID_FORMAT', detail: 'Must be 3 to 255 printable ASCII characters.' })
    }
    const correlation = headers[HEADER_CORRELATION_ID]
    if (correlation !== undefined && request.correlationId === null) {
      invalid.push({ field: 'Service-Correlation-Id', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ = + / -.' })
    }
    if (needsProperty && (typeof propertyId !== 'string' || !UUID.test(propertyId))) {
      invalid.push({ field: 'Service-Property-Id', code: 'INVALID_FORMAT', detail: 'Must be a property id (a UUID) as listed by GET /v1/properties.' })
    }
    if (invalid.length > 0) {
      throw new ApiError('INVALID_HEADER', `Invalid ${listed(invalid.map((e) => e.field))} header.`, { errors: invalid })
    }
    if (needsProperty) {
      request.propertyId = (propertyId as string).toLowerCase()
    } else if (propertyId !== undefined) {
      throw new ApiError('HEADER_NOT_ALLOWED', 'This endpoint takes no Service-Property-Id header.', {
        errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
      })
    }
  }
}
