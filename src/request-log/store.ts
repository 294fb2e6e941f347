import type { RedisClient } from '../redis.js'
import { Cluster } from 'ioredis'
import { redisScript, redisScriptOverKeys } from '../redis-script.js'
import { storedEntry, storedEntryJson, storedEntryOf, type RequestLogEntry, type RequestLogRecord } from './entry.js'
import { filtersFields, type RequestLogFilters } from './filters.js'

// Where the request log lives (docs/architecture.md, "The request log"). Per credential and
// mode, two keys in one hash slot (the braces are literal: the credential id is the Cluster
// hash tag, so one script writes and trims both):
//   {ns}reqlog:{id}:{mode}:lines    ZSET   an index line per entry (filters.ts) -> epoch ms of its arrival
//   {ns}reqlog:{id}:{mode}:entries  HASH   request id -> the entry as storedEntry writes it (entry.ts): its arrival, its index line, the rest of its fields
// A write adds a batch's entries and trims, in the same script, those older than the
// retention and the oldest beyond the count; both keys expire a retention after the last write.
// Beside them, for the admin port's look-up of a request id whatever its credential:
//   {ns}reqlog:ids:<UTC day>       HASH   request id -> "<credential id> <mode>" of the entries that arrived that day
// one per day, so that it goes whole a retention after its day ends (docs/architecture.md §D80).

const DAY_MS = 86_400_000
/** Index lines a page's script reads per call while it walks a log for the filters. */
const SCAN_CHUNK = 1000
/** Logs one call of the write script takes at most (on one server or through Sentinel). */
export const LOGS_PER_CALL = 32
/** Entries read per call while an export is streamed: its memory is this many entries, whatever the window. */
const EXPORT_CHUNK = 500

// A batch goes to Redis as one argument per log, not four per entry: the client's encoding of
// each argument was most of a write's CPU in the gateway (docs/performance.md, "The request
// log"). Its text is the log's stored entries, one a line (`<epoch ms> <index line>\t<the
// rest>`, entry.ts): the script takes each entry's score, index line and request id from its
// line, so no field is sent twice, and makes one ZADD and one HSET per 500 entries. One call writes up to LOGS_PER_CALL logs of a
// batch (on a Cluster, where each log's keys are in its credential's slot, one log): a call
// per log cost the gateway more than the entries themselves when a batch held a few entries
// of each of many credentials, and a bound keeps each script short, since Redis serves no
// one else while it runs (docs/performance.md, "2026-11-30: a batch's logs in one call").
//
// KEYS: each log's lines and entries, in pairs; ARGV: cutoff (epoch ms: older goes), the most
// entries a log keeps, when the keys expire, then each log's text, in the order of its keys.
// One pattern match takes an entry's line apart (the stored entry, its score, its index line,
// its request id), and a trim takes the oldest lines a thousand at a time, each thousand gone
// by two commands (their ids from the hash, their ranks from the sorted set) rather than two
// per entry: Redis serves no one else while a script runs (docs/performance.md, "2026-11-30
// (noon): the write script in Redis"). Returns the entries written.
export const WRITE_SCRIPT = `
local cutoff, most, expireAt = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local n = 0
-- The oldest lines of a log, its lowest ranks: their entries and their lines.
local function trim(linesKey, entriesKey, lines)
  local ids = {}
  for i = 1, #lines do ids[i] = string.match(lines[i], '^[^ ]*') end
  redis.call('HDEL', entriesKey, unpack(ids))
  redis.call('ZREMRANGEBYRANK', linesKey, 0, #lines - 1)
end
for log = 1, #KEYS / 2 do
  local linesKey, entriesKey = KEYS[2 * log - 1], KEYS[2 * log]
  local scores, fields, count = {}, {}, 0
  -- The entries taken since the last call: their lines by arrival, then their stored entries by
  -- request id. Lua's unpack has a bound: called every 500 entries, and once for the rest.
  local function add()
    redis.call('ZADD', linesKey, unpack(scores))
    redis.call('HSET', entriesKey, unpack(fields))
    n = n + count
    scores, fields, count = {}, {}, 0
  end
  for stored, score, line, id in string.gmatch(ARGV[3 + log], '(([^ ]*) (([^ ]*)[^\\t]*)\\t[^\\n]*)\\n') do
    scores[2 * count + 1] = score
    scores[2 * count + 2] = line
    fields[2 * count + 1] = id
    fields[2 * count + 2] = stored
    count = count + 1
    if count == 500 then add() end
  end
  if count > 0 then add() end
  while true do
    local old = redis.call('ZRANGEBYSCORE', linesKey, '-inf', '(' .. cutoff, 'LIMIT', 0, 1000)
    if #old == 0 then break end
    trim(linesKey, entriesKey, old)
  end
  local over = redis.call('ZCARD', linesKey) - most
  while over > 0 do
    local take = math.min(over, 1000)
    trim(linesKey, entriesKey, redis.call('ZRANGE', linesKey, 0, take - 1))
    over = over - take
  end
  redis.call('PEXPIREAT', linesKey, expireAt)
  redis.call('PEXPIREAT', entriesKey, expireAt)
end
return n
`

