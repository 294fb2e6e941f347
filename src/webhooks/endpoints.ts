import type { KeyMode } from '../keys/principal.js'
import type { RedisClient } from '../redis.js'
import { UlidFactory } from '../events/ulid.js'
import { ENDPOINT_ID_PREFIX } from '../routes/policy.js'

// Partners' webhook endpoints and the attempts made to them (docs/architecture.md,
// "Webhooks"), in Redis, every key under one hash tag so that Cluster keeps them on one slot
// and a script may touch several:
//   {ns}{webhooks}:ep                     HASH  endpoint id -> its record (JSON; secrets sealed)
//   {ns}{webhooks}:cred:<credential id>   ZSET  its endpoints, by creation time
//   {ns}{webhooks}:part:<brand>:<mode>    SET   the endpoints an event of that brand and mode may go to
//   {ns}{webhooks}:att:<endpoint id>      LIST  its last attempts, newest first (JSON), trimmed
//   {ns}{webhooks}:slot:<endpoint id>     ZSET  attempts in flight to it (its concurrency), by lease end
// The delivery queue (BullMQ) lives under {ns}{webhooks} too.

export { ENDPOINT_ID_PREFIX }
/** Attempts kept per endpoint (and shown for 7 days). */
const KEPT_ATTEMPTS = 1000
export const ATTEMPTS_SHOWN_MS = 7 * 86_400_000

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

// KEYS slot; ARGV now, lease end, holder, limit. 1 when a slot is taken.
const ACQUIRE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
`

type CreateCommand = (ep: string, cred: string, part: string, id: string, record: string, max: number, score: number) => Promise<number>
type AcquireCommand = (slot: string, now: number, until: number, holder: string, limit: number) => Promise<number>

export class EndpointStore {
  private readonly base: string
  private readonly ulids = new UlidFactory()
  private readonly createCommand: CreateCommand
  private readonly acquireCommand: AcquireCommand

  constructor(private readonly redis: RedisClient, namespace: string) {
    this.base = `${namespace}{webhooks}:`
    redis.defineCommand('webhookEndpointCreate', { numberOfKeys: 3, lua: CREATE_SCRIPT })
    redis.defineCommand('webhookSlotAcquire', { numberOfKeys: 1, lua: ACQUIRE_SCRIPT })
    const commands = redis as unknown as { webhookEndpointCreate: CreateCommand; webhookSlotAcquire: AcquireCommand }
    this.createCommand = commands.webhookEndpointCreate.bind(redis)
    this.acquireCommand = commands.webhookSlotAcquire.bind(redis)
  }

  /** The prefix of the delivery queue's keys (BullMQ's `prefix`): the same hash tag. */
  get queuePrefix(): string {
    return `${this.base.slice(0, -1)}`
  }

  newId(now: number): string {
    return `${ENDPOINT_ID_PREFIX}${this.ulids.next(now).text}`
  }

  private get ep(): string { return `${this.base}ep` }
  private cred(credentialId: string): string { return `${this.base}cred:${credentialId}` }
  private part(brand: string, mode: KeyMode): string { return `${this.base}part:${brand}:${mode}` }
  private att(id: string): string { return `${this.base}att:${id}` }
  private slot(id: string): string { return `${this.base}slot:${id}` }

  /** Adds `record` unless its credential has `max` endpoints already (false). */
  async create(record: EndpointRecord, max: number): Promise<boolean> {
    const created = await this.createCommand(this.ep, this.cred(record.credentialId), this.part(record.brand, record.mode), record.id, JSON.stringify(record), max, Date.parse(record.createdAt))
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

  private async many(ids: string[]): Promise<EndpointRecord[]> {
    if (ids.length === 0) return []
    const values = await this.redis.hmget(this.ep, ...ids)
    return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as EndpointRecord)
  }

  /** How many endpoints there are, by status (for the metrics and /status). */
  async countByStatus(): Promise<Record<EndpointStatus, number>> {
    const counts: Record<EndpointStatus, number> = { enabled: 0, disabled: 0 }
    for (const value of await this.redis.hvals(this.ep)) counts[(JSON.parse(value) as EndpointRecord).status] += 1
    return counts
  }

  async save(record: EndpointRecord): Promise<void> {
    // Only while it exists: a delivery finishing after a DELETE must not bring it back.
    if (await this.redis.hexists(this.ep, record.id) === 1) await this.redis.hset(this.ep, record.id, JSON.stringify(record))
  }

  async remove(record: EndpointRecord): Promise<void> {
    await this.redis.multi()
      .hdel(this.ep, record.id).zrem(this.cred(record.credentialId), record.id).srem(this.part(record.brand, record.mode), record.id)
      .del(this.att(record.id), this.slot(record.id))
      .exec()
  }

  async recordAttempt(endpointId: string, attempt: Attempt): Promise<void> {
    await this.redis.multi().lpush(this.att(endpointId), JSON.stringify(attempt)).ltrim(this.att(endpointId), 0, KEPT_ATTEMPTS - 1)
      .pexpire(this.att(endpointId), String(ATTEMPTS_SHOWN_MS)).exec()
  }

  /** The attempts of the last 7 days, newest first. */
  async attempts(endpointId: string, now: number): Promise<Attempt[]> {
    const values = await this.redis.lrange(this.att(endpointId), 0, -1)
    return values.map((v) => JSON.parse(v) as Attempt).filter((a) => Date.parse(a.at) >= now - ATTEMPTS_SHOWN_MS)
  }

  /** Takes one of the endpoint's `limit` slots until `until` (a lease, so a dead instance frees it); false when all are taken. */
  async acquire(endpointId: string, holder: string, now: number, until: number, limit: number): Promise<boolean> {
    return (await this.acquireCommand(this.slot(endpointId), now, until, holder, limit)) === 1
  }

  async release(endpointId: string, holder: string): Promise<void> {
    await this.redis.zrem(this.slot(endpointId), holder)
  }
}
