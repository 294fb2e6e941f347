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
//                                status, expiresAt, name, rateLimit ("" when unset), createdAt;
//                                allowedIps (JSON array) when set; after a roll previousDigest,
//                                previousSecretExpiresAt and rolledAt
//                        or, for a rolled key's previous secret: id, secret ("previous"),
//                                rolledAt, previousSecretExpiresAt (when it stops working);
//                                expires PREVIOUS_SECRET_KEPT_MS after that
//   {ns}keyid:{id}       STRING  the digest, to find a record by its public id
//   {ns}keys             SET     every key id, for `keys list`
//   {ns}grant:{digest}   HASH    id, issuer, clientId, brand, mode, properties, scopes, status,
//                                name, rateLimit, createdAt
//   {ns}grantid:{id}     STRING  the grant's digest
//   {ns}grants           SET     every grant id
//   {ns}keys:changed     channel a digest (of a key or a grant), published on suspend, resume,
//                                revoke, update and roll (and on a new grant), so every gateway
//                                drops its cached copy at once; a rolled key's change publishes
//                                its previous secret's digest too
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

// A change to a record (a key's or a grant's), only while it is one: not once it is revoked,
// nor once a roll turned it into a previous secret. ARGV: the number of fields to set, those
// fields and values, then the fields to delete.
const UPDATE_IF_RECORD = `
if redis.call('HEXISTS', KEYS[1], 'brand') == 0 then return 0 end
local n = tonumber(ARGV[1])
for i = 2, 1 + 2 * n, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
for i = 2 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
return 1
`

// The record a roll leaves behind becomes its previous secret: only while it is the record.
// ARGV: id, rolledAt, previousSecretExpiresAt, the time (epoch ms) the stub expires.
const TO_PREVIOUS_SECRET = `
if redis.call('HEXISTS', KEYS[1], 'brand') == 0 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'secret', 'previous', 'rolledAt', ARGV[2], 'previousSecretExpiresAt', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
`

// Ends a previous secret's overlap now, if it still lasts. ARGV: now (ISO).
const END_PREVIOUS_SECRET = `
if redis.call('HGET', KEYS[1], 'secret') ~= 'previous' then return 0 end
local ends = redis.call('HGET', KEYS[1], 'previousSecretExpiresAt')
if ends <= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'previousSecretExpiresAt', ARGV[1])
return 1
`

/**
 * How long a previous secret is still known once its overlap ended: it is answered
 * API_KEY_EXPIRED (the key was rolled, and when) rather than INVALID_API_KEY meanwhile.
 */
export const PREVIOUS_SECRET_KEPT_MS = 90 * 24 * 3600_000

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
  /** Where the key may be used from; null: anywhere. */
  allowedIps: string[] | null
  /** After a roll: the digest of the previous secret (never shown), when it stops working, when the key was rolled. */
  previousDigest: string | null
  previousSecretExpiresAt: string | null
  rolledAt: string | null
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
  allowedIps?: string[] | null
}

/** What `update` may change; a field left out stays as it is. `null` lifts a limit. */
export interface CredentialChanges {
  name?: string | null
  scopes?: string[] | '*'
  properties?: string[] | '*'
  rateLimit?: number | null
  /** Keys only: grants have no expiry (their tokens do). */
  expiresAt?: string | null
  allowedIps?: string[] | null
}

/** What a secret opens: its key's record; for a rolled key's previous secret, with when it was rolled and when that secret stops working. */
export interface SecretRecord {
  record: KeyRecord
  previous?: { rolledAt: string; expiresAt: string }
}

