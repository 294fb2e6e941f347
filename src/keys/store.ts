import { Cluster } from 'ioredis'
import type { RedisClient } from '../redis.js'
import type { KeyMode } from './principal.js'
import { digestKey, generateKey, generateKeyId } from './format.js'
import { GrantExistsError, grantFromHash, grantToHash, newGrantRecord, type GrantRecord, type GrantStatus, type NewGrant } from './grants.js'

// API-key records, stored under the SHA-256 digest of the key, never the key; and the grants
// of OAuth 2.0 clients (grants.ts), stored under a digest of their issuer and client id. No
// token is ever stored.
//
// Redis layout (every name starts with the namespace, `gw:` by default):
//   {ns}key:{digest}     HASH    id, brand, mode, properties ("*" or JSON array), scopes ("*"
//                                or JSON array; absent on keys made before scopes: "*"),
//                                status, expiresAt, name, rateLimit ("" when unset), createdAt
//   {ns}keyid:{id}       STRING  the digest, to find a record by its public id
//   {ns}keys             SET     every key id, for `keys list`
//   {ns}grant:{digest}   HASH    id, issuer, clientId, brand, mode, properties, scopes, status,
//                                name, rateLimit, createdAt
//   {ns}grantid:{id}     STRING  the grant's digest
//   {ns}grants           SET     every grant id
//   {ns}keys:changed     channel a digest (of a key or a grant), published on suspend, resume
//                                and revoke (and on a new grant), so every gateway drops its
//                                cached copy at once
//
// The three keys of one API key (or grant) live in different hash slots (in a Cluster, on
// different nodes), so no transaction spans them. Instead the writes come in an order whose
// every intermediate state is safe: the record, which is what makes a key work, is written
// last on create and deleted first on revoke. A crash in between leaves at worst an id that
// points to no record, which reads as "no such key" (and `revoke` removes it).

const SET_STATUS_IF_EXISTS = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
return 1
`

// One grant per client: the record is written only where none is (one key, one slot).
const CREATE_IF_ABSENT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HGET', KEYS[1], 'id') or '' end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
`

export type KeyStatus = 'active' | 'suspended'

export interface KeyRecord {
  id: string
  digest: string
  brand: string
  mode: KeyMode
  properties: string[] | '*'
  /** What the key may do; `*`: every scope, also those of routes added later. */
  scopes: string[] | '*'
  status: KeyStatus
  name: string | null
  expiresAt: string | null
  rateLimit: number | null
  createdAt: string
}

export interface NewKey {
  brand: string
  mode: KeyMode
  properties: string[] | '*'
  scopes?: string[] | '*'
  name?: string | null
  expiresAt?: string | null
  rateLimit?: number | null
}

/** Storage of key records: Redis in production, memory for the demo without Redis. */
export interface KeyStore {
  create(input: NewKey): Promise<{ key: string; record: KeyRecord }>
  findByDigest(digest: string): Promise<KeyRecord | null>
  findById(id: string): Promise<KeyRecord | null>
  list(brand?: string): Promise<KeyRecord[]>
  /** Null when no key has this id. */
  setStatus(id: string, status: KeyStatus): Promise<KeyRecord | null>
  /** False when no key has this id. */
  revoke(id: string): Promise<boolean>
  /** Registers a client's grant; throws GrantExistsError when the client has one. */
  createGrant(input: NewGrant): Promise<GrantRecord>
  findGrant(digest: string): Promise<GrantRecord | null>
  findGrantById(id: string): Promise<GrantRecord | null>
  listGrants(brand?: string): Promise<GrantRecord[]>
  /** Null when no grant has this id. */
  setGrantStatus(id: string, status: GrantStatus): Promise<GrantRecord | null>
  /** False when no grant has this id. */
  revokeGrant(id: string): Promise<boolean>
  /** Calls `listener(digest)` whenever a record (a key's or a grant's) changes, on any instance. */
  onChange(listener: (digest: string) => void): void
  /** Called when changes may have been missed (a lost subscription). */
  onResync(listener: () => void): void
  close(): Promise<void>
}

