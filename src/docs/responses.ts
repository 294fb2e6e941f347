import { errorCatalog, type ErrorCode } from '../contract/errors.js'
import { withDeprecation } from '../lifecycle/config.js'
import { BODY_METHODS, builtInRoutes, eventListPolicy, idempotencyOf, scopeOf, webhookRoutes, type Deprecation, type Method, type RoutePolicy } from '../routes/policy.js'

// Which error codes an operation can answer, derived from its policy and the order of checks
// (docs/architecture.md, "Order of checks"). The OpenAPI document, the error pages and the
// contract test all read this one function, so the documentation cannot promise less than the
// pipeline does.
//
// Codes are sorted into the steps that only some routes take; every other code of the
// catalog can answer on any route (routing, negotiation, the HTTP parser, timeouts, faults).
// A code added to the catalog therefore appears on every operation until it is placed here.

type Condition = (policy: RoutePolicy, method: Method) => boolean

const takesKey: Condition = (p) => p.auth
const takesBody: Condition = (p, m) => p.body !== 'none' && BODY_METHODS.has(m)
const isGetProperty = (p: RoutePolicy): boolean => p.kind === 'facade' && p.path === builtInRoutes.getProperty.path
const isGetCredential = (p: RoutePolicy): boolean => p.kind === 'facade' && p.path === builtInRoutes.getCredential.path
const isGetEvent = (p: RoutePolicy): boolean => p.kind === 'facade' && p.path === builtInRoutes.getEvent.path
const WEBHOOK_PATHS: ReadonlySet<string> = new Set(Object.values(webhookRoutes).map((p) => p.path))
/** A route of the webhook endpoints API (their bodies are the gateway's own). */
const isWebhookRoute = (p: RoutePolicy): boolean => p.kind === 'facade' && WEBHOOK_PATHS.has(p.path)
const namesEndpoint = (p: RoutePolicy, m: Method): boolean => isWebhookRoute(p) && ('endpointId' in p.pathParams || p.path === webhookRoutes.redeliverEvent.path) && !(m === 'GET' && p.path === webhookRoutes.webhookEndpoints.path)

/**
 * Codes answered on the admin port only, never by a public route: to publishers of events, and
 * by the credentials API (docs/operations.md, "The credentials API"). The body codes
 * (UNKNOWN_BODY_FIELD, VALIDATION_FAILED) answer there and on the webhook endpoints API.
 */
export const ADMIN_PORT_CODES: ReadonlySet<ErrorCode> = new Set(['CREDENTIAL_NOT_FOUND', 'INVALID_EVENT', 'PORTAL_SESSION_LIMIT_REACHED'])

/**
 * Codes answered under /portal/ only (docs/partners.md, "The portal"): a session standing in
 * for the Bearer credential, never by a route of the public API.
 */
export const PORTAL_CODES: ReadonlySet<ErrorCode> = new Set(['PORTAL_SESSION_INVALID', 'PORTAL_CSRF_FAILED', 'PORTAL_CAPABILITY_MISSING'])

const conditional: Partial<Record<ErrorCode, Condition>> = {
  // 3. headers and body framing (routes with a key only). MISSING_REQUIRED_HEADER and
  // INVALID_HEADER answer on every route: a Host missing or sent twice is refused at step 1.
  HEADER_NOT_ALLOWED: (p) => p.auth && p.scope === 'brand',
  UNEXPECTED_BODY: takesKey,
  UNSUPPORTED_MEDIA_TYPE: takesBody,
  // A body over the limit: the route's own on body methods, 1 MiB on the others.
  PAYLOAD_TOO_LARGE: (p, m) => p.auth || takesBody(p, m),
  // 4. authentication and permission
  MISSING_AUTH_HEADER: takesKey,
  INVALID_AUTH_HEADER: takesKey,
  INVALID_API_KEY: takesKey,
  API_KEY_EXPIRED: takesKey,
  API_KEY_SUSPENDED: takesKey,
  INVALID_ACCESS_TOKEN: takesKey,
  ACCESS_TOKEN_EXPIRED: takesKey,
  CLIENT_NOT_REGISTERED: takesKey,
  CLIENT_SUSPENDED: takesKey,
  BRAND_ACCESS_DENIED: takesKey,
  IP_NOT_ALLOWED: takesKey,
  INSUFFICIENT_SCOPE: (p, m) => p.auth && scopeOf(p, m) !== undefined,
  // 1, once the route is known: a deprecated route past its sunset
  ROUTE_RETIRED: (p) => p.deprecation?.sunset !== undefined,
  // 5. quota
  RATE_LIMITED: takesKey,
  // 6. input
  INVALID_QUERY_PARAMETER: (p) => Object.keys(p.query).length > 0,
  INVALID_PATH_PARAMETER: (p) => Object.keys(p.pathParams).length > 0,
  MALFORMED_JSON: takesBody,
  // 8. the idempotency record, after every check of the gateway's own
  IDEMPOTENCY_KEY_IN_USE: (p, m) => idempotencyOf(p, m) !== undefined,
  IDEMPOTENCY_KEY_REUSED: (p, m) => idempotencyOf(p, m) !== undefined,
  // 7. resource
  TEST_MODE_UNAVAILABLE: (p) => p.auth && p.upstreams.length > 0,
  PROPERTY_ACCESS_DENIED: (p) => p.scope === 'property' || isGetProperty(p),
  PROPERTY_NOT_FOUND: (p) => p.scope === 'property' || isGetProperty(p),
  // Events: an id the credential does not see.
  EVENT_NOT_FOUND: (p) => isGetEvent(p) || p.path === webhookRoutes.redeliverEvent.path,
  // Webhook endpoints: the gateway's own bodies, and endpoints of the credential's own.
  UNKNOWN_BODY_FIELD: (p, m) => isWebhookRoute(p) && takesBody(p, m),
  VALIDATION_FAILED: (p, m) => isWebhookRoute(p) && takesBody(p, m),
  WEBHOOK_ENDPOINT_NOT_FOUND: namesEndpoint,
  WEBHOOK_ENDPOINT_LIMIT_REACHED: (p, m) => p.path === webhookRoutes.webhookEndpoints.path && m === 'POST',
  WEBHOOK_RECOVERY_NOT_FOUND: (p) => p.path === webhookRoutes.webhookRecovery.path,
  WEBHOOK_RECOVERY_IN_PROGRESS: (p) => p.path === webhookRoutes.recoverWebhookEndpoint.path,
  ...Object.fromEntries([...ADMIN_PORT_CODES, ...PORTAL_CODES].map((code) => [code, () => false])),
}

