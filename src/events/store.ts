import type { KeyMode } from '../keys/principal.js'
import type { RedisClient } from '../redis.js'

// Where the event log is kept (docs/architecture.md, "Redis layout"): Redis, shared by every
// instance, or, for the demo without Redis, this process's memory. The log is partitioned by
// brand and mode, the first two things that decide who sees an event, and every key of a
// partition carries the same hash tag `{brand:mode}`, so each script below touches one slot of
// a Redis Cluster:
//
//   {ns}ev:{<brand>:<mode>}:e:<ulid>                  STRING the event: its public JSON, a newline,
//                                                      the internal JSON (source, id, traceparent);
//                                                      expires at its time + retention + EXPIRY_GRACE_MS
//   {ns}ev:{<brand>:<mode>}:d:<digest>                STRING the ulid stored for a (source, id); 24 h
//   {ns}ev:{<brand>:<mode>}:t:<type>                  ZSET   every event of a type
//   {ns}ev:{<brand>:<mode>}:n:<type>                  ZSET   the events of a type that concern no property
//   {ns}ev:{<brand>:<mode>}:p:<type>:<propertyId>     ZSET   the events of a type about one property
//
// An index's members are ULIDs scored by their milliseconds, so members sort as scores do and
// a time range is a score range. A page is read in two steps of one slot each: its ULIDs (a
// script), then the records an instance does not hold yet (MGET). Each write trims the indexes it touches to the retention and
// sets their lifetime to it (plus the grace), so an index that gets no more events goes away
// whole, and the memory the log takes is bounded by what a retention's worth of events needs.

/** One brand's events of one mode: what a credential may read at all. */
export interface Partition {
  /** The brand's id. */
  brand: string
  mode: KeyMode
}

/** An event to append: its id and time, the facts its indexes are chosen by, and the record kept. */
export interface NewEvent {
  ulid: string
  millis: number
  type: string
  propertyId: string | null
  /** What recognises a copy: a digest of the publisher's (source, id). */
  dedupe: string
  /** The stored record: the public JSON, a newline, the internal JSON. */
  record: string
}

export type AppendOutcome =
  | { kind: 'stored'; ulid: string }
  /** A copy of an event stored before: its ulid, and its record (null once that has expired). */
  | { kind: 'duplicate'; ulid: string; record: string | null }

/**
 * The events of one index: of `type`, and about `property` (a property id), no property
 * (null), or any (`'*'`).
 */
export interface IndexSelector {
  type: string
  property: string | null | '*'
}

export interface PageQuery {
  /** The union of these indexes (they never share an event, unless one is a `'*'` index and another of its type). */
  indexes: readonly IndexSelector[]
  /** Milliseconds, both included. */
  from: number
  to: number
  offset: number
  limit: number
}

/** How many events a union of indexes holds in a range, and the ULIDs of one page of them, oldest first. */
export interface EventPage {
  total: number
  ulids: string[]
}

/** The public JSON of a record: what comes before its newline. */
export function publicPart(record: string): string {
  return record.slice(0, record.indexOf('\n'))
}

export interface AppendTimes {
  /** Events older than this (ms) are trimmed from the indexes touched. */
  oldest: number
  retentionMs: number
  dedupeMs: number
}

export interface EventStore {
  /** Appends the events of one partition, in order; a copy of a kept (source, id) is not stored again. */
  append(partition: Partition, events: readonly NewEvent[], times: AppendTimes): Promise<AppendOutcome[]>
  /** One page of the union of some indexes (its ULIDs, oldest first), and how many events the union holds in the range. */
  page(partition: Partition, query: PageQuery): Promise<EventPage>
  /** The record of one event; null when there is none (or no more). */
  get(partition: Partition, ulid: string): Promise<string | null>
  /** The records of some events, in their order; null for one that is gone. */
  records(partition: Partition, ulids: readonly string[]): Promise<(string | null)[]>
}

/** A record stays this long past the retention, so that a read finds every event its range admits whatever the clocks of instances and Redis say. */
export const EXPIRY_GRACE_MS = 3_600_000

/**
 * Offset + limit up to which a page of several indexes is merged from their starts; beyond it
 * the page's first score is found by a binary search of counts, so a deep page costs about
 * 32 counts per index instead of reading every event before it.
 */
export const MERGE_WINDOW = 1000

