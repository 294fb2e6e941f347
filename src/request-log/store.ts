import type { RedisClient } from '../redis.js'
import type { RequestLogEntry } from './entry.js'
import { filtersFields, indexLine, matchLine, type RequestLogFilters } from './filters.js'

// Where the request log lives (docs/architecture.md, "The request log"). Per credential and
// mode, two keys in one hash slot (the braces are literal: the credential id is the Cluster
// hash tag, so one script writes and trims both):
//   {ns}reqlog:{id}:{mode}:lines    ZSET   an index line per entry (filters.ts) -> epoch ms of its arrival
//   {ns}reqlog:{id}:{mode}:entries  HASH   request id -> the entry's JSON
// A write adds a batch's entries and trims, in the same script, those older than the
// retention and the oldest beyond the count; both keys expire a retention after the last write.
// Beside them, for the admin port's look-up of a request id whatever its credential:
//   {ns}reqlog:ids:<UTC day>       HASH   request id -> "<credential id> <mode>" of the entries that arrived that day
// one per day, so that it goes whole a retention after its day ends (docs/architecture.md §D80).

const DAY_MS = 86_400_000
/** Index lines read per call while a page with filters is looked for. */
const SCAN_CHUNK = 5000
/** Entries read per call while an export is streamed: its memory is this many entries, whatever the window. */
const EXPORT_CHUNK = 500

// ARGV: cutoff (epoch ms: older goes), the most entries kept, when both keys expire, then per
// entry its score, index line, id and JSON. Trimmed a thousand at a time (Lua's unpack has a bound).
const WRITE = `
local n = (#ARGV - 3) / 4
for i = 0, n - 1 do
  local at = 4 + i * 4
  redis.call('ZADD', KEYS[1], ARGV[at], ARGV[at + 1])
  redis.call('HSET', KEYS[2], ARGV[at + 2], ARGV[at + 3])
end
local function drop(lines)
  for i = 1, #lines do
    redis.call('HDEL', KEYS[2], string.match(lines[i], '^[^ ]+'))
    redis.call('ZREM', KEYS[1], lines[i])
  end
end
while true do
  local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 1000)
  if #old == 0 then break end
  drop(old)
end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
while over > 0 do
  local take = math.min(over, 1000)
  drop(redis.call('ZRANGE', KEYS[1], 0, take - 1))
  over = over - take
end
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
redis.call('PEXPIREAT', KEYS[2], ARGV[3])
return n
`

export interface RetentionSettings {
  retentionDays: number
  maxPerCredential: number
}

/** One page of entries: their JSON, newest first, and how many match in all. */
export interface RequestLogPage {
  json: string
  total: number
}

export class RequestLogStore {
  private readonly now: () => number

  constructor(private readonly redis: RedisClient, private readonly namespace: string, private readonly retention: RetentionSettings, now?: () => number) {
    this.now = now ?? Date.now
  }

  /** The day's key of the request id index (UTC). */
  private idsKey(at: number): string {
    return `${this.namespace}reqlog:ids:${new Date(at).toISOString().slice(0, 10)}`
  }

  private keys(credentialId: string, mode: string): [string, string] {
    const base = `${this.namespace}reqlog:{${credentialId}}:${mode}`
    return [`${base}:lines`, `${base}:entries`]
  }

  /** Writes entries (any credentials') and trims each credential's log; one script per credential and mode. */
  async write(entries: readonly RequestLogEntry[]): Promise<void> {
    const byLog = new Map<string, { keys: [string, string]; args: string[] }>()
    const byDay = new Map<number, string[]>()
    for (const entry of entries) {
      const name = `${entry.credentialId} ${entry.mode}`
      let log = byLog.get(name)
      if (log === undefined) byLog.set(name, log = { keys: this.keys(entry.credentialId, entry.mode), args: [] })
      const at = Date.parse(entry.at)
      log.args.push(String(at), indexLine(entry), entry.id, JSON.stringify(entry))
      const day = Math.floor(at / DAY_MS)
      let ids = byDay.get(day)
      if (ids === undefined) byDay.set(day, ids = [])
      ids.push(entry.id, name)
    }
    const now = this.now()
    const retentionMs = this.retention.retentionDays * DAY_MS
    const head = [String(now - retentionMs), String(this.retention.maxPerCredential), String(now + retentionMs)]
    // The index's days live in other hash slots than the logs: written beside them, not in their script.
    await Promise.all([
      ...[...byLog.values()].map(async ({ keys, args }) => this.redis.eval(WRITE, 2, ...keys, ...head, ...args)),
      ...[...byDay.entries()].map(async ([day, ids]) => {
        const key = this.idsKey(day * DAY_MS)
        await this.redis.hset(key, ...ids)
        await this.redis.pexpireat(key, (day + 1) * DAY_MS + retentionMs)
      }),
    ])
  }

