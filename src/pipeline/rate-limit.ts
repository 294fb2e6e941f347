import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import type { Principal } from '../keys/principal.js'
import type { RateLimiter, Verdict } from '../ratelimit/limiter.js'

// Step 5 of the order of checks (docs/architecture.md, "Quotas"): the credential's quota (an
// API key's, or a token client's grant's). Every authenticated answer under the quota, errors
// included (docs/architecture.md §D5), carries the contract's RateLimit-Limit, -Remaining and
// -Reset, and beside them the two fields of draft-ietf-httpapi-ratelimit-headers-11 as RFC 9651
// structured fields: `RateLimit-Policy: "default";q=<quota>;w=<window seconds>` and
// `RateLimit: "default";r=<left>;t=<seconds to reset>`. Over it, 429 RATE_LIMITED with
// Retry-After. When Redis cannot answer, the request goes through without the headers (fail
// open, counted and logged by the limiter).

export function rateLimitStage(limiter: RateLimiter, defaultLimit: number, windowSeconds: number) {
  // One policy string per quota in use (a handful), not one per request.
  const policies = new Map<number, string>()
  const policyOf = (limit: number): string => {
    let policy = policies.get(limit)
    if (policy === undefined) {
      policy = `"default";q=${limit};w=${windowSeconds}`
      if (policies.size < 1000) policies.set(limit, policy)
    }
    return policy
  }
  /** The quota headers of the verdict, and its refusal when the quota is spent. */
  const answer = (reply: FastifyReply, limit: number, verdict: Verdict | undefined): ApiError | undefined => {
    if (verdict === undefined) return undefined
    const remaining = String(verdict.remaining)
    const reset = String(verdict.resetSeconds)
    reply.header('ratelimit-limit', String(limit))
    reply.header('ratelimit-remaining', remaining)
    reply.header('ratelimit-reset', reset)
    reply.header('ratelimit-policy', policyOf(limit))
    reply.header('ratelimit', `"default";r=${remaining};t=${reset}`)
    if (!verdict.allowed) {
      const credential = (reply.request.principal as Principal).kind === 'apiKey' ? 'This API key' : 'The client of this access token'
      return new ApiError('RATE_LIMITED',
        `${credential} may make ${limit} requests per ${windowSeconds} seconds; the quota resets in ${verdict.resetSeconds} seconds.`,
        { retryAfter: verdict.resetSeconds })
    }
    return undefined
  }
  return function rateLimit(request: FastifyRequest, reply: FastifyReply): void | Error | Promise<void | Error> {
    const principal = request.principal as Principal
    const limit = principal.rateLimit ?? defaultLimit
    const verdict = limiter.take(principal.keyId, limit)
    if (verdict instanceof Promise) return verdict.then((v) => answer(reply, limit, v))
    return answer(reply, limit, verdict)
  }
}
