import type { Config } from './config.js'
import type { ErrorCode } from './contract/errors.js'
import type { HealthState } from './health.js'
import type { Principal } from './keys/principal.js'
import type { Brand, BrandDirectory } from './pipeline/brands.js'
import type { ParamsSpec, ParsedQuery, QuerySpec } from './pipeline/parameters.js'
import type { TraceContext } from './pipeline/trace.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Answers only on a brand's host (health answers on every host). */
    brandScoped?: boolean
    /** Takes the authenticated pipeline: headers, API key, rate limit. */
    authenticated?: boolean
    takesPropertyHeader?: boolean
    query?: QuerySpec
    params?: ParamsSpec
  }

  interface FastifyInstance {
    gatewayConfig: Config
    brands: BrandDirectory
    health: HealthState
  }

  interface FastifyRequest {
    /** The matched route's path pattern; null when none matched. */
    routeUrl: string | null
    brand: Brand | null
    trace: TraceContext | null
    correlationId: string | null
    principal: Principal | null
    parsedQuery: ParsedQuery | null
    /** The error code answered, for the log line and metrics. */
    errorCode: ErrorCode | null
    upstreamMs: number | null
    cacheResult: string | null
  }
}