// KEYS[1] the partition's key prefix: its hash tag routes the script to the partition's slot,
// and every key the script touches starts with it. ARGV[1] a copy record's lifetime (ms),
// ARGV[2] an index's lifetime (ms), ARGV[3] the oldest score kept; then seven per event:
// ulid, score, the record's expiry (ms since 1970), the record, the digest its copy record is
// named by, its type, its property ('' for none). Returns three values per event: 0 and the
// ulid when stored; 1, the ulid stored first and that one's record when it is a copy.
const APPEND_SCRIPT = `
local prefix = KEYS[1]
local out = {}
local touched = {}
for i = 4, #ARGV, 7 do
  local ulid, score, expiry, body = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local copy = prefix .. 'd:' .. ARGV[i + 4]
  local first = redis.call('GET', copy)
  if first then
    out[#out + 1] = 1
    out[#out + 1] = first
    out[#out + 1] = redis.call('GET', prefix .. 'e:' .. first)
  else
    local type, property = ARGV[i + 5], ARGV[i + 6]
    local byType = prefix .. 't:' .. type
    local byProperty = property == '' and (prefix .. 'n:' .. type) or (prefix .. 'p:' .. type .. ':' .. property)
    redis.call('SET', copy, ulid, 'PX', ARGV[1])
    redis.call('SET', prefix .. 'e:' .. ulid, body, 'PXAT', expiry)
    redis.call('ZADD', byType, score, ulid)
    redis.call('ZADD', byProperty, score, ulid)
    touched[byType] = true
    touched[byProperty] = true
    out[#out + 1] = 0
    out[#out + 1] = ulid
    out[#out + 1] = false
  end
end
for index in pairs(touched) do
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. ARGV[3])
  redis.call('PEXPIRE', index, ARGV[2])
end
return out
`

// KEYS: the indexes whose union is read. ARGV[1] and ARGV[2] the lowest and highest score
// (both included), ARGV[3] the offset, ARGV[4] the limit, ARGV[5] the merge window. Returns
// the union's count in the range, and the page's ULIDs, oldest first, joined by commas (one
// string to decode, not a hundred; their records are read apart, most from an instance's cache). A ULID's order is its score's, so members are
// merged by their text.
const PAGE_SCRIPT = `
local low, high = ARGV[1], ARGV[2]
local offset, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local sets, counts, total = {}, {}, 0
for i = 1, #KEYS do
  local n = redis.call('ZCOUNT', KEYS[i], low, high)
  if n > 0 then
    sets[#sets + 1] = KEYS[i]
    counts[#counts + 1] = n
    total = total + n
  end
end
if offset >= total or limit <= 0 then return { total } end
local ids = {}
if #sets == 1 then
  local from = redis.call('ZCOUNT', sets[1], '-inf', '(' .. low) + offset
  ids = redis.call('ZRANGE', sets[1], from, from + math.min(limit, counts[1] - offset) - 1)
else
  local start, skip = low, offset
  if offset + limit > tonumber(ARGV[5]) then
    -- The lowest score with more than offset events at or below it, searched between the
    -- lowest and the highest score the indexes hold in the range.
    local lo, hi = nil, nil
    for i = 1, #sets do
      local first = tonumber(redis.call('ZRANGE', sets[i], low, high, 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')[2])
      local last = tonumber(redis.call('ZRANGE', sets[i], high, low, 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')[2])
      if lo == nil or first < lo then lo = first end
      if hi == nil or last > hi then hi = last end
    end
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local n = 0
      for i = 1, #sets do n = n + redis.call('ZCOUNT', sets[i], low, mid) end
      if n > offset then hi = mid else lo = mid + 1 end
    end
    local below = 0
    for i = 1, #sets do below = below + redis.call('ZCOUNT', sets[i], low, '(' .. lo) end
    start, skip = lo, offset - below
  end
  local all = {}
  for i = 1, #sets do
    local from = redis.call('ZCOUNT', sets[i], '-inf', '(' .. start)
    local n = math.min(redis.call('ZCOUNT', sets[i], start, high), skip + limit)
    if n > 0 then
      for _, id in ipairs(redis.call('ZRANGE', sets[i], from, from + n - 1)) do all[#all + 1] = id end
    end
  end
  table.sort(all)
  for i = skip + 1, math.min(skip + limit, #all) do ids[#ids + 1] = all[i] end
end
return { total, table.concat(ids, ',') }
`

type AppendCommand = (prefix: string, ...args: (string | number)[]) => Promise<(number | string | null)[]>
type PageCommand = (numberOfKeys: number, ...args: (string | number)[]) => Promise<(number | string)[]>

/** The key prefix of a partition: every key of it shares the hash tag `{brand:mode}`. */
export function partitionPrefix(namespace: string, partition: Partition): string {
  return `${namespace}ev:{${partition.brand}:${partition.mode}}:`
}

/** The key of an index (as the append script names it). */
function indexKey(prefix: string, type: string, property: string | null | '*'): string {
  return property === '*' ? `${prefix}t:${type}` : property === null ? `${prefix}n:${type}` : `${prefix}p:${type}:${property}`
}

/** The event log in Redis: one round trip to append a partition's events, one to read a page's ULIDs, one to read some events. */
export class RedisEventStore implements EventStore {
  private readonly appendCommand: AppendCommand
  private readonly pageCommand: PageCommand

