import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { sendJsonData } from '../contract/envelope.js'
import { ApiError, type FieldError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import { CredentialInputError, CredentialNotFound, DEFAULT_OVERLAP_MS, type CredentialService } from '../credentials/service.js'
import type { EventLog } from '../events/log.js'
import { hasScope } from '../events/types.js'
import type { Principal } from '../keys/principal.js'
import type { RoutePolicy } from '../routes/policy.js'
import type { PortalRoute } from './api.js'
import { cookieValue, PORTAL_API_PREFIX, PORTAL_PREFIX, SESSION_COOKIE, sessionCookie } from './http.js'
import type { Capability } from './schemas.js'
import { csrfTokenOf, PortalSessionInvalid, type PortalSessions } from './sessions.js'
import type { PortalSession } from './store.js'

// The portal's own routes (docs/partners.md, "The portal"): entering by a link, logging out,
// and what the page needs to know of its session. The partner routes behind the portal's
// JSON API are the API's own (portal/api.ts).

const BODY_BYTES = 4096

/** A route of a session: a policy like a partner route's (the route table's rules), under /portal. */
function sessionPolicy(path: string, methods: RoutePolicy['methods'], query: RoutePolicy['query'] = {}): RoutePolicy {
  return {
    kind: 'facade', path, methods, scope: 'brand', auth: true, query, pathParams: {},
    body: methods.includes('POST') ? { maxBytes: BODY_BYTES } : 'none', upstreams: [], scopes: {}, noScope: true,
  }
}

export const portalPolicies = {
  /** The body rule of `POST /portal/session` (step 3); it takes no credential. */
  enter: { ...sessionPolicy(`${PORTAL_PREFIX}/session`, ['POST']), auth: false },
  logout: sessionPolicy(`${PORTAL_PREFIX}/logout`, ['POST']),
  session: sessionPolicy(`${PORTAL_API_PREFIX}/session`, ['GET']),
  usage: sessionPolicy(`${PORTAL_API_PREFIX}/usage`, ['GET']),
  roll: sessionPolicy(`${PORTAL_API_PREFIX}/roll`, ['POST']),
} as const satisfies Record<string, RoutePolicy>

function sessionRoute(policy: RoutePolicy, capability: Capability = 'view'): { config: { policy: RoutePolicy; portal: PortalRoute } } {
  return { config: { policy, portal: { kind: 'session', capability, path: policy.path } } }
}

export interface PortalRouteOptions {
  sessions: PortalSessions
  /** The event log: which event types the session's credential may subscribe to. */
  events?: EventLog
  /** The credentials: the usage screen's counts, and rolling the key. */
  credentials?: CredentialService
}

/** The usage screen's span: requests per day over the last 30 days. */
export const USAGE_DAYS = 30

/** The body as an object with these fields only: 400 otherwise, as every body of the gateway's own. */
function bodyOf(request: FastifyRequest, known: readonly string[]): Record<string, unknown> {
  const body = request.body ?? {}
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError('VALIDATION_FAILED', 'The body must be a JSON object.', { errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }] })
  }
  const errors: FieldError[] = Object.keys(body).filter((name) => !known.includes(name))
    .map((name) => ({ field: name, code: 'UNKNOWN_PARAMETER', detail: `Unknown field '${quoteInput(name)}'.` }))
  if (errors.length > 0) throw new ApiError('UNKNOWN_BODY_FIELD', `The body has fields this operation does not take: ${errors.map((e) => quoteInput(e.field)).join(', ')}.`, { errors })
  return body as Record<string, unknown>
}

/**
 * A link is entered from the portal's own page: a browser says where a request comes from
 * (`Origin`, `Sec-Fetch-Site`), and another site's page may not log a person into a session
 * of its choosing. A client that says nothing (no browser) is not refused.
 */
function checkSameOrigin(request: FastifyRequest): void {
  const origin = request.headers.origin
  const site = request.headers['sec-fetch-site']
  const own = `${request.protocol}://${request.host}`
  if ((origin !== undefined && origin !== own) || (site !== undefined && site !== 'same-origin')) {
    throw new ApiError('PORTAL_CSRF_FAILED', 'A portal link is entered from the portal\'s own page; this request came from another site.')
  }
}