/** A roll: the new secret (shown once), the record as it is now, and an earlier overlap it ended. */
export interface Rolled {
  key: string
  record: KeyRecord
  /** When the previous previous secret would have stopped working, had this roll not ended it now. */
  endedOverlap: string | null
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
  /** What a secret opens (a key's record, or a rolled key's through its previous secret); null: nothing. */
  findSecret(digest: string): Promise<SecretRecord | null>
  /** Changes fields of a key; null when no key has this id. */
  update(id: string, changes: CredentialChanges): Promise<KeyRecord | null>
  /**
   * A new secret for the same key; the current one keeps working until `previousExpiresAt`
   * (an earlier previous secret stops at once). Null when no key has this id.
   */
  roll(id: string, previousExpiresAt: Date): Promise<Rolled | null>
  /** Ends the previous secret's overlap now; the record, and when the overlap would have ended (null: none lasted). */
  endOverlap(id: string): Promise<{ record: KeyRecord; ended: string | null } | null>
  /** Changes fields of a grant (never its expiry); null when no grant has this id. */
  updateGrant(id: string, changes: Omit<CredentialChanges, 'expiresAt'>): Promise<GrantRecord | null>
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
  /** Whether `onChange` hears the changes made by every instance (a store made without a subscriber hears none). */
  readonly hearsChanges: boolean
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
      allowedIps: input.allowedIps ?? null,
      previousDigest: null,
      previousSecretExpiresAt: null,
      rolledAt: null,
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
    // Written only when set, so a key that never used them has the fields it had before they existed.
    ...(record.allowedIps === null ? {} : { allowedIps: JSON.stringify(record.allowedIps) }),
    ...(record.previousDigest === null ? {} : { previousDigest: record.previousDigest }),
    ...(record.previousSecretExpiresAt === null ? {} : { previousSecretExpiresAt: record.previousSecretExpiresAt }),
    ...(record.rolledAt === null ? {} : { rolledAt: record.rolledAt }),
  }
}

/** The hash fields `changes` sets, and those it deletes (a limit lifted that has no written "none"). */
function changesToHash(changes: CredentialChanges): { set: [string, string][]; remove: string[] } {
  const set: [string, string][] = []
  const remove: string[] = []
  if (changes.name !== undefined) set.push(['name', changes.name ?? ''])
  if (changes.scopes !== undefined) set.push(['scopes', changes.scopes === '*' ? '*' : JSON.stringify(changes.scopes)])
  if (changes.properties !== undefined) set.push(['properties', changes.properties === '*' ? '*' : JSON.stringify(changes.properties)])
  if (changes.rateLimit !== undefined) set.push(['rateLimit', changes.rateLimit === null ? '' : String(changes.rateLimit)])
  if (changes.expiresAt !== undefined) set.push(['expiresAt', changes.expiresAt ?? ''])
  if (changes.allowedIps === null) remove.push('allowedIps')
  else if (changes.allowedIps !== undefined) set.push(['allowedIps', JSON.stringify(changes.allowedIps)])
  return { set, remove }
}

function updateArgs(changes: CredentialChanges): string[] {
  const { set, remove } = changesToHash(changes)
  return [String(set.length), ...set.flat(), ...remove]
}

/** `record` with `changes` applied. */
function applied<R extends { name: string | null; scopes: string[] | '*'; properties: string[] | '*'; rateLimit: number | null; allowedIps: string[] | null }>(
  record: R, changes: CredentialChanges,
): R {
  const out = { ...record }
  for (const field of ['name', 'scopes', 'properties', 'rateLimit', 'expiresAt', 'allowedIps'] as const) {
    if (changes[field] !== undefined && field in out) (out as Record<string, unknown>)[field] = changes[field]
  }
  return out
}

const text = (value: string | undefined): string | null => (value === '' || value === undefined ? null : value)

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
    allowedIps: hash.allowedIps === '' || hash.allowedIps === undefined ? null : JSON.parse(hash.allowedIps) as string[],
    previousDigest: text(hash.previousDigest),
    previousSecretExpiresAt: text(hash.previousSecretExpiresAt),
    rolledAt: text(hash.rolledAt),
    createdAt: hash.createdAt ?? '',
  }
}

