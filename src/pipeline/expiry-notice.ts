import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Principal } from '../keys/principal.js'

// Step 4, once the credential is known (docs/architecture.md, "Order of checks"): an answer to
// a credential that stops working within `keys.expiryWarningDays` carries
// `Service-Credential-Expires: <RFC 3339 time>`, errors of the later steps included, so that a
// partner's own monitoring sees it coming (docs/partners.md, "When a credential expires"). A
// rolled key's previous secret stops at the end of its overlap: that is the time it names.

export const HEADER_CREDENTIAL_EXPIRES = 'service-credential-expires'

export function expiryNoticeStage(warningMs: number) {
  return function noticeExpiry(request: FastifyRequest, reply: FastifyReply): void {
    const { expiresAtMs, expiresAt } = request.principal as Principal
    if (expiresAtMs !== undefined && expiresAtMs - Date.now() <= warningMs) reply.header(HEADER_CREDENTIAL_EXPIRES, expiresAt as string)
  }
}
