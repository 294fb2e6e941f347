import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { Metrics } from './admin/metrics.js'
import { buildAdmin } from './admin/server.js'
import { buildApp, type Dispatch } from './app.js'
import type { Config } from './config.js'
import { Reloader, type ReloadResult } from './lifecycle/reload.js'
import { reloadRoute } from './lifecycle/admin.js'
import { HealthState } from './health.js'
import { IdempotencyRecords, MemoryRecordStore, RedisRecordStore } from './idempotency/records.js'
import { ingestRoutes, INGEST_PATH } from './events/ingest.js'
import { EventLog } from './events/log.js'
import { MemoryEventStore, RedisEventStore, type EventStore } from './events/store.js'
import { EventTypes } from './events/types.js'
import { KeyAuthenticator } from './keys/authenticator.js'
import { Credentials } from './keys/credentials.js'
import { TokenAuthenticator } from './oauth/tokens.js'
import { RedisKeyStore, type KeyStore } from './keys/store.js'
import { PmsPropertySource } from './properties/pms-source.js'
import type { PropertySource } from './properties/source.js'
import { RateLimiter } from './ratelimit/limiter.js'
import { MemoryQuotaStore, RedisQuotaStore, type QuotaStore } from './ratelimit/store.js'
import { createPmsUpstreams, type PmsSet, type UpstreamHooks } from './properties/upstreams.js'
import { Services } from './proxy/services.js'
import { createRedis, redisMode, redisTarget, RedisMonitor, type RedisClient } from './redis.js'
import { Tracing } from './tracing/tracing.js'
import { ADMIN_API_PREFIX, credentialsAdminApi } from './credentials/admin-api.js'
import { ADMIN_OPENAPI_PATH, adminOpenApiDocument } from './credentials/admin-openapi.js'
import { AuditTrail, MemoryAuditStore, RedisAuditStore, type AuditStore } from './credentials/audit.js'
import { CredentialService, knownOf } from './credentials/service.js'
import { MemoryUsageStore, RedisUsageStore, UsageRecorder, type UsageStore } from './credentials/usage.js'
import type { UpstreamOutcome } from './upstream/errors.js'
import { portalOrigins } from './portal/config.js'
import { PortalSessions, type EndReason } from './portal/sessions.js'
import { PortalSessionStore } from './portal/store.js'
import { REQUEST_LOG_ADMIN_PATHS, requestLogAdminRoutes } from './request-log/admin-routes.js'
import { routeTemplatesOf } from './request-log/routes.js'
import { RequestLogStore } from './request-log/store.js'
import { RequestLogWriter } from './request-log/writer.js'
import { VERSION } from './version.js'
import { Deliveries, type DeliveriesOptions } from './webhooks/deliveries.js'
import { EndpointStore } from './webhooks/endpoints.js'
import { RecoveryStore } from './webhooks/recoveries.js'
import { webhookEndpointRoutes } from './webhooks/routes.js'
import { DEVELOPMENT_KEY, SecretBox } from './webhooks/secrets.js'
import { WebhookEndpoints } from './webhooks/service.js'

// The composition root: builds the gateway's parts from the config and hands them to the
// app, which closes them again in `onClose`.

export interface GatewayOptions {
  config: Config
  logger: Logger
  /** Tests of the pipeline alone give an in-memory source; otherwise the PMS from the config. */
  properties?: PropertySource
  /** Tests of the PMS client give undici's MockAgent here. */
  upstreamHooks?: UpstreamHooks
  /** The demo's in-memory store when no Redis answers; Redis otherwise. */
  keyStore?: KeyStore
  /** Sees every quota lease (the failover scenario accounts for each key's quota with it). */
  onLease?: (keyId: string, granted: number) => void
  /** The event log's clock (tests of the retention move it). */
  eventsClock?: () => number
  /** The request log's clock for its retention (tests of the trimming move it). */
  requestLogClock?: () => number
  /** Tests resolve endpoint host names themselves, and shorten a parked delivery's sleep. */
  webhookHooks?: Pick<DeliveriesOptions, 'lookup' | 'sleepMs'>
  /**
   * How a reload reads the configuration (`npm start`: the environment and CONFIG_FILE, as at
   * start) and the text of the file the start read. Without it the configuration cannot be
   * reloaded: every reload is refused.
   */
  reload?: { load: () => Config; text: string }
}

