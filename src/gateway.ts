import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { Metrics } from './admin/metrics.js'
import { buildAdmin } from './admin/server.js'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import { HealthState } from './health.js'
import { KeyAuthenticator } from './keys/authenticator.js'
import { RedisKeyStore, type KeyStore } from './keys/store.js'
import { PmsPropertySource } from './properties/pms-source.js'
import type { PropertySource } from './properties/source.js'
import { RateLimiter } from './ratelimit/limiter.js'
import { MemoryQuotaStore, RedisQuotaStore, type QuotaStore } from './ratelimit/store.js'
import { createPmsUpstreams, type PmsSet, type UpstreamHooks } from './properties/upstreams.js'
import { Services } from './proxy/services.js'
import { createRedis, redisMode, redisTarget, RedisMonitor, type RedisClient } from './redis.js'
import type { UpstreamOutcome } from './upstream/errors.js'

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
}

export interface Gateway {
  app: FastifyInstance
  /** The admin listener's app: /metrics and /status. */
  admin: FastifyInstance
  metrics: Metrics
  health: HealthState
  redis: RedisClient | undefined
  redisMonitor: RedisMonitor | undefined
  keyStore: KeyStore
  authenticator: KeyAuthenticator
  /** The PMS and its sandbox; absent when tests give a property source of their own. */
  upstreams: PmsSet | undefined
  /** The services of the declared routes. */
  services: Services
}

export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const { config, logger } = options
  const health = new HealthState()
  let redis: RedisClient | undefined
  let redisMonitor: RedisMonitor | undefined
  let keyStore = options.keyStore
  let quotaStore: QuotaStore = new MemoryQuotaStore()
  if (keyStore === undefined) {
    const target = redisTarget(config)
    const client = createRedis({ ...target, name: 'gateway', logger })
    redis = client
    const monitor = new RedisMonitor(client, 1000, redisMode(target))
    redisMonitor = monitor
    health.add('redis', () => monitor.up)
    keyStore = new RedisKeyStore(client, config.redisPrefix, () => createRedis({ ...target, name: 'gateway-keys-subscriber', logger, role: 'subscriber' }))
    quotaStore = new RedisQuotaStore(client, config.redisPrefix)
  }
  const authenticator = new KeyAuthenticator(keyStore, { ...config.keyCache, maxUnknown: config.abuse.unknownKeys })
  const metrics = new Metrics()
  const onCall = (name: string, outcome: UpstreamOutcome, seconds: number): void => metrics.upstreamCall(name, outcome, seconds)
  const upstreams = options.properties === undefined
    ? createPmsUpstreams(config, { onCall, onCache: (name, result) => metrics.cacheRead(name, result), ...options.upstreamHooks })
    : undefined
  const services = new Services(config, options.upstreamHooks?.dispatcher)
  const allUpstreams = [...(upstreams?.all.map((p) => p.client.upstream) ?? []), ...services.all]
  for (const upstream of allUpstreams) metrics.watchBreaker(upstream.name, () => upstream.state)
  const properties = options.properties ?? new PmsPropertySource((upstreams as PmsSet).byMode)
  // Decisions 9: a test key never reaches live data. Without PMS_SANDBOX_URL (or a service's
  // sandbox) it is refused with 403 before any upstream call. A property source given by a
  // test serves both modes itself.
  const hasSandbox = (name: string): boolean => name === 'pms'
    ? options.properties !== undefined || config.pmsSandbox !== undefined
    : services.get(name).sandbox !== undefined
  const rateLimiter = new RateLimiter(quotaStore, {
    windowSeconds: config.rateLimit.windowSeconds,
    logger,
    onFailOpen: () => metrics.rateLimiterFailOpen.inc(),
    onLease: (keyId, granted) => {
      metrics.rateLimitLeased.inc(granted)
      options.onLease?.(keyId, granted)
    },
  })
  const app = await buildApp({
    config, logger, keys: authenticator, properties, health, metrics, rateLimiter, services, hasSandbox, proxyHooks: { onCall },
  })
  const caches = upstreams?.all.map((p) => ({ name: p.cacheName, cache: p.cache })) ?? []
  const admin = await buildAdmin(metrics, {
    health, redis: redisMonitor, upstreams: allUpstreams, caches: () => caches.map(({ name, cache }) => ({ name, entries: cache.entries, hitRatio: cache.hitRatio })),
    authenticator, startedAt: Date.now(),
  }, { token: config.adminToken })
  const store = keyStore
  app.addHook('onClose', async () => {
    await admin.close()
    redisMonitor?.stop()
    await store.close()
    await Promise.all(allUpstreams.map((u) => u.close()))
    redis?.disconnect()
  })
  return { app, admin, metrics, health, redis, redisMonitor, keyStore: store, authenticator, upstreams, services }
}
