import type { KeyMode } from '../keys/principal.js'
import type { RedisClient } from '../redis.js'
import { redisScript } from '../redis-script.js'

// Where the event log is kept (docs/architecture.md, "Redis layout"): Redis, shared by every
// instance, or, for the demo without Redis, this process's memory. The log is partitioned by
// brand and mode, the first two things that decide who sees an event, and every key of a
// partition carries the same hash tag `{brand:mode}`, so each script below touches one slot of
// a Redis Cluster:
//
//   {ns}ev:{<brand>:<mode>}:e:<ulid>                  STRING the event: its public JSON, a newline,
//                                                      the internal JSON (source, id, traceparent);
//                                                      expires at its time + retention + EXPIRY_GRACE_MS
//   {ns}ev:{<brand>:<mode>}:t:<type>                  ZSET   every event of a type
//   {ns}ev:{<brand>:<mode>}:n:<type>                  ZSET   the events of a type that concern no property
//   {ns}ev:{<brand>:<mode>}:p:<type>:<propertyId>     ZSET   the events of a type about one property
//   {ns}ev:{<brand>:<mode>}:ps                        ZSET   the properties that have events, scored by
//                                                      the time of their last one
//
// A publisher's copies are recognised apart from any brand, since the same (source, id) is one
// event whatever brand it names; its copy records carry the hash tag `{src:<source>}`:
//
//   {ns}ev:{src:<source>}:d:<digest>                  STRING the brand and ulid of the event kept
//                                                      for a (source, id); 24 h
//
// An index's members are ULIDs scored by their milliseconds, so members sort as scores do and
// a time range is a score range. A page is read in two steps of one slot each: its ULIDs (a
// script), then the records an instance does not hold yet (MGET). The script reads the
// property indexes of a credential limited to some properties only for those of its properties
// that have events in the range (one ZMSCORE of `ps`), so a credential of a thousand
// properties costs about what one of ten does. Each write trims the indexes it touches to the
// retention and sets their lifetime to it (plus the grace), so an index that gets no more
// events goes away whole, and the memory the log takes is bounded by what a retention's worth
// of events needs.

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
  /** The stored record: the public JSON, a newline, the internal JSON. */
  record: string
}

export type AppendOutcome =
  | { kind: 'stored'; ulid: string }
  /** Its ulid was stored before (a copy, written twice): the record kept then. */
  | { kind: 'duplicate'; ulid: string; record: string }

/** Where the event of a (source, id) is kept: its brand and ulid. */
export interface Claim {
  brand: string
  ulid: string
}

/** A (source, id) to claim, by its digest, for an event of `brand` to be kept as `ulid`. */
export interface ClaimRequest extends Claim {
  dedupe: string
}

/** The events a page is taken from, in a time range. */
export interface PageQuery {
  /** Of these public types. */
  types: readonly string[]
  /** `'*'`: about any property or none; else about one of these properties. */
  properties: '*' | readonly string[]
  /** With a list of properties: the events about no property as well. */
  withoutProperty: boolean
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
}

