import { Cluster, Redis, type ClusterOptions, type RedisOptions as ClientOptions } from 'ioredis'
import pino, { type Logger } from 'pino'
import type { Config } from './config.js'
import type { HostPort } from './config/process.js'

// Redis connections of the gateway: one server, the master a Sentinel group names, or a
// Cluster, chosen by the environment. Commands fail at once while Redis is unreachable
// (no offline queue), so a request never waits for a reconnect; the client keeps
// reconnecting in the background (at most a second apart; 0.4 s with Sentinel or Cluster)
// and follows a failover by itself.

/** A connection to Redis in any of the three modes; the code that takes one does not care which. */
export type RedisClient = Redis | Cluster

/** Where Redis is. With `sentinel` or `clusterNodes`, `url` gives only credentials (and the database). */
export interface RedisTarget {
  url: string
  sentinel?: { sentinels: HostPort[]; master: string } | undefined
  clusterNodes?: HostPort[] | undefined
}

export interface RedisOptions extends RedisTarget {
  name: string
  logger: Logger
  /**
   * `command` (default): fails fast while disconnected. `subscriber`: queues its SUBSCRIBE
   * until connected. `tool`: one attempt, no reconnects (the key tool).
   */
  role?: 'command' | 'subscriber' | 'tool'
}

export function redisTarget(config: Pick<Config, 'redisUrl' | 'redisSentinel' | 'redisClusterNodes'>): RedisTarget {
  return { url: config.redisUrl, sentinel: config.redisSentinel, clusterNodes: config.redisClusterNodes }
}

export function redisMode(target: RedisTarget): 'single' | 'sentinel' | 'cluster' {
  return target.clusterNodes !== undefined ? 'cluster' : target.sentinel !== undefined ? 'sentinel' : 'single'
}

