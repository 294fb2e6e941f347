import type { Job, JobsOptions } from 'bullmq'
import type { Logger } from 'pino'
import { ulidMillis, UlidFactory } from '../events/ulid.js'
import type { KeyMode } from '../keys/principal.js'
import type { RedisClient } from '../redis.js'
import { redisScript } from '../redis-script.js'
import type { EndpointStore, Received } from './endpoints.js'
import {
  countedAs, feedWindow, RECOVERIES_SHOWN_MS, RECOVERY_ID_PREFIX, recoveryJobId, recoveryView, ulidOfRecoveryJob,
  type RecoveryInput, type RecoveryView,
} from './recovery.js'

// Recoveries (docs/architecture.md, "Webhooks", §D62-§D66): a partner asks for the events of a
// time range again, in one call. What each endpoint was due is written when an event is fanned
// out (the endpoint subscribed to its type then, whatever its status), and what it received
// when an attempt succeeds; a recovery is the difference (or the whole, for `all`), chosen
// once and kept as a list. Its deliveries are fed to the delivery queue a few at a time, as
// deliveries a partner asked for (§D39), and each finishes by counting itself. Keys, under the
// webhooks' hash tag (endpoints.ts), so that one script may touch several:
//   {ns}{webhooks}:due:<endpoint id>   ZSET   events fanned out to it: ULID, by the event's millisecond
//   {ns}{webhooks}:ok:<endpoint id>    ZSET   events delivered to it: ULID, by the event's millisecond
//   {ns}{webhooks}:wr:<recovery id>    HASH   the recovery: its fields, counts and cursor
//   {ns}{webhooks}:wrq:<recovery id>   LIST   the events it sends, oldest first (ULIDs)
//   {ns}{webhooks}:wrl:<recovery id>   ZSET   its deliveries queued and not yet counted: job id, by when queued (expires with the recovery)
//   {ns}{webhooks}:wrs:<endpoint id>   ZSET   the endpoint's recoveries, by creation
//   {ns}{webhooks}:wrrun:<endpoint id> STRING the id of its running recovery
//   {ns}{webhooks}:wrrunning           ZSET   every running recovery, by creation (the sweep reads it)

/** How often each delivering instance looks at the running recoveries (a feed lost with an instance is made again). */
export const SWEEP_MS = 10_000
/** A delivery queued this long ago and not in the queue was lost with its instance between the claim and the add: it is queued again. */
export const REPAIR_AFTER_MS = 60_000
/** Events read per round trip while a recovery's events are chosen. */
const SELECT_CHUNK = 1000
/** ULIDs pushed per command while a recovery's list is written. */
const PUSH_CHUNK = 1000

// KEYS ep, wr, wrq, wrs, run, running; ARGV endpoint id, recovery id, now, queued, keep ms, field, value, ...
// {1} made; {-1} the endpoint is gone; {-2, id} another recovery runs. The list (written before) goes when refused.
const CREATE_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  redis.call('DEL', KEYS[3])
  return {-1}
end
local running = redis.call('GET', KEYS[5])
if running then
  redis.call('DEL', KEYS[3])
  return {-2, running}