  constructor(private readonly redis: RedisClient, private readonly namespace: string, private readonly mergeWindow = MERGE_WINDOW) {
    redis.defineCommand('eventsAppend', { numberOfKeys: 1, lua: APPEND_SCRIPT })
    // No fixed number of keys: the first argument says how many.
    redis.defineCommand('eventsPage', { lua: PAGE_SCRIPT })
    const commands = redis as unknown as { eventsAppend: AppendCommand; eventsPage: PageCommand }
    this.appendCommand = commands.eventsAppend.bind(redis)
    this.pageCommand = commands.eventsPage.bind(redis)
  }

  async append(partition: Partition, events: readonly NewEvent[], times: AppendTimes): Promise<AppendOutcome[]> {
    const args: (string | number)[] = [times.dedupeMs, times.retentionMs + EXPIRY_GRACE_MS, times.oldest]
    for (const event of events) {
      args.push(event.ulid, event.millis, event.millis + times.retentionMs + EXPIRY_GRACE_MS, event.record, event.dedupe, event.type, event.propertyId ?? '')
    }
    const reply = await this.appendCommand(partitionPrefix(this.namespace, partition), ...args)
    const outcomes: AppendOutcome[] = []
    for (let i = 0; i < reply.length; i += 3) {
      const ulid = String(reply[i + 1])
      outcomes.push(reply[i] === 0 ? { kind: 'stored', ulid } : { kind: 'duplicate', ulid, record: reply[i + 2] === null ? null : String(reply[i + 2]) })
    }
    return outcomes
  }

  async page(partition: Partition, query: PageQuery): Promise<EventPage> {
    const prefix = partitionPrefix(this.namespace, partition)
    const keys = query.indexes.map((index) => indexKey(prefix, index.type, index.property))
    if (keys.length === 0) return { total: 0, ulids: [] }
    const [total, ulids] = await this.pageCommand(keys.length, ...keys, query.from, query.to, query.offset, query.limit, this.mergeWindow)
    return { total: Number(total), ulids: ulids === undefined || ulids === '' ? [] : String(ulids).split(',') }
  }

  async records(partition: Partition, ulids: readonly string[]): Promise<(string | null)[]> {
    if (ulids.length === 0) return []
    const prefix = `${partitionPrefix(this.namespace, partition)}e:`
    // One slot: every record of the partition shares its hash tag.
    return this.redis.mget(...ulids.map((ulid) => `${prefix}${ulid}`))
  }

  get(partition: Partition, ulid: string): Promise<string | null> {
    return this.redis.get(`${partitionPrefix(this.namespace, partition)}e:${ulid}`)
  }
}

interface MemoryEvent {
  millis: number
  type: string
  propertyId: string | null
  record: string
  expiresAt: number
}

/** The event log in this process only: the demo's when no Redis answers. */
export class MemoryEventStore implements EventStore {
  private readonly events = new Map<string, Map<string, MemoryEvent>>()
  private readonly copies = new Map<string, { ulid: string; expiresAt: number }>()

  private partition(partition: Partition): Map<string, MemoryEvent> {
    const key = `${partition.brand}:${partition.mode}`
    let events = this.events.get(key)
    if (events === undefined) {
      events = new Map()
      this.events.set(key, events)
    }
    return events
  }

  async append(partition: Partition, events: readonly NewEvent[], times: AppendTimes): Promise<AppendOutcome[]> {
    const stored = this.partition(partition)
    const now = Date.now()
    for (const [ulid, event] of stored) if (event.millis < times.oldest || event.expiresAt <= now) stored.delete(ulid)
    for (const [key, copy] of this.copies) if (copy.expiresAt <= now) this.copies.delete(key)
    return events.map((event): AppendOutcome => {
      const copyKey = `${partition.brand}:${partition.mode}:${event.dedupe}`
      const first = this.copies.get(copyKey)
      if (first !== undefined) return { kind: 'duplicate', ulid: first.ulid, record: stored.get(first.ulid)?.record ?? null }
      this.copies.set(copyKey, { ulid: event.ulid, expiresAt: now + times.dedupeMs })
      stored.set(event.ulid, { millis: event.millis, type: event.type, propertyId: event.propertyId, record: event.record, expiresAt: event.millis + times.retentionMs + EXPIRY_GRACE_MS })
      return { kind: 'stored', ulid: event.ulid }
    })
  }

  async page(partition: Partition, query: PageQuery): Promise<EventPage> {
    const now = Date.now()
    const matching = [...this.partition(partition)].filter(([, event]) => event.millis >= query.from && event.millis <= query.to && event.expiresAt > now
      && query.indexes.some((index) => index.type === event.type && (index.property === '*' || index.property === event.propertyId)))
    matching.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return { total: matching.length, ulids: matching.slice(query.offset, query.offset + query.limit).map(([ulid]) => ulid) }
  }

  async records(partition: Partition, ulids: readonly string[]): Promise<(string | null)[]> {
    return Promise.all(ulids.map((ulid) => this.get(partition, ulid)))
  }

  async get(partition: Partition, ulid: string): Promise<string | null> {
    const event = this.partition(partition).get(ulid)
    return event === undefined || event.expiresAt <= Date.now() ? null : event.record
  }
}
