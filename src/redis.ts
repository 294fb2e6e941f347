import { Redis } from 'ioredis'
import type { Logger } from 'pino'

// Redis connections of the gateway. Commands fail at once while Redis is unreachable
// (no offline queue), so a request never waits for a reconnect; the client keeps
// reconnecting in the background, at most a second apart.

export interface RedisOptions {
  url: string
  name: string
  logger: Logger
  /**
   * `command` (default): fails fast while disconnected. `subscriber`: queues its SUBSCRIBE
   * until connected. `tool`: one attempt, no reconnects (the key tool).
   */
  role?: 'command' | 'subscriber' | 'tool'
}

export function createRedis(options: RedisOptions): Redis {
  const role = options.role ?? 'command'
  const reconnect = role !== 'tool'
  const client = new Redis(options.url, {
    connectionName: options.name,
    enableOfflineQueue: role !== 'command',
    maxRetriesPerRequest: role === 'command' ? 0 : role === 'subscriber' ? null : 1,
    connectTimeout: 2000,
    // A Redis that hangs must not hang requests: the limiter fails open, auth answers 503.
    ...(role === 'command' ? { commandTimeout: 1000 } : {}),
    enableAutoPipelining: true,
    lazyConnect: !reconnect,
    retryStrategy: reconnect ? (times) => Math.min(times * 100, 1000) : () => null,
  })
  // One line per incident, not per reconnect attempt. `reconnecting` fires on every loss we
  // did not ask for; `error` carries the reason when there is one.
  let down = false
  let reason: string | undefined
  const lost = (): void => {
    if (!down) options.logger.error({ redis: options.name, reason: reason ?? 'connection lost' }, 'redis unreachable')
    down = true
  }
  client.on('error', (error: Error) => {
    reason = error.message
    if (!reconnect) return
    lost()
  })
  client.on('reconnecting', lost)
  client.on('ready', () => {
    if (down) options.logger.info({ redis: options.name }, 'redis reachable again')
    down = false
  })
  return client
}

/** Redis as health and /status see it: up while the connection is ready; latency of the last PING. */
export class RedisMonitor {
  latencyMs: number | null = null
  private readonly timer: NodeJS.Timeout

  constructor(private readonly client: Redis, intervalMs = 1000) {
    this.timer = setInterval(() => void this.ping(), intervalMs)
    this.timer.unref()
  }

  get up(): boolean {
    return this.client.status === 'ready'
  }

  async ping(): Promise<void> {
    const start = performance.now()
    try {
      await this.client.ping()
      this.latencyMs = Math.round((performance.now() - start) * 1000) / 1000
    } catch {
      this.latencyMs = null
    }
  }

  stop(): void {
    clearInterval(this.timer)
  }
}

/** Whether a Redis answers PING at `url` within the connect timeout (one attempt, no retry). */
export async function redisAnswers(url: string, connectTimeoutMs = 1000): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: connectTimeoutMs, retryStrategy: () => null, maxRetriesPerRequest: 0 })
  client.on('error', () => undefined)
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}