end
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[5])
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[5], ARGV[2], 'PX', ARGV[5])
  redis.call('ZADD', KEYS[6], ARGV[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return {1}
`

// Ends a running recovery: no longer running for its endpoint nor for the sweep; kept for the list.
// KEYS wr, wrq, run, running; ARGV recovery id, keep ms.
const END = `
local function finish(keys, id, keepMs)
  if redis.call('GET', keys[3]) == id then redis.call('DEL', keys[3]) end
  redis.call('ZREM', keys[4], id)
  redis.call('DEL', keys[2])
  redis.call('PEXPIRE', keys[1], keepMs)
end
`

// KEYS ep, wr, wrq, wrl, manual; ARGV endpoint id, now, window, max manual, forget before, manual ttl ms, job id prefix.
// {brand, mode, job ids...} of the deliveries to queue now (none when it is not running or has no room).
const CLAIM_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {} end
local fields = redis.call('HMGET', KEYS[2], 'status', 'cursor', 'queued', 'brand', 'mode')
if fields[1] ~= 'running' then return {} end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', ARGV[5])
local cursor = tonumber(fields[2])
local want = math.min(tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[4]), tonumber(ARGV[4]) - redis.call('ZCARD', KEYS[5]), tonumber(fields[3]) - cursor)
if want <= 0 then return {} end
local result = {fields[4], fields[5]}
for _, ulid in ipairs(redis.call('LRANGE', KEYS[3], cursor, cursor + want - 1)) do
  local id = ARGV[7] .. ulid
  redis.call('ZADD', KEYS[5], ARGV[2], id)
  redis.call('ZADD', KEYS[4], ARGV[2], id)
  table.insert(result, id)
end
redis.call('HSET', KEYS[2], 'cursor', cursor + #result - 2)
redis.call('PEXPIRE', KEYS[5], ARGV[6])
-- Its queued deliveries go with the recovery, should none of them ever be counted: at the same
-- instant (a PTTL read and a PEXPIRE set can see two clocks a millisecond apart).
local at = redis.call('PEXPIRETIME', KEYS[2])
if at > 0 then redis.call('PEXPIREAT', KEYS[4], at) end
return result
`

// KEYS wr, wrl, wrq, run, running; ARGV job id, counted as ('delivered', 'failed', or '' for nothing), recovery id, keep ms.
// 1 when the delivery was the recovery's and is counted now; 0 when it was counted before (or the recovery is gone).
const FINISH_SCRIPT = `${END}
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
if ARGV[2] ~= '' then redis.call('HINCRBY', KEYS[1], ARGV[2], 1) end
local fields = redis.call('HMGET', KEYS[1], 'status', 'cursor', 'queued')
if fields[1] == 'running' and tonumber(fields[2]) >= tonumber(fields[3]) and redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[1], 'status', 'done')
  finish({KEYS[1], KEYS[3], KEYS[4], KEYS[5]}, ARGV[3], ARGV[4])
end
return 1
`

// KEYS wr, wrl, wrq, run, running, manual; ARGV recovery id, keep ms. 1 cancelled now; 0 it had ended.
// Its deliveries still queued leave the endpoint's bound at once; each ends without an attempt when it runs.
const CANCEL_SCRIPT = `${END}
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'cancelled')
finish({KEYS[1], KEYS[3], KEYS[4], KEYS[5]}, ARGV[1], ARGV[2])
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do redis.call('ZREM', KEYS[6], id) end
-- The record's expiry, which finish has just set.
redis.call('PEXPIREAT', KEYS[2], redis.call('PEXPIRETIME', KEYS[1]))
return 1
`

type CreateCommand = (ep: string, wr: string, wrq: string, wrs: string, run: string, running: string, endpointId: string, id: string, now: number, queued: number, keepMs: number, ...fields: string[]) => Promise<[number, string?]>
type ClaimCommand = (ep: string, wr: string, wrq: string, wrl: string, manual: string, endpointId: string, now: number, window: number, maxManual: number, forgetBefore: number, manualTtlMs: number, prefix: string) => Promise<string[]>
type FinishCommand = (wr: string, wrl: string, wrq: string, run: string, running: string, jobId: string, counted: string, id: string, keepMs: number) => Promise<number>
type CancelCommand = (wr: string, wrl: string, wrq: string, run: string, running: string, manual: string, id: string, keepMs: number) => Promise<number>

/** An event an endpoint was due (fanned out to it). */
export interface Due {
  endpointId: string
  ulid: string
}

/** What a recovery asked for came to. */
export type Started = { kind: 'started'; recovery: RecoveryView } | { kind: 'gone' } | { kind: 'running'; id: string } | { kind: 'too many' }

/** The recoveries' records in Redis. */
export class RecoveryStore {
  private readonly base: string
  private readonly ids = new UlidFactory()
  private readonly commands: { create: CreateCommand; claim: ClaimCommand; finish: FinishCommand; cancel: CancelCommand }

  constructor(private readonly redis: RedisClient, private readonly endpoints: EndpointStore) {
    this.base = `${endpoints.queuePrefix}:`
    const scripts = { create: [6, CREATE_SCRIPT], claim: [5, CLAIM_SCRIPT], finish: [5, FINISH_SCRIPT], cancel: [6, CANCEL_SCRIPT] } as const
    const commands: Record<string, unknown> = {}
    for (const [name, [numberOfKeys, lua]] of Object.entries(scripts)) commands[name] = redisScript(redis, numberOfKeys, lua)
    this.commands = commands as RecoveryStore['commands']
  }

  private due(endpointId: string): string { return `${this.base}due:${endpointId}` }
  private ok(endpointId: string): string { return `${this.base}ok:${endpointId}` }
  private wr(id: string): string { return `${this.base}wr:${id}` }
  private wrq(id: string): string { return `${this.base}wrq:${id}` }
  private wrl(id: string): string { return `${this.base}wrl:${id}` }
  private wrs(endpointId: string): string { return `${this.base}wrs:${endpointId}` }
  private run(endpointId: string): string { return `${this.base}wrrun:${endpointId}` }
  private get running(): string { return `${this.base}wrrunning` }

  newId(now: number): string {
    return `${RECOVERY_ID_PREFIX}${this.ids.next(now).text}`
  }

  /** Writes that each endpoint was due each event; what is past the retention goes. */
  async recordDue(due: readonly Due[], now: number, retentionMs: number): Promise<void> {
    if (due.length === 0) return
    const byEndpoint = new Map<string, string[]>()
    for (const { endpointId, ulid } of due) {
      const members = byEndpoint.get(endpointId) ?? []
      members.push(String(ulidMillis(ulid)), ulid)
      byEndpoint.set(endpointId, members)
    }
    const pipeline = this.redis.pipeline()
    for (const [endpointId, members] of byEndpoint) this.addTrimmed(pipeline, this.due(endpointId), members, now, retentionMs)
    await execOrThrow(pipeline)
  }

  /** Writes that the endpoint received the event (an attempt answered 2xx). */
  /** What `recordDelivered` writes, for the endpoint store to write with the attempt (EndpointStore.recordDelivered). */
  received(endpointId: string, ulid: string, now: number, retentionMs: number): Received {
    return { key: this.ok(endpointId), at: ulidMillis(ulid), ulid, forgetBefore: now - retentionMs, ttlMs: retentionMs }
  }

  async recordDelivered(endpointId: string, ulid: string, now: number, retentionMs: number): Promise<void> {
    const pipeline = this.redis.pipeline()
    this.addTrimmed(pipeline, this.ok(endpointId), [String(ulidMillis(ulid)), ulid], now, retentionMs)
    await execOrThrow(pipeline)
  }

  private addTrimmed(pipeline: ReturnType<RedisClient['pipeline']>, key: string, members: string[], now: number, retentionMs: number): void {
    pipeline.zadd(key, ...members)
    pipeline.zremrangebyscore(key, '-inf', `(${now - retentionMs}`)
    pipeline.pexpire(key, retentionMs)
  }

  /**
   * The events of the range that the endpoint was due, oldest first: those it did not receive
   * (`failed`) or all of them; undefined when they are more than `max`.
   */
  async select(endpointId: string, input: RecoveryInput, max: number): Promise<string[] | undefined> {
    if (input.include === 'all' && await this.redis.zcount(this.due(endpointId), input.since, input.until) > max) return undefined
    const chosen: string[] = []
    for (let offset = 0; ; offset += SELECT_CHUNK) {
      const chunk = await this.redis.zrangebyscore(this.due(endpointId), input.since, input.until, 'LIMIT', offset, SELECT_CHUNK)
      if (chunk.length === 0) break
      if (input.include === 'all') chosen.push(...chunk)
      else {
        const received = await this.redis.zmscore(this.ok(endpointId), ...chunk)
        chunk.forEach((ulid, i) => {
          if (received[i] === null) chosen.push(ulid)
        })
      }
      if (chosen.length > max) return undefined
      if (chunk.length < SELECT_CHUNK) break
    }
    return chosen
  }

  /** Makes a recovery of `events` (running, or done at once when there are none), unless the endpoint is gone or runs one. */
  async create(view: RecoveryView, brand: string, mode: KeyMode, events: readonly string[], now: number): Promise<Started> {
    const { id, endpointId } = view
    for (let i = 0; i < events.length; i += PUSH_CHUNK) await this.redis.rpush(this.wrq(id), ...events.slice(i, i + PUSH_CHUNK))
    const fields: Record<string, string | number> = {
      id, endpointId, brand, mode, since: Date.parse(view.since), until: Date.parse(view.until), include: view.include,
      status: view.status, queued: view.queued, delivered: 0, failed: 0, cursor: 0, createdAt: Date.parse(view.createdAt),
    }
    const [made, running] = await this.commands.create(
      this.endpoints.keysOf(endpointId).ep, this.wr(id), this.wrq(id), this.wrs(endpointId), this.run(endpointId), this.running,
      endpointId, id, now, events.length, RECOVERIES_SHOWN_MS, ...Object.entries(fields).flatMap(([k, v]) => [k, String(v)]),
    )
    if (made === -1) return { kind: 'gone' }
    if (made === -2) return { kind: 'running', id: running as string }
    return { kind: 'started', recovery: view }
  }

  /**
   * Takes the next of the recovery's deliveries to queue: as many as its window and the
   * endpoint's bound of deliveries asked for leave room for, each admitted to that bound.
   */
  async claim(endpointId: string, id: string, now: number, window: number, maxManual: number, manualLifetimeMs: number): Promise<{ brand: string; mode: KeyMode; jobIds: string[] } | undefined> {
    const [brand, mode, ...jobIds] = await this.commands.claim(
      this.endpoints.keysOf(endpointId).ep, this.wr(id), this.wrq(id), this.wrl(id), this.endpoints.keysOf(endpointId).manual,
      endpointId, now, window, maxManual, now - manualLifetimeMs, manualLifetimeMs, recoveryJobId(id, ''),
    )
    return brand === undefined || jobIds.length === 0 ? undefined : { brand, mode: mode as KeyMode, jobIds }
  }

  /** Counts one of its deliveries as `counted` ('' for nothing: it ended unsent); the recovery is done after its last. */
  async finish(endpointId: string, id: string, jobId: string, counted: 'delivered' | 'failed' | ''): Promise<boolean> {
    return await this.commands.finish(this.wr(id), this.wrl(id), this.wrq(id), this.run(endpointId), this.running, jobId, counted, id, RECOVERIES_SHOWN_MS) === 1
  }

  /** The id of the endpoint's running recovery, if it runs one. */
  async runningOf(endpointId: string): Promise<string | undefined> {
    return await this.redis.get(this.run(endpointId)) ?? undefined
  }

  /** Whether the delivery `jobId` is still to be made: its recovery runs and has not counted it. */
  async live(id: string, jobId: string): Promise<boolean> {
    const [status, queued] = await Promise.all([this.redis.hget(this.wr(id), 'status'), this.redis.zscore(this.wrl(id), jobId)])
    return status === 'running' && queued !== null
  }

  /** Cancels a running recovery: true; false when it had ended. */
  async cancel(endpointId: string, id: string): Promise<boolean> {
    return await this.commands.cancel(this.wr(id), this.wrl(id), this.wrq(id), this.run(endpointId), this.running, this.endpoints.keysOf(endpointId).manual, id, RECOVERIES_SHOWN_MS) === 1
  }

  /** The recovery `id` of the endpoint. */
  async get(endpointId: string, id: string): Promise<RecoveryView | undefined> {
    const fields = await this.redis.hgetall(this.wr(id))
    return fields.endpointId === endpointId ? recoveryView(fields) : undefined
  }

  /** The endpoint's recoveries of the last 7 days, newest first. */
  async list(endpointId: string, now: number): Promise<RecoveryView[]> {
    await this.redis.zremrangebyscore(this.wrs(endpointId), '-inf', `(${now - RECOVERIES_SHOWN_MS}`)
    const ids = await this.redis.zrevrange(this.wrs(endpointId), 0, -1)
    if (ids.length === 0) return []
    const pipeline = this.redis.pipeline()
    for (const id of ids) pipeline.hgetall(this.wr(id))
    const all = (await execOrThrow(pipeline)) as Record<string, string>[]
    return all.filter((fields) => fields.endpointId === endpointId).map(recoveryView)
  }

  /** The brand and mode of the recovery's events. */
  async brandMode(id: string): Promise<{ brand: string; mode: KeyMode } | undefined> {
    const [brand, mode] = await this.redis.hmget(this.wr(id), 'brand', 'mode')
    return brand === null || brand === undefined || mode === null || mode === undefined ? undefined : { brand, mode: mode as KeyMode }
  }

  /** The running recoveries, with their endpoints. */
  async allRunning(): Promise<{ id: string; endpointId: string }[]> {
    const ids = await this.redis.zrange(this.running, '0', '-1')
    if (ids.length === 0) return []
    const pipeline = this.redis.pipeline()
    for (const id of ids) pipeline.hget(this.wr(id), 'endpointId')
    const endpoints = (await execOrThrow(pipeline)) as (string | null)[]
    // A recovery whose record expired while it ran (7 days after it began, whether or not an
    // instance still fed it) is no longer listed for the next sweeps. No recovery being made can
    // be among them: the script that makes one writes its record and this entry in one step.
    const running: { id: string; endpointId: string }[] = []
    const expired: string[] = []
    ids.forEach((id, i) => {
      const endpointId = endpoints[i]
      if (endpointId === null || endpointId === undefined) expired.push(id)
      else running.push({ id, endpointId })
    })
    if (expired.length > 0) await this.redis.zrem(this.running, ...expired)
    return running
  }

  /** The recovery's deliveries queued before `before` and not yet counted. */
  async queuedBefore(id: string, before: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.wrl(id), '-inf', `(${before}`)
  }

  /** Deletes everything of an endpoint's recoveries (the endpoint is deleted). */
  async removeAllOf(endpointId: string): Promise<void> {
    const ids = await this.redis.zrange(this.wrs(endpointId), '0', '-1')
    const keys = [this.wrs(endpointId), this.run(endpointId), this.due(endpointId), this.ok(endpointId), ...ids.flatMap((id) => [this.wr(id), this.wrq(id), this.wrl(id)])]
    const pipeline = this.redis.pipeline()
    if (ids.length > 0) pipeline.zrem(this.running, ...ids)
    pipeline.del(...keys)
    await execOrThrow(pipeline)
  }
}

/** A pipeline's results; the first error thrown. */
async function execOrThrow(pipeline: ReturnType<RedisClient['pipeline']>): Promise<unknown[]> {
  const results = await pipeline.exec()
  return (results ?? []).map(([error, value]) => {
    if (error !== null) throw error
    return value
  })
}

/** What the recoveries need of the delivery queue. */
export interface RecoveryQueue {
  addBulk(jobs: { name: string; data: RecoveryJobData; opts: JobsOptions }[]): Promise<unknown>
  getJob(id: string): Promise<Job | undefined>
}

export interface RecoveryJobData {
  ulid: string
  brand: string
  mode: KeyMode
  endpointId: string
  kind: 'recovery'
  recoveryId: string
}

export interface RecoveriesOptions {
  store: RecoveryStore
  queue: RecoveryQueue
  /** A delivery's job options for job id `jobId` (deliveries.ts). */
  jobOptions: (jobId: string) => JobsOptions
  settings: { endpointConcurrency: number; maxManualDeliveriesPerEndpoint: number; maxRecoveryEvents: number; retentionMs: number }
  /** The longest a delivery lives: how long its place in the endpoint's bound is kept. */
  lifetimeMs: number
  logger: Logger
  now: () => number
}

/** Starts recoveries, feeds their deliveries to the queue and counts them as they finish. */
export class Recoveries {
  private sweepTimer: NodeJS.Timeout | undefined

  constructor(private readonly options: RecoveriesOptions) {}

  /** The bounds of a reloaded configuration, for the recoveries asked for and fed from now on. */
  reconfigure(settings: RecoveriesOptions['settings']): void {
    this.options.settings = settings
  }

  get store(): RecoveryStore {
    return this.options.store
  }

  /** Chooses the events of a new recovery of the endpoint and starts sending them. */
  async start(endpoint: { id: string; brand: string; mode: KeyMode }, input: RecoveryInput): Promise<Started> {
    const { store, settings, now } = this.options
    const events = await store.select(endpoint.id, input, settings.maxRecoveryEvents)
    if (events === undefined) return { kind: 'too many' }
    const at = now()
    const view: RecoveryView = {
      id: store.newId(at), endpointId: endpoint.id, since: new Date(input.since).toISOString(), until: new Date(input.until).toISOString(), include: input.include,
      status: events.length === 0 ? 'done' : 'running', queued: events.length, delivered: 0, failed: 0, createdAt: new Date(at).toISOString(),
    }
    const started = await store.create(view, endpoint.brand, endpoint.mode, events, at)
    if (started.kind === 'started' && events.length > 0) {
      await this.feed(endpoint.id, view.id).catch((error: unknown) => this.options.logger.warn({ err: error, recoveryId: view.id }, 'recovery deliveries not queued yet; the sweep queues them'))
    }
    return started
  }

  /** Queues the recovery's next deliveries, as many as it has room for. */
  async feed(endpointId: string, id: string): Promise<void> {
    const { store, settings, now, lifetimeMs } = this.options
    const claimed = await store.claim(endpointId, id, now(), feedWindow(settings.endpointConcurrency), settings.maxManualDeliveriesPerEndpoint, lifetimeMs)
    if (claimed === undefined) return
    await this.queue(endpointId, id, claimed.brand, claimed.mode, claimed.jobIds)
  }

  private async queue(endpointId: string, id: string, brand: string, mode: KeyMode, jobIds: readonly string[]): Promise<void> {
    await this.options.queue.addBulk(jobIds.map((jobId) => ({
      name: 'recovery',
      data: { ulid: ulidOfRecoveryJob(jobId), brand, mode, endpointId, kind: 'recovery', recoveryId: id },
      // One attempt each: a recovery is the partner's retry, not a new retry schedule.
      opts: { ...this.options.jobOptions(jobId), attempts: 1 },
    })))
  }

  /** Whether a recovery's delivery is still to be made (its recovery runs, and it was not counted). */
  live(data: { recoveryId?: string | undefined }, jobId: string): Promise<boolean> {
    return data.recoveryId === undefined ? Promise.resolve(false) : this.options.store.live(data.recoveryId, jobId)
  }

  /** Counts a recovery's delivery that finished (`result`: what the attempt came to; `skipped`: it ended unsent), then queues the next ones. */
  async finished(data: { endpointId: string; recoveryId?: string | undefined }, jobId: string, result: string | undefined, skipped: boolean): Promise<void> {
    if (data.recoveryId === undefined) return
    await this.options.store.finish(data.endpointId, data.recoveryId, jobId, skipped ? '' : countedAs(result))
    await this.feed(data.endpointId, data.recoveryId)
  }

  /**
   * Repairs what an instance that died took with it: a recovery not fed after its last
   * delivery finished, and a delivery claimed but never queued (queued again, under the same id)
   * or finished but never counted (counted now).
   */
  async sweep(): Promise<void> {
    const { store, queue, now } = this.options
    for (const { id, endpointId } of await store.allRunning()) {
      for (const jobId of await store.queuedBefore(id, now() - REPAIR_AFTER_MS)) {
        const job = await queue.getJob(jobId)
        if (job === undefined) {
          const brandMode = await store.brandMode(id)
          if (brandMode !== undefined) await this.queue(endpointId, id, brandMode.brand, brandMode.mode, [jobId])
        } else if (job.finishedOn !== undefined) {
          await store.finish(endpointId, id, jobId, countedAs(job.returnvalue as string | undefined))
        }
      }
      await this.feed(endpointId, id)
    }
  }

  /** Sweeps every SWEEP_MS (instances that deliver). */
  startSweeping(): void {
    this.sweepTimer = setInterval(() => {
      this.sweep().catch((error: unknown) => this.options.logger.warn({ err: error }, 'recovery sweep failed; retried at the next'))
    }, SWEEP_MS)
    this.sweepTimer.unref()
  }

  stop(): void {
    clearInterval(this.sweepTimer)
  }
}
