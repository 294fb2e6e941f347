// The error catalog: every code this API emits, with its status, fixed title and a
// troubleshooting tip (`moreInfo`). The error handler, the generated error reference
// (docs/errors.md) and the tests' expectations all derive from this table; no status
// code is written at a throw site.

interface ErrorSpec {
  readonly status: number
  readonly title: string
  readonly tip: string
}

export const errorCatalog = {
  UNKNOWN_QUERY_PARAMETER: {
    status: 400, title: 'Unknown query parameter',
    tip: 'Remove the parameters listed in `errors`; names are case-sensitive camelCase. Each endpoint documents the parameters it accepts.',
  },
  INVALID_QUERY_PARAMETER: {
    status: 400, title: 'Invalid query parameter',
    tip: 'Send each parameter once, as plain digits (no sign, decimals or spaces), within the range given in `errors`.',
  },
  INVALID_PATH_PARAMETER: {
    status: 400, title: 'Invalid path parameter',
    tip: 'Ids in paths are UUIDs such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10 (property ids come from GET /v1/properties) or the plain identifiers an endpoint documents.',
  },
  TRAILING_SLASH_NOT_ALLOWED: {
    status: 400, title: 'Trailing slash not allowed',
    tip: 'Remove the slash at the end of the path; paths are matched exactly.',
  },
  PATH_CASE_MISMATCH: {
    status: 400, title: 'Path case mismatch',
    tip: 'Paths are lower-case kebab-case and case-sensitive; use the path given in `detail`.',
  },
  MISSING_REQUIRED_HEADER: {
    status: 400, title: 'Missing required header',
    tip: 'Send the headers listed in `errors`. User-Agent should name your integration and its version, e.g. `acme-channel-sync/2.3`; Host the API\'s host name.',
  },
  INVALID_HEADER: {
    status: 400, title: 'Invalid header',
    tip: 'Send Host and Authorization once each. User-Agent takes 3 to 255 printable ASCII characters; Service-Correlation-Id 1 to 128 of A-Z a-z 0-9 . _ = + / -; Service-Property-Id a property id (UUID); Idempotency-Key, sent once, 1 to 255 visible ASCII characters other than `"` and `\\`, bare or in double quotes.',
  },
  HEADER_NOT_ALLOWED: {
    status: 400, title: 'Header not allowed',
    tip: 'Brand-wide endpoints such as /v1/properties and /v1/guests take no Service-Property-Id header; send it only to property-scoped endpoints.',
  },
  UNEXPECTED_BODY: {
    status: 400, title: 'Unexpected request body',
    tip: 'GET, HEAD and DELETE requests take no body; send parameters in the query string.',
  },
  // Answered to internal publishers on the admin port, never on the public API (docs/operations.md, "Events").
  INVALID_EVENT: {
    status: 400, title: 'Invalid event',
    tip: 'Fix the events listed in `errors` (`[i].field`: the event at index i of the batch) and send the whole request again; none of its events was accepted.',
  },
  MALFORMED_JSON: {
    status: 400, title: 'Malformed JSON',
    tip: 'Check the body with a JSON validator; it must be one UTF-8 JSON document.',
  },
  MALFORMED_REQUEST: {
    status: 400, title: 'Malformed request',
    tip: 'The request is not valid HTTP/1.1 (bad percent-encoding, header syntax or framing); check how your client builds the request line and headers.',
  },
  MISSING_AUTH_HEADER: {
    status: 401, title: 'Missing Authorization header',
    tip: 'Send `Authorization: Bearer <API key>` with the key issued to you, or `Bearer <access token>` with a token from the identity provider.',
  },
  INVALID_AUTH_HEADER: {
    status: 401, title: 'Invalid Authorization header',
    tip: 'The header must be exactly `Bearer <credential>`: the word Bearer, one space, then the API key or the access token.',
  },
  INVALID_API_KEY: {
    status: 401, title: 'Invalid API key',
    tip: 'Check that the key is copied whole (it starts with svc_live_ or svc_test_) and has not been revoked; ask your account manager for a new one.',
  },
  API_KEY_EXPIRED: {
    status: 401, title: 'API key expired',
    tip: 'This key has passed its expiry date, or `detail` says it was rolled: then use its new secret; otherwise ask your account manager for a new key.',
  },
  INVALID_ACCESS_TOKEN: {
    status: 401, title: 'Invalid access token',
    tip: 'Get a token from the identity provider with the client-credentials grant, for this API\'s audience, and send it whole as `Authorization: Bearer <token>`; `detail` says which check failed.',
  },
  ACCESS_TOKEN_EXPIRED: {
    status: 401, title: 'Access token expired',
    tip: 'Get a new token from the identity provider and retry; request a fresh one shortly before `expires_in` runs out instead of waiting for this answer.',
  },
  API_KEY_SUSPENDED: {
    status: 403, title: 'API key suspended',
    tip: 'This key has been suspended by an operator; contact partner support to have it resumed.',
  },
  BRAND_ACCESS_DENIED: {
    status: 403, title: 'Brand access denied',
    tip: "Each key belongs to one brand; call the host name of your key's brand.",
  },
  PROPERTY_ACCESS_DENIED: {
    status: 403, title: 'Property access denied',
    tip: 'Your key is not authorised for this property; GET /v1/properties lists the ones it may use.',
  },
  INSUFFICIENT_SCOPE: {
    status: 403, title: 'Insufficient scope',
    tip: 'Your credential lacks the scope named in `detail` and in the `WWW-Authenticate` header; request a token with that scope, or ask your account manager to add it to your key or client.',
  },
  CLIENT_NOT_REGISTERED: {
    status: 403, title: 'Client not registered',
    tip: 'The token is valid, but its client has not been registered for this API (or was revoked); ask your account manager to register your client id.',
  },
  CLIENT_SUSPENDED: {
    status: 403, title: 'Client suspended',
    tip: 'Your client has been suspended by an operator; contact partner support to have it resumed.',
  },
  TEST_MODE_UNAVAILABLE: {
    status: 403, title: 'Test mode unavailable',
    tip: 'This endpoint has no sandbox, so test keys (svc_test_) cannot use it; use a live key, or ask partner support for sandbox access.',
  },
  ROUTE_NOT_FOUND: {
    status: 404, title: 'Not found',
    tip: 'Check the host name and the path against the API reference; every path starts with /v1.',
  },
  PROPERTY_NOT_FOUND: {
    status: 404, title: 'Property not found',
    tip: 'Use an id returned by GET /v1/properties for this brand.',
  },
  EVENT_NOT_FOUND: {
    status: 404, title: 'Event not found',
    tip: 'Use an id returned by GET /v1/events with this credential; events are kept for a limited time (see the API reference) and each credential sees only the events of its mode, brand, properties and scopes.',
  },
  WEBHOOK_ENDPOINT_NOT_FOUND: {
    status: 404, title: 'Webhook endpoint not found',
    tip: 'Use an id returned by GET /v1/webhook-endpoints with this credential; each credential sees only the endpoints it created.',
  },
  WEBHOOK_RECOVERY_NOT_FOUND: {
    status: 404, title: 'Webhook recovery not found',
    tip: 'List the endpoint\'s recoveries (GET /v1/webhook-endpoints/{endpointId}/recoveries) for the ids it has; recoveries are kept 7 days, and go with their endpoint.',
  },
  METHOD_NOT_ALLOWED: {
    status: 405, title: 'Method not allowed',
    tip: 'Use one of the methods in the `Allow` header.',
  },
  NOT_ACCEPTABLE: {
    status: 406, title: 'Not acceptable',
    tip: 'This API produces application/json only; send `Accept: application/json` or no Accept header.',
  },
  REQUEST_TIMEOUT: {
    status: 408, title: 'Request timeout',
    tip: 'Send the whole request (headers, then any body) without pauses; the connection was closed, so open a new one and retry.',
  },
  IDEMPOTENCY_KEY_IN_USE: {
    status: 409, title: 'Idempotency key in use',
    tip: 'A request with this Idempotency-Key is still being processed; wait the seconds given in `Retry-After` and send the same request again to get its answer.',
  },
  WEBHOOK_ENDPOINT_LIMIT_REACHED: {
    status: 409, title: 'Webhook endpoint limit reached',
    tip: 'This credential has as many webhook endpoints as it may; delete one it no longer needs, or subscribe an existing endpoint to more event types.',
  },
  WEBHOOK_RECOVERY_IN_PROGRESS: {
    status: 409, title: 'Webhook recovery in progress',
    tip: 'An endpoint runs one recovery at a time: follow the running one named in `detail` until it is `done`, or cancel it with DELETE, then ask again.',
  },
  ROUTE_RETIRED: {
    status: 410, title: 'Route retired',
    tip: 'This endpoint has passed its sunset date and answers no more; move to the endpoint `detail` names (the `Link` header leads to the migration guide). Watch for `Deprecation` and `Sunset` headers to hear of the next one early.',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413, title: 'Payload too large',
    tip: 'Request bodies are limited to 1 MiB unless the endpoint documents a smaller limit; split large changes into several requests.',
  },
  URI_TOO_LONG: {
    status: 414, title: 'URI too long',
    tip: 'Request targets are limited to 8 KiB; shorten the query string.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415, title: 'Unsupported media type',
    tip: 'Send request bodies as JSON with `Content-Type: application/json`, with no parameter but `charset=utf-8`.',
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: 422, title: 'Idempotency key reused',
    tip: 'This Idempotency-Key was already used for a different request (path, query, Service-Property-Id, Content-Type or body); use a new key for each new request, and resend a request only unchanged.',
  },
  REQUEST_HEADERS_TOO_LARGE: {
    status: 431, title: 'Request header fields too large',
    tip: 'Request headers are limited to 16 KiB in all; drop headers the API does not use.',
  },
  RATE_LIMITED: {
    status: 429, title: 'Too many requests',
    tip: 'Wait the seconds given in `Retry-After`, and pace requests using the RateLimit-* headers of each response.',
  },
  INTERNAL_ERROR: {
    status: 500, title: 'Internal server error',
    tip: 'Retry later; if it persists, contact partner support and quote the requestId.',
  },
  SERVICE_UNAVAILABLE: {
    status: 503, title: 'Service unavailable',
    tip: 'Retry after the seconds given in `Retry-After`, with exponential backoff if it persists.',
  },
  // Credentials over their life (docs/operations.md, "Credentials over their life"): where a
  // credential may be used from, and the gateway's own JSON bodies (the credentials API of
  // the admin port).
  IP_NOT_ALLOWED: {
    status: 403, title: 'IP address not allowed',
    tip: 'This credential may only be used from the addresses registered for it; call from one of them, or ask your account manager to add the address named in `detail`.',
  },
  UNKNOWN_BODY_FIELD: {
    status: 400, title: 'Unknown body field',
    tip: 'Remove the fields listed in `errors`; names are case-sensitive camelCase, and a field error suggests the known name where one matches ignoring case.',
  },
  VALIDATION_FAILED: {
    status: 422, title: 'Validation failed',
    tip: 'Correct the fields listed in `errors`, one entry per bad field, and send the request again.',
  },
  CREDENTIAL_NOT_FOUND: {
    status: 404, title: 'Credential not found',
    tip: 'No API key or client grant has this id: it was never issued here or has been revoked. List the credentials to find its id.',
  },
  // The partner portal (docs/partners.md, "The portal"): answered under /portal/ only, and the
  // session limit by the credentials API of the admin port.
  PORTAL_SESSION_INVALID: {
    status: 401, title: 'Portal session not valid',
    tip: 'The portal link was used already, has expired or is unknown, or the session has ended (logged out, ended by an operator, or its credential suspended, revoked or expired); ask your operator for a new link.',
  },
  PORTAL_CSRF_FAILED: {
    status: 403, title: 'Portal request not verified',
    tip: 'A change in the portal must carry the session\'s CSRF token in the `X-CSRF-Token` header, as the portal\'s own page sends it; reload the portal and try again.',
  },
  PORTAL_CAPABILITY_MISSING: {
    status: 403, title: 'Portal capability missing',
    tip: 'The portal link this session was entered by does not allow this action (`detail` names the capability it needs); ask your operator for a link with it.',
  },
  PORTAL_SESSION_LIMIT_REACHED: {
    status: 409, title: 'Portal session limit reached',
    tip: 'The credential has 10 live portal sessions (links not yet entered count); end them with DELETE on its portal-sessions, or wait until one expires.',
  },
} as const satisfies Record<string, ErrorSpec>

