import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, unauthorized } from '../contract/errors.js'
import type { Brand } from '../http/brands.js'
import type { KeyVerifier } from '../keys/authenticator.js'

// Step 4 of decisions 1: who is calling, and may they call this brand's host?

// RFC 6750 2.1: the scheme is case-insensitive; b64token characters only after one space.
const BEARER = /^bearer ([A-Za-z0-9\-._~+/]+=*)$/i

export function bearerToken(header: string | undefined): string {
  if (header === undefined) throw unauthorized('MISSING_AUTH_HEADER', 'Send the header `Authorization: Bearer <API key>`.')
  const match = BEARER.exec(header)
  if (match === null) throw unauthorized('INVALID_AUTH_HEADER', 'The Authorization header must be `Bearer <API key>`.')
  return match[1] as string
}

export function authenticationStage(verifier: KeyVerifier) {
  return async function authenticate(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const principal = await verifier.verify(bearerToken(request.headers.authorization))
    request.principal = principal
    const brand = request.brand as Brand
    if (principal.brand !== brand.id) {
      throw new ApiError('BRAND_ACCESS_DENIED', `This API key belongs to another brand; it cannot be used at host '${request.hostname}'.`)
    }
  }
}
