import { createHash, randomBytes } from 'node:crypto'
import type { RedisClient } from '../redis.js'
import { redisScript } from '../redis-script.js'

// The idempotency records of declared routes (docs/architecture.md, "Idempotency records"): one per
// credential, method, route and Idempotency-Key, shared by every instance through Redis.
//
// Redis layout (under the namespace, `gw:` by default):
//   {ns}idem:{<credential id>}:<digest>   STRING, the record, where <digest> is the SHA-256
//                                         (base64url) of the method, the declared path and the key
//     in flight:  "L" <fingerprint> <owner>                                   PX the lease
//     answered:   "D" <fingerprint> <status> <headers as JSON> "\n" <body>    PX the retention
//
// The credential's id is the hash tag: a record is one key, and every record of a credential
// sits on one Cluster slot. Records expire by themselves; nothing sweeps them. A record is
// claimed with SET NX (one instance wins), read in the same script when it exists, and
// replaced (answered) or deleted (released) only by the claim that holds it: an instance
// whose lease ran out cannot overwrite the record of the retry that took over.

/** The fingerprint is a SHA-256 in base64url: 43 characters. */
const FINGERPRINT_LENGTH = 43
const LEASED = 0x4c // 'L'
const ANSWERED = 0x44 // 'D'
const NEWLINE = 0x0a

// KEYS[1] the record; ARGV the lease's value, the lease in ms. Nil when claimed, else the record.
const CLAIM_SCRIPT = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return redis.call('GET', KEYS[1])
`

// KEYS[1] the record; ARGV the lease's value, the answered record, its retention in ms.
const ANSWER_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`

