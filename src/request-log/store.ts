import type { RedisClient } from '../redis.js'
import { Cluster } from 'ioredis'
import { redisScript, redisScriptOverKeys } from '../redis-script.js'
import { arrivalOfRequestId } from '../http/request-id.js'
import { DAY_MS, EntryBatch, MINUTE_MS, type LogLines } from './batch.js'
import { BATCH_BYTES, BatchBytes } from './bytes.js'
import { storedEntryJson, storedEntryOf, type RequestLogEntry, type RequestLogRecord } from './entry.js'
import { filtersFields, type RequestLogFilters } from './filters.js'

// Where the request log lives (docs/architecture.md, "The request log"). Per credential and
// mode, one key (the braces are literal: the credential id is the Cluster hash tag):
//   {ns}reqlog:{id}:{mode}:lines    ZSET   each entry, as storedEntry writes it (entry.ts): its arrival, its index line (filters.ts), a tab, the rest of its fields -> epoch ms of its arrival
// A write adds a batch's entries and trims, in the same script, those older than the
// retention and the oldest beyond the count; the key expires a retention after the last write.
// Beside it, for the look-up of a request id by any credential (the admin port's):
//   {ns}reqlog:logs:<UTC minute>    SET    "<credential id> <mode>" of each log that took an entry that arrived in that minute
// one per minute, gone a retention after its minute ends. An entry's arrival is the time in its
// request id (src/http/request-id.ts), so an id names its minute and the entry's score: the
// entry is found in the few logs of its minute, by its score (docs/architecture.md §D89).
//
// Two layouts before are still read, never written, until the retention has taken what they
// hold (their keys expire on their own):
// - before 2026-12-01, each request id was indexed by the day its entry arrived on, one field
//   per entry in `{ns}reqlog:ids:<UTC day>` (HASH: request id -> "<credential id> <mode> <epoch
//   ms of its arrival>"): ids then held no time (docs/architecture.md §D80);
// - before that, a log was two keys: its sorted set held each entry's index line alone, and a
//   hash `{ns}reqlog:{id}:{mode}:entries` held the entry by request id (the day's index named
//   no arrival). Such lines hold no tab; they are read through that hash.

/** Entries a page's script reads per call while it walks a log for the filters. */
const SCAN_CHUNK = 1000
/** Logs one call of the write script takes at most (on one server or through Sentinel). */
export const LOGS_PER_CALL = 32
/** Entries read per call while an export is streamed: its memory is this many entries, whatever the window. */
const EXPORT_CHUNK = 500

