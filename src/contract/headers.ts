// Response headers shared by every answer (docs/partners.md, "Every answer"); `no-store` on
// every one of them, health included (docs/architecture.md §D4).
export const HEADER_REQUEST_ID = 'service-request-id'
export const HEADER_CORRELATION_ID = 'service-correlation-id'
export const HEADER_PROPERTY_ID = 'service-property-id'

export const COMMON_HEADERS = {
  'x-content-type-options': 'nosniff',
  // Partner data must not sit in shared caches; health is not worth caching either.
  'cache-control': 'no-store',
} as const