// A day's request id index, its fields in one argument too: the entries of each log, its
// owner once, `<credential id> <mode>\n`, then a request id a line, and an empty line (a
// request id holds no line break, an owner none). KEYS: the day's key; ARGV: when it
// expires, the text.
export const IDS_SCRIPT = `
local text = ARGV[2]
local pos, size = 1, #text
local fields = {}
local owner = nil
while pos <= size do
  local lineEnd = string.find(text, '\\n', pos, true)
  if lineEnd == pos then owner = nil
  elseif owner == nil then owner = string.sub(text, pos, lineEnd - 1)
  else
    fields[#fields + 1] = string.sub(text, pos, lineEnd - 1)
    fields[#fields + 1] = owner
    if #fields >= 1000 then
      redis.call('HSET', KEYS[1], unpack(fields))
      fields = {}
    end
  end
  pos = lineEnd + 1
end
if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
`

// A page with filters, found inside Redis (the gateway reads only the page's entries): walks
// the window's index lines newest first, by rank a thousand at a time, and matches each as
// matchLine does (filters.ts). KEYS: the log's lines and entries; ARGV: the window's max and min
// (ZRANGEBYSCORE's form: '+inf' or '(<ms>', '-inf' or '(<ms>'), the offset, the page's size,
// the status filter's kind ('', 'exact', 'class', 'errors') and its number, then the method,
// code, route and Idempotency-Key filters, each '' when not sent or '=' and its value. Returns
// the number of matches in all, then the page's stored entries.
export const PAGE_SCRIPT = `
local offset, perPage = tonumber(ARGV[3]), tonumber(ARGV[4])
local kind, wantedText = ARGV[5], ARGV[6]
local wanted = tonumber(wantedText)
local function filter(value)
  if value == '' then return nil end
  return string.sub(value, 2)
end
local method, code, route, key = filter(ARGV[7]), filter(ARGV[8]), filter(ARGV[9]), filter(ARGV[10])
local above = 0
if ARGV[1] ~= '+inf' then above = redis.call('ZCOUNT', KEYS[1], string.sub(ARGV[1], 2), '+inf') end
local last = above + redis.call('ZCOUNT', KEYS[1], ARGV[2], ARGV[1]) - 1
local total, ids = 0, {}
local from = above
while from <= last do
  local to = math.min(from + ${SCAN_CHUNK - 1}, last)
  local lines = redis.call('ZREVRANGE', KEYS[1], from, to)
  for i = 1, #lines do
    local line = lines[i]
    -- Cheap refusals first, sound for any line (a line they refuse matchLine refuses too): the
    -- status field alone, and a plain find of ' <value> ' for the filters of the middle fields.
    local pass = true
    if kind == 'exact' then
      local first = string.match(line, '^[^ ]* ([^ ]*) ')
      if first == nil then pass = false
      elseif first ~= wantedText then
        local status = tonumber(first)
        if first == '' then status = 0 end
        if status ~= wanted then pass = false end
      end
    end
    if pass and method ~= nil and not string.find(line, ' ' .. method .. ' ', 1, true) then pass = false end
    if pass and code ~= nil and not string.find(line, ' ' .. code .. ' ', 1, true) then pass = false end
    if pass and route ~= nil and not string.find(line, ' ' .. route .. ' ', 1, true) then pass = false end
    local id, statusText, m, c, r, k
    if pass then
      id, statusText, m, c, r, k = string.match(line, '^([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*)$')
      pass = id ~= nil
    end
    if pass and kind ~= '' then
      -- As Number() reads it: '' is 0, what is not a number is NaN (nil), which no comparison passes.
      local status = tonumber(statusText)
      if statusText == '' then status = 0 end
      if kind == 'exact' then pass = status == wanted
      elseif kind == 'class' then pass = status ~= nil and math.floor(status / 100) == wanted
      else pass = status == nil or status >= 400 end
    end
    if pass and method ~= nil and m ~= method then pass = false end
    if pass and code ~= nil and c ~= code then pass = false end
    if pass and route ~= nil and r ~= route then pass = false end
    if pass and key ~= nil and k ~= key then pass = false end
    if pass then
      if total >= offset and #ids < perPage then ids[#ids + 1] = id end
      total = total + 1
    end
  end
  from = to + 1
end
local page = { total }
if #ids > 0 then
  local found = redis.call('HMGET', KEYS[2], unpack(ids))
  for i = 1, #found do
    if found[i] then page[#page + 1] = found[i] end
  end
end
return page
`

