// The error table of the public contract, written out by hand: the tests' own oracle for the
// status and title of every code. It is deliberately not read from src/contract/errors.ts;
// test/contract/catalog.test.ts pins the catalog to it, so a change to either side fails.

export interface ExpectedError {
  readonly status: number
  readonly title: string
}

export const ERROR_TABLE: Readonly<Record<string, ExpectedError>> = {
  UNKNOWN_QUERY_PARAMETER: { status: 400, title: 'Unknown query parameter' },
  INVALID_QUERY_PARAMETER: { status: 400, title: 'Invalid query parameter' },
  INVALID_PATH_PARAMETER: { status: 400, title: 'Invalid path parameter' },
  TRAILING_SLASH_NOT_ALLOWED: { status: 400, title: 'Trailing slash not allowed' },
  PATH_CASE_MISMATCH: { status: 400, title: 'Path case mismatch' },
  MISSING_REQUIRED_HEADER: { status: 400, title: 'Missing required header' },
  INVALID_HEADER: { status: 400, title: 'Invalid header' },
  HEADER_NOT_ALLOWED: { status: 400, title: 'Header not allowed' },
  UNEXPECTED_BODY: { status: 400, title: 'Unexpected request body' },
  INVALID_EVENT: { status: 400, title: 'Invalid event' },
  MALFORMED_JSON: { status: 400, title: 'Malformed JSON' },
  MALFORMED_REQUEST: { status: 400, title: 'Malformed request' },
  MISSING_AUTH_HEADER: { status: 401, title: 'Missing Authorization header' },
  INVALID_AUTH_HEADER: { status: 401, title: 'Invalid Authorization header' },
  INVALID_API_KEY: { status: 401, title: 'Invalid API key' },
  API_KEY_EXPIRED: { status: 401, title: 'API key expired' },
  INVALID_ACCESS_TOKEN: { status: 401, title: 'Invalid access token' },
  ACCESS_TOKEN_EXPIRED: { status: 401, title: 'Access token expired' },
  API_KEY_SUSPENDED: { status: 403, title: 'API key suspended' },
  BRAND_ACCESS_DENIED: { status: 403, title: 'Brand access denied' },
  PROPERTY_ACCESS_DENIED: { status: 403, title: 'Property access denied' },
  TEST_MODE_UNAVAILABLE: { status: 403, title: 'Test mode unavailable' },
  INSUFFICIENT_SCOPE: { status: 403, title: 'Insufficient scope' },
  CLIENT_NOT_REGISTERED: { status: 403, title: 'Client not registered' },
  CLIENT_SUSPENDED: { status: 403, title: 'Client suspended' },
  ROUTE_NOT_FOUND: { status: 404, title: 'Not found' },
  PROPERTY_NOT_FOUND: { status: 404, title: 'Property not found' },
  EVENT_NOT_FOUND: { status: 404, title: 'Event not found' },
  WEBHOOK_ENDPOINT_NOT_FOUND: { status: 404, title: 'Webhook endpoint not found' },
  WEBHOOK_ENDPOINT_LIMIT_REACHED: { status: 409, title: 'Webhook endpoint limit reached' },
  WEBHOOK_RECOVERY_NOT_FOUND: { status: 404, title: 'Webhook recovery not found' },
  WEBHOOK_RECOVERY_IN_PROGRESS: { status: 409, title: 'Webhook recovery in progress' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed' },
  NOT_ACCEPTABLE: { status: 406, title: 'Not acceptable' },
  REQUEST_TIMEOUT: { status: 408, title: 'Request timeout' },
  ROUTE_RETIRED: { status: 410, title: 'Route retired' },
  IDEMPOTENCY_KEY_IN_USE: { status: 409, title: 'Idempotency key in use' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  URI_TOO_LONG: { status: 414, title: 'URI too long' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: 'Idempotency key reused' },
  REQUEST_HEADERS_TOO_LARGE: { status: 431, title: 'Request header fields too large' },
  RATE_LIMITED: { status: 429, title: 'Too many requests' },
  INTERNAL_ERROR: { status: 500, title: 'Internal server error' },
  SERVICE_UNAVAILABLE: { status: 503, title: 'Service unavailable' },
  IP_NOT_ALLOWED: { status: 403, title: 'IP address not allowed' },
  UNKNOWN_BODY_FIELD: { status: 400, title: 'Unknown body field' },
  VALIDATION_FAILED: { status: 422, title: 'Validation failed' },
  CREDENTIAL_NOT_FOUND: { status: 404, title: 'Credential not found' },
  PORTAL_SESSION_INVALID: { status: 401, title: 'Portal session not valid' },
  PORTAL_CSRF_FAILED: { status: 403, title: 'Portal request not verified' },
  PORTAL_CAPABILITY_MISSING: { status: 403, title: 'Portal capability missing' },
  PORTAL_SESSION_LIMIT_REACHED: { status: 409, title: 'Portal session limit reached' },
}

/** The expected status and title of `code`; throws for a code the table does not hold. */
export function expectedError(code: string): ExpectedError {
  const entry = ERROR_TABLE[code]
  if (entry === undefined) throw new Error(`${code} is not in the tests' error table (test/helpers/catalog.ts)`)
  return entry
}
