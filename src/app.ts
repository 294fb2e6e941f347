import Fastify, {
  LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type onRequestHookHandler, type preHandlerAsyncHookHandler,
} from 'fastify'
import { createServer, ServerResponse, type IncomingMessage, type RequestListener } from 'node:http'
import type { Logger } from 'pino'
import type { Metrics } from './admin/metrics.js'
import type { Config } from './config.js'
import { errorHandler } from './contract/error-handler.js'
import { ApiError } from './contract/errors.js'
import { healthRoutes, HealthState } from './health.js'
import { BrandDirectory } from './http/brands.js'
import { CoalescedResponse, CoalescingServer } from './http/coalesced-response.js'
import { clientErrorHandler, closeIdleReaders, connectHandler, serveEveryRequest } from './http/client-errors.js'
import { LoadShedder } from './http/load-shedding.js'
import { MAX_URL_LENGTH } from './http/limits.js'
import { closeWhileDraining, requestContext } from './http/request-context.js'
import { generateRequestId } from './http/request-id.js'
import { LazyRequestLogger } from './http/request-logger.js'
import { RouteIndex } from './http/route-index.js'
import type { KeyVerifier } from './keys/authenticator.js'
import { AuthFailureLimiter } from './pipeline/abuse.js'
import { authenticationStage } from './pipeline/authentication.js'
import { bodyStage } from './pipeline/body.js'
import { runChecks, type Check } from './pipeline/check.js'
import { headerStage } from './pipeline/headers.js'
import { observeStage } from './pipeline/log.js'
import { negotiationStage } from './pipeline/negotiation.js'
import { parametersStage } from './pipeline/parameters.js'
import { rateLimitStage } from './pipeline/rate-limit.js'
import { propertyScopeStage, testModeStage, type SandboxCheck } from './pipeline/resource.js'
import { scopeStage } from './pipeline/scope.js'
import { expiryNoticeStage } from './pipeline/expiry-notice.js'
import { credentialRoute } from './credentials/partner-route.js'
import type { CredentialService } from './credentials/service.js'
import type { UsageRecorder } from './credentials/usage.js'
import { movedStage, notFoundHandler, routingStage } from './pipeline/routing.js'
import { withDeprecation } from './lifecycle/config.js'
import { movedPaths } from './lifecycle/rules.js'
import { deprecationStage } from './lifecycle/stage.js'
import { propertyRoutes } from './properties/routes.js'
import type { PropertySource } from './properties/source.js'
import type { IdempotencyRecords } from './idempotency/records.js'
import type { EventLog } from './events/log.js'
import { eventRoutes } from './events/routes.js'
import type { EventTypes } from './events/types.js'
import { declaredRoutes, type ProxyHooks } from './proxy/routes.js'
import type { Services } from './proxy/services.js'
import type { RateLimiter } from './ratelimit/limiter.js'
import { requestLogPartnerRoutes, routeTemplatesOf } from './request-log/routes.js'
import type { RequestLogStore } from './request-log/store.js'
import type { RequestLogWriter } from './request-log/writer.js'
import { assertPolicy, DEFAULT_BODY_BYTES, type RoutePolicy } from './routes/policy.js'
import type { Tracing } from './tracing/tracing.js'
import { portalTwin } from './portal/api.js'
import { portalHeaders } from './portal/http.js'
import { portalSessionStage } from './portal/pipeline.js'
import { buildDirectory, portalPages, readBuild } from './portal/pages.js'
import { portalPolicies, portalRoutes } from './portal/routes.js'
import type { PortalSessions } from './portal/sessions.js'
import './types.js'