type IdsCommand = (key: string, expireAt: number, text: Buffer) => Promise<number>
type PageCommand = (lines: string, entries: string, ...args: (string | number)[]) => Promise<[number, ...string[]]>

/** A filter as the page's script takes it: '' when not sent, else '=' and its value (which may be empty). */
function wanted(value: string | undefined): string {
  return value === undefined ? '' : `=${value}`
}

export interface RetentionSettings {
  retentionDays: number
  maxPerCredential: number
}

/** One page of entries: their JSON, newest first, and how many match in all. */
export interface RequestLogPage {
  json: string
  total: number
}

/**
 * Bytes a write's buffer starts with: a batch of 500 entries of ~300 bytes and their request ids
 * (~170 KiB) fits, with the room each text's append asks for (3 bytes a character).
 */
const BATCH_BYTES = 512 * 1024

/** Text written as UTF-8 into one buffer, grown when a text might not fit; its slices are what is sent. */
class BatchBytes {
  private buffer: Buffer
  length = 0

  constructor(size: number) {
    this.buffer = Buffer.allocUnsafeSlow(size)
  }

  append(text: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit (a pair's 4 bytes are 2 per unit).
    const most = this.length + text.length * 3
    if (most > this.buffer.length) {
      const grown = Buffer.allocUnsafeSlow(Math.max(most, this.buffer.length * 2))
      this.buffer.copy(grown, 0, 0, this.length)
      this.buffer = grown
    }
    this.length += this.buffer.write(text, this.length)
  }

  slice(start: number, end: number): Buffer {
    return this.buffer.subarray(start, end)
  }

  /** Empty for the next write; a buffer grown far by an unusual batch is not kept. */
  clear(): void {
    this.length = 0
    if (this.buffer.length > 4 * BATCH_BYTES) this.buffer = Buffer.allocUnsafeSlow(BATCH_BYTES)
  }
}

/** The request ids of `owner`'s log that arrived on `day`, made empty on first use. */
function idsOf(byDay: Map<number, Map<string, string[]>>, day: number, owner: string): string[] {
  let owners = byDay.get(day)
  if (owners === undefined) byDay.set(day, owners = new Map())
  let ids = owners.get(owner)
  if (ids === undefined) owners.set(owner, ids = [])
  return ids
}

export class RequestLogStore {
  /** The buffer of the last write, for the next (undefined while a write holds it). */
  private spare: BatchBytes | undefined
  private readonly now: () => number
  private readonly writeLogs: (keys: readonly string[], args: readonly (number | Buffer)[]) => Promise<number>
  private readonly writeIds: IdsCommand
  private readonly findPage: PageCommand

  constructor(private readonly redis: RedisClient, private readonly namespace: string, private readonly retention: RetentionSettings, now?: () => number) {
    this.now = now ?? Date.now
    this.writeLogs = redisScriptOverKeys<number>(redis, WRITE_SCRIPT)
    this.writeIds = redisScript<IdsCommand>(redis, 1, IDS_SCRIPT)
    this.findPage = redisScript<PageCommand>(redis, 2, PAGE_SCRIPT)
  }

  /** The day's key of the request id index (UTC). */
  private idsKey(at: number): string {
    return `${this.namespace}reqlog:ids:${new Date(at).toISOString().slice(0, 10)}`
  }

  private keys(credentialId: string, mode: string): [string, string] {
    const base = `${this.namespace}reqlog:{${credentialId}}:${mode}`
    return [`${base}:lines`, `${base}:entries`]
  }