function newRecord(input: NewKey): { key: string; record: KeyRecord } {
  const key = generateKey(input.mode)
  return {
    key,
    record: {
      id: generateKeyId(),
      digest: digestKey(key),
      brand: input.brand,
      mode: input.mode,
      properties: input.properties,
      scopes: input.scopes ?? '*',
      status: 'active',
      name: input.name ?? null,
      expiresAt: input.expiresAt ?? null,
      rateLimit: input.rateLimit ?? null,
      createdAt: new Date().toISOString(),
    },
  }
}

function toHash(record: KeyRecord): Record<string, string> {
  return {
    id: record.id,
    brand: record.brand,
    mode: record.mode,
    properties: record.properties === '*' ? '*' : JSON.stringify(record.properties),
    scopes: record.scopes === '*' ? '*' : JSON.stringify(record.scopes),
    status: record.status,
    name: record.name ?? '',
    expiresAt: record.expiresAt ?? '',
    rateLimit: record.rateLimit === null ? '' : String(record.rateLimit),
    createdAt: record.createdAt,
  }
}

function fromHash(digest: string, hash: Record<string, string>): KeyRecord | null {
  if (hash.id === undefined || hash.brand === undefined) return null
  return {
    id: hash.id,
    digest,
    brand: hash.brand,
    mode: hash.mode === 'test' ? 'test' : 'live',
    properties: hash.properties === '*' || hash.properties === undefined ? '*' : JSON.parse(hash.properties) as string[],
    // Keys made before scopes existed have none stored: they keep every scope.
    scopes: hash.scopes === '*' || hash.scopes === undefined ? '*' : JSON.parse(hash.scopes) as string[],
    status: hash.status === 'suspended' ? 'suspended' : 'active',
    name: hash.name === '' || hash.name === undefined ? null : hash.name,
    expiresAt: hash.expiresAt === '' || hash.expiresAt === undefined ? null : hash.expiresAt,
    rateLimit: hash.rateLimit === '' || hash.rateLimit === undefined ? null : Number(hash.rateLimit),
    createdAt: hash.createdAt ?? '',
  }
}

export class RedisKeyStore implements KeyStore {
  private subscriber: RedisClient | undefined
  private closed = false
  private readonly listeners: ((digest: string) => void)[] = []
  private readonly resyncListeners: (() => void)[] = []

  constructor(
    private readonly redis: RedisClient,
    private readonly namespace: string,
    /** Makes the subscriber connection; only instances that cache keys subscribe. */
    private readonly connectSubscriber?: () => RedisClient,
  ) {}

  private recordKey(digest: string): string {
    return `${this.namespace}key:${digest}`
  }

  private idKey(id: string): string {
    return `${this.namespace}keyid:${id}`
  }

  private get channel(): string {
    return `${this.namespace}keys:changed`
  }

  async create(input: NewKey): Promise<{ key: string; record: KeyRecord }> {
    const created = newRecord(input)
    const { record } = created
    await this.redis.sadd(this.listKey, record.id)
    await this.redis.set(this.idKey(record.id), record.digest)
    await this.redis.hset(this.recordKey(record.digest), toHash(record))
    return created
  }

  async findByDigest(digest: string): Promise<KeyRecord | null> {
    return fromHash(digest, await this.redis.hgetall(this.recordKey(digest)))
  }

  async findById(id: string): Promise<KeyRecord | null> {
    const digest = await this.redis.get(this.idKey(id))
    return digest === null ? null : this.findByDigest(digest)
  }

  async list(brand?: string): Promise<KeyRecord[]> {
    const ids = await this.redis.smembers(this.listKey)
    // An id without a record (a create under way, or one interrupted) is left out.
    const records = await Promise.all(ids.map((id) => this.findById(id)))
    return records
      .filter((r): r is KeyRecord => r !== null && (brand === undefined || r.brand === brand))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
  }

  async setStatus(id: string, status: KeyStatus): Promise<KeyRecord | null> {
    const record = await this.findById(id)
    if (record === null) return null
    // HSET on a record revoked meanwhile would leave a stray hash of one field: only update
    // a record that exists.
    const updated = await this.redis.eval(SET_STATUS_IF_EXISTS, 1, this.recordKey(record.digest), status)
    if (updated === 0) return null
    await this.redis.publish(this.channel, record.digest)
    return { ...record, status }
  }

  async revoke(id: string): Promise<boolean> {
    const digest = await this.redis.get(this.idKey(id))
    if (digest === null) return false
    const deleted = await this.redis.del(this.recordKey(digest))
    await this.redis.publish(this.channel, digest)
    await this.forgetId(id)
    return deleted === 1
  }

