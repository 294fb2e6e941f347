import type { Logger } from 'pino'
import type { RedisClient } from '../redis.js'
import type { Principal } from '../keys/principal.js'

// Usage per credential (docs/architecture.md, "Usage and last use"): each instance counts the
// requests of each credential in memory, by UTC day, route template and status class, and
// notes the minute each credential (and a rolled key's previous secret) was last used. Every
// `usage.flushSeconds`, and when the app closes (graceful shutdown), it writes what it has in
// one pipeline: never a Redis write per request. A crash loses at most one interval of one
// instance's counts. A flush that fails keeps its counts for the next one.
//
// Redis layout (the braces are literal: the credential id is the Cluster hash tag, so one
// credential's keys share a slot):
//   {ns}usage:{id}:{YYYY-MM-DD}  HASH  "<METHOD> <route template>|<class>" -> requests, class one
//                                      of 2xx, 3xx, 4xx (429s apart), 429, 5xx; expires
//                                      `usage.retentionDays` after its day
//   {ns}lastused:{id}            HASH  any, previous -> epoch ms of the minute last used (by
//                                      any secret; by a rolled key's previous secret)

export const STATUS_CLASSES = ['2xx', '3xx', '4xx', '429', '5xx'] as const
export type StatusClass = (typeof STATUS_CLASSES)[number]

const DAY_MS = 86_400_000
const MINUTE_MS = 60_000

/** What one flush writes: counts by day, credential and field; the minutes last used by credential. */
export interface UsageBatch {
  counts: Map<string, Map<string, Map<string, number>>>
  lastUsed: Map<string, { any?: number; previous?: number }>
}

/** When a credential was last used: epoch ms of the minute, by any secret and by the previous one. */
export interface LastUse { any: number | null; previous: number | null }

export interface UsageStore {
  write(batch: UsageBatch, retentionMs: number): Promise<void>
  /** The counts of `id` on each of `days` (YYYY-MM-DD), by field. */
  counts(id: string, days: readonly string[]): Promise<Map<string, Record<string, number>>>
  lastUse(ids: readonly string[]): Promise<Map<string, LastUse>>
  /** A roll starts its previous secret's last use afresh. */
  resetPrevious(id: string): Promise<void>
  /** Forgets when a revoked credential was last used (its counts stay until they expire). */
  forget(id: string): Promise<void>
}

/** `YYYY-MM-DD` of a time, in UTC. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

/** The `days` UTC days that end with the one of `now`, oldest first. */
export function lastDays(now: number, days: number): string[] {
  const out: string[] = []
  for (let i = days - 1; i >= 0; i -= 1) out.push(utcDay(now - i * DAY_MS))
  return out
}

/** The field of a count: the route (method and template) and the status class. */
export function usageField(route: string, statusClass: StatusClass): string {
  return `${route}|${statusClass}`
}

/** The route and class of a field. */
export function parseUsageField(field: string): { route: string; statusClass: StatusClass } | undefined {
  const bar = field.lastIndexOf('|')
  const statusClass = field.slice(bar + 1) as StatusClass
  if (bar === -1 || !STATUS_CLASSES.includes(statusClass)) return undefined
  return { route: field.slice(0, bar), statusClass }
}

function classIndex(status: number): number {
  if (status === 429) return 3
  if (status >= 500) return 4
  if (status >= 400) return 2
  if (status >= 300) return 1
  return 0
}

// Max of the stored and the given minute, per field: instances flush in any order.
const LAST_USED = `
for i = 1, #ARGV, 2 do
  local stored = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i + 1]) > stored then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
`

export class RedisUsageStore implements UsageStore {
  constructor(private readonly redis: RedisClient, private readonly namespace: string) {}

  private countsKey(id: string, day: string): string {
    return `${this.namespace}usage:{${id}}:${day}`
  }

  private lastUsedKey(id: string): string {
    return `${this.namespace}lastused:{${id}}`
  }