/** What the page knows of its session (no secret but the CSRF token, which it keeps in memory only). */
function sessionView(session: PortalSession, principal: Principal, csrfToken: string, events: EventLog | undefined) {
  return {
    sessionId: session.id,
    credentialId: session.credentialId,
    brand: principal.brand,
    mode: principal.mode,
    capabilities: session.capabilities,
    label: session.label,
    expiresAt: session.expiresAt,
    csrfToken,
    // The public types an endpoint of this credential may subscribe to: those it has the scope of.
    eventTypes: events === undefined ? [] : events.types.publicTypes.filter((type) => hasScope(principal, events.types.scopeOf(type) as string)),
  }
}

/** A call of the credentials' service, its refusals as the API's problems. */
async function credentialCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if (error instanceof CredentialInputError) throw new ApiError('VALIDATION_FAILED', error.message, { errors: error.errors })
    // Revoked between the session's check and this call: the session has ended with it.
    if (error instanceof CredentialNotFound) throw new ApiError('PORTAL_SESSION_INVALID', 'This portal session has ended: its credential is gone.')
    throw new ApiError('SERVICE_UNAVAILABLE', 'The credential cannot be read right now; retry shortly.', { retryAfter: 1, cause: error })
  }
}

function send(request: FastifyRequest, reply: FastifyReply, status: number, data: unknown): FastifyReply {
  reply.code(status)
  return sendJsonData(request, reply, JSON.stringify(data))
}

export function portalRoutes(options: PortalRouteOptions) {
  const { sessions, events, credentials } = options
  return async function routes(app: FastifyInstance): Promise<void> {
    app.removeAllContentTypeParsers()
    app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_BYTES }, (_request, text, done) => {
      if (text === '') return done(null, undefined)
      try {
        done(null, JSON.parse(text as string))
      } catch {
        done(new ApiError('MALFORMED_JSON', 'The body is not one well-formed JSON document.'), undefined)
      }
    })
    app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))

    // The page of /portal/enter posts the token of its URL's fragment here: a mail scanner
    // that fetches the link runs no script and spends nothing.
    app.post(portalPolicies.enter.path, { config: { policy: portalPolicies.enter, portal: { kind: 'enter' } } }, async (request, reply) => {
      checkSameOrigin(request)
      const { token } = bodyOf(request, ['token'])
      let entered
      try {
        entered = await sessions.enter(token)
      } catch (error) {
        if (error instanceof PortalSessionInvalid) throw new ApiError('PORTAL_SESSION_INVALID', error.detail)
        throw new ApiError('SERVICE_UNAVAILABLE', 'The portal cannot be entered right now; retry shortly.', { retryAfter: 1, cause: error })
      }
      reply.header('set-cookie', sessionCookie(request, entered.cookie, entered.session))
      return send(request, reply, 201, sessionView(entered.session, entered.principal, entered.csrfToken, events))
    })

    app.post(portalPolicies.logout.path, sessionRoute(portalPolicies.logout), async (request, reply) => {
      bodyOf(request, [])
      await sessions.logout(request.portalSession as PortalSession)
      reply.header('set-cookie', sessionCookie(request, '', null))
      return reply.code(204).send()
    })

    // A page loaded again (a reload, a bookmark) learns its session here, the CSRF token included.
    app.get(portalPolicies.session.path, sessionRoute(portalPolicies.session), async (request, reply) => {
      const csrfToken = csrfTokenOf(cookieValue(request.headers.cookie, SESSION_COOKIE) as string)
      return send(request, reply, 200, sessionView(request.portalSession as PortalSession, request.principal as Principal, csrfToken, events))
    })

    if (credentials === undefined) return

    // The credential's requests per day and route by status class, as `keys usage` counts
    // them (docs/operations.md, "Reading usage and the audit trail"): the usage screen's chart and table.
    app.get(portalPolicies.usage.path, sessionRoute(portalPolicies.usage), async (request, reply) => {
      const session = request.portalSession as PortalSession
      const { id: _id, ...usage } = await credentialCall(() => credentials.usageOf(session.credentialId, USAGE_DAYS))
      return send(request, reply, 200, usage)
    })

    // Rolling the key as `keys roll` does, with the default overlap: the new secret once, and
    // when the previous one stops working. Audited with the session as its actor.
    app.post(portalPolicies.roll.path, sessionRoute(portalPolicies.roll, 'roll_credential'), async (request, reply) => {
      bodyOf(request, [])
      const session = request.portalSession as PortalSession
      const rolled = await credentialCall(() => credentials.roll(session.credentialId, DEFAULT_OVERLAP_MS, `portal:${session.id}`))
      return send(request, reply, 201, rolled)
    })
  }
}