export interface Gateway {
  /** The public app built at start: it owns the listener (listen, close, its address). */
  app: FastifyInstance
  /** The public app that serves now: the one built from the configuration in force. */
  serving: () => FastifyInstance
  /** Reloads of the configuration (docs/operations.md, "Changing the configuration"). */
  reloader: Reloader
  /** The admin listener's app: /metrics and /status. */
  admin: FastifyInstance
  metrics: Metrics
  health: HealthState
  redis: RedisClient | undefined
  redisMonitor: RedisMonitor | undefined
  keyStore: KeyStore
  authenticator: KeyAuthenticator
  /** Access tokens: their issuers' keys, the verified tokens, the grants. */
  tokens: TokenAuthenticator
  /** The PMS and its sandbox; absent when tests give a property source of their own. */
  upstreams: PmsSet | undefined
  /** The services of the declared routes. */
  services: Services
  /** Present when spans are exported. */
  tracing: Tracing | undefined
  /** Each credential's requests, counted and flushed (docs/architecture.md, "Usage and last use"). */
  usage: UsageRecorder
  /** Behind GET /v1/credential and the admin port's credentials API. */
  credentials: CredentialService
  /** The event log: what publishers send to the admin port's POST /events, read at /v1/events. */
  events: EventLog
  /** Webhook deliveries (with Redis only). */
  deliveries: Deliveries | undefined
  /** The partner portal's sessions (with Redis, and `portal.enabled`). */
  portal: PortalSessions | undefined
  /** The request log's writer and store (with Redis; they keep nothing while `requestLog.enabled` is false). */
  requestLog: { writer: RequestLogWriter; store: RequestLogStore } | undefined
}

/**
 * A test key never reaches live data (docs/architecture.md, "Test mode"). Without
 * PMS_SANDBOX_URL (or a service's sandbox) it is refused with 403 before any upstream call. A
 * property source given by a test serves both modes itself.
 */
function sandboxOf(config: Config, services: Services, ownSource: boolean) {
  return (name: string): boolean => name === 'pms' ? ownSource || config.pmsSandbox !== undefined : services.get(name).sandbox !== undefined
}