/** Credentials, database and TLS of a redis:// or rediss:// URL. */
function fromUrl(url: string): Pick<ClientOptions, 'username' | 'password' | 'db' | 'tls'> {
  const parsed = new URL(url)
  const db = Number(parsed.pathname.slice(1) || '0')
  return {
    ...(parsed.username !== '' ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password !== '' ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(Number.isInteger(db) && db > 0 ? { db } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  }
}

type SendCommand = Redis['sendCommand']

/**
 * The commands a connection sends in one turn of the event loop leave in one write: its socket
 * is corked at the turn's first command and uncorked once the turn's I/O callbacks and their
 * promises are done (a setImmediate), so a burst of requests' commands costs one system call
 * and one wake-up of Redis, not one each. ioredis's auto-pipelining batches the same way, but
 * builds a pipeline per turn and hands each reply back through it: a command alone in its
 * turn cost about half again as much CPU as sent plainly, and a plain send's writes went out
 * one a command under load (docs/performance.md, "A turn's commands in one write").
 * Commands keep their order; only the time their bytes leave moves, within the turn.
 */
export function batchWritesPerTurn(client: Redis): void {
  const send: SendCommand = client.sendCommand.bind(client)
  let corked: Redis['stream'] | undefined
  client.sendCommand = ((command, stream) => {
    const socket = client.stream as Redis['stream'] | undefined
    // A pipeline's own writes (`stream` given) gather themselves; a new socket (a reconnect) is corked anew.
    if (stream === undefined && socket !== undefined && socket !== corked && socket.writable) {
      corked = socket
      socket.cork()
      setImmediate(() => {
        if (corked === socket) corked = undefined
        socket.uncork()
      })
    }
    return send(command, stream)
  }) as SendCommand
}

export function createRedis(options: RedisOptions): RedisClient {
  const role = options.role ?? 'command'
  const reconnect = role !== 'tool'
  // Through Sentinel or in a Cluster a new master is usually there within seconds, and the
  // sentinels or nodes answer the reconnect: retry more often, so an instance finds it soon.
  const maxDelayMs = options.sentinel !== undefined || options.clusterNodes !== undefined ? 400 : 1000
  const retry = reconnect ? (times: number) => Math.min(times * 100, maxDelayMs) : () => null
  const perConnection: ClientOptions = {
    connectionName: options.name,
    connectTimeout: 2000,
    // A Redis that hangs must not hang requests: the limiter fails open, auth answers 503.
    ...(role === 'command' ? { commandTimeout: 1000 } : {}),
  }
  let client: RedisClient
  if (options.clusterNodes !== undefined) {
    const { username, password, tls } = fromUrl(options.url)
    const clusterOptions: ClusterOptions = {
      redisOptions: { ...perConnection, username, password, tls, maxRetriesPerRequest: role === 'command' ? 0 : null },
      enableOfflineQueue: role !== 'command',
      lazyConnect: !reconnect,
      clusterRetryStrategy: retry,
      // While a master fails over, a command is retried on the refreshed slot map a few
      // times, then fails (and the request goes on without it) rather than waiting long.
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      maxRedirections: role === 'command' ? 4 : 16,
    }
    client = new Cluster(options.clusterNodes, clusterOptions)
    client.on('+node', (node: Redis) => batchWritesPerTurn(node))
  } else {
    const common: ClientOptions = {
      ...perConnection,
      enableOfflineQueue: role !== 'command',
      maxRetriesPerRequest: role === 'command' ? 0 : role === 'subscriber' ? null : 1,
      lazyConnect: !reconnect,
      retryStrategy: retry,
    }
    client = options.sentinel === undefined
      ? new Redis(options.url, common)
      : new Redis({
        ...fromUrl(options.url),
        ...common,
        sentinels: options.sentinel.sentinels,
        name: options.sentinel.master,
        role: 'master',
        sentinelRetryStrategy: retry,
        // A master demoted to replica (a planned failover) answers writes with READONLY:
        // reconnect, which asks the sentinels for the new master. (ioredis's failover detector
        // is not used: a switch announced while the client is reconnecting ends the client.)
        reconnectOnError: (error) => error.message.startsWith('READONLY'),
      })
  }
  if (client instanceof Redis) batchWritesPerTurn(client)
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

/**
 * Redis as health and /status see it: up while the connection is ready and the last probe
 * found a master that serves (through Sentinel: the node answers ROLE as master; in a
 * Cluster: CLUSTER INFO says every slot is served). Latency is that of the last probe.
 */
export class RedisMonitor {
  latencyMs: number | null = null
  private probeFailed = false
  private readonly timer: NodeJS.Timeout
  private readonly probeNow = (): void => void this.ping()

  constructor(private readonly client: RedisClient, intervalMs = 1000, readonly mode: 'single' | 'sentinel' | 'cluster' = 'single') {
    this.timer = setInterval(this.probeNow, intervalMs)
    this.timer.unref()
    // A reconnected client is probed at once, so health turns back without waiting a period.
    client.on('ready', this.probeNow)
  }

  get up(): boolean {
    return this.client.status === 'ready' && !this.probeFailed
  }

  /** Through Sentinel: the address of the master this instance talks to now. */
  get master(): string | undefined {
    if (this.mode !== 'sentinel' || !this.up) return undefined
    const stream = (this.client as Redis).stream as { remoteAddress?: string; remotePort?: number } | undefined
    return stream?.remoteAddress === undefined ? undefined : `${stream.remoteAddress}:${stream.remotePort}`
  }

  async ping(): Promise<void> {
    const start = performance.now()
    try {
      if (this.mode === 'sentinel') {
        const [role] = await (this.client as Redis).role() as [string, ...unknown[]]
        this.probeFailed = role !== 'master'
        // Connected to a node that is no longer the master: find the master again.
        if (this.probeFailed) (this.client as Redis).disconnect(true)
      } else if (this.mode === 'cluster') {
        const info = await (this.client as Cluster).cluster('INFO')
        this.probeFailed = !info.includes('cluster_state:ok')
      } else {
        await this.client.ping()
        this.probeFailed = false
      }
      this.latencyMs = Math.round((performance.now() - start) * 1000) / 1000
    } catch {
      this.probeFailed = true
      this.latencyMs = null
    }
  }

  stop(): void {
    clearInterval(this.timer)
    this.client.off('ready', this.probeNow)
  }
}

/** Whether Redis answers PING at `target` within the connect timeout (one attempt, no retry). */
export async function redisAnswers(target: string | RedisTarget, connectTimeoutMs = 1000): Promise<boolean> {
  const where = typeof target === 'string' ? { url: target } : target
  let client: RedisClient
  if (redisMode(where) === 'single') {
    // A bare client for one server, so the connect timeout is the caller's.
    client = new Redis(where.url, { lazyConnect: true, connectTimeout: connectTimeoutMs, retryStrategy: () => null, maxRetriesPerRequest: 0 })
    client.on('error', () => undefined)
  } else {
    client = createRedis({ ...where, name: 'probe', logger: pino({ level: 'silent' }), role: 'tool' })
  }
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}