export interface AppDependencies {
  config: Config
  logger: Logger
  /** API keys and access tokens (keys/credentials.ts). */
  keys: KeyVerifier
  properties: PropertySource
  health?: HealthState
  metrics?: Metrics
  /** Absent when `rateLimit.enabled` is false. */
  rateLimiter?: RateLimiter
  /** The services of the declared routes (config `upstreams`); required when there are any. */
  services?: Services
  proxyHooks?: ProxyHooks
  /** Which upstreams have a sandbox for test keys (docs/architecture.md, "Test mode"); without it a test key gets 403. */
  hasSandbox?: SandboxCheck
  /** Absent unless spans are exported: then no request makes a span. */
  tracing?: Tracing
  /** The records of Idempotency-Key; without them a declared route forwards the header and keeps nothing. */
  idempotency?: IdempotencyRecords
  // Credentials over their life (docs/architecture.md, "Usage and last use").
  /** Counts each credential's requests; without it nothing is counted. */
  usage?: UsageRecorder
  /** Behind GET /v1/credential; without it the route is not served. */
  credentials?: CredentialService
  /** The event log; without it there are no /v1/events routes. */
  events?: EventLog
  /** The public event types of `config` when they are not yet the log's (an app a reload builds). */
  eventTypes?: EventTypes
  /** The webhook endpoints API (webhooks/routes.ts); without it (no Redis) it is not served. */
  webhooks?: (app: FastifyInstance) => Promise<void>
  /** The partner portal's sessions (portal/sessions.ts); without them (no Redis, or `portal.enabled` false) no /portal route is served. */
  portal?: PortalSessions
  /** The request log (docs/architecture.md, "The request log"): its writer and store; without it (no Redis, or `requestLog.enabled` false) nothing is kept and its routes are not served. */
  requestLog?: { writer: RequestLogWriter; store: RequestLogStore }
  /**
   * Where the listener this app builds sends each request: this app's handler at first; a
   * reload points it at the app built from the new configuration (src/lifecycle/reload.ts).
   */
  dispatch?: Dispatch
  /** Built by a reload: it serves through the listener of the app it replaces and builds none of its own. */
  detached?: boolean
}

/**
 * What the listener hands on to the app in force: each request, and the route index its own
 * answers (a request Node's parser refused, CONNECT) take their `Allow` from. A reload points
 * both at the app it built (src/gateway.ts).
 */
export interface Dispatch {
  handler: RequestListener
  routes: Pick<RouteIndex, 'allowFor'>
}

function noop(): void {}

/** Load shedding: every route but health answers 503; health answers unhealthy itself. */
function shedLoad(shedder: LoadShedder, metrics: Metrics | undefined) {
  return function shed(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
    if (!shedder.overloaded || (request.routeOptions.config.policy?.auth !== true && !request.is404)) return done()
    metrics?.shedRequests.inc()
    done(new ApiError('SERVICE_UNAVAILABLE', 'The gateway is overloaded; retry shortly.', { retryAfter: 1 }))
  }
}

/**
 * The public listener with the slow-client bounds of docs/security.md, "Slow clients". Node
 * enforces the header and request deadlines only when it checks its connections (every 30 s by
 * default), so it checks at least every second: a slow client is cut within a second of its
 * deadline. What Node would answer or drop by itself (an Expect it does not know, CONNECT) is
 * ours to answer (http/client-errors.ts).
 */
function serverWithTimeouts(settings: Config['server'], docsUrl: string, routes: Pick<RouteIndex, 'allowFor'>, dispatch: Dispatch | undefined) {
  return (handler: RequestListener) => {
    const server = new CoalescingServer({
      headersTimeout: settings.headersTimeoutMs,
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(settings.headersTimeoutMs / 2))),
      // A request without Host gets its problem+json from step 1 (pipeline/routing.ts), with a
      // request id, not Node's bare 400.
      requireHostHeader: false,
      // The answers of one turn end together (http/coalesced-response.ts). (Node's typings
      // want a class generic over the request type, which a subclass of the plain one is not.)
      ServerResponse: (settings.coalesceAnswers ? CoalescedResponse : ServerResponse) as typeof ServerResponse,
    })
    // Older Node versions take these only as properties.
    server.keepAliveTimeout = settings.keepAliveTimeoutMs
    server.headersTimeout = settings.headersTimeoutMs
    server.requestTimeout = settings.requestTimeoutMs
    if (dispatch === undefined) serveEveryRequest(server, handler)
    else {
      dispatch.handler = handler
      serveEveryRequest(server, (req, res) => dispatch.handler(req, res))
    }
    closeIdleReaders(server, settings.writeIdleTimeoutMs)
    server.on('connect', connectHandler(docsUrl, routes))
    return server
  }
}

