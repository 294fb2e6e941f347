import type { KeyMode } from '../keys/principal.js'
import type { RedisClient } from '../redis.js'
import { redisScript } from '../redis-script.js'
import { UlidFactory } from '../events/ulid.js'
import { ENDPOINT_ID_PREFIX } from '../routes/policy.js'

// Partners' webhook endpoints and the attempts made to them (docs/architecture.md,
// "Webhooks"), in Redis, every key under one hash tag so that Cluster keeps them on one slot
// and a script may touch several:
//   {ns}{webhooks}:ep                     HASH  endpoint id -> its record (JSON; secrets sealed)
//   {ns}{webhooks}:cred:<credential id>   ZSET  its endpoints, by creation time
//   {ns}{webhooks}:part:<brand>:<mode>    SET   the endpoints an event of that brand and mode may go to
//   {ns}{webhooks}:att:<endpoint id>      LIST  its last attempts, newest first (JSON), trimmed
//   {ns}{webhooks}:slot:<endpoint id>     ZSET  its concurrency leases: delivery job id, by lease end
//   {ns}{webhooks}:park:<endpoint id>     ZSET  deliveries asleep until a lease frees: job id, by when queued
//   {ns}{webhooks}:manual:<endpoint id>   ZSET  deliveries a partner asked for, not yet finished: job id, by when asked
//   {ns}{webhooks}:tests:<endpoint id>    ZSET  the webhook.test events sent to it: event id, by when made; trimmed like att
// A recovery's keys (the events each endpoint was due, its recoveries) are beside them: recoveries.ts.
// The delivery queue (BullMQ) lives under {ns}{webhooks} too.
//
// A record is changed only by compare-and-set (`update`): the change is made to the record as
// it is in Redis, and written only if nobody wrote it meanwhile (else made again). So an
// attempt's bookkeeping never undoes a partner's change made at the same moment, nor the
// other way round (docs/architecture.md §D38).

export { ENDPOINT_ID_PREFIX }
/** Attempts kept per endpoint (and shown for 7 days). */
const KEPT_ATTEMPTS = 1000
export const ATTEMPTS_SHOWN_MS = 7 * 86_400_000
/** How often a compare-and-set is tried before the change gives up (only under a storm of writes to one endpoint). */
const UPDATE_TRIES = 20

export type EndpointStatus = 'enabled' | 'disabled'
export type DisabledReason = 'gone' | 'failing' | 'partner'

export interface SealedSecret {
  sealed: string
  /** When a rotated-out secret stops signing (epoch ms); null for the current one. */
  expiresAt: number | null
}

export interface EndpointRecord {
  id: string
  credentialId: string
  brand: string
  mode: KeyMode
  url: string
  eventTypes: string[]
  description: string | null
  status: EndpointStatus
  disabledReason: DisabledReason | null
  createdAt: string
  updatedAt: string
  /** Current first. */
  secrets: SealedSecret[]
  /** Since when every attempt failed (epoch ms); null after a success. */
  failingSince: number | null
}

/** An endpoint as its partner sees it. */
export type EndpointView = Pick<EndpointRecord, 'id' | 'url' | 'eventTypes' | 'description' | 'status' | 'disabledReason' | 'createdAt' | 'updatedAt'>

export function viewOf(record: EndpointRecord): EndpointView {
  return {
    id: record.id, url: record.url, eventTypes: record.eventTypes, description: record.description,
    status: record.status, disabledReason: record.disabledReason, createdAt: record.createdAt, updatedAt: record.updatedAt,
  }
}

/** What a signing secret is sealed with: bound to its endpoint, so a sealed value copied to another endpoint does not open. */
export const secretContext = (endpointId: string): string => `webhook-endpoint:${endpointId}`

export type AttemptOutcome = 'delivered' | 'failed' | 'blocked' | 'gone' | 'timeout'

export interface Attempt {
  eventId: string
  attempt: number
  at: string
  status: number | null
  outcome: AttemptOutcome
  durationMs: number
}

// KEYS ep, cred, part; ARGV id, record, max, score. 0 when the credential has `max` already.
const CREATE_SCRIPT = `
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1
`

