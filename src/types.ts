import type { Span } from '@opentelemetry/api'
import type { Config } from './config.js'
import type { ErrorCode, RefusedCredential } from './contract/errors.js'
import type { HealthState } from './health.js'
import type { Brand, BrandDirectory } from './http/brands.js'
import type { RouteIndex } from './http/route-index.js'
import type { TraceContext } from './http/trace.js'
import type { Principal } from './keys/principal.js'
import type { ParsedQuery } from './pipeline/parameters.js'
import type { PortalRoute } from './portal/api.js'
import type { PortalSession } from './portal/store.js'
import type { RoutePolicy } from './routes/policy.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route is: every stage of its pipeline is composed from it (app.ts). */
    policy?: RoutePolicy
    /** A route of the partner portal: its pipeline takes the session instead of a Bearer credential (portal/api.ts). */
    portal?: PortalRoute
  }

  interface FastifyInstance {
    gatewayConfig: Config
    /** The app's routes by path and method: what its `Allow` headers are made from. */
    routeIndex: RouteIndex
    brands: BrandDirectory
    health: HealthState
  }

  interface FastifyRequest {
    /** The matched route's path pattern; null when none matched. */
    routeUrl: string | null
    brand: Brand | null
    trace: TraceContext | null
    /** The request's server span, when tracing is on (tracing/tracing.ts). */
    span: Span | null
    correlationId: string | null
    principal: Principal | null
    /** A known credential refused at step 4 (expired, suspended): the request is still its own. */
    refusedCredential: RefusedCredential | null
    /** The partner portal's session behind the principal, on the portal's routes. */
    portalSession: PortalSession | null
    parsedQuery: ParsedQuery | null
    /** The validated `Service-Property-Id`, lower-cased, on property-scoped routes. */
    propertyId: string | null
    /** The error code answered, for the log line and metrics. */
    errorCode: ErrorCode | null
    upstreamMs: number | null
    /** The upstream called and what it answered, for the log line. */
    upstreamName: string | null
    upstreamStatus: number | null
    upstreamStartedAt: number | null
    /** The path and query (`?…` or '') a declared route's service is called on, built from validated values. */
    upstreamPath: string | null
    upstreamQuery: string | null
    /** Why a declared service's streamed answer ended before its end, for the log line. */
    upstreamCut: string | null
    cacheResult: string | null
    /** The Idempotency-Key of a POST or PATCH on a declared route, unquoted, once step 3 found it valid. */
    idempotencyKey: string | null
    /** What the idempotency record did for this request (stored, replayed, …), for the log line. */
    idempotency: string | null
    /** The request's log line and metrics are written (pipeline/log.ts): once, however it ended. */
    observed: boolean
    /**
     * Work for the request goes on after its partner has gone (a declared service's call runs to
     * its end): the line is written when that work ends, not when the partner leaves.
     */
    logDeferred: boolean
  }
}
