// When each code is answered, in a partner's words, for the error pages and the examples of
// the OpenAPI document. What to do about it is the catalog's `tip` (src/contract/errors.ts).
// Keyed by name, not by the catalog's type, so an entry may be written before its code
// lands; a test fails while a code of the catalog has no entry here.

export const whenItHappens: Readonly<Record<string, string>> = {
  UNKNOWN_QUERY_PARAMETER: 'The query string names a parameter the endpoint does not take. Names are case-sensitive: where a known name matches ignoring case, `-` and `_` (`per_page`), the field error suggests it. Unknown names are reported before bad values.',
  INVALID_QUERY_PARAMETER: 'A parameter the endpoint takes has a bad value: not plain digits, out of range, not one of the allowed values, or given twice. There is one field error per bad parameter.',
  INVALID_PATH_PARAMETER: 'An id in the path is not in its format, for example a property id that is not a UUID.',
  TRAILING_SLASH_NOT_ALLOWED: 'The path of a known endpoint ends with a slash, such as `/v1/properties/`.',
  PATH_CASE_MISMATCH: 'The path matches an endpoint only when case is ignored, such as `/v1/Properties`; `detail` names the right path.',
  MISSING_REQUIRED_HEADER: 'A header the endpoint needs is missing: `User-Agent` on every authenticated endpoint, `Service-Property-Id` on property-scoped ones.',
  INVALID_HEADER: 'A header is present but malformed: `User-Agent` outside 3 to 255 printable ASCII characters, a `Service-Correlation-Id` outside its pattern, or a `Service-Property-Id` that is not a UUID.',
  HEADER_NOT_ALLOWED: 'A brand-wide endpoint received a `Service-Property-Id` header, which only property-scoped endpoints take.',
  UNEXPECTED_BODY: 'A request that takes no body (`GET`, `HEAD`, `DELETE`, or any method of an endpoint without a body) carried one, or announced one with `Transfer-Encoding: chunked`.',
  MALFORMED_JSON: 'The request body is not one well-formed JSON document.',
  MALFORMED_REQUEST: 'The request is not valid HTTP: bad percent-encoding in the path, broken header syntax or framing.',
  MISSING_AUTH_HEADER: 'An authenticated endpoint was called without an `Authorization` header.',
  INVALID_AUTH_HEADER: 'The `Authorization` header is not `Bearer <API key>`.',
  INVALID_API_KEY: 'The API key is unknown, revoked or mangled (a copy that lost characters, a wrong prefix).',
  API_KEY_EXPIRED: 'The API key has passed its expiry date.',
  API_KEY_SUSPENDED: 'An operator has suspended the API key.',
  BRAND_ACCESS_DENIED: "The key belongs to another brand than the host name called: each brand has its own host names.",
  PROPERTY_ACCESS_DENIED: 'The property belongs to your brand, but your key is limited to other properties.',
  TEST_MODE_UNAVAILABLE: 'A test key (`svc_test_`) called an endpoint whose service has no sandbox; test keys never reach live data.',
  ROUTE_NOT_FOUND: 'No endpoint has this path on this host (an unknown path, an empty segment such as `/v1//properties`, or a host name of no brand).',
  PROPERTY_NOT_FOUND: 'No property of your brand has this id (ids of other brands are never revealed).',
  METHOD_NOT_ALLOWED: 'The path exists but does not take this method; `Allow` lists the methods it takes.',
  NOT_ACCEPTABLE: 'The `Accept` header admits no `application/json` (for example `text/html` alone, or `application/json;q=0`).',
  REQUEST_TIMEOUT: 'The request did not arrive in time: its headers or its whole body came in too slowly, and the connection was closed.',
  PAYLOAD_TOO_LARGE: 'The request body is larger than the endpoint takes.',
  URI_TOO_LONG: 'The request target (path and query string) is longer than the server accepts.',
  UNSUPPORTED_MEDIA_TYPE: 'A request body was sent with a `Content-Type` other than `application/json`.',
  REQUEST_HEADERS_TOO_LARGE: 'The request headers together are larger than the server accepts.',
  RATE_LIMITED: "The key has used its quota of the current window, or this client address sent too many requests with invalid keys. `Retry-After` says when to try again.",
  INTERNAL_ERROR: 'Something failed on our side: a fault of the gateway or an answer of a service behind it that could not be used.',
  SERVICE_UNAVAILABLE: 'A service behind the API is down, slow or overloaded, or this instance is shutting down. `Retry-After` says when to try again.',
}