// KEYS ep; ARGV id, the record as read, the record to write. 1 when written; 0 when it changed meanwhile (or is gone).
const COMPARE_AND_SET_SCRIPT = `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`

// KEYS ep, cred, part, att, slot, park, manual, tests; ARGV id. The deliveries that were asleep, to wake (they end at once).
const REMOVE_SCRIPT = `
local parked = redis.call('ZRANGE', KEYS[6], 0, -1)
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
return parked
`

// KEYS ep, tests; ARGV id, event id, its time in ms, kept, ttl ms. Only while the endpoint exists, as an attempt.
const RECORD_TEST_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[5]))
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[4]) - 1)
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
`

// KEYS ep, att; ARGV id, attempt, kept, ttl ms. Only while the endpoint exists: an attempt ending after a DELETE leaves nothing.
const RECORD_ATTEMPT_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
`

// Gives the free leases of `slot` (at most `limit`) to the deliveries asleep in `park`, oldest
// first, each until `leaseEnd`; appends their ids to `woken`, to wake. Used by ACQUIRE and RELEASE.
const HAND_OVER = `
local function handOver(slot, park, limit, leaseEnd, woken)
  while redis.call('ZCARD', slot) < limit do
    local popped = redis.call('ZPOPMIN', park)
    if #popped == 0 then break end
    redis.call('ZADD', slot, leaseEnd, popped[1])
    table.insert(woken, popped[1])
  end
end
`

// KEYS slot, park; ARGV now, lease end, holder (the job id), limit, park score, park ttl ms.
// {1, woken...} when the holder has a lease (it may already have one: handed over while it
// slept, or its own from before its instance died); {0} when all are taken: it is parked.
const ACQUIRE = `${HAND_OVER}
local function acquire()
  local slot, park, holder, limit, leaseEnd = KEYS[1], KEYS[2], ARGV[3], tonumber(ARGV[4]), ARGV[2]
  redis.call('ZREMRANGEBYSCORE', slot, '-inf', ARGV[1])
  if not redis.call('ZSCORE', slot, holder) and redis.call('ZCARD', slot) >= limit then
    redis.call('ZADD', park, 'NX', ARGV[5], holder)
    redis.call('PEXPIRE', park, ARGV[6])
    return {0}
  end
  redis.call('ZADD', slot, leaseEnd, holder)
  redis.call('ZREM', park, holder)
  local result = {1}
  handOver(slot, park, limit, leaseEnd, result)
  redis.call('PEXPIREAT', slot, leaseEnd)
  return result
end
`
const ACQUIRE_SCRIPT = `${ACQUIRE}
return acquire()
`

// KEYS slot, park, ep; ARGV those of ACQUIRE_SCRIPT, then the endpoint's id. As ACQUIRE_SCRIPT, with
// the endpoint's record (or '' when it is gone) second when the lease is taken: an attempt's
// lease and the endpoint as it is then, in one round trip.
const TAKE_SCRIPT = `${ACQUIRE}
local result = acquire()
if result[1] == 1 then table.insert(result, 2, redis.call('HGET', KEYS[3], ARGV[7]) or '') end
return result
`

// Frees `holder`'s lease in `slot` (and any lapsed before `now`) and hands the free leases on
// (HAND_OVER), appending the woken deliveries to `woken`. Used by RELEASE_SCRIPT and
// RECORD_DELIVERED_SCRIPT.
const RELEASE = `${HAND_OVER}
local function release(slot, park, holder, now, leaseEnd, limit, woken)
  redis.call('ZREM', slot, holder)
  redis.call('ZREMRANGEBYSCORE', slot, '-inf', now)
  local before = #woken
  handOver(slot, park, limit, leaseEnd, woken)
  if #woken > before then redis.call('PEXPIREAT', slot, leaseEnd) end
end
`

// KEYS slot, park; ARGV holder, now, lease end, limit. The parked deliveries the freed lease (and any lapsed one) went to.
const RELEASE_SCRIPT = `${RELEASE}
local woken = {}
release(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), woken)
return woken
`

