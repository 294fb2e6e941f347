import underPressure from '@fastify/under-pressure'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { Metrics } from './admin/metrics.js'
import type { Config } from './config.js'
import { errorHandler } from './contract/error-handler.js'
import { ApiError } from './contract/errors.js'
import { healthRoutes, HealthState } from './health.js'
import { authenticationStage, type KeyVerifier } from './pipeline/authentication.js'
import { bodyStage, BODY_LIMIT } from './pipeline/body.js'
import { BrandDirectory } from './pipeline/brands.js'
import { clientErrorHandler } from './pipeline/client-errors.js'
import { headerStage } from './pipeline/headers.js'
import { observeStage } from './pipeline/log.js'
import { negotiationStage } from './pipeline/negotiation.js'
import { parametersStage } from './pipeline/parameters.js'
import { closeWhileDraining, generateRequestId, requestContextStage, traceOf } from './pipeline/request-context.js'
import { RouteIndex } from './pipeline/route-index.js'
import { MAX_URL_LENGTH, notFoundHandler, routingStage } from './pipeline/routing.js'
import { rateLimitStage } from './pipeline/rate-limit.js'
import { propertyRoutes } from './properties/routes.js'
import type { PropertySource } from './properties/source.js'
import type { RateLimiter } from './ratelimit/limiter.js'
import './types.js'

export interface AppDependencies {
  config: Config
  logger: Logger
  keys: KeyVerifier
  properties: PropertySource
  health?: HealthState
  metrics?: Metrics
  /** Absent when `rateLimit.enabled` is false. */
  rateLimiter?: RateLimiter
}

/** Load shedding: every route but health answers 503; health answers unhealthy itself. */
function shedLoad(request: FastifyRequest): Promise<void> | undefined {
  if (request.routeOptions.config.authenticated !== true && !request.is404) return undefined
  return Promise.reject(new ApiError('SERVICE_UNAVAILABLE', 'The gateway is overloaded; retry shortly.', { retryAfter: 1 }))
}

/** The public API: the pipeline of decisions 1, in its order, and the routes. */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const { config } = deps
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Our own single line per request replaces Fastify's two (pipeline/log.ts).
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: generateRequestId,
    childLoggerFactory: (logger, bindings, options, raw) =>
      logger.child({ ...bindings, traceId: traceOf(raw as Parameters<typeof traceOf>[0]).traceId }, options),
    trustProxy: config.trustProxy,
    bodyLimit: BODY_LIMIT,
    routerOptions: { maxParamLength: MAX_URL_LENGTH },
    // Keep serving while closing: in-flight and drained requests must still be answered.
    return503OnClosing: false,
    clientErrorHandler: clientErrorHandler(config.docsUrl),
    frameworkErrors: (error, request, reply) => errorHandler(error, request, reply),
  })

  app.decorate('gatewayConfig', config)
  app.decorate('brands', new BrandDirectory(config.brands, config.docsUrl))
  app.decorate('health', deps.health ?? new HealthState())
  for (const field of ['brand', 'trace', 'correlationId', 'principal', 'parsedQuery', 'errorCode', 'upstreamMs', 'cacheResult'] as const) {
    app.decorateRequest(field, null)
  }

  const shedding = config.loadShedding
  if (shedding.maxEventLoopDelayMs > 0 || shedding.maxEventLoopUtilization > 0) {
    await app.register(underPressure, {
      maxEventLoopDelay: shedding.maxEventLoopDelayMs,
      maxEventLoopUtilization: shedding.maxEventLoopUtilization,
      sampleInterval: shedding.sampleIntervalMs,
      pressureHandler: shedLoad,
    })
    const pressured = app as unknown as { isUnderPressure(): boolean }
    app.health.add('eventLoop', () => !pressured.isUnderPressure())
  }

  const routes = new RouteIndex()
  app.addHook('onRoute', (route) => {
    routes.add(route.url, route.method, route.config?.brandScoped === true)
  })

  // The order of checks (decisions 1). Each stage skips what does not concern its route.
  app.addHook('onRequest', requestContextStage) // ids, trace, correlation id
  app.addHook('onRequest', routingStage(routes)) // 1. route and host
  app.addHook('onRequest', negotiationStage) // 2. Accept
  app.addHook('onRequest', headerStage) // 3. headers
  app.addHook('onRequest', bodyStage) // 3. no body where none is taken
  app.addHook('onRequest', authenticationStage(deps.keys)) // 4. API key and brand
  if (deps.rateLimiter !== undefined && config.rateLimit.enabled) {
    app.addHook('onRequest', rateLimitStage(deps.rateLimiter, config.rateLimit.limit, config.rateLimit.windowSeconds)) // 5. quota
  }
  app.addHook('onRequest', parametersStage) // 6. query and path parameters
  app.addHook('onSend', closeWhileDraining)
  app.addHook('onResponse', observeStage(deps.metrics))

  app.setErrorHandler(errorHandler)
  app.setNotFoundHandler(notFoundHandler(routes))

  await app.register(healthRoutes)
  await app.register(propertyRoutes(deps.properties))
  return app
}
