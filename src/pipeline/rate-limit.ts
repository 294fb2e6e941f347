import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import type { Principal } from '../keys/principal.js'
import type { RateLimiter, Verdict } from '../ratelimit/limiter.js'

// Step 5 of decisions 1: the key's quota. Every authenticated answer under the quota carries
// RateLimit-Limit, -Remaining and -Reset (draft-ietf-httpapi-ratelimit-headers); over it,
// 429 RATE_LIMITED with Retry-After. When Redis cannot answer, the request goes through
// without the headers (fail open, counted and logged by the limiter).

export function rateLimitStage(limiter: RateLimiter, defaultLimit: number, windowSeconds: number) {
  const answer = (reply: FastifyReply, limit: number, verdict: Verdict | undefined): void => {
    if (verdict === undefined) return
    reply.header('ratelimit-limit', String(limit))
    reply.header('ratelimit-remaining', String(verdict.remaining))
    reply.header('ratelimit-reset', String(verdict.resetSeconds))
    if (!verdict.allowed) {
      throw new ApiError('RATE_LIMITED',
        `This API key may make ${limit} requests per ${windowSeconds} seconds; the quota resets in ${verdict.resetSeconds} seconds.`,
        { retryAfter: verdict.resetSeconds })
    }
  }
  return function rateLimit(request: FastifyRequest, reply: FastifyReply): void | Promise<void> {
    const principal = request.principal as Principal
    const limit = principal.rateLimit ?? defaultLimit
    const verdict = limiter.take(principal.keyId, limit)
    if (verdict instanceof Promise) return verdict.then((v) => answer(reply, limit, v))
    return answer(reply, limit, verdict)
  }
}