  /** Writes entries (any credentials') and trims each credential's log: one script for every log (on a Cluster, one per log), one per day of the id index. */
  async write(records: readonly RequestLogRecord[]): Promise<void> {
    const byLog = new Map<string, RequestLogRecord[]>()
    for (const record of records) {
      const name = `${record.credentialId} ${record.mode}`
      const log = byLog.get(name)
      if (log === undefined) byLog.set(name, [record])
      else log.push(record)
    }
    // Each text is written as UTF-8 straight into one buffer, kept from write to write, and sent
    // as a slice of it. Made as one string by appending every entry, a batch's text was
    // flattened and then copied into a Buffer of its own: about 1 µs more per entry
    // (docs/performance.md, "The request log").
    const bytes = this.spare ?? new BatchBytes(BATCH_BYTES)
    this.spare = undefined
    // The request ids of each day, by log: a log's entries nearly always arrived on one day.
    const byDay = new Map<number, Map<string, string[]>>()
    const logs = [...byLog].map(([name, log]) => {
      const start = bytes.length
      let day = Number.NaN
      let ids: string[] = []
      for (const record of log) {
        bytes.append(`${storedEntry(record)}\n`)
        const arrived = Math.floor(record.atMs / DAY_MS)
        if (arrived !== day) {
          day = arrived
          ids = idsOf(byDay, day, name)
        }
        ids.push(record.id)
      }
      return { record: log[0] as RequestLogRecord, start, end: bytes.length }
    })
    const days = [...byDay].map(([day, owners]) => {
      const start = bytes.length
      for (const [name, ids] of owners) bytes.append(`${name}\n${ids.join('\n')}\n\n`)
      return { day, start, end: bytes.length }
    })
    const now = this.now()
    const retentionMs = this.retention.retentionDays * DAY_MS
    // On a Cluster each log's keys are in the slot of its credential; elsewhere a call takes up to LOGS_PER_CALL.
    const perCall = this.redis instanceof Cluster ? 1 : LOGS_PER_CALL
    const calls = Array.from({ length: Math.ceil(logs.length / perCall) }, (_, i) => logs.slice(i * perCall, (i + 1) * perCall))
    // The index's days live in other hash slots than the logs: written beside them, not in their script.
    const sent = await Promise.allSettled([
      ...calls.map(async (call) => this.writeLogs(
        call.flatMap(({ record }) => this.keys(record.credentialId, record.mode)),
        [now - retentionMs, this.retention.maxPerCredential, now + retentionMs, ...call.map(({ start, end }) => bytes.slice(start, end))],
      )),
      ...days.map(async ({ day, start, end }) => this.writeIds(this.idsKey(day * DAY_MS), (day + 1) * DAY_MS + retentionMs, bytes.slice(start, end))),
    ])
    const failed = sent.find((result) => result.status === 'rejected')
    if (failed !== undefined) {
      // Not given to the next write: a refused or timed-out command may yet be sent again from
      // these bytes (a Cluster redirect, a retry after a failover).
      throw failed.reason
    }
    // Every command answered: the client holds none of the buffer's bytes.
    bytes.clear()
    this.spare = bytes
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
        yield found.filter((stored): stored is string => stored !== null).map((stored) => storedEntryOf(stored, credentialId, mode))
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
    if (filtersFields(filters)) {
      const status = filters.status
      const [total, ...found] = await this.findPage(lines, entries, max, min, offset, perPage,
        status?.kind ?? '', status === undefined ? 0 : status.kind === 'exact' ? status.status : status.kind === 'class' ? status.first : 0,
        wanted(filters.method), wanted(filters.code), wanted(filters.route), wanted(filters.idempotencyKey))
      return { json: `[${found.map((stored) => storedEntryJson(stored, credentialId, mode)).join(',')}]`, total }
    }
    const [total, onPage] = await Promise.all([
      this.redis.zcount(lines, min, max),
      this.redis.zrevrangebyscore(lines, max, min, 'LIMIT', offset, perPage),
    ])
    const ids = onPage.map((line) => line.slice(0, line.indexOf(' ')))
    if (ids.length === 0) return { json: '[]', total }
    const found = await this.redis.hmget(entries, ...ids)
    return { json: `[${found.filter((stored): stored is string => stored !== null).map((stored) => storedEntryJson(stored, credentialId, mode)).join(',')}]`, total }
  }

  /** One entry of a credential's, as JSON; undefined when it has none of that id. */
  async get(credentialId: string, mode: string, requestId: string): Promise<string | undefined> {
    const [, entries] = this.keys(credentialId, mode)
    const stored = await this.redis.hget(entries, requestId)
    return stored === null ? undefined : storedEntryJson(stored, credentialId, mode)
  }
}