  private async forgetId(id: string): Promise<void> {
    await this.redis.del(this.idKey(id))
    await this.redis.srem(this.listKey, id)
  }

  private get listKey(): string {
    return `${this.namespace}keys`
  }

  private grantKey(digest: string): string {
    return `${this.namespace}grant:${digest}`
  }

  private grantIdKey(id: string): string {
    return `${this.namespace}grantid:${id}`
  }

  private get grantListKey(): string {
    return `${this.namespace}grants`
  }

  async createGrant(input: NewGrant): Promise<GrantRecord> {
    const record = newGrantRecord(input)
    await this.redis.sadd(this.grantListKey, record.id)
    await this.redis.set(this.grantIdKey(record.id), record.digest)
    const created = await this.redis.eval(CREATE_IF_ABSENT, 1, this.grantKey(record.digest), ...Object.entries(grantToHash(record)).flat()) as number | string
    if (created !== 1) {
      await this.redis.del(this.grantIdKey(record.id))
      await this.redis.srem(this.grantListKey, record.id)
      throw new GrantExistsError(created === '' ? null : String(created))
    }
    // An instance that answered this client "not registered" remembers the miss: it forgets it now.
    await this.redis.publish(this.channel, record.digest)
    return record
  }

  async findGrant(digest: string): Promise<GrantRecord | null> {
    return grantFromHash(digest, await this.redis.hgetall(this.grantKey(digest)))
  }

  async findGrantById(id: string): Promise<GrantRecord | null> {
    const digest = await this.redis.get(this.grantIdKey(id))
    return digest === null ? null : this.findGrant(digest)
  }

  async listGrants(brand?: string): Promise<GrantRecord[]> {
    const ids = await this.redis.smembers(this.grantListKey)
    const records = await Promise.all(ids.map((id) => this.findGrantById(id)))
    return records
      .filter((r): r is GrantRecord => r !== null && (brand === undefined || r.brand === brand))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
  }

  async setGrantStatus(id: string, status: GrantStatus): Promise<GrantRecord | null> {
    const record = await this.findGrantById(id)
    if (record === null) return null
    const updated = await this.redis.eval(SET_STATUS_IF_EXISTS, 1, this.grantKey(record.digest), status)
    if (updated === 0) return null
    await this.redis.publish(this.channel, record.digest)
    return { ...record, status }
  }

  async revokeGrant(id: string): Promise<boolean> {
    const digest = await this.redis.get(this.grantIdKey(id))
    if (digest === null) return false
    const deleted = await this.redis.del(this.grantKey(digest))
    await this.redis.publish(this.channel, digest)
    await this.redis.del(this.grantIdKey(id))
    await this.redis.srem(this.grantListKey, id)
    return deleted === 1
  }

  onChange(listener: (digest: string) => void): void {
    this.listeners.push(listener)
    this.subscribe()
  }

  onResync(listener: () => void): void {
    this.resyncListeners.push(listener)
  }

  private subscribe(): void {
    if (this.subscriber !== undefined || this.connectSubscriber === undefined) return
    const subscriber = this.connectSubscriber()
    this.subscriber = subscriber
    subscriber.on('message', (channel: string, digest: string) => {
      if (channel === this.channel) for (const listener of this.listeners) listener(digest)
    })
    // Messages published while the subscription was down are lost: whoever caches must read
    // again what it holds once the subscription is back (ioredis resubscribes on ready). The
    // resync waits until commands work again (the subscriber may reconnect before the command
    // connection does), so that those reads can be answered.
    const resync = (): void => {
      void this.whenCommandsWork().then(() => {
        if (!this.closed) for (const listener of this.resyncListeners) listener()
      })
    }
    let connectedBefore = false
    subscriber.on('ready', () => {
      if (connectedBefore) resync()
      connectedBefore = true
    })
    // A Cluster moves its subscription to another node by itself, without a `ready`: when a
    // node leaves (a failover), the subscription may have moved and missed messages. The
    // resync waits until the Cluster serves every slot again.
    if (subscriber instanceof Cluster) {
      let waiting = false
      subscriber.on('-node', (node: { options: { host?: string; port?: number } }) => {
        if (waiting) return
        waiting = true
        void this.whenClusterServesWithout(subscriber, `${node.options.host}:${node.options.port}`).then(() => {
          waiting = false
          resync()
        })
      })
    }
    // Queued until the connection is up; ioredis renews it after every reconnect.
    subscriber.subscribe(this.channel).catch(() => undefined)
  }

