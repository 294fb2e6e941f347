import { randomBytes } from 'node:crypto'
import type { Logger } from 'pino'
import type { RedisClient } from '../redis.js'
import type { AuditAction, AuditEntry } from './schemas.js'

// The audit trail (docs/architecture.md, "The audit trail"): every change to a credential,
// from the key tool or the credentials API, with its time, actor, action and the fields
// changed, old and new; never a secret nor its digest. Kept `audit.retentionDays` in Redis,
// and written as a log line too.
//
// Redis layout:
//   {ns}audit          ZSET  every entry (JSON), scored by its time (epoch ms)
//   {ns}audit:{id}     ZSET  the entries of one credential (the braces are literal)
// Entries older than the retention are trimmed on every write; a credential's own set
// expires with its last entry.

export interface AuditQuery {
  id?: string
  /** Epoch ms: entries at or after it. */
  since?: number
  offset: number
  limit: number
}

export interface AuditPage { entries: AuditEntry[]; total: number }

export interface AuditStore {
  append(entry: AuditEntry, retentionMs: number): Promise<void>
  /** Newest first. */
  query(query: AuditQuery, retentionMs: number): Promise<AuditPage>
}

export class RedisAuditStore implements AuditStore {
  constructor(private readonly redis: RedisClient, private readonly namespace: string) {}

  private get allKey(): string {
    return `${this.namespace}audit`
  }

  private credentialKey(id: string): string {
    return `${this.namespace}audit:{${id}}`
  }

  async append(entry: AuditEntry, retentionMs: number): Promise<void> {
    const at = Date.parse(entry.time)
    const member = JSON.stringify(entry)
    const cutoff = Date.now() - retentionMs
    // Two keys in two slots: two writes, each whole. The credential's own set first, so the
    // trail of all never lists an entry that the credential's does not.
    const own = this.credentialKey(entry.credentialId)
    await this.redis.multi().zadd(own, at, member).zremrangebyscore(own, '-inf', `(${cutoff}`).pexpireat(own, at + retentionMs).exec()
    await this.redis.multi().zadd(this.allKey, at, member).zremrangebyscore(this.allKey, '-inf', `(${cutoff}`).exec()
  }

  async query(query: AuditQuery, retentionMs: number): Promise<AuditPage> {
    const key = query.id === undefined ? this.allKey : this.credentialKey(query.id)
    const min = Math.max(query.since ?? 0, Date.now() - retentionMs)
    const [total, members] = await Promise.all([
      this.redis.zcount(key, min, '+inf'),
      this.redis.zrevrangebyscore(key, '+inf', min, 'LIMIT', query.offset, query.limit),
    ])
    return { entries: members.map((m) => JSON.parse(m) as AuditEntry), total }
  }
}

/** The demo's trail when no Redis answers: this process only. */
export class MemoryAuditStore implements AuditStore {
  private readonly entries: AuditEntry[] = []

  async append(entry: AuditEntry): Promise<void> {
    this.entries.push(entry)
  }

  async query(query: AuditQuery, retentionMs: number): Promise<AuditPage> {
    const min = Math.max(query.since ?? 0, Date.now() - retentionMs)
    const matching = this.entries
      .filter((e) => (query.id === undefined || e.credentialId === query.id) && Date.parse(e.time) >= min)
      .reverse()
    return { entries: matching.slice(query.offset, query.offset + query.limit), total: matching.length }
  }
}

let auditCounter = 0

/** `aud_` and an id that sorts by time: entries of one millisecond stay in the order they were made. */
function auditId(at: number): string {
  auditCounter = (auditCounter + 1) % 1296
  return `aud_${at.toString(36).padStart(9, '0')}${auditCounter.toString(36).padStart(2, '0')}${randomBytes(4).toString('hex')}`
}

/** Writes each entry to the store and as a log line. */
export class AuditTrail {
  constructor(private readonly store: AuditStore, private readonly retentionMs: number, private readonly logger: Logger) {}

  /** A new entry, made at `at` (epoch ms), written. */
  async add(actor: string, action: AuditAction, credentialId: string, changes: AuditEntry['changes'], at = Date.now()): Promise<AuditEntry> {
    const entry: AuditEntry = { id: auditId(at), time: new Date(at).toISOString(), actor, action, credentialId, changes }
    await this.record(entry)
    return entry
  }

  async record(entry: AuditEntry): Promise<void> {
    await this.store.append(entry, this.retentionMs)
    this.logger.info({ audit: entry }, 'credential changed')
  }

  async query(query: AuditQuery): Promise<AuditPage> {
    return this.store.query(query, this.retentionMs)
  }
}
