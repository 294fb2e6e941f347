import type { FastifyRequest } from 'fastify'
import { ApiError, type FieldError } from '../contract/errors.js'
import { HEADER_CORRELATION_ID, HEADER_PROPERTY_ID } from '../contract/headers.js'
import { headerLines } from '../http/header-lines.js'
import { IDEMPOTENCY_METHODS, type IdempotencyRule, type Scope } from '../routes/policy.js'

// Step 3 of the order of checks (docs/architecture.md, "Order of checks"): the request headers
// a route requires or refuses. `Service-Property-Id` is required on property-scoped routes and
// refused on brand-wide ones.

export const USER_AGENT = /^[\x20-\x7E]{3,255}$/
export const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

/** An idempotency key: 1 to 255 visible ASCII characters but `"` and `\`. */
const IDEMPOTENCY_KEY = /^[\x21\x23-\x5B\x5D-\x7E]{1,255}$/

/**
 * The key of an `Idempotency-Key` value: an RFC 9651 string (`"<key>"`, as the IETF draft
 * writes it) or the bare key (as most clients send it); undefined when it is neither.
 */
export function idempotencyKeyOf(value: string): string | undefined {
  const key = value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value
  return IDEMPOTENCY_KEY.test(key) ? key : undefined
}

function listed(fields: string[]): string {
  return fields.join(' and ')
}

/**
 * Step 3 for a route that takes a key, with its scope and, on declared routes with POST or
 * PATCH, its Idempotency-Key rule (the header is ignored on every other method).
 */
export function headerStage(scope: Scope, idempotency?: IdempotencyRule) {
  const needsProperty = scope === 'property'
  return function checkHeaders(request: FastifyRequest): void {
    const headers = request.headers
    const userAgent = headers['user-agent']
    const propertyId = headers[HEADER_PROPERTY_ID]
    const idempotencyRule = idempotency !== undefined && IDEMPOTENCY_METHODS.has(request.method) ? idempotency : undefined
    const idempotencyValue = idempotencyRule === undefined ? undefined : headers['idempotency-key']
    const missing: FieldError[] = []
    if (userAgent === undefined) {
      missing.push({ field: 'User-Agent', code: 'REQUIRED', detail: 'Send a User-Agent naming your integration, e.g. acme-channel-sync/2.3.' })
    }
    if (needsProperty && propertyId === undefined) {
      missing.push({ field: 'Service-Property-Id', code: 'REQUIRED', detail: 'Send the id of the property this request is about, as listed by GET /v1/properties.' })
    }
    if (idempotencyRule === 'required' && idempotencyValue === undefined) {
      missing.push({ field: 'Idempotency-Key', code: 'REQUIRED', detail: `${request.method} on this endpoint needs a key that names this request, e.g. a UUID you keep until you have its answer.` })
    }
    if (missing.length > 0) {
      const names = missing.map((e) => e.field)
      throw new ApiError('MISSING_REQUIRED_HEADER', `The ${listed(names)} header${names.length > 1 ? 's are' : ' is'} required.`, { errors: missing })
    }
    const invalid: FieldError[] = []
    if (userAgent !== undefined && !USER_AGENT.test(userAgent)) {
      invalid.push({ field: 'User-Agent', code: 'INVALID_FORMAT', detail: 'Must be 3 to 255 printable ASCII characters.' })
    }
    // Node keeps the first of two Authorization lines; which one the partner meant is not ours to guess.
    if (headers.authorization !== undefined && headerLines(request.raw.rawHeaders, 'authorization') > 1) {
      invalid.push({ field: 'Authorization', code: 'INVALID_FORMAT', detail: 'Send one Authorization header.' })
    }
    const correlation = headers[HEADER_CORRELATION_ID]
    if (correlation !== undefined && request.correlationId === null) {
      invalid.push({ field: 'Service-Correlation-Id', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ = + / -.' })
    }
    if (needsProperty && (typeof propertyId !== 'string' || !UUID.test(propertyId))) {
      invalid.push({ field: 'Service-Property-Id', code: 'INVALID_FORMAT', detail: 'Must be a property id (a UUID) as listed by GET /v1/properties.' })
    }
    if (idempotencyValue !== undefined) {
      const key = typeof idempotencyValue === 'string' && headerLines(request.raw.rawHeaders, 'idempotency-key') === 1 ? idempotencyKeyOf(idempotencyValue) : undefined
      if (key === undefined) {
        invalid.push({ field: 'Idempotency-Key', code: 'INVALID_FORMAT', detail: 'Send it once: 1 to 255 visible ASCII characters other than " and \\, bare or in double quotes.' })
      } else {
        request.idempotencyKey = key
      }
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