// A batch goes to Redis as one argument per log, not two per entry: the client's encoding of
// each argument was most of a write's CPU in the gateway (docs/performance.md, "The request
// log"). Its text is the log's stored entries, one a line (`<epoch ms> <index line>\t<the
// rest>`, entry.ts): the script takes each entry and its score from its line, so no field is
// sent twice, and makes one ZADD per 500 entries. One call writes up to LOGS_PER_CALL logs of a
// batch (on a Cluster, where each log's key is in its credential's slot, one log): a call per
// log cost the gateway more than the entries themselves when a batch held a few entries of each
// of many credentials, and a bound keeps each script short, since Redis serves no one else
// while it runs (docs/performance.md, "2026-11-30: a batch's logs in one call").
//
// KEYS: each log's sorted set and the hash of the layout before, in pairs. ARGV: cutoff (epoch
// ms: older goes), the most entries a log keeps, when the logs expire, then each log's text, in
// the order of its keys. The entry is the sorted set's member, so a trim is one command by
// score and one by rank, and an entry costs Redis one insert, not one in a sorted set and one
// in a hash (docs/performance.md, "2026-11-30 (afternoon): an entry kept once"). Returns the
// entries written.
export const WRITE_SCRIPT = `
local cutoff, most, expireAt = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local n = 0
for log = 1, #KEYS / 2 do
  local key, before = KEYS[2 * log - 1], KEYS[2 * log]
  local members, count = {}, 0
  -- Each line and its score cut out after plain finds (a search for one byte), not by a
  -- pattern, which matched every byte of the line against a class: a fifth less of the
  -- script's CPU per entry (docs/performance.md, "2026-11-30 (night): lines found by plain finds").
  local text, from = ARGV[3 + log], 1
  while true do
    local stop = string.find(text, '\\n', from, true)
    if stop == nil then break end
    -- Lua's unpack has a bound: a ZADD every 500 entries, and one for the rest.
    members[2 * count + 1] = string.sub(text, from, string.find(text, ' ', from, true) - 1)
    members[2 * count + 2] = string.sub(text, from, stop - 1)
    count = count + 1
    if count == 500 then
      redis.call('ZADD', key, unpack(members))
      n = n + count
      members, count = {}, 0
    end
    from = stop + 1
  end
  if count > 0 then
    redis.call('ZADD', key, unpack(members))
    n = n + count
  end
  if redis.call('EXISTS', before) == 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. cutoff)
    local over = redis.call('ZCARD', key) - most
    if over > 0 then redis.call('ZREMRANGEBYRANK', key, 0, over - 1) end
  else
    -- Lines of the layout before (no tab) have their entries in the hash: each goes with its
    -- line, a thousand lines at a time, until the hash is empty and Redis removes it.
    local function trim(lines)
      local ids = {}
      for i = 1, #lines do
        if not string.find(lines[i], '\\t', 1, true) then ids[#ids + 1] = string.match(lines[i], '^[^ ]*') end
      end
      if #ids > 0 then redis.call('HDEL', before, unpack(ids)) end
      redis.call('ZREMRANGEBYRANK', key, 0, #lines - 1)
    end
    while true do
      local old = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. cutoff, 'LIMIT', 0, 1000)
      if #old == 0 then break end
      trim(old)
    end
    local over = redis.call('ZCARD', key) - most
    while over > 0 do
      local take = math.min(over, 1000)
      trim(redis.call('ZRANGE', key, 0, take - 1))
      over = over - take
    end
  end
  redis.call('PEXPIREAT', key, expireAt)
end
return n
`

// Notes logs in a minute's set and sets when it goes, in one step: a set left without its
// expiry by a failure between two commands would stay for good. KEYS: the minute's set; ARGV:
// when it expires, then the logs (`<credential id> <mode>`).
export const NOTE_SCRIPT = `
redis.call('SADD', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
`

type NoteCommand = (minuteKey: string, expireAt: number, ...owners: string[]) => Promise<unknown>

/** Logs the operator's look-up of a request id reads at once. */
const LOOKUPS_AT_ONCE = 64