export type ErrorCode = keyof typeof errorCatalog

export const fieldErrorCodes = [
  'INVALID_FORMAT', 'INVALID_ENUM_VALUE', 'REQUIRED', 'OUT_OF_RANGE', 'UNKNOWN_PARAMETER', 'NOT_ALLOWED',
] as const
export type FieldErrorCode = (typeof fieldErrorCodes)[number]

export interface FieldError {
  field: string
  code: FieldErrorCode
  detail: string
}

export function kebabCode(code: ErrorCode): string {
  return code.toLowerCase().replaceAll('_', '-')
}

export interface ApiErrorOptions {
  errors?: FieldError[]
  /** Extra response headers (Allow, WWW-Authenticate, RateLimit-*). */
  headers?: Record<string, string>
  /** Seconds for `Retry-After`; set on every 429 and 503. */
  retryAfter?: number
  /** Kept for the log line only, never for the body. */
  cause?: unknown
}

/** A failure that leaves as problem+json with the catalog entry of `code`. */
export class ApiError extends Error {
  readonly status: number
  readonly errors: FieldError[]
  readonly headers: Record<string, string> | undefined
  readonly retryAfter: number | undefined

  constructor(readonly code: ErrorCode, readonly detail: string, options: ApiErrorOptions = {}) {
    // An ApiError is an expected answer, not a fault: capturing a stack trace for every
    // 400 or 401 was most of what a rejection cost. A 5xx keeps its cause, with its stack.
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(detail, options.cause === undefined ? undefined : { cause: options.cause })
    Error.stackTraceLimit = stackTraceLimit
    this.name = 'ApiError'
    this.status = errorCatalog[code].status
    this.errors = options.errors ?? []
    this.headers = options.headers
    this.retryAfter = options.retryAfter
  }
}

