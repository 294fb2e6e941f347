import type { RouteOptions } from 'fastify'
import { builtInRoutes, requestLogRoutes, webhookRoutes, type Method, type RoutePolicy } from '../routes/policy.js'
import { PORTAL_API_PREFIX } from './http.js'
import type { Capability } from './schemas.js'

// The portal's JSON API (docs/architecture.md, "The partner portal"): the partner routes
// themselves, served again under /portal/api with the session standing in for the Bearer
// credential. Each is the same route: its handler, its policy (validation, scopes, quota,
// problems) and its own hooks, registered a second time with the portal's step 4, so the
// portal and the API cannot disagree. Only the routes below are served there, each method
// with the capability it needs; a capability never widens a scope the credential lacks.

/** How a route is served under /portal (its pipeline is composed from this in app.ts). */
export type PortalRoute =
  /** A page or asset of the front end: step 1 only (the host's brand). */
  | { kind: 'page' }
  /** `POST /portal/session`: a link's token in, a session's cookie out. */
  | { kind: 'enter' }
  /** A route of a session: its cookie, CSRF token and `capability` at step 4; `path` names it in usage. */
  | { kind: 'session'; capability: Capability; path: string }

export const PORTAL_API_ROUTES: ReadonlyMap<string, Readonly<Partial<Record<Method, Capability>>>> = new Map([
  [builtInRoutes.getCredential.path, { GET: 'view' }],
  [builtInRoutes.listEvents.path, { GET: 'view' }],
  [builtInRoutes.getEvent.path, { GET: 'view' }],
  [webhookRoutes.webhookEndpoints.path, { GET: 'view', POST: 'manage_webhooks' }],
  [webhookRoutes.webhookEndpoint.path, { GET: 'view', PATCH: 'manage_webhooks', DELETE: 'manage_webhooks' }],
  [webhookRoutes.rotateWebhookSecret.path, { POST: 'manage_webhooks' }],
  [webhookRoutes.testWebhookEndpoint.path, { POST: 'manage_webhooks' }],
  [webhookRoutes.listWebhookDeliveries.path, { GET: 'view' }],
  [webhookRoutes.redeliverEvent.path, { POST: 'replay' }],
  [webhookRoutes.recoverWebhookEndpoint.path, { POST: 'replay' }],
  [webhookRoutes.listWebhookRecoveries.path, { GET: 'view' }],
  [webhookRoutes.webhookRecovery.path, { GET: 'view', DELETE: 'replay' }],
  [requestLogRoutes.listRequestLogs.path, { GET: 'view' }],
  [requestLogRoutes.getRequestLog.path, { GET: 'view' }],
])

/** The capability `method` of the partner route of `policy` needs in the portal; undefined: not served there. */
export function portalCapabilityOf(policy: RoutePolicy, method: string): Capability | undefined {
  if (policy.kind !== 'facade') return undefined
  return PORTAL_API_ROUTES.get(policy.path)?.[method as Method]
}

/**
 * The portal's copy of a partner route being registered, or undefined when the portal does
 * not serve it: the same handler, policy and own hooks, under /portal/api. HEAD comes with GET.
 */
export function portalTwin(route: RouteOptions, own: { onRequest: unknown[]; preHandler: unknown[] }): RouteOptions | undefined {
  const policy = route.config?.policy
  if (policy === undefined || typeof route.method !== 'string' || route.method === 'HEAD') return undefined
  const capability = portalCapabilityOf(policy, route.method)
  if (capability === undefined) return undefined
  const portal: PortalRoute = { kind: 'session', capability, path: `${PORTAL_API_PREFIX}${policy.path}` }
  return {
    method: route.method,
    url: `${PORTAL_API_PREFIX}${route.url}`,
    handler: route.handler,
    config: { ...route.config, portal },
    onRequest: own.onRequest,
    preHandler: own.preHandler,
  } as RouteOptions
}