  /**
   * The credential and mode of the log holding `requestId`, whatever its credential (the
   * admin port's look-up); undefined when no day of the retention knows it.
   */
  async ownerOf(requestId: string): Promise<{ credentialId: string; mode: string } | undefined> {
    const today = Math.floor(this.now() / DAY_MS)
    const days = Array.from({ length: this.retention.retentionDays + 1 }, (_, i) => today - i)
    const found = await Promise.all(days.map(async (day) => this.redis.hget(this.idsKey(day * DAY_MS), requestId)))
    const owner = found.find((value): value is string => value !== null)
    if (owner === undefined) return undefined
    const [credentialId, mode] = owner.split(' ') as [string, string]
    return { credentialId, mode }
  }

  /** One entry of any credential's, as JSON; undefined when none has it (or it was trimmed). */
  async find(requestId: string): Promise<string | undefined> {
    const owner = await this.ownerOf(requestId)
    return owner === undefined ? undefined : this.get(owner.credentialId, owner.mode, requestId)
  }

  /** How many of a credential's entries arrived within the window (epoch ms, exclusive; `before` defaults to +inf). */
  async count(credentialId: string, mode: string, after: number | undefined, before: number | undefined): Promise<number> {
    const [lines] = this.keys(credentialId, mode)
    return this.redis.zcount(lines, after === undefined ? '-inf' : `(${after}`, before === undefined ? '+inf' : `(${before}`)
  }

  /**
   * A credential's entries within the window, newest first, as parsed objects, a chunk at a
   * time. The window's end must be fixed by the caller (an instant, not +inf): entries that
   * arrive meanwhile are then after it and trims take the oldest, so the offsets hold.
   */
  async *entries(credentialId: string, mode: string, after: number | undefined, before: number): AsyncGenerator<RequestLogEntry[]> {
    const [lines, entries] = this.keys(credentialId, mode)
    const min = after === undefined ? '-inf' : `(${after}`
    for (let from = 0; ; from += EXPORT_CHUNK) {
      const chunk = await this.redis.zrevrangebyscore(lines, `(${before}`, min, 'LIMIT', from, EXPORT_CHUNK)
      if (chunk.length > 0) {
        const found = await this.redis.hmget(entries, ...chunk.map((line) => line.slice(0, line.indexOf(' '))))
        yield found.filter((json): json is string => json !== null).map((json) => JSON.parse(json) as RequestLogEntry)
      }
      if (chunk.length < EXPORT_CHUNK) return
    }
  }

  /** A page of a credential's entries of `mode`, newest first, that pass the filters. */
  async list(credentialId: string, mode: string, filters: RequestLogFilters, page: number, perPage: number): Promise<RequestLogPage> {
    const [lines, entries] = this.keys(credentialId, mode)
    const max = filters.createdBefore === undefined ? '+inf' : `(${filters.createdBefore}`
    const min = filters.createdAfter === undefined ? '-inf' : `(${filters.createdAfter}`
    const offset = (page - 1) * perPage
    let ids: string[]
    let total: number
    if (!filtersFields(filters)) {
      const [count, found] = await Promise.all([
        this.redis.zcount(lines, min, max),
        this.redis.zrevrangebyscore(lines, max, min, 'LIMIT', offset, perPage),
      ])
      total = count
      ids = found.map((line) => line.slice(0, line.indexOf(' ')))
    } else {
      ids = []
      total = 0
      for (let from = 0; ; from += SCAN_CHUNK) {
        const chunk = await this.redis.zrevrangebyscore(lines, max, min, 'LIMIT', from, SCAN_CHUNK)
        for (const line of chunk) {
          const id = matchLine(line, filters)
          if (id === undefined) continue
          if (total >= offset && ids.length < perPage) ids.push(id)
          total += 1
        }
        if (chunk.length < SCAN_CHUNK) break
      }
    }
    if (ids.length === 0) return { json: '[]', total }
    const found = await this.redis.hmget(entries, ...ids)
    return { json: `[${found.filter((json): json is string => json !== null).join(',')}]`, total }
  }

  /** One entry of a credential's, as JSON; undefined when it has none of that id. */
  async get(credentialId: string, mode: string, requestId: string): Promise<string | undefined> {
    const [, entries] = this.keys(credentialId, mode)
    return (await this.redis.hget(entries, requestId)) ?? undefined
  }
}