// KEYS ep, manual; ARGV endpoint id, now, forget before, max, ttl ms, job ids... How many of
// the ids (in order) are admitted; -1 when the endpoint is gone.
const ADMIT_MANUAL_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
local free = tonumber(ARGV[4]) - redis.call('ZCARD', KEYS[2])
local admitted = 0
for i = 6, #ARGV do
  if admitted >= free then break end
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i])
  admitted = admitted + 1
end
if admitted > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
return admitted
`

// KEYS ep, att, received, slot, park; ARGV id, attempt, kept, ttl ms, the event's time, its
// ulid, forget before, received ttl ms, holder, now, lease end, limit. A delivered attempt, and
// that its event was received (recoveries.ts: what a recovery of failed events leaves out), in
// one call; only while the endpoint exists. When the endpoint was not failing (so its
// bookkeeping writes nothing), the holder's lease is freed too, as RELEASE_SCRIPT frees it.
// "Not failing" is rules.ts `afterSuccess`'s test (`failingSince` null: nothing to write),
// read here from the record's JSON (a string field cannot hold that text: its quotes are
// escaped). When it does not hold, the lease stays with its holder, which frees it after
// writing the bookkeeping from the record returned.
// {'', 1, the parked deliveries the lease went to...} when freed (the record, not failing, has
// nothing for its holder to write: not sent back); {record, 0} when not; {''} when it is gone.
const RECORD_DELIVERED_SCRIPT = `${RELEASE}
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return {''} end
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
if KEYS[3] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7])
  redis.call('PEXPIRE', KEYS[3], ARGV[8])
end
if ARGV[9] ~= '' and string.find(record, '"failingSince":null', 1, true) then
  local result = {'', 1}
  release(KEYS[4], KEYS[5], ARGV[9], ARGV[10], ARGV[11], tonumber(ARGV[12]), result)
  return result