  async write(batch: UsageBatch, retentionMs: number): Promise<void> {
    // One pipeline per credential: its keys share a slot, so this holds on a Cluster too.
    const byCredential = new Map<string, ReturnType<RedisClient['pipeline']>>()
    const pipelineOf = (id: string) => {
      let pipeline = byCredential.get(id)
      if (pipeline === undefined) {
        pipeline = this.redis.pipeline()
        byCredential.set(id, pipeline)
      }
      return pipeline
    }
    for (const [day, credentials] of batch.counts) {
      const expiresAt = Date.parse(`${day}T00:00:00.000Z`) + DAY_MS + retentionMs
      for (const [id, fields] of credentials) {
        const pipeline = pipelineOf(id)
        const key = this.countsKey(id, day)
        for (const [field, count] of fields) pipeline.hincrby(key, field, count)
        pipeline.pexpireat(key, expiresAt)
      }
    }
    for (const [id, minutes] of batch.lastUsed) {
      const args: string[] = []
      if (minutes.any !== undefined) args.push('any', String(minutes.any))
      if (minutes.previous !== undefined) args.push('previous', String(minutes.previous))
      if (args.length > 0) pipelineOf(id).eval(LAST_USED, 1, this.lastUsedKey(id), ...args)
    }
    const results = await Promise.all([...byCredential.values()].map(async (pipeline) => pipeline.exec()))
    for (const result of results) {
      const failed = result?.find(([error]) => error !== null)
      if (failed !== undefined) throw failed[0] as Error
    }
  }

  async counts(id: string, days: readonly string[]): Promise<Map<string, Record<string, number>>> {
    const out = new Map<string, Record<string, number>>()
    const hashes = await Promise.all(days.map(async (day) => this.redis.hgetall(this.countsKey(id, day))))
    days.forEach((day, i) => {
      const fields: Record<string, number> = {}
      for (const [field, count] of Object.entries(hashes[i] ?? {})) fields[field] = Number(count)
      out.set(day, fields)
    })
    return out
  }

  async lastUse(ids: readonly string[]): Promise<Map<string, LastUse>> {
    const hashes = await Promise.all(ids.map(async (id) => this.redis.hgetall(this.lastUsedKey(id))))
    const out = new Map<string, LastUse>()
    ids.forEach((id, i) => {
      const hash = hashes[i] ?? {}
      out.set(id, { any: hash.any === undefined ? null : Number(hash.any), previous: hash.previous === undefined ? null : Number(hash.previous) })
    })
    return out
  }

  async resetPrevious(id: string): Promise<void> {
    await this.redis.hdel(this.lastUsedKey(id), 'previous')
  }

  async forget(id: string): Promise<void> {
    await this.redis.del(this.lastUsedKey(id))
  }
}

/** The demo's store when no Redis answers: this process only. */
export class MemoryUsageStore implements UsageStore {
  private readonly days = new Map<string, Map<string, Record<string, number>>>()
  private readonly last = new Map<string, LastUse>()

  async write(batch: UsageBatch): Promise<void> {
    for (const [day, credentials] of batch.counts) {
      for (const [id, fields] of credentials) {
        let byDay = this.days.get(id)
        if (byDay === undefined) this.days.set(id, byDay = new Map())
        const stored = byDay.get(day) ?? {}
        for (const [field, count] of fields) stored[field] = (stored[field] ?? 0) + count
        byDay.set(day, stored)
      }
    }
    for (const [id, minutes] of batch.lastUsed) {
      const stored = this.last.get(id) ?? { any: null, previous: null }
      this.last.set(id, {
        any: Math.max(stored.any ?? 0, minutes.any ?? 0) || null,
        previous: Math.max(stored.previous ?? 0, minutes.previous ?? 0) || null,
      })
    }
  }

  async counts(id: string, days: readonly string[]): Promise<Map<string, Record<string, number>>> {
    return new Map(days.map((day) => [day, { ...this.days.get(id)?.get(day) }]))
  }

  async lastUse(ids: readonly string[]): Promise<Map<string, LastUse>> {
    return new Map(ids.map((id) => [id, this.last.get(id) ?? { any: null, previous: null }]))
  }

  async resetPrevious(id: string): Promise<void> {
    const stored = this.last.get(id)
    if (stored !== undefined) stored.previous = null
  }

  async forget(id: string): Promise<void> {
    this.last.delete(id)
  }
}

export interface UsageRecorderOptions {
  flushMs: number
  retentionMs: number
  logger: Logger
}

/**
 * The counting of one instance. `count` runs after every answer to a request whose
 * credential was found (a principal): a few map look-ups, no I/O.
 */