export interface EventStore {
  /**
   * Claims each (source, id) of a request, in order, for `dedupeMs`: undefined where this
   * request made the claim (its event is kept as it asked), else the claim made before (by an
   * earlier request, or earlier in this one). Per publisher, whatever brand an event names.
   */
  claim(source: string, claims: readonly ClaimRequest[], dedupeMs: number): Promise<(Claim | undefined)[]>
  /** Appends the events of one partition, in order; an event whose ulid is kept already is not stored again. */
  append(partition: Partition, events: readonly NewEvent[], times: AppendTimes): Promise<AppendOutcome[]>
  /** One page of the events a query selects (its ULIDs, oldest first), and how many it selects in all. */
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

// KEYS[1] a publisher's key prefix; ARGV[1] a copy record's lifetime (ms); then two per event:
// the digest its copy record is named by, and its claim (brand and ulid, a space between).
// Returns one value per event: '' when this call made the claim, else the claim made before.
const CLAIM_SCRIPT = `
local out = {}
for i = 2, #ARGV, 2 do
  local copy = KEYS[1] .. 'd:' .. ARGV[i]
  local first = redis.call('GET', copy)
  if first then
    out[#out + 1] = first
  else
    redis.call('SET', copy, ARGV[i + 1], 'PX', ARGV[1])
    out[#out + 1] = ''
  end
end
return out
`

// KEYS[1] the partition's key prefix: its hash tag routes the script to the partition's slot,
// and every key the script touches starts with it. ARGV[1] an index's lifetime (ms), ARGV[2]
// the oldest score kept; then six per event: ulid, score, the record's expiry (ms since 1970),
// the record, its type, its property ('' for none). Returns two values per event: 0 and false
// when stored; 1 and the record kept before when its ulid was stored already.
const APPEND_SCRIPT = `
local prefix = KEYS[1]
local out = {}
local touched = {}
for i = 3, #ARGV, 6 do
  local ulid, score, expiry, body = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local record = prefix .. 'e:' .. ulid
  if redis.call('SET', record, body, 'NX', 'PXAT', expiry) then
    local type, property = ARGV[i + 4], ARGV[i + 5]
    local byType = prefix .. 't:' .. type
    redis.call('ZADD', byType, score, ulid)
    touched[byType] = true
    if property == '' then
      local none = prefix .. 'n:' .. type
      redis.call('ZADD', none, score, ulid)
      touched[none] = true
    else
      local one = prefix .. 'p:' .. type .. ':' .. property
      local present = prefix .. 'ps'
      redis.call('ZADD', one, score, ulid)
      redis.call('ZADD', present, 'GT', score, property)
      touched[one] = true
      touched[present] = true
    end
    out[#out + 1] = 0
    out[#out + 1] = false
  else
    out[#out + 1] = 1
    out[#out + 1] = redis.call('GET', record)
  end
end
for index in pairs(touched) do
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. ARGV[2])
  redis.call('PEXPIRE', index, ARGV[1])
end
return out
`

// KEYS[1] the partition's key prefix. ARGV[1] and ARGV[2] the lowest and highest score (both
// included), ARGV[3] the offset, ARGV[4] the limit, ARGV[5] the merge window, ARGV[6] the
// number of types, ARGV[7] '*' for every property or '' for a list, ARGV[8] '1' to add the
// events about no property; then the types; then the properties of the list. The indexes read
// are the types' whole indexes, or their no-property indexes and the indexes of those listed
// properties whose last event is in the range (one ZMSCORE, whatever the list's length).
// Returns the union's count in the range, and the page's ULIDs, oldest first, joined by commas
// (one string to decode, not a hundred; their records are read apart, most from an instance's
// cache). A ULID's order is its score's, so members are merged by their text.
const PAGE_SCRIPT = `
local prefix = KEYS[1]
local low, high = ARGV[1], ARGV[2]
local offset, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local ntypes = tonumber(ARGV[6])
local firstProperty = 9 + ntypes
local present = {}
if ARGV[7] ~= '*' and #ARGV >= firstProperty then
  local since = tonumber(low)
  local last = redis.call('ZMSCORE', prefix .. 'ps', unpack(ARGV, firstProperty, #ARGV))
  for i = 1, #ARGV - firstProperty + 1 do
    if last[i] and tonumber(last[i]) >= since then present[#present + 1] = ARGV[firstProperty + i - 1] end
  end
end
local indexes = {}
for t = 9, 8 + ntypes do
  local type = ARGV[t]
  if ARGV[7] == '*' then
    indexes[#indexes + 1] = prefix .. 't:' .. type
  else
    if ARGV[8] == '1' then indexes[#indexes + 1] = prefix .. 'n:' .. type end
    for _, property in ipairs(present) do indexes[#indexes + 1] = prefix .. 'p:' .. type .. ':' .. property end
  end
end
local sets, counts, total = {}, {}, 0
for i = 1, #indexes do
  local n = redis.call('ZCOUNT', indexes[i], low, high)
  if n > 0 then
    sets[#sets + 1] = indexes[i]
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

/**
 * Past this many properties, a page first asks which properties of the partition have events
 * in its range, when they are at most as many as the list (one small script, whose cost is
 * theirs, not the list's), keeps those of the list, and reads the page with them alone: a list
 * of 1,000 then never crosses to Redis. Up to it, or when the partition has more properties
 * with events than the list, the page's script itself asks which of the list have events, in
 * one round trip. (The two steps are not one atomic read: a property whose first event lands
 * between them is left out of that page, as an event written a moment late is; partners read
 * with a minute's overlap, docs/partners.md.)
 */
export const PRESENT_FIRST = 32

// KEYS[1] the partition's key prefix; ARGV[1] the lowest score of a page's range, ARGV[2] a
// number. Returns the properties with events at or after it, or false when they are more than
// that number.
const PRESENT_SCRIPT = `
local present = KEYS[1] .. 'ps'
if redis.call('ZCOUNT', present, ARGV[1], '+inf') > tonumber(ARGV[2]) then return false end
return redis.call('ZRANGE', present, ARGV[1], '+inf', 'BYSCORE')
`

type PresentCommand = (prefix: string, since: number, most: number) => Promise<string[] | null>
type ClaimCommand = (prefix: string, ...args: (string | number)[]) => Promise<string[]>
type AppendCommand = (prefix: string, ...args: (string | number)[]) => Promise<(number | string | null)[]>
type PageCommand = (prefix: string, ...args: (string | number)[]) => Promise<(number | string)[]>

/** The key prefix of a partition: every key of it shares the hash tag `{brand:mode}`. */
export function partitionPrefix(namespace: string, partition: Partition): string {
  return `${namespace}ev:{${partition.brand}:${partition.mode}}:`
}

/** The key prefix of a publisher's copy records: they share the hash tag `{src:<source>}` (a brand's tag holds its mode after a colon, so no brand's is one). */
export function publisherPrefix(namespace: string, source: string): string {
  return `${namespace}ev:{src:${source}}:`
}

/** The event log in Redis: one round trip to claim a request's copies, one to append a partition's events, one to read a page's ULIDs, one to read some events. */
export class RedisEventStore implements EventStore {
  private readonly claimCommand: ClaimCommand
  private readonly appendCommand: AppendCommand
  private readonly pageCommand: PageCommand
  private readonly presentCommand: PresentCommand

  constructor(private readonly redis: RedisClient, private readonly namespace: string, private readonly mergeWindow = MERGE_WINDOW, private readonly presentFirst = PRESENT_FIRST) {
    this.presentCommand = redisScript<PresentCommand>(redis, 1, PRESENT_SCRIPT)
    this.claimCommand = redisScript<ClaimCommand>(redis, 1, CLAIM_SCRIPT)
    this.appendCommand = redisScript<AppendCommand>(redis, 1, APPEND_SCRIPT)
    this.pageCommand = redisScript<PageCommand>(redis, 1, PAGE_SCRIPT)
  }

  async claim(source: string, claims: readonly ClaimRequest[], dedupeMs: number): Promise<(Claim | undefined)[]> {
    if (claims.length === 0) return []
    const args: (string | number)[] = [dedupeMs]
    for (const claim of claims) args.push(claim.dedupe, `${claim.brand} ${claim.ulid}`)
    const reply = await this.claimCommand(publisherPrefix(this.namespace, source), ...args)
    return reply.map((value) => {
      if (value === '') return undefined
      const space = value.indexOf(' ')
      return { brand: value.slice(0, space), ulid: value.slice(space + 1) }
    })
  }

  async append(partition: Partition, events: readonly NewEvent[], times: AppendTimes): Promise<AppendOutcome[]> {
    const args: (string | number)[] = [times.retentionMs + EXPIRY_GRACE_MS, times.oldest]
    for (const event of events) {
      args.push(event.ulid, event.millis, event.millis + times.retentionMs + EXPIRY_GRACE_MS, event.record, event.type, event.propertyId ?? '')
    }
    const reply = await this.appendCommand(partitionPrefix(this.namespace, partition), ...args)
    return events.map((event, i): AppendOutcome => (reply[2 * i] === 0
      ? { kind: 'stored', ulid: event.ulid }
      : { kind: 'duplicate', ulid: event.ulid, record: String(reply[2 * i + 1]) }))
  }

  async page(partition: Partition, query: PageQuery): Promise<EventPage> {
    if (query.types.length === 0 || (query.properties !== '*' && query.properties.length === 0 && !query.withoutProperty)) return { total: 0, ulids: [] }
    const every = query.properties === '*'
    let properties = every ? [] : query.properties as readonly string[]
    if (properties.length > this.presentFirst) {
      const active = await this.presentCommand(partitionPrefix(this.namespace, partition), query.from, properties.length)
      if (active !== null) {
        const listed = new Set(properties)
        properties = active.filter((property) => listed.has(property))
      }
    }
    const [total, ulids] = await this.pageCommand(partitionPrefix(this.namespace, partition), query.from, query.to, query.offset, query.limit, this.mergeWindow,
      query.types.length, every ? '*' : '', query.withoutProperty ? '1' : '', ...query.types, ...properties)
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
  private readonly copies = new Map<string, Claim & { expiresAt: number }>()

  private partition(partition: Partition): Map<string, MemoryEvent> {
    const key = `${partition.brand}:${partition.mode}`
    let events = this.events.get(key)
    if (events === undefined) {
      events = new Map()
      this.events.set(key, events)
    }
    return events
  }

  async claim(source: string, claims: readonly ClaimRequest[], dedupeMs: number): Promise<(Claim | undefined)[]> {
    const now = Date.now()
    for (const [key, copy] of this.copies) if (copy.expiresAt <= now) this.copies.delete(key)
    return claims.map((claim) => {
      const key = `${source}\n${claim.dedupe}`
      const first = this.copies.get(key)
      if (first !== undefined) return { brand: first.brand, ulid: first.ulid }
      this.copies.set(key, { brand: claim.brand, ulid: claim.ulid, expiresAt: now + dedupeMs })
      return undefined
    })
  }

  async append(partition: Partition, events: readonly NewEvent[], times: AppendTimes): Promise<AppendOutcome[]> {
    const stored = this.partition(partition)
    const now = Date.now()
    for (const [ulid, event] of stored) if (event.millis < times.oldest || event.expiresAt <= now) stored.delete(ulid)
    return events.map((event): AppendOutcome => {
      const kept = stored.get(event.ulid)
      if (kept !== undefined) return { kind: 'duplicate', ulid: event.ulid, record: kept.record }
      stored.set(event.ulid, { millis: event.millis, type: event.type, propertyId: event.propertyId, record: event.record, expiresAt: event.millis + times.retentionMs + EXPIRY_GRACE_MS })
      return { kind: 'stored', ulid: event.ulid }
    })
  }

  async page(partition: Partition, query: PageQuery): Promise<EventPage> {
    const now = Date.now()
    const about = (propertyId: string | null): boolean => query.properties === '*'
      || (propertyId === null ? query.withoutProperty : query.properties.includes(propertyId))
    const matching = [...this.partition(partition)].filter(([, event]) => event.millis >= query.from && event.millis <= query.to && event.expiresAt > now
      && query.types.includes(event.type) && about(event.propertyId))
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
