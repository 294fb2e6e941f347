import { Pool } from 'undici'
import { guardedConnector, type Lookup } from './addresses.js'

// The connections of deliveries (docs/architecture.md, "Webhooks"): one undici pool per
// endpoint origin, its connections kept alive between attempts, so that an endpoint receiving
// a stream of events is not sent a TCP (and TLS) handshake per attempt. Every connection is
// opened by the guarded connector (addresses.ts, §D34): a connection kept alive was opened to
// an address the guard accepted, and a name that re-resolves elsewhere is checked again when
// the next connection is opened. Bounded: a connection idle for IDLE_MS closes (whatever the
// endpoint's own Keep-Alive says), and past MAX_ORIGINS the pool used longest ago closes.

/** A connection left idle this long closes: under the 5 s of common servers, so that it is rarely the server that closes it as a request leaves. */
export const IDLE_MS = 4_000
/** Origins whose pool is kept; the one used longest ago closes when another comes. */
export const MAX_ORIGINS = 512

export interface ConnectionOptions {
  /** `events.deliveryTimeoutMs`: to connect, to the answer's headers, between its body's chunks. */
  timeoutMs: number
  /** `events.allowPrivateTargets`. */
  allowPrivate: boolean
  lookup?: Lookup
  idleMs?: number
  maxOrigins?: number
}

export class EndpointConnections {
  /** By origin, the one used longest ago first. */
  private readonly pools = new Map<string, Pool>()
  private readonly connect: ReturnType<typeof guardedConnector>
  private readonly idleMs: number
  private readonly maxOrigins: number

  constructor(private readonly options: ConnectionOptions) {
    this.connect = guardedConnector({ allowPrivate: options.allowPrivate, connectTimeoutMs: options.timeoutMs, ...(options.lookup === undefined ? {} : { lookup: options.lookup }) })
    this.idleMs = options.idleMs ?? IDLE_MS
    this.maxOrigins = options.maxOrigins ?? MAX_ORIGINS
  }

  /** The pool for `url`'s origin, made when none is kept. */
  of(url: string): Pool {
    const origin = new URL(url).origin
    let pool = this.pools.get(origin)
    if (pool !== undefined) {
      this.pools.delete(origin)
      this.pools.set(origin, pool)
      return pool
    }
    pool = new Pool(origin, {
      connect: this.connect,
      headersTimeout: this.options.timeoutMs,
      bodyTimeout: this.options.timeoutMs,
      keepAliveTimeout: this.idleMs,
      keepAliveMaxTimeout: this.idleMs,
      // One request at a time on a connection: a partner's server need not support pipelining.
      pipelining: 1,
    })
    this.pools.set(origin, pool)
    if (this.pools.size > this.maxOrigins) {
      const [oldest] = this.pools.keys()
      if (oldest !== undefined) this.forget(oldest)
    }
    return pool
  }

  /** Closes the pool of `url`'s origin (an endpoint deleted): its idle connections at once, those in use once their attempt ends. */
  forgetUrl(url: string): void {
    let origin: string
    try {
      origin = new URL(url).origin
    } catch {
      return
    }
    this.forget(origin)
  }

  private forget(origin: string): void {
    const pool = this.pools.get(origin)
    if (pool === undefined) return
    this.pools.delete(origin)
    pool.close().catch(() => undefined)
  }

  /** Closes every pool as `forgetUrl` does (a configuration reloaded). */
  forgetAll(): void {
    for (const origin of [...this.pools.keys()]) this.forget(origin)
  }

  /** Drops every connection at once (shutdown: attempts in flight were handed back before). */
  async destroy(): Promise<void> {
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((pool) => pool.destroy().catch(() => undefined)))
  }

  /** Origins whose pool is kept. */
  get size(): number {
    return this.pools.size
  }
}
