import type { FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import type { Brand } from '../http/brands.js'
import type { AuthFailureLimiter } from '../pipeline/abuse.js'
import type { Check } from '../pipeline/check.js'
import { cookieValue, CSRF_HEADER, SESSION_COOKIE } from './http.js'
import type { Capability } from './schemas.js'
import { csrfMatches, PortalSessionInvalid, type PortalSessions } from './sessions.js'

// Step 4 of the order of checks on the portal's routes (docs/architecture.md, "The partner
// portal"): the session's cookie stands in for the Bearer credential. The session and its
// credential as they are now, the host's brand, then for a change the CSRF token, then the
// capability the action needs. The scope check, the quota and every later step are the
// route's own, as on the partner API.

const READS: ReadonlySet<string> = new Set(['GET', 'HEAD'])

export function portalSessionStage(sessions: PortalSessions, failures: AuthFailureLimiter) {
  return function stageFor(capability: Capability): Check {
    return async function checkSession(request: FastifyRequest): Promise<void> {
      // An address past its allowance of refusals is refused before a look-up, as for keys
      // (docs/security.md, "Invented keys").
      failures.check(request.ip)
      const cookie = cookieValue(request.headers.cookie, SESSION_COOKIE)
      let resolved
      try {
        resolved = await sessions.resolve(cookie)
      } catch (error) {
        if (!(error instanceof PortalSessionInvalid)) {
          throw new ApiError('SERVICE_UNAVAILABLE', 'The portal session cannot be checked right now; retry shortly.', { retryAfter: 1, cause: error })
        }
        failures.add(request.ip)
        throw new ApiError('PORTAL_SESSION_INVALID', error.detail)
      }
      const { session, principal } = resolved
      request.principal = principal
      request.portalSession = session
      // A cookie is sent only to the host that set it; another brand's host never holds one.
      if (principal.brand !== (request.brand as Brand).id) throw new ApiError('PORTAL_SESSION_INVALID', 'This portal session belongs to another brand\'s portal.')
      if (!READS.has(request.method) && !csrfMatches(cookie as string, headerOnce(request, CSRF_HEADER))) {
        throw new ApiError('PORTAL_CSRF_FAILED', `A change in the portal needs the session's CSRF token in the ${CSRF_HEADER} header; nothing was changed. Reload the portal and try again.`)
      }
      if (!session.capabilities.includes(capability)) {
        throw new ApiError('PORTAL_CAPABILITY_MISSING', `This portal session may not do this: it needs the capability '${capability}', which its link did not give.`)
      }
    }
  }
}

function headerOnce(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return typeof value === 'string' ? value : undefined
}
