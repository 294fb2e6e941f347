import type { FastifyInstance } from 'fastify'
import type { PartnerCredential } from '../contract/credential.js'
import { sendJsonData } from '../contract/envelope.js'
import { ApiError, unauthorized } from '../contract/errors.js'
import type { Principal } from '../keys/principal.js'
import { builtInRoutes, routerPath } from '../routes/policy.js'
import { CredentialNotFound, type CredentialService } from './service.js'

// GET /v1/credential (docs/partners.md, "Who am I: GET /v1/credential"): the calling
// credential as the partner may see it, for any valid credential, no scope needed. Its checks
// up to step 6 come from its policy (routes/policy.ts), composed in app.ts; the record is read
// from the credentials service (one Redis read: a partner asks this rarely), never from a
// cache that could hold a change back.

export function credentialRoute(service: CredentialService) {
  return async function routes(app: FastifyInstance): Promise<void> {
    const policy = builtInRoutes.getCredential
    const { limit, windowSeconds } = service.known.rateLimit
    app.get(routerPath(policy.path), { config: { policy } }, async (request, reply) => {
      const principal = request.principal as Principal
      let view
      try {
        view = await service.show(principal.keyId)
      } catch (error) {
        // Revoked between the check of step 4 and this read.
        if (error instanceof CredentialNotFound) {
          throw principal.kind === 'apiKey'
            ? unauthorized('INVALID_API_KEY', 'The API key is not valid.')
            : new ApiError('CLIENT_NOT_REGISTERED', 'The client of this access token is not registered for this API.')
        }
        throw new ApiError('SERVICE_UNAVAILABLE', 'The credential cannot be read right now; retry shortly.', { retryAfter: 1, cause: error })
      }
      const data: PartnerCredential = {
        id: view.id,
        type: view.type,
        name: view.name,
        brand: view.brand,
        mode: view.mode,
        scopes: view.scopes,
        properties: view.properties,
        rateLimit: { limit: view.rateLimit ?? limit, windowSeconds },
        expiresAt: view.expiresAt,
        allowedIps: view.allowedIps,
        previousSecretExpiresAt: view.previousSecretExpiresAt,
        lastUsedAt: view.lastUsedAt,
      }
      return sendJsonData(request, reply, JSON.stringify(data))
    })
  }
}