/** The public API: the pipeline of docs/architecture.md, "Order of checks", in its order, for every route, and the routes. */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const { config } = deps
  // Filled from onRoute; the not-found and parser-error handlers consult it.
  const routes = new RouteIndex()
  // The listener's own answers consult the index of the app in force, which a reload changes.
  const { dispatch } = deps
  if (dispatch !== undefined) dispatch.routes = routes
  const listenerRoutes: Pick<RouteIndex, 'allowFor'> = dispatch === undefined ? routes : { allowFor: (path) => dispatch.routes.allowFor(path) }
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Our own single line per request replaces Fastify's two (pipeline/log.ts).
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: generateRequestId,
    childLoggerFactory: (logger, bindings, options, raw) => new LazyRequestLogger(logger, bindings, options, raw as IncomingMessage),
    // The config refuses a hop count (src/http/config.ts): only these two forms get here.
    trustProxy: config.trustProxy as boolean | string[],
    // An app built by a reload never listens: its handler is called by the listener it replaces.
    serverFactory: deps.detached === true ? () => createServer() : serverWithTimeouts(config.server, config.docsUrl, listenerRoutes, dispatch),
    bodyLimit: DEFAULT_BODY_BYTES,
    routerOptions: { maxParamLength: MAX_URL_LENGTH },
    // Keep serving while closing: in-flight and drained requests must still be answered.
    return503OnClosing: false,
    clientErrorHandler: clientErrorHandler(config.docsUrl, listenerRoutes),
    frameworkErrors: (error, request, reply) => errorHandler(error, request, reply),
  })

  // A content parser runs only for a request step 3 let through. A route that takes a body reads
  // and checks its JSON itself (src/proxy/routes.ts); anywhere else step 3 has refused any body,
  // so what is left is empty whatever its Content-Type says: a DELETE announced as JSON with no
  // body is not malformed JSON, and one announced as XML is no unsupported media type. (The
  // routes without step 3, health and the like, take GET only, whose body Fastify never reads.)
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))

  app.decorate('gatewayConfig', config)
  app.decorate('routeIndex', routes)
  app.decorate('brands', new BrandDirectory(config.brands, config.docsUrl))
  app.decorate('health', deps.health ?? new HealthState())
  for (const field of ['routeUrl', 'brand', 'trace', 'span', 'correlationId', 'principal', 'refusedCredential', 'portalSession', 'parsedQuery', 'propertyId', 'errorCode', 'upstreamMs',
    'upstreamName', 'upstreamStatus', 'upstreamStartedAt', 'upstreamPath', 'upstreamQuery', 'upstreamCut', 'cacheResult', 'idempotencyKey', 'idempotency'] as const) {
    app.decorateRequest(field, null)
  }
  app.decorateRequest('observed', false)
  app.decorateRequest('logDeferred', false)

  const shedder = new LoadShedder(config.loadShedding)
  if (shedder.enabled) {
    shedder.start()
    app.addHook('onClose', async () => shedder.stop())
    app.health.add('eventLoop', () => !shedder.overloaded)
    deps.metrics?.watchShedding(() => shedder.overloaded)
  }
  deps.metrics?.watchHealth(() => app.health.healthy)

  const authFailures = new AuthFailureLimiter({ perMinute: config.abuse.authFailuresPerMinute, trackedAddresses: config.abuse.trackedAddresses })
  const authenticate = authenticationStage(deps.keys, authFailures)
  const limitRate = deps.rateLimiter !== undefined && config.rateLimit.enabled
    ? rateLimitStage(deps.rateLimiter, config.rateLimit.limit, config.rateLimit.windowSeconds)
    : undefined
  const hasSandbox = deps.hasSandbox ?? (() => true)
  const checkPropertyScope = propertyScopeStage(deps.properties, config.accessDeniedStatus)
  const warningMs = config.keys.expiryWarningDays * 86_400_000
  const noticeExpiry = warningMs > 0 ? expiryNoticeStage(warningMs) : undefined

  const countDeprecated = deps.metrics === undefined ? undefined : deps.metrics.deprecatedRequest.bind(deps.metrics)

  // The partner portal's session stands in for the credential at step 4 on its routes.
  const portalSession = deps.portal === undefined ? undefined : portalSessionStage(deps.portal, authFailures)

  /**
   * The order of checks (docs/architecture.md, "Order of checks") for one route, composed from
   * its policy when the route is registered, so no stage looks its route up per request. Steps
   * 1 to 6 run on the request's head; the body (on routes that take one) is read after them,
   * and the resource steps run once it is in. `step4` finds the caller: the Bearer credential,
   * or on the portal's routes its session.
   */
  function pipelineFor(url: string, policy: RoutePolicy, step4: Check = authenticate): { onRequest: onRequestHookHandler[]; preHandler: preHandlerAsyncHookHandler[] } {
    const brandScoped = policy.scope !== 'none'
    // Logs and metrics name a declared route by its declared path (docs/architecture.md, "The
    // pass-through's bounds").
    const label = policy.kind === 'proxy' ? policy.path : url
    const checks: Check[] = [
      routingStage(routes, label, brandScoped), // 1. route and host
      ...(policy.deprecation === undefined ? [] : [deprecationStage(policy.path, policy.deprecation, countDeprecated)]), // (deprecated: its headers from here on; retired: 410)
      negotiationStage, // 2. Accept
      ...(policy.auth ? [headerStage(policy.scope, policy.idempotency), bodyStage(policy)] : []), // 3. headers, body framing
      ...(policy.auth ? [step4] : []), // 4. API key or access token, where it is used from, brand,
      ...(policy.auth && noticeExpiry !== undefined ? [noticeExpiry] : []), // (its coming expiry on every answer from here on)
      ...(policy.auth ? [scopeStage(policy)] : []), // then the method's scope
      ...(policy.auth && limitRate !== undefined ? [limitRate] : []), // 5. quota
      parametersStage(policy.query, policy.pathParams), // 6. query and path parameters (then the body is read: 6, well-formed JSON)
    ]
    const onRequest = [runChecks(checks)] as onRequestHookHandler[]
    const testMode = policy.auth ? testModeStage(policy, hasSandbox) : undefined
    const preHandler = [
      ...(testMode === undefined ? [] : [testMode]), // a test key needs a sandbox of every upstream (docs/architecture.md, "Test mode")
      ...(policy.scope === 'property' ? [checkPropertyScope] : []), // 7. the property of Service-Property-Id
    ] as preHandlerAsyncHookHandler[]
    return { onRequest, preHandler }
  }

  app.addHook('onRoute', function onRoute(route) {
    const own = (hooks: unknown): unknown[] => (hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks])
    const portal = route.config?.portal
    // The portal's pages and its entering take no credential: the host's brand, and for the
    // entering the request's form (docs/architecture.md, "The partner portal").
    if (portal?.kind === 'page' || portal?.kind === 'enter') {
      routes.add(route.url, route.method, true)
      const checks: Check[] = portal.kind === 'page'
        ? [routingStage(routes, route.url, true)]
        : [routingStage(routes, route.url, true), negotiationStage, headerStage('brand'), bodyStage(portalPolicies.enter)]
      route.onRequest = [runChecks(checks), ...own(route.onRequest)] as onRequestHookHandler[]
      return
    }
    const declaredPolicy = route.config?.policy
    // Every public route has a policy; one without would skip the checks, so it may not start.
    if (declaredPolicy === undefined) throw new Error(`route ${String(route.method)} ${route.url} has no policy`)
    // A built-in route takes its deprecation from the config file (`builtinRoutes`).
    const policy = withDeprecation(declaredPolicy, config.builtinRoutes)
    if (policy !== declaredPolicy) route.config = { ...route.config, policy }
    // The portal's own routes live under /portal, outside the route table of the API.
    if (portal === undefined || policy.path.startsWith('/v1/')) assertPolicy(policy)
    routes.add(route.url, route.method, policy.scope !== 'none')
    if (portal !== undefined && portalSession === undefined) throw new Error(`route ${String(route.method)} ${route.url} is the portal's, which is not served`)
    const ownHooks = { onRequest: own(route.onRequest), preHandler: own(route.preHandler) }
    const stages = pipelineFor(route.url, policy, portal === undefined ? authenticate : (portalSession as NonNullable<typeof portalSession>)(portal.capability))
    route.onRequest = [...stages.onRequest, ...ownHooks.onRequest] as onRequestHookHandler[]
    route.preHandler = [...stages.preHandler, ...ownHooks.preHandler] as preHandlerAsyncHookHandler[]
    // A partner route the portal serves is served again under /portal/api, the same route.
    const twin = portal === undefined && portalSession !== undefined ? portalTwin(route, ownHooks) : undefined
    if (twin !== undefined) this.route(twin)
  })

  // Every request, matched or not: its id, trace and correlation id; after the answer, the
  // log line and the metrics.
  const observe = observeStage(deps.logger, deps.metrics, deps.tracing, deps.usage, deps.requestLog?.writer)
  // A request whose partner leaves before its answer is written gets its line then, unless
  // work for it goes on (a declared service's call), which writes it when it ends.
  const abandoned = (request: FastifyRequest, reply: FastifyReply): void => {
    if (!request.logDeferred) observe(request, reply, noop)
  }
  app.addHook('onRequest', requestContext(deps.tracing, abandoned))
  if (shedder.enabled) app.addHook('onRequest', shedLoad(shedder, deps.metrics))
  // A request no route serves is answered from its head: step 1 comes first (docs/architecture.md,
  // "Order of checks"). Left to the not-found handler, it would first have its body read and
  // parsed by Fastify, with no credential checked, and a malformed one answered 400.
  const notFound = notFoundHandler(routes)
  // A path that moved is answered 308 at step 1, on a brand's host (docs/architecture.md,
  // "Deprecated and moved routes").
  const moved = movedStage(movedPaths(config.moved))
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.is404) return done()
    try {
      const location = moved(request)
      if (location !== undefined) {
        reply.code(308).header('location', location).send()
        return
      }
      notFound(request)
    } catch (error) {
      done(error as Error)
    }
  })
  app.addHook('onSend', closeWhileDraining)
  if (deps.portal !== undefined) app.addHook('onSend', portalHeaders)
  app.addHook('onResponse', observe)

  app.setErrorHandler(errorHandler)
  app.setNotFoundHandler(notFound)

  await app.register(healthRoutes)
  await app.register(propertyRoutes(deps.properties))
  if (deps.credentials !== undefined) await app.register(credentialRoute(deps.credentials))
  if (deps.events !== undefined) await app.register(eventRoutes(deps.events, deps.eventTypes))
  if (deps.webhooks !== undefined) await app.register(deps.webhooks)
  if (deps.requestLog !== undefined) {
    await app.register(requestLogPartnerRoutes({ store: deps.requestLog.store, routes: routeTemplatesOf(config) }))
  }
  if (deps.portal !== undefined) {
    await app.register(portalRoutes({ sessions: deps.portal, ...(deps.events === undefined ? {} : { events: deps.events }), ...(deps.credentials === undefined ? {} : { credentials: deps.credentials }) }))
    await app.register(portalPages(readBuild(buildDirectory())))
  }
  if (config.routes.length > 0) {
    if (deps.services === undefined) throw new Error('declared routes need their services')
    // An answer that never finished (cut short, or its partner gone while the call ran on):
    // Fastify runs no onResponse hook for it, the proxy has its line written.
    await app.register(declaredRoutes(config.routes, deps.services, { ...deps.proxyHooks, onUnfinished: (request, reply) => observe(request, reply, noop) },
      deps.idempotency === undefined ? undefined : { records: deps.idempotency, maxBodyBytes: config.idempotency.maxBodyBytes }))
  }
  return app
}