// RFC 6750 3: every 401 carries the Bearer challenge, and a 403 for a missing scope names the
// scope; this is the one place that builds them. A request without credentials, or with an
// API key, gets the bare challenge; a refused access token gets `error="invalid_token"`.
const CHALLENGE = { 'www-authenticate': 'Bearer' } as const

/** Failures of authentication proper: 401 with the Bearer challenge. */
export function unauthorized(code: 'MISSING_AUTH_HEADER' | 'INVALID_AUTH_HEADER' | 'INVALID_API_KEY' | 'API_KEY_EXPIRED', detail: string): ApiError {
  return new ApiError(code, detail, { headers: CHALLENGE })
}

/**
 * RFC 6750 3 allows only %x20-21 / %x23-5B / %x5D-7E inside `error_description` and `scope`:
 * anything else (quotes, backslashes, control or non-ASCII characters) becomes a space.
 */
function challengeValue(text: string): string {
  return text.replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, ' ')
}

/** A refused access token (RFC 6750 3.1 `invalid_token`); `detail` says which check failed. */
export function invalidToken(code: 'INVALID_ACCESS_TOKEN' | 'ACCESS_TOKEN_EXPIRED', detail: string): ApiError {
  return new ApiError(code, detail, {
    headers: { 'www-authenticate': `Bearer error="invalid_token", error_description="${challengeValue(detail)}"` },
  })
}

/** The credential lacks the scope the route needs (RFC 6750 3.1 `insufficient_scope`). */
export function insufficientScope(scope: string, credential: 'API key' | 'access token'): ApiError {
  return new ApiError('INSUFFICIENT_SCOPE', `This ${credential} lacks the scope '${scope}' that this request needs.`, {
    headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${challengeValue(scope)}"` },
  })
}
