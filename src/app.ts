import underPressure from '@fastify/under-pressure'
import Fastify, {
  LogController, type FastifyBaseLogger, type FastifyContextConfig, type FastifyInstance, type FastifyRequest, type onRequestHookHandler,
} from 'fastify'
import type { IncomingMessage } from 'node:http'
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
import { LazyRequestLogger } from './pipeline/request-logger.js'
import { closeWhileDraining, generateRequestId, requestContextStage } from './pipeline/request-context.js'
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
    childLoggerFactory: (logger, bindings, options, raw) => new LazyRequestLogger(logger, bindings, options, raw as IncomingMessage),
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
  for (const field of ['routeUrl', 'brand', 'trace', 'correlationId', 'principal', 'parsedQuery', 'errorCode', 'upstreamMs', 'cacheResult'] as const) {
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
  const authenticate = authenticationStage(deps.keys)
  const limitRate = deps.rateLimiter !== undefined && config.rateLimit.enabled
    ? rateLimitStage(deps.rateLimiter, config.rateLimit.limit, config.rateLimit.windowSeconds)
    : undefined

  /**
   * The order of checks (decisions 1), for one route. Each route gets the stages it takes,
   * built with its own config, so no stage looks its route up per request. Health takes
   * steps 1, 2 and 6 only.
   */
  function pipelineFor(url: string, routeConfig: FastifyContextConfig): onRequestHookHandler[] {
    const authenticated = routeConfig.authenticated === true
    return [
      routingStage(routes, url, routeConfig), // 1. route and host
      negotiationStage, // 2. Accept
      ...(authenticated ? [headerStage(routeConfig), bodyStage] : []), // 3. headers, no body
      ...(authenticated ? [authenticate] : []), // 4. API key and brand
      ...(authenticated && limitRate !== undefined ? [limitRate] : []), // 5. quota
      parametersStage(routeConfig), // 6. query and path parameters
    ] as onRequestHookHandler[]
  }

  app.addHook('onRoute', (route) => {
    const routeConfig = (route.config ?? {}) as FastifyContextConfig
    routes.add(route.url, route.method, routeConfig.brandScoped === true)
    const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]
    route.onRequest = [...pipelineFor(route.url, routeConfig), ...own]
  })

  // Every request, matched or not: its id, trace and correlation id; after the answer, the
  // log line and the metrics.
  app.addHook('onRequest', requestContextStage)
  app.addHook('onSend', closeWhileDraining)
  app.addHook('onResponse', observeStage(deps.logger, deps.metrics))

  app.setErrorHandler(errorHandler)
  app.setNotFoundHandler(notFoundHandler(routes))

  await app.register(healthRoutes)
  await app.register(propertyRoutes(deps.properties))
  return app
}