export class UsageRecorder {
  /** Day -> credential -> field -> requests, since the last flush. */
  private pending = new Map<string, Map<string, Map<string, number>>>()
  /** Credential -> the minutes last used, by any secret and by a previous one. */
  private lastUsed = new Map<string, { any?: number; previous?: number }>()
  /** What was written of each, so a minute is written once per instance. */
  private readonly written = new Map<string, { any: number; previous: number }>()
  /** The day counts go to now, its map, and when it ends. */
  private day = ''
  private dayCounts = new Map<string, Map<string, number>>()
  private dayEndsAt = 0
  /** Each route's fields, one per status class, made once. */
  private readonly fields = new Map<string, string[]>()
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> | undefined
  private failing = false

  constructor(private readonly store: UsageStore, private readonly options: UsageRecorderOptions) {}

  start(): void {
    if (this.timer !== undefined) return
    this.timer = setInterval(() => void this.flush(), this.options.flushMs)
    this.timer.unref()
  }

  /** Counts one answer of `status` to `principal` on `route` (`<METHOD> <template>`). */
  count(principal: Principal, route: string, status: number, now: number = Date.now()): void {
    if (now >= this.dayEndsAt) this.startDay(now)
    let fields = this.fields.get(route)
    if (fields === undefined) {
      fields = STATUS_CLASSES.map((c) => usageField(route, c))
      this.fields.set(route, fields)
    }
    const field = fields[classIndex(status)] as string
    const id = principal.keyId
    let counts = this.dayCounts.get(id)
    if (counts === undefined) this.dayCounts.set(id, counts = new Map())
    counts.set(field, (counts.get(field) ?? 0) + 1)
    const minute = now - (now % MINUTE_MS)
    let last = this.lastUsed.get(id)
    if (last === undefined) this.lastUsed.set(id, last = {})
    last.any = minute
    if (principal.previousSecret === true) last.previous = minute
  }

  private startDay(now: number): void {
    this.day = utcDay(now)
    this.dayEndsAt = Date.parse(`${this.day}T00:00:00.000Z`) + DAY_MS
    let counts = this.pending.get(this.day)
    if (counts === undefined) this.pending.set(this.day, counts = new Map())
    this.dayCounts = counts
  }

  /** Writes what was counted since the last flush; one flush at a time. */
  async flush(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing
    this.flushing = this.write().finally(() => { this.flushing = undefined })
    await this.flushing
  }

  private async write(): Promise<void> {
    const counts = this.pending
    const lastUsed = new Map<string, { any?: number; previous?: number }>()
    for (const [id, minutes] of this.lastUsed) {
      const written = this.written.get(id) ?? { any: 0, previous: 0 }
      const due: { any?: number; previous?: number } = {}
      if (minutes.any !== undefined && minutes.any > written.any) due.any = minutes.any
      if (minutes.previous !== undefined && minutes.previous > written.previous) due.previous = minutes.previous
      if (due.any !== undefined || due.previous !== undefined) lastUsed.set(id, due)
    }
    this.pending = new Map()
    this.dayEndsAt = 0
    if (counts.size === 0 && lastUsed.size === 0) return
    try {
      await this.store.write({ counts, lastUsed }, this.options.retentionMs)
      for (const [id, due] of lastUsed) {
        const written = this.written.get(id) ?? { any: 0, previous: 0 }
        this.written.set(id, { any: due.any ?? written.any, previous: due.previous ?? written.previous })
      }
      if (this.failing) this.options.logger.info('usage counts are written to Redis again')
      this.failing = false
    } catch (error) {
      // Kept for the next flush: counted again on top of what came since.
      this.merge(counts)
      if (!this.failing) this.options.logger.warn({ err: error }, 'usage counts could not be written to Redis; they are kept for the next flush')
      this.failing = true
    }
  }

  private merge(counts: Map<string, Map<string, Map<string, number>>>): void {
    for (const [day, credentials] of counts) {
      let into = this.pending.get(day)
      if (into === undefined) this.pending.set(day, into = new Map())
      for (const [id, fields] of credentials) {
        let target = into.get(id)
        if (target === undefined) into.set(id, target = new Map())
        for (const [field, count] of fields) target.set(field, (target.get(field) ?? 0) + count)
      }
    }
  }

  /** Stops the timer and writes what is left (the app's onClose: a graceful shutdown loses nothing). */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    await this.flush()
  }
}