// A page with filters, found inside Redis (the gateway reads only the page's entries): walks
// the window's entries newest first, by rank a thousand at a time, and matches the index line
// of each as matchLine does (filters.ts): an entry's, between its arrival and its tab, or a
// line of the layout before, whole (its entry then read from the log's hash). KEYS: the log's
// sorted set and the hash of the layout before; ARGV: the window's max and min
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
local total, picked, before, at = 0, {}, {}, {}
local from = above
while from <= last do
  local to = math.min(from + ${SCAN_CHUNK - 1}, last)
  local members = redis.call('ZREVRANGE', KEYS[1], from, to)
  for i = 1, #members do
    local member = members[i]
    -- An entry's index line is between its arrival and its tab; a line of the layout before is
    -- the whole member. Matched in place, not cut out: a copy of each member's line cost the
    -- walk a third more.
    local tab = string.find(member, '\\t', 1, true)
    -- Cheap refusals first, sound for any line (a line they refuse matchLine refuses too): the
    -- status field alone, and a plain find of ' <value> ' for the filters of the middle fields
    -- (found in an entry's other fields too, it only lets the full match decide).
    local pass = true
    if kind == 'exact' then
      local first
      if tab ~= nil then first = string.match(member, '^[^ ]* [^ ]* ([^ ]*) ')
      else first = string.match(member, '^[^ ]* ([^ ]*) ') end
      if first == nil then pass = false
      elseif first ~= wantedText then
        local status = tonumber(first)
        if first == '' then status = 0 end
        if status ~= wanted then pass = false end
      end
    end
    if pass and method ~= nil and not string.find(member, ' ' .. method .. ' ', 1, true) then pass = false end
    if pass and code ~= nil and not string.find(member, ' ' .. code .. ' ', 1, true) then pass = false end
    if pass and route ~= nil and not string.find(member, ' ' .. route .. ' ', 1, true) then pass = false end
    local id, statusText, m, c, r, k
    if pass then
      if tab ~= nil then id, statusText, m, c, r, k = string.match(member, '^[^ \\t]* ([^ \\t]*) ([^ \\t]*) ([^ \\t]*) ([^ \\t]*) ([^ \\t]*) ([^ \\t]*)\\t')
      else id, statusText, m, c, r, k = string.match(member, '^([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*) ([^ ]*)$') end
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
      if total >= offset and #picked < perPage then
        -- An entry of the layout before is its id until the hash is read.
        if tab ~= nil then picked[#picked + 1] = member
        else
          picked[#picked + 1] = false
          before[#before + 1] = id
          at[#at + 1] = #picked
        end
      end
      total = total + 1
    end
  end
  from = to + 1
end
if #before > 0 then
  local found = redis.call('HMGET', KEYS[2], unpack(before))
  for i = 1, #found do picked[at[i]] = found[i] end
end
local page = { total }
for i = 1, #picked do
  if picked[i] then page[#page + 1] = picked[i] end
end
return page
`

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

/** A log's text in a write's bytes. */
export interface LogText {
  log: LogLines
  start: number
  end: number
}

/**
 * The calls of the write script that write a batch's logs, each the texts it sends: up to
 * LOGS_PER_CALL logs a call; on a Cluster, where each log's keys are in its credential's slot,
 * one a call.
 */
export function writeCalls(texts: readonly LogText[], cluster: boolean): LogText[][] {
  const perCall = cluster ? 1 : LOGS_PER_CALL
  return Array.from({ length: Math.ceil(texts.length / perCall) }, (_, i) => texts.slice(i * perCall, (i + 1) * perCall))
}

/** The logs that took entries in each minute of a batch (epoch ms / MINUTE_MS), as the minute's set holds them: `<credential id> <mode>`. */
export function logsByMinute(logs: readonly LogLines[]): Map<number, string[]> {
  const byMinute = new Map<number, string[]>()
  for (const log of logs) {
    for (const minute of log.minutes) {
      let owners = byMinute.get(minute)
      if (owners === undefined) byMinute.set(minute, owners = [])
      owners.push(`${log.credentialId} ${log.mode}`)
    }
  }
  return byMinute
}

/** Buffers a store keeps for the next batches once their writes have ended. */
const SPARE_BUFFERS = 4

export class RequestLogStore {
  /** Buffers of batches whose writes have ended, for the next. */
  private readonly spares: BatchBytes[] = []
  private readonly now: () => number
  private readonly writeLogs: (keys: readonly string[], args: readonly (string | number | Buffer)[]) => Promise<number>
  private readonly findPage: PageCommand
  private readonly note: NoteCommand

  constructor(private readonly redis: RedisClient, private readonly namespace: string, private readonly retention: RetentionSettings, now?: () => number) {
    this.now = now ?? Date.now
    this.writeLogs = redisScriptOverKeys<number>(redis, WRITE_SCRIPT)
    this.findPage = redisScript<PageCommand>(redis, 2, PAGE_SCRIPT)
    this.note = redisScript<NoteCommand>(redis, 1, NOTE_SCRIPT)
  }

  /** The day's key of the request id index of the layout before (UTC). */
  private idsKey(at: number): string {
    return `${this.namespace}reqlog:ids:${new Date(at).toISOString().slice(0, 10)}`
  }

  /** The key of the logs that took entries in the minute of `at` (UTC). */
  private logsKey(at: number): string {
    return `${this.namespace}reqlog:logs:${new Date(at).toISOString().slice(0, 16)}`
  }

  private keys(credentialId: string, mode: string): [string, string] {
    const base = `${this.namespace}reqlog:{${credentialId}}:${mode}`
    return [`${base}:lines`, `${base}:entries`]
  }

  /** An empty batch, for the writer to fill and `send`. */
  batch(): EntryBatch {
    return new EntryBatch(this.spares.pop() ?? new BatchBytes(BATCH_BYTES))
  }

  /** Writes entries (any credentials') as one batch: `send`. */
  async write(records: readonly RequestLogRecord[]): Promise<void> {
    const batch = this.batch()
    for (const record of records) batch.add(record)
    await this.send(batch)
  }

  /**
   * Writes a batch and trims each credential's log: one script for every LOGS_PER_CALL logs (on
   * a Cluster, one per log), and notes each log in the minutes its entries arrived in. The
   * batch is not to be used again.
   */
  async send(batch: EntryBatch): Promise<void> {
    const logs = batch.logs()
    // Each log's lines go as one text: a batch of one log's entries is that already; otherwise
    // each log's lines are copied together into a second buffer, a copy of bytes per entry.
    let bytes = batch.bytes
    let texts: LogText[]
    if (logs.length === 1) {
      texts = [{ log: logs[0] as LogLines, start: 0, end: bytes.length }]
    } else {
      bytes = this.spares.pop() ?? new BatchBytes(BATCH_BYTES)
      texts = logs.map((log) => {
        const start = bytes.length
        for (let i = 0; i < log.starts.length; i += 1) bytes.appendFrom(batch.bytes, log.starts[i] as number, log.ends[i] as number)
        return { log, start, end: bytes.length }
      })
    }
    const now = this.now()
    const retentionMs = this.retention.retentionDays * DAY_MS
    // The minutes' sets first, and the entries only once they are written: an entry a reader
    // sees is found by its id too, and a batch whose sets failed is dropped whole (counted by
    // the writer) rather than kept where the operator's look-up cannot find it.
    await Promise.all([...logsByMinute(logs)].map(async ([minute, owners]) =>
      this.note(this.logsKey(minute * MINUTE_MS), (minute + 1) * MINUTE_MS + retentionMs, ...owners)))
    const sent = await Promise.allSettled(writeCalls(texts, this.redis instanceof Cluster).map(async (call) => this.writeLogs(
      call.flatMap(({ log }) => this.keys(log.credentialId, log.mode)),
      [now - retentionMs, this.retention.maxPerCredential, now + retentionMs, ...call.map(({ start, end }) => bytes.slice(start, end))],
    )))
    const failed = sent.find((result) => result.status === 'rejected')
    if (failed !== undefined) {
      // Not given to the next write: a refused or timed-out command may yet be sent again from
      // these bytes (a Cluster redirect, a retry after a failover).
      throw failed.reason
    }
    // Every command answered: the client holds none of the buffers' bytes.
    for (const done of bytes === batch.bytes ? [bytes] : [batch.bytes, bytes]) {
      if (this.spares.length >= SPARE_BUFFERS) break
      done.clear()
      this.spares.push(done)
    }
  }

  /**
   * Where the entry of `requestId` is kept, in the layout before 2026-12-01 (its day's index):
   * its log's credential and mode and its arrival (null for an entry of the layout before that,
   * kept in its log's hash); undefined when no day of the retention knows it.
   */
  async locate(requestId: string): Promise<{ credentialId: string; mode: string; atMs: number | null } | undefined> {
    const today = Math.floor(this.now() / DAY_MS)
    const days = Array.from({ length: this.retention.retentionDays + 1 }, (_, i) => today - i)
    const found = await Promise.all(days.map(async (day) => this.redis.hget(this.idsKey(day * DAY_MS), requestId)))
    const place = found.find((value): value is string => value !== null)
    if (place === undefined) return undefined
    const [credentialId, mode, atMs] = place.split(' ') as [string, string, string | undefined]
    return { credentialId, mode, atMs: atMs === undefined ? null : Number(atMs) }
  }

  /** One entry of any credential's, as JSON; undefined when none has it (or it was trimmed). */
  async find(requestId: string): Promise<string | undefined> {
    const arrival = arrivalOfRequestId(requestId)
    if (arrival !== null) {
      // The logs of the id's minute, each asked for the entries of one millisecond, so many at
      // a time: a busy minute's set names every credential that called in it.
      const owners = await this.redis.smembers(this.logsKey(arrival))
      for (let from = 0; from < owners.length; from += LOOKUPS_AT_ONCE) {
        const found = await Promise.all(owners.slice(from, from + LOOKUPS_AT_ONCE).map(async (owner) => {
          const [credentialId, mode] = owner.split(' ') as [string, string]
          return this.kept(credentialId, mode, requestId, arrival)
        }))
        const json = found.find((entry) => entry !== undefined)
        if (json !== undefined) return json
      }
    }
    const place = await this.locate(requestId)
    return place === undefined ? undefined : this.kept(place.credentialId, place.mode, requestId, place.atMs)
  }

  /** One entry of a credential's, as JSON; undefined when it has none of that id. */
  async get(credentialId: string, mode: string, requestId: string): Promise<string | undefined> {
    const arrival = arrivalOfRequestId(requestId)
    if (arrival !== null) {
      const json = await this.kept(credentialId, mode, requestId, arrival)
      if (json !== undefined) return json
    }
    // An entry of a layout before: through the day's index, or in the log's hash.
    const place = await this.locate(requestId)
    if (place !== undefined && (place.credentialId !== credentialId || place.mode !== mode)) return undefined
    return this.kept(credentialId, mode, requestId, place?.atMs ?? null)
  }

  /** The entry of `requestId` in a log, found by its arrival (null: in the log's hash, the layout before). */
  private async kept(credentialId: string, mode: string, requestId: string, atMs: number | null): Promise<string | undefined> {
    const [lines, entries] = this.keys(credentialId, mode)
    if (atMs === null) {
      const stored = await this.redis.hget(entries, requestId)
      return stored === null ? undefined : storedEntryJson(stored, credentialId, mode)
    }
    // Entries of one millisecond are few; the one whose index line begins with the id is it.
    const prefix = `${atMs} ${requestId} `
    const stored = (await this.redis.zrangebyscore(lines, atMs, atMs)).find((member) => member.startsWith(prefix))
    return stored === undefined ? undefined : storedEntryJson(stored, credentialId, mode)
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
        yield (await this.stored(entries, chunk)).map((stored) => storedEntryOf(stored, credentialId, mode))
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
    const found = await this.stored(entries, onPage)
    return { json: `[${found.map((stored) => storedEntryJson(stored, credentialId, mode)).join(',')}]`, total }
  }

  /**
   * The stored entries of a log's members, in their order: an entry as it is, the index line
   * of the layout before replaced by its entry from the log's hash (left out when gone).
   */
  private async stored(entries: string, members: readonly string[]): Promise<string[]> {
    const before = members.filter((member) => !member.includes('\t'))
    if (before.length === 0) return [...members]
    const found = await this.redis.hmget(entries, ...before.map((line) => line.slice(0, line.indexOf(' '))))
    let next = 0
    return members.map((member) => member.includes('\t') ? member : found[next++] ?? null).filter((stored): stored is string => stored !== null)
  }
}