/** A previous secret's stub, or undefined for anything else. */
function previousOf(hash: Record<string, string>): { id: string; rolledAt: string; expiresAt: string } | undefined {
  if (hash.secret !== 'previous' || hash.id === undefined || hash.previousSecretExpiresAt === undefined) return undefined
  return { id: hash.id, rolledAt: hash.rolledAt ?? '', expiresAt: hash.previousSecretExpiresAt }
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

  get hearsChanges(): boolean {
    return this.connectSubscriber !== undefined
  }

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
    const previous = await this.redis.hget(this.recordKey(digest), 'previousDigest')
    const deleted = await this.redis.del(this.recordKey(digest))
    await this.redis.publish(this.channel, digest)
    // The previous secret of a roll opens the key's record: it goes with it.
    if (previous !== null && previous !== '') {
      await this.redis.del(this.recordKey(previous))
      await this.redis.publish(this.channel, previous)
    }
    await this.forgetId(id)
    return deleted === 1
  }

  async findSecret(digest: string): Promise<SecretRecord | null> {
    const hash = await this.redis.hgetall(this.recordKey(digest))
    const record = fromHash(digest, hash)
    if (record !== null) return { record }
    const previous = previousOf(hash)
    if (previous === undefined) return null
    const current = await this.findById(previous.id)
    return current === null ? null : { record: current, previous: { rolledAt: previous.rolledAt, expiresAt: previous.expiresAt } }
  }

  /** Publishes a change of `record`: its digest and, after a roll, its previous secret's. */
  private async announce(record: Pick<KeyRecord, 'digest' | 'previousDigest'>): Promise<void> {
    await this.redis.publish(this.channel, record.digest)
    if (record.previousDigest !== null) await this.redis.publish(this.channel, record.previousDigest)
  }

  async update(id: string, changes: CredentialChanges): Promise<KeyRecord | null> {
    // A roll between the read and the write moves the record: read it again where it went.
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const record = await this.findById(id)
      if (record === null) return null
      const updated = await this.redis.eval(UPDATE_IF_RECORD, 1, this.recordKey(record.digest), ...updateArgs(changes))
      if (updated === 0) continue
      await this.announce(record)
      return applied(record, changes)
    }
    return null
  }

  async roll(id: string, previousExpiresAt: Date): Promise<Rolled | null> {
    const record = await this.findById(id)
    if (record === null) return null
    const now = new Date().toISOString()
    const until = previousExpiresAt.toISOString()
    const key = generateKey(record.mode)
    const rolled: KeyRecord = { ...record, digest: digestKey(key), previousDigest: record.digest, previousSecretExpiresAt: until, rolledAt: now }
    // The new secret works first; then the id names it; then the old record becomes the
    // previous secret (only if it still is the record: a revoke or another roll meanwhile
    // leaves it alone, and this roll is undone).
    await this.redis.hset(this.recordKey(rolled.digest), toHash(rolled))
    await this.redis.set(this.idKey(id), rolled.digest)
    const kept = Date.parse(until) + PREVIOUS_SECRET_KEPT_MS
    const moved = await this.redis.eval(TO_PREVIOUS_SECRET, 1, this.recordKey(record.digest), id, now, until, String(kept))
    if (moved === 0) {
      await this.redis.del(this.recordKey(rolled.digest))
      return null
    }
    // One previous secret at most: an earlier one still in its overlap ends now.
    let endedOverlap: string | null = null
    if (record.previousDigest !== null) {
      const earlier = record.previousSecretExpiresAt
      if (await this.redis.eval(END_PREVIOUS_SECRET, 1, this.recordKey(record.previousDigest), now) === 1) endedOverlap = earlier
      await this.redis.publish(this.channel, record.previousDigest)
    }
    await this.redis.publish(this.channel, record.digest)
    await this.redis.publish(this.channel, rolled.digest)
    return { key, record: rolled, endedOverlap }
  }

  async endOverlap(id: string): Promise<{ record: KeyRecord; ended: string | null } | null> {
    const record = await this.findById(id)
    if (record === null) return null
    if (record.previousDigest === null) return { record, ended: null }
    const now = new Date().toISOString()
    const ended = await this.redis.eval(END_PREVIOUS_SECRET, 1, this.recordKey(record.previousDigest), now) === 1
    if (!ended) return { record, ended: null }
    await this.redis.eval(UPDATE_IF_RECORD, 1, this.recordKey(record.digest), '1', 'previousSecretExpiresAt', now)
    await this.announce(record)
    return { record: { ...record, previousSecretExpiresAt: now }, ended: record.previousSecretExpiresAt }
  }

  async updateGrant(id: string, changes: Omit<CredentialChanges, 'expiresAt'>): Promise<GrantRecord | null> {
    const record = await this.findGrantById(id)
    if (record === null) return null
    const updated = await this.redis.eval(UPDATE_IF_RECORD, 1, this.grantKey(record.digest), ...updateArgs(changes))
    if (updated === 0) return null
    await this.redis.publish(this.channel, record.digest)
    return applied(record, changes)
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
  /** Every change to a record is made in this process and announced (a creation is not: nothing of a credential can be cached before it exists). */
  readonly hearsChanges = true

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
    if (record.previousDigest !== null) {
      this.previousSecrets.delete(record.previousDigest)
      this.changed(record.previousDigest)
    }
    return true
  }

  /** Rolled keys' previous secrets, by digest. */
  private readonly previousSecrets = new Map<string, { id: string; rolledAt: string; expiresAt: string }>()

  async findSecret(digest: string): Promise<SecretRecord | null> {
    const record = this.byDigest.get(digest)
    if (record !== undefined) return { record }
    const previous = this.previousSecrets.get(digest)
    if (previous === undefined) return null
    const current = await this.findById(previous.id)
    return current === null ? null : { record: current, previous: { rolledAt: previous.rolledAt, expiresAt: previous.expiresAt } }
  }

  private announce(record: KeyRecord): void {
    this.changed(record.digest)
    if (record.previousDigest !== null) this.changed(record.previousDigest)
  }

  async update(id: string, changes: CredentialChanges): Promise<KeyRecord | null> {
    const record = await this.findById(id)
    if (record === null) return null
    const updated = applied(record, changes)
    this.byDigest.set(record.digest, updated)
    this.announce(updated)
    return updated
  }

  async roll(id: string, previousExpiresAt: Date): Promise<Rolled | null> {
    const record = await this.findById(id)
    if (record === null) return null
    const now = new Date().toISOString()
    const key = generateKey(record.mode)
    const rolled: KeyRecord = { ...record, digest: digestKey(key), previousDigest: record.digest, previousSecretExpiresAt: previousExpiresAt.toISOString(), rolledAt: now }
    this.byDigest.delete(record.digest)
    this.byDigest.set(rolled.digest, rolled)
    this.previousSecrets.set(record.digest, { id, rolledAt: now, expiresAt: previousExpiresAt.toISOString() })
    let endedOverlap: string | null = null
    const earlier = record.previousDigest === null ? undefined : this.previousSecrets.get(record.previousDigest)
    if (earlier !== undefined && earlier.expiresAt > now) {
      endedOverlap = earlier.expiresAt
      earlier.expiresAt = now
    }
    if (record.previousDigest !== null) this.changed(record.previousDigest)
    this.changed(record.digest)
    this.changed(rolled.digest)
    return { key, record: rolled, endedOverlap }
  }

  async endOverlap(id: string): Promise<{ record: KeyRecord; ended: string | null } | null> {
    const record = await this.findById(id)
    if (record === null) return null
    const previous = record.previousDigest === null ? undefined : this.previousSecrets.get(record.previousDigest)
    const now = new Date().toISOString()
    if (previous === undefined || previous.expiresAt <= now) return { record, ended: null }
    const ended = previous.expiresAt
    previous.expiresAt = now
    const updated = { ...record, previousSecretExpiresAt: now }
    this.byDigest.set(record.digest, updated)
    this.announce(updated)
    return { record: updated, ended }
  }

  async updateGrant(id: string, changes: Omit<CredentialChanges, 'expiresAt'>): Promise<GrantRecord | null> {
    const record = await this.findGrantById(id)
    if (record === null) return null
    const updated = applied(record, changes)
    this.grants.set(record.digest, updated)
    this.changed(record.digest)
    return updated
  }

  onChange(listener: (digest: string) => void): void {
    this.listeners.push(listener)
  }

  onResync(): void {
    // Nothing is ever missed in one process.
  }

  async close(): Promise<void> {}
}
