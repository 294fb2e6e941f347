import type { RedisClient } from '../redis.js'
import { redisScript } from '../redis-script.js'

// Where quota is counted. One atomic operation: lease up to `batch` of what is left of a
// key's quota in a window, and say how much of it is used now.

export interface Lease {
  granted: number
  used: number
}

export interface QuotaStore {
  /** `keyId` names whose quota it is; `window` which window of it. */
  lease(keyId: string, window: number, limit: number, batch: number, ttlMs: number): Promise<Lease>
}

// KEYS[1] the window's counter; ARGV limit, batch, ttl in ms. Never grants past the limit.
const LEASE_SCRIPT = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local left = tonumber(ARGV[1]) - used
if left <= 0 then return {0, used} end
local grant = math.min(tonumber(ARGV[2]), left)
used = redis.call('INCRBY', KEYS[1], grant)
if used == grant then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return {grant, used}
`

type LeaseCommand = (key: string, limit: number, batch: number, ttlMs: number) => Promise<[number, number]>

export class RedisQuotaStore implements QuotaStore {
  private readonly leaseQuota: LeaseCommand

  constructor(redis: RedisClient, private readonly namespace: string) {
    this.leaseQuota = redisScript<LeaseCommand>(redis, 1, LEASE_SCRIPT)
  }

  async lease(keyId: string, window: number, limit: number, batch: number, ttlMs: number): Promise<Lease> {
    // The key id is a hash tag: every counter of one key sits in one slot of a Cluster, so a
    // script may one day touch several of them.
    const [granted, used] = await this.leaseQuota(`${this.namespace}rl:{${keyId}}:${window}`, limit, batch, ttlMs)
    return { granted, used }
  }
}

/** Counting in this process only: the demo's store when no Redis answers. */
export class MemoryQuotaStore implements QuotaStore {
  private readonly counters = new Map<string, { used: number; expiresAt: number }>()

  async lease(keyId: string, window: number, limit: number, batch: number, ttlMs: number): Promise<Lease> {
    const counter = `${keyId}:${window}`
    const now = Date.now()
    let entry = this.counters.get(counter)
    if (entry === undefined || entry.expiresAt <= now) {
      entry = { used: 0, expiresAt: now + ttlMs }
      this.counters.set(counter, entry)
    }
    const granted = Math.max(0, Math.min(batch, limit - entry.used))
    entry.used += granted
    return { granted, used: entry.used }
  }
}