  private async whenCommandsWork(): Promise<void> {
    while (this.redis.status !== 'ready' && !this.closed) await new Promise((resolve) => setTimeout(resolve, 100))
  }

  /**
   * Resolves once every slot is served and `lost` (host:port) either serves none (a replica
   * took over) or is connected again (it was only a lost connection).
   */
  private async whenClusterServesWithout(cluster: Cluster, lost: string): Promise<void> {
    for (;;) {
      if (this.closed) return
      try {
        if ((await cluster.cluster('INFO')).includes('cluster_state:ok')) {
          const slots = await cluster.cluster('SLOTS')
          if (!slots.some(([, , master]) => master !== undefined && `${master[0]}:${master[1]}` === lost)) return
          if (cluster.nodes('master').some((n) => `${n.options.host}:${n.options.port}` === lost && n.status === 'ready')) return
        }
      } catch {
        // Not yet.
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.subscriber !== undefined) this.subscriber.disconnect()
  }
}

/** Keys and grants in this process only: the demo's store when no Redis answers. */
export class MemoryKeyStore implements KeyStore {
  private readonly byDigest = new Map<string, KeyRecord>()
  private readonly grants = new Map<string, GrantRecord>()
  private readonly listeners: ((digest: string) => void)[] = []

  private changed(digest: string): void {
    for (const listener of this.listeners) listener(digest)
  }

  async createGrant(input: NewGrant): Promise<GrantRecord> {
    const record = newGrantRecord(input)
    const existing = this.grants.get(record.digest)
    if (existing !== undefined) throw new GrantExistsError(existing.id)
    this.grants.set(record.digest, record)
    this.changed(record.digest)
    return record
  }

  async findGrant(digest: string): Promise<GrantRecord | null> {
    return this.grants.get(digest) ?? null
  }

  async findGrantById(id: string): Promise<GrantRecord | null> {
    for (const record of this.grants.values()) if (record.id === id) return record
    return null
  }

  async listGrants(brand?: string): Promise<GrantRecord[]> {
    return [...this.grants.values()].filter((r) => brand === undefined || r.brand === brand)
  }

  async setGrantStatus(id: string, status: GrantStatus): Promise<GrantRecord | null> {
    const record = await this.findGrantById(id)
    if (record === null) return null
    const updated = { ...record, status }
    this.grants.set(record.digest, updated)
    this.changed(record.digest)
    return updated
  }

  async revokeGrant(id: string): Promise<boolean> {
    const record = await this.findGrantById(id)
    if (record === null) return false
    this.grants.delete(record.digest)
    this.changed(record.digest)
    return true
  }

  async create(input: NewKey): Promise<{ key: string; record: KeyRecord }> {
    const created = newRecord(input)
    this.byDigest.set(created.record.digest, created.record)
    return created
  }

  async findByDigest(digest: string): Promise<KeyRecord | null> {
    return this.byDigest.get(digest) ?? null
  }

  async findById(id: string): Promise<KeyRecord | null> {
    for (const record of this.byDigest.values()) if (record.id === id) return record
    return null
  }

  async list(brand?: string): Promise<KeyRecord[]> {
    return [...this.byDigest.values()].filter((r) => brand === undefined || r.brand === brand)
  }

  async setStatus(id: string, status: KeyStatus): Promise<KeyRecord | null> {
    const record = await this.findById(id)
    if (record === null) return null
    const updated = { ...record, status }
    this.byDigest.set(record.digest, updated)
    for (const listener of this.listeners) listener(record.digest)
    return updated
  }

  async revoke(id: string): Promise<boolean> {
    const record = await this.findById(id)
    if (record === null) return false
    this.byDigest.delete(record.digest)
    for (const listener of this.listeners) listener(record.digest)
    return true
  }

  onChange(listener: (digest: string) => void): void {
    this.listeners.push(listener)
  }

  onResync(): void {
    // Nothing is ever missed in one process.
  }

  async close(): Promise<void> {}
}