// KEYS[1] the record; ARGV the lease's value.
const RELEASE_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`

/** Where records are kept: three atomic operations on one key. */
export interface RecordStore {
  /** Writes `value` for `ttlMs` when there is no record; else returns the record. */
  claim(key: string, value: Buffer, ttlMs: number): Promise<Buffer | null>
  /** Replaces the record by `value` for `ttlMs` if it is still `expected`. */
  replace(key: string, expected: Buffer, value: Buffer, ttlMs: number): Promise<boolean>
  /** Deletes the record if it is still `expected`. */
  remove(key: string, expected: Buffer): Promise<boolean>
}

type ClaimCommand = (key: string, value: Buffer, ttlMs: number) => Promise<Buffer | null>
type ReplaceCommand = (key: string, expected: Buffer, value: Buffer, ttlMs: number) => Promise<number>
type RemoveCommand = (key: string, expected: Buffer) => Promise<number>

/** Records in Redis: one round trip per operation (a script, src/redis-script.ts). */
export class RedisRecordStore implements RecordStore {
  private readonly claimCommand: ClaimCommand
  private readonly replaceCommand: ReplaceCommand
  private readonly removeCommand: RemoveCommand

  constructor(redis: RedisClient) {
    // Its reply in bytes: a stored body is bytes, never decoded on the way.
    this.claimCommand = redisScript<ClaimCommand>(redis, 1, CLAIM_SCRIPT, 'bytes')
    this.replaceCommand = redisScript<ReplaceCommand>(redis, 1, ANSWER_SCRIPT)
    this.removeCommand = redisScript<RemoveCommand>(redis, 1, RELEASE_SCRIPT)
  }

  claim(key: string, value: Buffer, ttlMs: number): Promise<Buffer | null> {
    return this.claimCommand(key, value, ttlMs)
  }

  async replace(key: string, expected: Buffer, value: Buffer, ttlMs: number): Promise<boolean> {
    return (await this.replaceCommand(key, expected, value, ttlMs)) === 1
  }

  async remove(key: string, expected: Buffer): Promise<boolean> {
    return (await this.removeCommand(key, expected)) === 1
  }
}

/** Records in this process only: the demo's store when no Redis answers. */
export class MemoryRecordStore implements RecordStore {
  private readonly records = new Map<string, { value: Buffer; expiresAt: number }>()

  private current(key: string): Buffer | null {
    const record = this.records.get(key)
    if (record === undefined) return null
    if (record.expiresAt <= Date.now()) {
      this.records.delete(key)
      return null
    }
    return record.value
  }

  async claim(key: string, value: Buffer, ttlMs: number): Promise<Buffer | null> {
    const existing = this.current(key)
    if (existing !== null) return existing
    this.records.set(key, { value, expiresAt: Date.now() + ttlMs })
    return null
  }

  async replace(key: string, expected: Buffer, value: Buffer, ttlMs: number): Promise<boolean> {
    if (!this.current(key)?.equals(expected)) return false
    this.records.set(key, { value, expiresAt: Date.now() + ttlMs })
    return true
  }

  async remove(key: string, expected: Buffer): Promise<boolean> {
    if (!this.current(key)?.equals(expected)) return false
    this.records.delete(key)
    return true
  }
}

/** An answer kept for replay: the status, the headers passed on to the partner, the body bytes. */
export interface StoredAnswer {
  status: number
  headers: Record<string, string>
  body: Buffer
}

/** A record this request claimed, until it is answered or released. */
export interface Lease {
  key: string
  value: Buffer
  fingerprint: string
}

export type Claim =
  | { kind: 'claimed'; lease: Lease }
  /** Another request with this key is in flight. */
  | { kind: 'in_use' }
  /** The key was used for another request. */
  | { kind: 'reused' }
  | { kind: 'answered'; answer: StoredAnswer }

/** What the record did for a request: the metric's `outcome`. */
export type IdempotencyOutcome = 'stored' | 'replayed' | 'in_use' | 'reused' | 'released'

export function digest(...parts: (string | Buffer)[]): string {
  const hash = createHash('sha256')
  // Each part's length first: no two lists of parts hash alike.
  for (const part of parts) hash.update(`${part.length}:`).update(part)
  return hash.digest('base64url')
}

function decode(record: Buffer): { fingerprint: string; answer?: StoredAnswer } | undefined {
  const fingerprint = record.toString('latin1', 1, 1 + FINGERPRINT_LENGTH)
  if (record[0] === LEASED) return { fingerprint }
  if (record[0] !== ANSWERED) return undefined
  const at = 1 + FINGERPRINT_LENGTH
  const newline = record.indexOf(NEWLINE, at + 3)
  if (newline === -1) return undefined
  const status = Number(record.toString('latin1', at, at + 3))
  const headers = JSON.parse(record.toString('utf8', at + 3, newline)) as Record<string, string>
  return { fingerprint, answer: { status, headers, body: record.subarray(newline + 1) } }
}

/**
 * A lease's owner: this process's random tag, drawn once, and a counter: unique to one claim
 * across instances and restarts, and no random bytes drawn per keyed request (a call into
 * OpenSSL and two allocations each, docs/performance.md).
 */
const OWNER_TAG = randomBytes(12).toString('base64url')
let owners = 0

export class IdempotencyRecords {
  constructor(private readonly store: RecordStore, private readonly namespace: string, private readonly retentionMs: number) {}

  /** The Redis key of a record: hash-tagged by the credential, the rest digested. */
  keyOf(credentialId: string, method: string, route: string, idempotencyKey: string): string {
    return `${this.namespace}idem:{${credentialId}}:${digest(method, route, idempotencyKey)}`
  }

  /** Claims the record for a request of `fingerprint`, or says what holds it. One round trip. */
  async claim(key: string, fingerprint: string, leaseMs: number): Promise<Claim> {
    const value = Buffer.from(`L${fingerprint}${OWNER_TAG}${(owners += 1).toString(36)}`, 'latin1')
    const existing = await this.store.claim(key, value, leaseMs)
    if (existing === null) return { kind: 'claimed', lease: { key, value, fingerprint } }
    const record = decode(existing)
    // A record this version cannot read is treated as another request's: never forwarded.
    if (record === undefined || record.fingerprint !== fingerprint) return { kind: 'reused' }
    return record.answer === undefined ? { kind: 'in_use' } : { kind: 'answered', answer: record.answer }
  }

  /** Keeps the answer for the retention, if the lease still holds the record. One round trip. */
  answer(lease: Lease, answer: StoredAnswer): Promise<boolean> {
    const head = Buffer.from(`D${lease.fingerprint}${String(answer.status).padStart(3, '0')}${JSON.stringify(answer.headers)}\n`, 'utf8')
    return this.store.replace(lease.key, lease.value, Buffer.concat([head, answer.body]), this.retentionMs)
  }

  /** Deletes the record, if the lease still holds it, so a retry is forwarded again. One round trip. */
  release(lease: Lease): Promise<boolean> {
    return this.store.remove(lease.key, lease.value)
  }
}