/** Every code of the catalog that `method` on the route of `policy` can answer, in catalog order. */
export function errorCodesOf(policy: RoutePolicy, method: Method): ErrorCode[] {
  return (Object.keys(errorCatalog) as ErrorCode[]).filter((code) => conditional[code]?.(policy, method) ?? true)
}

/** The same codes grouped by status, statuses ascending. */
export function errorStatusesOf(policy: RoutePolicy, method: Method): Map<number, ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of errorCodesOf(policy, method)) {
    const status = errorCatalog[code].status
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b))
}

/** Codes any request can meet whatever it asks for, even on a path no route has. */
export function codesOfEveryRoute(): ErrorCode[] {
  return (Object.keys(errorCatalog) as ErrorCode[]).filter((code) => conditional[code] === undefined)
}

/** What a successful answer of an operation is. */
export type Success =
  | { kind: 'health' }
  | { kind: 'property' }
  | { kind: 'properties' }
  | { kind: 'credential' }
  | { kind: 'event' }
  | { kind: 'events' }
  /** A webhook endpoint (with its secret when `secret`), a page of them, a page of attempts, a queued delivery, or nothing (204). */
  | { kind: 'webhookEndpoint'; status: 200 | 201; secret: boolean }
  | { kind: 'webhookEndpoints' }
  | { kind: 'webhookDeliveries' }
  | { kind: 'webhookQueued'; schema: 'WebhookTestQueued' | 'WebhookRedeliveryQueued' }
  /** A recovery (202 when it was just asked for), or a page of them. */
  | { kind: 'webhookRecovery'; status: 200 | 202 }
  | { kind: 'webhookRecoveries' }
  | { kind: 'noContent' }
  /** A declared route: the service's own JSON, passed on. */
  | { kind: 'service'; status: number }

export function successOf(policy: RoutePolicy, method: Method): Success {
  if (policy.kind === 'facade') {
    if (policy.path === builtInRoutes.health.path) return { kind: 'health' }
    if (isGetProperty(policy)) return { kind: 'property' }
    if (isGetCredential(policy)) return { kind: 'credential' }
    if (isGetEvent(policy)) return { kind: 'event' }
    if (policy.path === builtInRoutes.listEvents.path) return { kind: 'events' }
    const w = webhookRoutes
    if (policy.path === w.webhookEndpoints.path) return method === 'POST' ? { kind: 'webhookEndpoint', status: 201, secret: true } : { kind: 'webhookEndpoints' }
    if (policy.path === w.webhookEndpoint.path) return method === 'DELETE' ? { kind: 'noContent' } : { kind: 'webhookEndpoint', status: 200, secret: false }
    if (policy.path === w.rotateWebhookSecret.path) return { kind: 'webhookEndpoint', status: 200, secret: true }
    if (policy.path === w.testWebhookEndpoint.path) return { kind: 'webhookQueued', schema: 'WebhookTestQueued' }
    if (policy.path === w.redeliverEvent.path) return { kind: 'webhookQueued', schema: 'WebhookRedeliveryQueued' }
    if (policy.path === w.listWebhookDeliveries.path) return { kind: 'webhookDeliveries' }
    if (policy.path === w.recoverWebhookEndpoint.path) return { kind: 'webhookRecovery', status: 202 }
    if (policy.path === w.listWebhookRecoveries.path) return { kind: 'webhookRecoveries' }
    if (policy.path === w.webhookRecovery.path) return method === 'DELETE' ? { kind: 'noContent' } : { kind: 'webhookRecovery', status: 200 }
    return { kind: 'properties' }
  }
  return { kind: 'service', status: method === 'POST' ? 201 : method === 'DELETE' ? 204 : 200 }
}

/**
 * The public routes of a gateway: the built-in ones, then those its config file declares.
 * `eventTypes`, the public event types of its config, are what `GET /v1/events` filters by;
 * `builtinRoutes`, its deprecations of built-in routes.
 */
export function publicRoutes(declared: readonly RoutePolicy[], eventTypes: readonly string[] = [],
  builtinRoutes: Readonly<Record<string, { deprecated: Deprecation; replacement?: string | undefined }>> = {}): RoutePolicy[] {
  const builtIn: RoutePolicy[] = [builtInRoutes.health, builtInRoutes.listProperties, builtInRoutes.getProperty, builtInRoutes.getCredential, eventListPolicy(eventTypes), builtInRoutes.getEvent,
    ...Object.values(webhookRoutes)]
  return [...builtIn.map((policy) => withDeprecation(policy, builtinRoutes)), ...declared]
}
