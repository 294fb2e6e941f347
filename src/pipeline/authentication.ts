import type { FastifyRequest } from 'fastify'
import { ApiError, unauthorized } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import type { Brand } from '../http/brands.js'
import type { KeyVerifier } from '../keys/authenticator.js'
import type { Principal } from '../keys/principal.js'
import type { AuthFailureLimiter } from './abuse.js'

// Step 4 of the order of checks (docs/architecture.md, "Order of checks"): who is calling (an
// API key or an access token), and may they call this brand's host? The scope check
// (pipeline/scope.ts) follows.

// RFC 6750 2.1: the scheme is case-insensitive; b64token characters only after one space.
const BEARER = /^bearer ([A-Za-z0-9\-._~+/]+=*)$/i

export function bearerToken(header: string | undefined): string {
  if (header === undefined) throw unauthorized('MISSING_AUTH_HEADER', 'Send the header `Authorization: Bearer <API key>`.')
  const match = BEARER.exec(header)
  if (match === null) throw unauthorized('INVALID_AUTH_HEADER', 'The Authorization header must be `Bearer <API key>`.')
  return match[1] as string
}

export function authenticationStage(verifier: KeyVerifier, failures: AuthFailureLimiter) {
  /** The key is this principal's; may it be used from here, and call this host's brand? */
  const admit = (request: FastifyRequest, principal: Principal): void => {
    request.principal = principal
    // Found and active; from an address it may be used from? (docs/architecture.md, "Allowed addresses")
    if (principal.allowedFrom !== undefined && !principal.allowedFrom(request.ip)) throw ipNotAllowed(principal, request.ip)
    const brand = request.brand as Brand
    if (principal.brand !== brand.id) {
      const credential = principal.kind === 'apiKey' ? 'This API key belongs to' : 'The client of this access token is registered for'
      throw new ApiError('BRAND_ACCESS_DENIED', `${credential} another brand; it cannot be used at host '${quoteInput(request.hostname)}'.`)
    }
  }
  return function authenticate(request: FastifyRequest): void | Error | Promise<void | Error> {
    // An address over its 401 allowance (docs/security.md, "Invented keys") has its look-ups
    // refused: a credential this instance must look up (in Redis, or with a JWKS fetch) is
    // answered 429. A credential it already knows to be valid never needs one, so partners
    // behind the same address as whoever sends junk are never locked out by it.
    const address = request.ip
    let reserved = false
    /** The refusal, counted against the address when it is a 401 (returned, not thrown again: docs/performance.md). */
    const countedRefusal = (error: unknown): Error => {
      // A known credential refused still owns the request (its request log shows the refusal).
      if (error instanceof ApiError && error.credential !== undefined) request.refusedCredential = error.credential
      const refused = error instanceof ApiError && error.status === 401
      if (refused && !reserved) failures.add(address)
      else if (!refused && reserved) failures.release(address)
      // What is no Error is not a refusal of ours: it goes on as thrown.
      if (error instanceof Error) return error
      throw error
    }
    let principal: Principal | ApiError | Promise<Principal>
    try {
      principal = verifier.verify(bearerToken(request.headers.authorization), {
        beforeLookup: () => {
          // One reservation per request, however many look-ups its credential needs.
          if (reserved) return
          failures.reserve(address)
          reserved = true
        },
      })
    } catch (error) {
      return countedRefusal(error)
    }
    // A key this instance holds is answered at once, as is one it knows to refuse; only a look-up waits.
    if (principal instanceof ApiError) return countedRefusal(principal)
    if (!(principal instanceof Promise)) return admit(request, principal)
    return principal.then((found) => {
      if (reserved) failures.release(address)
      admit(request, found)
    }, countedRefusal)
  }
}

/** 403 IP_NOT_ALLOWED: names the address seen, never the list. */
function ipNotAllowed(principal: Principal, address: string): ApiError {
  const credential = principal.kind === 'apiKey' ? 'This API key' : 'The client of this access token'
  return new ApiError('IP_NOT_ALLOWED', `${credential} may not be used from the address ${quoteInput(address)}.`)
}