export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const { config, logger } = options
  const health = new HealthState()
  let redis: RedisClient | undefined
  let redisMonitor: RedisMonitor | undefined
  let keyStore = options.keyStore
  let quotaStore: QuotaStore = new MemoryQuotaStore()
  let recordStore: RedisRecordStore | MemoryRecordStore = new MemoryRecordStore()
  let usageStore: UsageStore = new MemoryUsageStore()
  let auditStore: AuditStore = new MemoryAuditStore()
  let eventStore: EventStore = new MemoryEventStore()
  if (keyStore === undefined) {
    const target = redisTarget(config)
    const client = createRedis({ ...target, name: 'gateway', logger })
    redis = client
    const monitor = new RedisMonitor(client, 1000, redisMode(target))
    redisMonitor = monitor
    health.add('redis', () => monitor.up)
    keyStore = new RedisKeyStore(client, config.redisPrefix, () => createRedis({ ...target, name: 'gateway-keys-subscriber', logger, role: 'subscriber' }))
    quotaStore = new RedisQuotaStore(client, config.redisPrefix)
    recordStore = new RedisRecordStore(client)
    usageStore = new RedisUsageStore(client, config.redisPrefix)
    auditStore = new RedisAuditStore(client, config.redisPrefix)
    eventStore = new RedisEventStore(client, config.redisPrefix)
  }
  const usage = new UsageRecorder(usageStore, { flushMs: config.usage.flushSeconds * 1000, retentionMs: config.usage.retentionDays * 86_400_000, logger })
  usage.start()
  const audit = new AuditTrail(auditStore, config.audit.retentionDays * 86_400_000, logger)
  // The partner portal's sessions live in Redis (docs/architecture.md, "The partner portal").
  const portal = redis !== undefined && config.portal.enabled
    ? new PortalSessions({ store: new PortalSessionStore(redis, config.redisPrefix), keys: keyStore, audit, origins: portalOrigins(config.brands) })
    : undefined
  // The parts that live as long as the process yet follow the configuration in force: each
  // takes a reloaded configuration's settings once the app built from it serves (what each may
  // take: its section's reload rules, src/config/reload-rules.ts).
  const followReload: ((next: Config) => void)[] = []
  if (portal !== undefined) followReload.push((next) => portal.useOrigins(portalOrigins(next.brands)))
  // Set once the deliveries exist (with Redis): a revoked credential's endpoints go with it.
  let removeEndpointsOf: ((id: string) => Promise<void>) | undefined
  const credentials = new CredentialService({
    store: keyStore, usage: usageStore, audit, known: knownOf(config),
    onRevoke: async (id) => { await removeEndpointsOf?.(id) },
    ...(portal === undefined ? {} : { endPortalSessions: async (id: string, actor: string, reason: EndReason) => void await portal.endAll(id, actor, reason) }),
  })
  followReload.push((next) => Object.assign(credentials.known, knownOf(next)))
  const idempotency = new IdempotencyRecords(recordStore, config.redisPrefix, config.idempotency.retentionHours * 3600_000)
  const authenticator = new KeyAuthenticator(keyStore, { ...config.keyCache, maxUnknown: config.abuse.unknownKeys })
  const metrics = new Metrics()
  const tokens = new TokenAuthenticator(keyStore, {
    oauth: config.oauth,
    grantCache: { ...config.keyCache, maxUnknown: config.abuse.unknownKeys },
    onJwksFetch: (issuer, result) => metrics.jwksRefresh(issuer, result),
    onJwksError: (issuer, message) => logger.warn({ issuer, error: message }, 'JWKS fetch failed; the last keys fetched stay in use'),
  })
  followReload.push((next) => tokens.useIssuers(next.oauth.issuers))
  if (redisMonitor !== undefined) {
    const monitor = redisMonitor
    metrics.watchRedis(() => monitor.up)
  }
  const tracing = config.tracing === undefined ? undefined : new Tracing(config.tracing, {
    exported: (spans) => metrics.traceSpansExported.inc(spans),
    dropped: (reason, spans) => metrics.traceSpansDropped.inc({ reason }, spans),
    // Once per change, not per export: an unreachable collector must not flood the log.
    health: (accepting) => {
      if (accepting) logger.info('trace export works again')
      else logger.warn('trace export failing: spans are dropped (gateway_trace_spans_dropped_total) until the collector accepts them again')
    },
  })
  const clientSpans = tracing === undefined ? undefined : (upstream: string) => tracing.clientSpans(upstream)
  const onCall = (name: string, outcome: UpstreamOutcome, seconds: number): void => metrics.upstreamCall(name, outcome, seconds)
  const upstreams = options.properties === undefined
    ? createPmsUpstreams(config, {
      onCall, onCache: (name, result) => metrics.cacheRead(name, result), ...(clientSpans === undefined ? {} : { clientSpans }), ...options.upstreamHooks,
    })
    : undefined
  const services = new Services(config, options.upstreamHooks?.dispatcher, clientSpans)
  const allUpstreams = [...(upstreams?.all.map((p) => p.client.upstream) ?? []), ...services.all]
  for (const upstream of allUpstreams) metrics.watchBreaker(upstream.name, () => upstream.state)
  const properties = options.properties ?? new PmsPropertySource((upstreams as PmsSet).byMode)
  const rateLimiter = new RateLimiter(quotaStore, {
    windowSeconds: config.rateLimit.windowSeconds,
    logger,
    onFailOpen: () => metrics.rateLimiterFailOpen.inc(),
    onLease: (keyId, granted) => {
      metrics.rateLimitLeased.inc(granted)
      options.onLease?.(keyId, granted)
    },
  })
  const events = new EventLog(eventStore, new EventTypes(config.events.types), {
    retentionDays: config.events.retentionDays, cachedEvents: config.events.cachedEvents, ...(options.eventsClock === undefined ? {} : { now: options.eventsClock }),
  })
  // Webhooks need Redis: the endpoints and the delivery queue live there (docs/architecture.md, "Webhooks").
  let deliveries: Deliveries | undefined
  let webhooks: ((app: FastifyInstance) => Promise<void>) | undefined
  if (redis !== undefined) {
    const target = redisTarget(config)
    const endpointStore = new EndpointStore(redis, config.redisPrefix)
    // Tests and the demo only: `npm start` refuses to start without WEBHOOKS_SECRET_KEY (config.ts).
    const box = new SecretBox(config.webhooksSecretKey ?? DEVELOPMENT_KEY, config.webhooksPreviousKeys)
    const onSecretUnreadable = (): void => metrics.webhookSecretUnreadable.inc()
    deliveries = new Deliveries({
      settings: config.events, store: endpointStore, log: events, keys: keyStore, box, logger,
      credentialCache: { ttlMs: config.keyCache.ttlMs, maxEntries: config.keyCache.maxEntries },
      connection: () => createRedis({ ...target, name: 'gateway-webhooks', logger, role: 'subscriber' }),
      work: config.eventsWorker !== 'off',
      userAgent: `partner-gateway/${VERSION} webhooks`,
      onAttempt: (outcome, seconds) => metrics.webhookAttempt(outcome, seconds),
      onSecretUnreadable,
      recoveries: new RecoveryStore(redis, endpointStore),
      ...(tracing === undefined ? {} : { tracing }),
      ...options.webhookHooks,
    })
    deliveries.start()
    const started = deliveries
    metrics.watchWebhooks(() => started.snapshot)
    removeEndpointsOf = (id) => started.removeEndpointsOf(id)
    const endpoints = new WebhookEndpoints({ store: endpointStore, deliveries, log: events, box, settings: config.events })
    webhooks = webhookEndpointRoutes({ endpoints, box, idempotency, logger, onSecretUnreadable })
    followReload.push((next) => {
      started.reconfigure(next.events)
      endpoints.reconfigure(next.events)
    })
  }
  // Each credential's requests (docs/architecture.md, "The request log"), with Redis only. The
  // writer and store are made whether the log is on or not: `requestLog.enabled` is reloadable,
  // and the public app built for a configuration takes them only while it is on.
  let requestLog: { writer: RequestLogWriter; store: RequestLogStore } | undefined
  if (redis !== undefined) {
    const store = new RequestLogStore(redis, config.redisPrefix, config.requestLog, options.requestLogClock)
    const monitor = redisMonitor
    const writer = new RequestLogWriter(store, {
      flushMs: config.requestLog.flushMs, bufferMax: config.requestLog.bufferMax, logger,
      ...(monitor === undefined ? {} : { available: () => monitor.up }),
      onWritten: (entries) => metrics.requestLogEntries.inc(entries),
      onDropped: (reason, entries) => metrics.requestLogDropped.inc({ reason }, entries),
      onFlush: (seconds) => metrics.requestLogFlushSeconds.observe(seconds),
    })
    writer.start()
    requestLog = { writer, store }
  }
  // The public app of one configuration: what a reload builds anew (docs/architecture.md,
  // "Reloading the configuration"); every other part lives as long as the process.
  const keys = new Credentials(authenticator, tokens)
  const proxyHooks = { onCall, onCut: (name: string, reason: string) => metrics.upstreamCut(name, reason), onIdempotency: metrics.idempotency.bind(metrics) }
  const publicApp = (appConfig: Config, appServices: Services, listener: { dispatch: Dispatch } | { detached: true }, eventTypes?: EventTypes): Promise<FastifyInstance> => buildApp({
    config: appConfig, logger, keys, properties, health, metrics, rateLimiter, services: appServices, hasSandbox: sandboxOf(appConfig, appServices, options.properties !== undefined),
    proxyHooks, idempotency, usage, credentials, events, ...(eventTypes === undefined ? {} : { eventTypes }),
    ...(requestLog === undefined || !appConfig.requestLog.enabled ? {} : { requestLog }),
    ...(webhooks === undefined ? {} : { webhooks }),
    ...(portal === undefined ? {} : { portal }),
    ...(tracing === undefined ? {} : { tracing }),
    ...listener,
  })
  const dispatch: Dispatch = { handler: () => undefined, routes: { allowFor: () => undefined } }
  const app = await publicApp(config, services, { dispatch })
  let serving = app
  let servingServices = services
  // What a reload replaced, closed once the requests it was serving have had their time.
  const retired = new Set<{ app: FastifyInstance | undefined; services: Services | undefined }>()
  const retire = (entry: { app: FastifyInstance | undefined; services: Services | undefined }, afterMs: number): void => {
    retired.add(entry)
    setTimeout(() => {
      retired.delete(entry)
      void closeRetired(entry)
    }, afterMs).unref()
  }
  const closeRetired = async (entry: { app: FastifyInstance | undefined; services: Services | undefined }): Promise<void> => {
    await entry.app?.close()
    await Promise.all(entry.services?.all.map((u) => u.close()) ?? [])
  }
  const apply = async (next: Config): Promise<void> => {
    // A changed upstream gets a new pool; the old one's calls finish, then it closes.
    const sameUpstreams = JSON.stringify(next.upstreams) === JSON.stringify(serving.gatewayConfig.upstreams)
    const nextServices = sameUpstreams ? servingServices : new Services(next, options.upstreamHooks?.dispatcher, clientSpans)
    const nextTypes = new EventTypes(next.events.types)
    let built: FastifyInstance
    try {
      built = await publicApp(next, nextServices, { detached: true }, nextTypes)
      await built.ready()
    } catch (error) {
      if (!sameUpstreams) await Promise.all(nextServices.all.map((u) => u.close()))
      throw error
    }
    // The swap: the next request on any connection is the new app's; those in flight finish
    // in the old one, with its routes, policies and pools.
    const previous = { app: serving === app ? undefined : serving, services: sameUpstreams ? undefined : servingServices }
    const before = serving.gatewayConfig
    dispatch.handler = built.routing
    dispatch.routes = built.routeIndex
    serving = built
    events.types = nextTypes
    for (const follow of followReload) follow(next)
    if (!sameUpstreams) {
      servingServices = nextServices
      allUpstreams.splice(allUpstreams.length - (previous.services?.all.length ?? 0), previous.services?.all.length ?? 0, ...nextServices.all)
      for (const upstream of previous.services?.all ?? []) metrics.unwatchBreaker(upstream.name)
      for (const upstream of nextServices.all) metrics.watchBreaker(upstream.name, () => upstream.state)
    }
    // A request that began under the old configuration is bounded by these (docs/security.md, "Slow clients").
    const longestCall = Math.max(0, ...Object.values(before.upstreams).map((u) => u.responseTimeoutMs))
    retire(previous, before.server.requestTimeoutMs + longestCall + 1000)
  }
  const reloader = new Reloader({
    config,
    text: options.reload?.text ?? '',
    load: options.reload?.load ?? (() => { throw new Error('this gateway was started without a way to read its configuration again') }),
    apply,
    logger,
    onOutcome: (outcome, hash) => metrics.configReload(outcome, hash),
  })
  metrics.configReload(undefined, reloader.inForce.hash)
  if (options.reload !== undefined && config.server.watchConfig) reloader.watch()
  const caches = upstreams?.all.map((p) => ({ name: p.cacheName, cache: p.cache })) ?? []
  const admin = await buildAdmin(metrics, {
    health, redis: redisMonitor, upstreams: allUpstreams, caches: () => caches.map(({ name, cache }) => ({ name, entries: cache.entries, hitRatio: cache.hitRatio })),
    authenticator, tokens, startedAt: Date.now(), ...(deliveries === undefined ? {} : { webhooks: () => deliveries?.snapshot }),
    config: () => reloader.inForce,
    ...(requestLog === undefined ? {} : { requestLog: { writer: requestLog.writer, enabled: () => reloader.config.requestLog.enabled } }),
  }, {
    token: config.adminToken,
    docsUrl: config.docsUrl,
    ownAuthPaths: [INGEST_PATH],
    extensions: [
      { paths: ADMIN_OPENAPI_PATH, routes: async (server) => { server.get(ADMIN_OPENAPI_PATH, async () => adminOpenApiDocument()) } },
      reloadRoute((trigger: string): Promise<ReloadResult> => reloader.reload(trigger), config.docsUrl),
      // Only with a token: the credentials API must never be open (docs/operations.md, "The credentials API").
      ...(config.adminToken === undefined ? [] : [{
        paths: `${ADMIN_API_PREFIX}/credentials… and ${ADMIN_API_PREFIX}/audit`,
        routes: credentialsAdminApi(credentials, {
          docsUrl: config.docsUrl,
          storeUp: () => redisMonitor?.up ?? true,
          onError: (error: unknown) => logger.error({ err: error }, 'credentials API request failed'),
          ...(portal === undefined ? {} : { portal }),
        }),
      }]),
      ...(config.adminToken === undefined || requestLog === undefined ? [] : [{
        paths: REQUEST_LOG_ADMIN_PATHS,
        routes: requestLogAdminRoutes({
          store: requestLog.store, credentials, docsUrl: config.docsUrl,
          routes: () => routeTemplatesOf(serving.gatewayConfig),
          storeUp: () => redisMonitor?.up ?? true,
          onError: (error: unknown) => logger.error({ err: error }, 'request log admin request failed'),
        }),
      }]),
    ],
  })
  // Internal services publish here, with tokens of their own (docs/operations.md, "Events").
  await admin.register(ingestRoutes({
    log: events, publishers: config.eventPublishers, brands: () => serving.gatewayConfig.brands, docsUrl: config.docsUrl, logger, metrics, ...(tracing === undefined ? {} : { tracing }),
  }))
  const store = keyStore
  app.addHook('onClose', async () => {
    reloader.close()
    // The app in force and what reloads replaced (the listener is closed by now); the pools in
    // force are among allUpstreams, closed below.
    if (serving !== app) await serving.close()
    await Promise.all([...retired].map(closeRetired))
    // First, while Redis is still there: what was counted since the last flush (graceful shutdown loses nothing).
    await usage.close()
    await requestLog?.writer.close()
    // Attempts in flight go back to the queue for another instance (or this one, restarted).
    await deliveries?.close()
    await admin.close()
    redisMonitor?.stop()
    await store.close()
    await tokens.close()
    await Promise.all(allUpstreams.map((u) => u.close()))
    redis?.disconnect()
    // Last: every request's span has ended by now.
    await tracing?.close()
  })
  return { app, serving: () => serving, reloader, admin, metrics, health, redis, redisMonitor, keyStore: store, authenticator, tokens, upstreams, services, tracing, usage, credentials, events, deliveries, portal, requestLog }
}
