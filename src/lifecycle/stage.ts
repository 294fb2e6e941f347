import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import type { Deprecation } from '../routes/policy.js'
import { deprecationHeaders, phaseAt, retiredDetail } from './rules.js'

// Right after step 1 (docs/architecture.md, "Order of checks"): a deprecated route announces
// it on every answer from `since`, whatever the later steps answer, and from `sunset` answers
// 410 ROUTE_RETIRED before any credential is asked for. The dates are read once, when the
// route's pipeline is composed; the clock per request.

export function deprecationStage(path: string, deprecation: Deprecation, counted: ((route: string) => void) | undefined) {
  const sinceMs = Date.parse(deprecation.since)
  const sunsetMs = deprecation.sunset === undefined ? undefined : Date.parse(deprecation.sunset)
  const headers = deprecationHeaders(deprecation)
  const detail = retiredDetail(path, deprecation)
  return function noticeDeprecation(_request: FastifyRequest, reply: FastifyReply): void {
    const phase = phaseAt(sinceMs, sunsetMs, Date.now())
    if (phase === 'announced') return
    counted?.(path)
    reply.headers(headers)
    if (phase === 'retired') throw new ApiError('ROUTE_RETIRED', detail)
  }
}