end
return {record, 0}
`

type CreateCommand = (ep: string, cred: string, part: string, id: string, record: string, max: number, score: number) => Promise<number>
type CompareAndSetCommand = (ep: string, id: string, expected: string, next: string) => Promise<number>
type RemoveCommand = (ep: string, cred: string, part: string, att: string, slot: string, park: string, manual: string, tests: string, id: string) => Promise<string[]>
type RecordAttemptCommand = (ep: string, att: string, id: string, attempt: string, kept: number, ttlMs: number) => Promise<number>
type RecordDeliveredCommand = (
  ep: string, att: string, received: string, slot: string, park: string, id: string, attempt: string, kept: number, ttlMs: number,
  at: number, ulid: string, forgetBefore: number, receivedTtlMs: number, holder: string, now: number, until: number, limit: number,
) => Promise<[string, number?, ...string[]]>
type RecordTestCommand = (ep: string, tests: string, id: string, eventId: string, at: number, kept: number, ttlMs: number) => Promise<number>
type AcquireCommand = (slot: string, park: string, now: number, until: number, holder: string, limit: number, parkScore: number, parkTtlMs: number) => Promise<[number, ...string[]]>
type TakeCommand = (slot: string, park: string, ep: string, now: number, until: number, holder: string, limit: number, parkScore: number, parkTtlMs: number, id: string) => Promise<[number, ...string[]]>
type ReleaseCommand = (slot: string, park: string, holder: string, now: number, until: number, limit: number) => Promise<string[]>
type AdmitManualCommand = (ep: string, manual: string, id: string, now: number, forgetBefore: number, max: number, ttlMs: number, ...jobIds: string[]) => Promise<number>

/** That an endpoint received an event, as recoveries.ts keeps it: in `key`, `ulid` at `at` ms; what is before `forgetBefore` goes; kept `ttlMs`. */
export interface Received {
  key: string
  at: number
  ulid: string
  forgetBefore: number
  ttlMs: number
}

/** A lease to free: `holder`'s, at `now`; a lease it hands on to a parked delivery ends at `until`; `limit` leases in all. */
export interface Lease {
  holder: string
  now: number
  until: number
  limit: number
}

/** A lease asked for: taken (with the parked deliveries it handed free leases to), or parked. */
export interface Acquired {
  taken: boolean
  /** Deliveries asleep that now hold a lease: wake them. */
  woken: string[]
}

export class EndpointStore {
  private readonly base: string
  private readonly ulids = new UlidFactory()
  private readonly commands: {
    create: CreateCommand; compareAndSet: CompareAndSetCommand; remove: RemoveCommand; recordAttempt: RecordAttemptCommand; recordTest: RecordTestCommand
    recordDelivered: RecordDeliveredCommand
    acquire: AcquireCommand; take: TakeCommand; release: ReleaseCommand; admitManual: AdmitManualCommand
  }

  constructor(private readonly redis: RedisClient, namespace: string) {
    this.base = `${namespace}{webhooks}:`
    const scripts = {
      create: [3, CREATE_SCRIPT], compareAndSet: [1, COMPARE_AND_SET_SCRIPT], remove: [8, REMOVE_SCRIPT], recordAttempt: [2, RECORD_ATTEMPT_SCRIPT], recordTest: [2, RECORD_TEST_SCRIPT],
      recordDelivered: [5, RECORD_DELIVERED_SCRIPT],
      acquire: [2, ACQUIRE_SCRIPT], take: [3, TAKE_SCRIPT], release: [2, RELEASE_SCRIPT], admitManual: [2, ADMIT_MANUAL_SCRIPT],
    } as const
    const commands: Record<string, unknown> = {}
    for (const [name, [numberOfKeys, lua]] of Object.entries(scripts)) commands[name] = redisScript(redis, numberOfKeys, lua)
    this.commands = commands as EndpointStore['commands']
  }

  /** The prefix of the delivery queue's keys (BullMQ's `prefix`): the same hash tag. */
  get queuePrefix(): string {
    return `${this.base.slice(0, -1)}`
  }

  /** The keys of the endpoints, and of one endpoint's bound of deliveries asked for, that a recovery's scripts touch too (recoveries.ts). */
  keysOf(endpointId: string): { ep: string; manual: string } {
    return { ep: this.ep, manual: this.manual(endpointId) }
  }

  newId(now: number): string {
    return `${ENDPOINT_ID_PREFIX}${this.ulids.next(now).text}`
  }

  private get ep(): string { return `${this.base}ep` }
  private cred(credentialId: string): string { return `${this.base}cred:${credentialId}` }
  private part(brand: string, mode: KeyMode): string { return `${this.base}part:${brand}:${mode}` }
  private att(id: string): string { return `${this.base}att:${id}` }
  private slot(id: string): string { return `${this.base}slot:${id}` }
  private park(id: string): string { return `${this.base}park:${id}` }
  private manual(id: string): string { return `${this.base}manual:${id}` }
  private tests(id: string): string { return `${this.base}tests:${id}` }

  /** Adds `record` unless its credential has `max` endpoints already (false). */
  async create(record: EndpointRecord, max: number): Promise<boolean> {
    const created = await this.commands.create(this.ep, this.cred(record.credentialId), this.part(record.brand, record.mode), record.id, JSON.stringify(record), max, Date.parse(record.createdAt))
    return created === 1
  }

  async get(id: string): Promise<EndpointRecord | undefined> {
    const json = await this.redis.hget(this.ep, id)
    return json === null ? undefined : JSON.parse(json) as EndpointRecord
  }

  /** The endpoint `id` when `credentialId` made it. */
  async ownedBy(credentialId: string, id: string): Promise<EndpointRecord | undefined> {
    const record = await this.get(id)
    return record?.credentialId === credentialId ? record : undefined
  }

  /** A credential's endpoints, oldest first. */
  async list(credentialId: string): Promise<EndpointRecord[]> {
    const ids = await this.redis.zrange(this.cred(credentialId), '0', '-1')
    return this.many(ids)
  }

  /** The endpoints events of `brand` and `mode` may go to. */
  async ofPartition(brand: string, mode: KeyMode): Promise<EndpointRecord[]> {
    return this.many(await this.redis.smembers(this.part(brand, mode)))
  }

  /** Every endpoint (for the metrics and /status). */
  async all(): Promise<EndpointRecord[]> {
    return (await this.redis.hvals(this.ep)).map((v) => JSON.parse(v) as EndpointRecord)
  }

  private async many(ids: string[]): Promise<EndpointRecord[]> {
    if (ids.length === 0) return []
    const values = await this.redis.hmget(this.ep, ...ids)
    return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as EndpointRecord)
  }

  /**
   * Changes the endpoint as it is in Redis now: `change` gets the current record and returns
   * the record to write, or undefined to leave it be. Written only if nobody wrote it
   * meanwhile; otherwise read and changed again. The record as it is afterwards; undefined when
   * the endpoint is gone (a change never brings back a deleted endpoint).
   */
  async update(id: string, change: (record: EndpointRecord) => EndpointRecord | undefined): Promise<EndpointRecord | undefined> {
    for (let tries = 0; tries < UPDATE_TRIES; tries += 1) {
      const json = await this.redis.hget(this.ep, id)
      if (json === null) return undefined
      const current = JSON.parse(json) as EndpointRecord
      const next = change(current)
      if (next === undefined) return current
      if (await this.commands.compareAndSet(this.ep, id, json, JSON.stringify(next)) === 1) return next
    }
    throw new Error(`webhook endpoint ${id} changed ${UPDATE_TRIES} times while one change was made`)
  }

  /** Deletes the endpoint and all it has; the ids of its deliveries that were asleep waiting for a lease (wake them: they end). */
  async remove(record: EndpointRecord): Promise<string[]> {
    return this.commands.remove(
      this.ep, this.cred(record.credentialId), this.part(record.brand, record.mode), this.att(record.id), this.slot(record.id), this.park(record.id), this.manual(record.id), this.tests(record.id), record.id,
    )
  }

  /** Deletes every endpoint of a credential (revoked); the ids of their deliveries that were asleep. */
  async removeAllOf(credentialId: string): Promise<string[]> {
    const woken: string[] = []
    for (const record of await this.list(credentialId)) woken.push(...await this.remove(record))
    // Ids left in the index without a record (an interrupted create) go too.
    await this.redis.del(this.cred(credentialId))
    return woken
  }

  async recordAttempt(endpointId: string, attempt: Attempt): Promise<void> {
    await this.commands.recordAttempt(this.ep, this.att(endpointId), endpointId, JSON.stringify(attempt), KEPT_ATTEMPTS, ATTEMPTS_SHOWN_MS)
  }

  /**
   * Records a delivered attempt and, with `received`, that the endpoint received its event (a
   * key of recoveries.ts, trimmed to the retention), in one round trip; with `lease`, frees the
   * holder's lease in the same call when the endpoint was not failing (as `release` does).
   * Whether the lease was freed and the parked deliveries it went to (wake them); when it was
   * not, the endpoint's record as it is after, for the bookkeeping its holder writes (undefined
   * when it is gone: nothing is written then). A freed lease's record is not sent back: an
   * endpoint not failing has nothing to write, and reading the record cost an attempt a parse.
   */
  async recordDelivered(endpointId: string, attempt: Attempt, received?: Received, lease?: Lease): Promise<{ record?: EndpointRecord; released: boolean; woken: string[] }> {
    const [json, released, ...woken] = await this.commands.recordDelivered(
      this.ep, this.att(endpointId), received?.key ?? '', this.slot(endpointId), this.park(endpointId), endpointId, JSON.stringify(attempt), KEPT_ATTEMPTS, ATTEMPTS_SHOWN_MS,
      received?.at ?? 0, received?.ulid ?? '', received?.forgetBefore ?? 0, received?.ttlMs ?? 0, lease?.holder ?? '', lease?.now ?? 0, lease?.until ?? 0, lease?.limit ?? 0,
    )
    if (released === 1) return { released: true, woken }
    if (json === '') return { released: false, woken: [] }
    return { record: JSON.parse(json) as EndpointRecord, released: false, woken }
  }

  /**
   * Keeps that the `webhook.test` event `eventId` (made at `at` ms) was sent to the endpoint, for
   * as long as its attempts are shown: a partner may ask for it again (redeliver), and it is in
   * no event log.
   */
  async recordTest(endpointId: string, eventId: string, at: number): Promise<void> {
    await this.commands.recordTest(this.ep, this.tests(endpointId), endpointId, eventId, at, KEPT_ATTEMPTS, ATTEMPTS_SHOWN_MS)
  }

  /** When the `webhook.test` event `eventId` was made, if it was sent to the endpoint within the last 7 days. */
  async testSentAt(endpointId: string, eventId: string, now: number): Promise<number | undefined> {
    const score = await this.redis.zscore(this.tests(endpointId), eventId)
    return score === null || Number(score) < now - ATTEMPTS_SHOWN_MS ? undefined : Number(score)
  }

  /** The attempts of the last 7 days, newest first. */
  async attempts(endpointId: string, now: number): Promise<Attempt[]> {
    const values = await this.redis.lrange(this.att(endpointId), 0, -1)
    return values.map((v) => JSON.parse(v) as Attempt).filter((a) => Date.parse(a.at) >= now - ATTEMPTS_SHOWN_MS)
  }

  /**
   * Takes one of the endpoint's `limit` leases for delivery `holder` until `until` (a lease, so
   * a dead instance's lapses), or, when all are taken, parks the delivery (by `queuedAt`,
   * oldest first) until a lease is handed to it. `parkedForMs`: how long the park remembers it.
   */
  async acquire(endpointId: string, holder: string, now: number, until: number, limit: number, queuedAt: number, parkedForMs: number): Promise<Acquired> {
    const [taken, ...woken] = await this.commands.acquire(this.slot(endpointId), this.park(endpointId), now, until, holder, limit, queuedAt, parkedForMs)
    return { taken: taken === 1, woken }
  }

  /**
   * As `acquire`, and, when the lease is taken, the endpoint's record as it is then (undefined:
   * gone), read by the same call.
   */
  async take(endpointId: string, holder: string, now: number, until: number, limit: number, queuedAt: number, parkedForMs: number): Promise<Acquired & { record?: EndpointRecord }> {
    const [taken, ...rest] = await this.commands.take(this.slot(endpointId), this.park(endpointId), this.ep, now, until, holder, limit, queuedAt, parkedForMs, endpointId)
    if (taken !== 1) return { taken: false, woken: rest }
    const [json, ...woken] = rest
    return { taken: true, woken, ...(json === undefined || json === '' ? {} : { record: JSON.parse(json) as EndpointRecord }) }
  }

  /** Frees `holder`'s lease; the parked deliveries that got a lease (this one, or one that lapsed) until `until`: wake them. */
  async release(endpointId: string, holder: string, now: number, until: number, limit: number): Promise<string[]> {
    return this.commands.release(this.slot(endpointId), this.park(endpointId), holder, now, until, limit)
  }

  /** Whether `holder` has a lease of the endpoint (handed over while it went to sleep). */
  async holds(endpointId: string, holder: string): Promise<boolean> {
    return await this.redis.zscore(this.slot(endpointId), holder) !== null
  }

  /**
   * The bound of deliveries a partner asked for (`test`, `redeliver`, recoveries): admits the
   * first of `jobIds` while fewer than `max` are outstanding for the endpoint, and says how
   * many it admitted (-1: the endpoint is gone). An id is forgotten when its delivery finishes
   * (`finishManual`), or after `forgetAfterMs` should its instance die first.
   */
  async admitManual(endpointId: string, jobIds: readonly string[], max: number, now: number, forgetAfterMs: number): Promise<number> {
    if (jobIds.length === 0) return 0
    return this.commands.admitManual(this.ep, this.manual(endpointId), endpointId, now, now - forgetAfterMs, max, forgetAfterMs, ...jobIds)
  }

  async finishManual(endpointId: string, jobId: string): Promise<void> {
    await this.redis.zrem(this.manual(endpointId), jobId)
  }
}
