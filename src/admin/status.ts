import type { HealthState } from '../health.js'
import type { KeyAuthenticator } from '../keys/authenticator.js'
import type { TokenAuthenticator } from '../oauth/tokens.js'
import type { RedisMonitor } from '../redis.js'
import type { BreakerState, Upstream } from '../upstream/upstream.js'
import { VERSION } from '../version.js'
import type { DeliverySnapshot } from '../webhooks/deliveries.js'

// GET /status on the admin port (docs/operations.md, "Status"): what an SRE needs without
// reading logs.

export interface StatusSources {
  health: HealthState
  redis: RedisMonitor | undefined
  upstreams: readonly Upstream[]
  /** The read caches, as they are now. */
  caches: () => readonly { name: string; entries: number; hitRatio: number }[]
  authenticator: KeyAuthenticator
  /** Access tokens; absent in tests that build the admin app alone. */
  tokens?: TokenAuthenticator
  startedAt: number
  /** Webhook deliveries, as last read; absent without Redis. */
  webhooks?: () => DeliverySnapshot | undefined
  /** The configuration in force: its file's hash and when it was loaded (docs/operations.md, "Changing the configuration"). */
  config?: () => { hash: string; loadedAt: string }
  /** The request log's writer of this instance, and whether the configuration in force keeps entries; absent without Redis. */
  requestLog?: { writer: RequestLogWriterStatus; enabled: () => boolean }
}

/** What /status shows of the request log's writer (docs/operations.md, "Status"). */
export interface RequestLogWriterStatus {
  readonly size: number
  readonly bufferMax: number
  readonly lastFlushAt: number | null
  readonly written: number
  readonly dropped: Readonly<Record<string, number>>
}

export function statusReport(sources: StatusSources) {
  const upstreams: Record<string, { breaker: BreakerState; retryAfterSeconds: number; callsInFlight: number; stats: Record<string, number> }> = {}
  const cache: Record<string, { entries: number; hitRatio: number; unknownEntries?: number }> = {}
  for (const upstream of sources.upstreams) {
    const stats = upstream.breaker.stats
    upstreams[upstream.name] = {
      breaker: upstream.state,
      retryAfterSeconds: upstream.retryAfterSeconds(),
      callsInFlight: upstream.callsInFlight,
      stats: { successes: stats.successes, failures: stats.failures, timeouts: stats.timeouts, rejects: stats.rejects },
    }
  }
  for (const { name, entries, hitRatio } of sources.caches()) cache[name] = { entries, hitRatio }
  cache.apiKeys = { entries: sources.authenticator.size, hitRatio: sources.authenticator.hitRatio, unknownEntries: sources.authenticator.unknownSize }
  const failing = sources.health.failing()
  const degraded = Object.values(upstreams).some((u) => u.breaker !== 'closed')
  return {
    status: failing.length > 0 ? 'unhealthy' : degraded ? 'degraded' : 'ok',
    ...(failing.length > 0 ? { failing } : {}),
    version: VERSION,
    uptimeSeconds: Math.floor((Date.now() - sources.startedAt) / 1000),
    redis: sources.redis === undefined
      ? { status: 'unused', latencyMs: null }
      : {
        status: sources.redis.up ? 'up' : 'down',
        latencyMs: sources.redis.up ? sources.redis.latencyMs : null,
        mode: sources.redis.mode,
        ...(sources.redis.master !== undefined ? { master: sources.redis.master } : {}),
      },
    upstreams,
    cache,
    // Per token issuer: its signing keys held, when they were fetched, the last failure.
    ...(sources.tokens === undefined ? {} : { oauth: sources.tokens.status() }),
    // The webhook queue (docs/operations.md, "Webhooks"); null until first read or while Redis does not answer.
    ...(sources.webhooks === undefined ? {} : { events: sources.webhooks() ?? null }),
    ...(sources.config === undefined ? {} : { config: sources.config() }),
    // This instance's buffer and its counts since start: a gap in a partner's log shows here first.
    ...(sources.requestLog === undefined ? {} : {
      requestLog: {
        enabled: sources.requestLog.enabled(),
        buffered: sources.requestLog.writer.size,
        bufferMax: sources.requestLog.writer.bufferMax,
        lastFlushAt: sources.requestLog.writer.lastFlushAt === null ? null : new Date(sources.requestLog.writer.lastFlushAt).toISOString(),
        written: sources.requestLog.writer.written,
        dropped: { ...sources.requestLog.writer.dropped },
      },
    }),
  }
}
