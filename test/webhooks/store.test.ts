import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, describe, expect, it } from 'vitest'
import { UlidFactory } from '../../src/events/ulid.js'
import { EndpointStore, secretContext, type Attempt, type EndpointRecord } from '../../src/webhooks/endpoints.js'
import { Recoveries, RecoveryStore, REPAIR_AFTER_MS, type RecoveryQueue } from '../../src/webhooks/recoveries.js'
import type { RecoveryView } from '../../src/webhooks/recovery.js'
import { resealAll } from '../../src/webhooks/reseal.js'
import { SecretBox } from '../../src/webhooks/secrets.js'
import { runWebhookTool } from '../../src/webhooks/tool.js'
import { keysUnder, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The webhooks' records in Redis without a gateway (docs/architecture.md, "Webhooks"): an
// endpoint's record and indexes, its bound of endpoints per credential, changes by
// compare-and-set, its attempts, its concurrency leases and the deliveries parked behind them,
// the bound of deliveries a partner asked for, sealing again under a new key, and recoveries:
// what each endpoint was due and received, the choice of events, the feed, the counts, the
// cancel and the repair. The module's mutation run uses these (scripts/mutation.ts).

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
})

// In the future: leases end at absolute times (PEXPIREAT), which must not have passed.
const T0 = Date.parse('2036-11-28T12:00:00.000Z')
const DAY = 86_400_000
let namespaces = 0

/** A store under a namespace of its own, and the base of its keys. */
function fresh(): { store: EndpointStore; base: string; ns: string } {
  namespaces += 1
  const ns = `${prefix}${namespaces}:`
  return { store: new EndpointStore(redis, ns), base: `${ns}{webhooks}:`, ns }
}

function endpoint(id: string, over: Partial<EndpointRecord> = {}): EndpointRecord {
  return {
    id, credentialId: 'key_1', brand: 'acme', mode: 'live', url: 'https://hooks.example.com/acme', eventTypes: ['property.updated'], description: null,
    status: 'enabled', disabledReason: null, createdAt: '2026-11-28T10:00:00.000Z', updatedAt: '2026-11-28T10:00:00.000Z',
    secrets: [{ sealed: 'v1.x', expiresAt: null }], failingSince: null, ...over,
  }
}

function attempt(n: number, at: number): Attempt {
  return { eventId: `evt_${n}`, attempt: 1, at: new Date(at).toISOString(), status: 200, outcome: 'delivered', durationMs: 5 }
}

describe('endpoints', () => {
  it('names an endpoint we_ and a ULID of its time, and the queue under the same hash tag', () => {
    const { store, base } = fresh()
    expect(store.newId(T0)).toMatch(/^we_01XEF6B5G0[0-9A-HJKMNP-TV-Z]{16}$/)
    expect(store.queuePrefix).toBe(base.slice(0, -1))
    expect(store.keysOf('we_A')).toEqual({ ep: `${base}ep`, manual: `${base}manual:we_A` })
  })

  it('adds endpoints up to the bound of their credential, indexed by credential (oldest first) and by brand and mode', async () => {
    const { store, base } = fresh()
    const a = endpoint('we_A', { createdAt: '2026-11-28T10:00:02.000Z' })
    const b = endpoint('we_B', { createdAt: '2026-11-28T10:00:01.000Z', mode: 'test' })
    const other = endpoint('we_C', { credentialId: 'key_2', brand: 'globex' })
    expect(await store.create(a, 2)).toBe(true)
    expect(await store.create(b, 2)).toBe(true)
    expect(await store.create(endpoint('we_D'), 2)).toBe(false)
    expect(await store.create(other, 1)).toBe(true)
    expect(await store.list('key_1')).toEqual([b, a])
    expect(await store.list('key_3')).toEqual([])
    expect(await store.get('we_A')).toEqual(a)
    expect(await store.get('we_D')).toBeUndefined()
    expect(await store.ownedBy('key_1', 'we_A')).toEqual(a)
    expect(await store.ownedBy('key_2', 'we_A')).toBeUndefined()
    expect(await store.ownedBy('key_1', 'we_D')).toBeUndefined()
    expect(await store.ofPartition('acme', 'live')).toEqual([a])
    expect(await store.ofPartition('acme', 'test')).toEqual([b])
    expect(await store.ofPartition('globex', 'test')).toEqual([])
    expect((await store.all()).sort((x, y) => x.id.localeCompare(y.id))).toEqual([a, b, other])
    expect((await keysUnder(redis, base)).sort()).toEqual([`${base}cred:key_1`, `${base}cred:key_2`, `${base}ep`, `${base}part:acme:live`, `${base}part:acme:test`, `${base}part:globex:live`])
  })

  it('changes a record as it is in Redis, again when it was written meanwhile, and never brings back one deleted', async () => {
    const { store } = fresh()
    await store.create(endpoint('we_A'), 10)
    expect(await store.update('we_A', (r) => ({ ...r, description: 'one' }))).toEqual(endpoint('we_A', { description: 'one' }))
    expect(await store.update('we_A', () => undefined)).toEqual(endpoint('we_A', { description: 'one' }))
    let calls = 0
    const after = await store.update('we_A', (r) => {
      calls += 1
      // Someone else writes the record while the first change is made.
      if (calls === 1) void redis.hset(`${store.keysOf('we_A').ep}`, 'we_A', JSON.stringify({ ...r, url: 'https://hooks.example.com/moved' }))
      return { ...r, description: `${r.description ?? ''}+` }
    })
    expect(calls).toBe(2)
    expect(after).toEqual(endpoint('we_A', { description: 'one+', url: 'https://hooks.example.com/moved' }))
    expect(await store.get('we_A')).toEqual(after)
    expect(await store.update('we_Z', (r) => r)).toBeUndefined()
  })

  it('gives up a change after 20 tries under a storm of writes', async () => {
    const { store } = fresh()
    await store.create(endpoint('we_A'), 10)
    let calls = 0
    await expect(store.update('we_A', (r) => {
      calls += 1
      void redis.hset(store.keysOf('we_A').ep, 'we_A', JSON.stringify({ ...r, description: String(calls) }))
      return { ...r, url: 'https://hooks.example.com/never' }
    })).rejects.toThrow('webhook endpoint we_A changed 20 times while one change was made')
    expect(calls).toBe(20)
  })

  it('keeps the last 1,000 attempts of an endpoint that exists, newest first, and shows those of the last 7 days', async () => {
    const { store, base } = fresh()
    await store.create(endpoint('we_A'), 10)
    await store.recordAttempt('we_Z', attempt(0, T0))
    expect(await redis.exists(`${base}att:we_Z`)).toBe(0)
    await store.recordAttempt('we_A', attempt(1, T0 - 7 * DAY - 1))
    await store.recordAttempt('we_A', attempt(2, T0 - 7 * DAY))
    await store.recordAttempt('we_A', attempt(3, T0))
    expect(await store.attempts('we_A', T0)).toEqual([attempt(3, T0), attempt(2, T0 - 7 * DAY)])
    const ttl = await redis.pttl(`${base}att:we_A`)
    expect(ttl).toBeGreaterThan(7 * DAY - 60_000)
    expect(ttl).toBeLessThanOrEqual(7 * DAY)
    const pipeline = redis.pipeline()
    for (let n = 4; n <= 1001; n += 1) pipeline.lpush(`${base}att:we_A`, JSON.stringify(attempt(n, T0)))
    await pipeline.exec()
    await store.recordAttempt('we_A', attempt(1002, T0))
    expect(await redis.llen(`${base}att:we_A`)).toBe(1000)
    expect(JSON.parse(await redis.lindex(`${base}att:we_A`, 999) as string)).toEqual(attempt(3, T0))
  })

  it('deletes an endpoint and all it has, naming the deliveries asleep behind it', async () => {
    const { store, base } = fresh()
    const a = endpoint('we_A')
    await store.create(a, 10)
    await store.create(endpoint('we_B'), 10)
    await store.recordAttempt('we_A', attempt(1, T0))
    await store.acquire('we_A', 'job1', T0, T0 + 1000, 1, 1, 60_000)
    await store.acquire('we_A', 'job2', T0, T0 + 1000, 1, 2, 60_000)
    await store.admitManual('we_A', ['job3'], 5, T0, 60_000)
    expect(await store.remove(a)).toEqual(['job2'])
    expect(await store.get('we_A')).toBeUndefined()
    expect((await keysUnder(redis, base)).sort()).toEqual([`${base}cred:key_1`, `${base}ep`, `${base}part:acme:live`])
    expect(await store.list('key_1')).toEqual([endpoint('we_B')])
  })

  it('deletes every endpoint of a credential, and the index with ids left without a record', async () => {
    const { store, base } = fresh()
    await store.create(endpoint('we_A'), 10)
    await store.create(endpoint('we_B'), 10)
    await store.create(endpoint('we_C', { credentialId: 'key_2' }), 10)
    await store.acquire('we_B', 'job1', T0, T0 + 1000, 1, 1, 60_000)
    await store.acquire('we_B', 'job2', T0, T0 + 1000, 1, 2, 60_000)
    await redis.zadd(`${base}cred:key_1`, 5, 'we_GONE')
    expect(await store.removeAllOf('key_1')).toEqual(['job2'])
    expect(await redis.exists(`${base}cred:key_1`)).toBe(0)
    expect((await store.all()).map((r) => r.id)).toEqual(['we_C'])
  })
})

describe('the leases of an endpoint', () => {
  it('gives at most `limit` leases, parks the rest oldest first, and hands a freed lease to the oldest asleep', async () => {
    const { store, base } = fresh()
    const until = T0 + 30_000
    expect(await store.acquire('we_A', 'j1', T0, until, 2, 10, 60_000)).toEqual({ taken: true, woken: [] })
    expect(await store.acquire('we_A', 'j2', T0, until, 2, 11, 60_000)).toEqual({ taken: true, woken: [] })
    expect(await store.acquire('we_A', 'j3', T0, until, 2, 13, 60_000)).toEqual({ taken: false, woken: [] })
    expect(await store.acquire('we_A', 'j4', T0, until, 2, 12, 60_000)).toEqual({ taken: false, woken: [] })
    // Parked again, it keeps its first place.
    expect(await store.acquire('we_A', 'j4', T0, until, 2, 99, 60_000)).toEqual({ taken: false, woken: [] })
    const parkTtl = await redis.pttl(`${base}park:we_A`)
    expect(parkTtl).toBeGreaterThan(50_000)
    expect(parkTtl).toBeLessThanOrEqual(60_000)
    // A holder asks again: it has its lease.
    expect(await store.acquire('we_A', 'j1', T0, until, 2, 10, 60_000)).toEqual({ taken: true, woken: [] })
    expect(await store.holds('we_A', 'j1')).toBe(true)
    expect(await store.holds('we_A', 'j4')).toBe(false)
    expect(await store.release('we_A', 'j1', T0, until + 5, 2)).toEqual(['j4'])
    expect(await store.holds('we_A', 'j4')).toBe(true)
    expect(await redis.zscore(`${base}slot:we_A`, 'j4')).toBe(String(until + 5))
    expect(await redis.pexpiretime(`${base}slot:we_A`)).toBe(until + 5)
    // The one woken takes the lease handed to it, even with every lease taken.
    expect(await store.acquire('we_A', 'j4', T0, until + 10, 2, 12, 60_000)).toEqual({ taken: true, woken: [] })
    expect(await store.release('we_A', 'j9', T0, until, 2)).toEqual([])
    expect(await redis.zrange(`${base}park:we_A`, '0', '-1', 'WITHSCORES')).toEqual(['j3', '13'])
  })

  it('takes a lease with the endpoint as it is then, as acquire does: the record with the lease, nothing when parked, none when gone', async () => {
    const { store } = fresh()
    const record = endpoint('we_A')
    await store.create(record, 10)
    const until = T0 + 30_000
    expect(await store.take('we_A', 'j1', T0, until, 1, 10, 60_000)).toEqual({ taken: true, woken: [], record })
    expect(await store.take('we_A', 'j2', T0, until, 1, 11, 60_000)).toEqual({ taken: false, woken: [] })
    expect(await store.take('we_A', 'j3', T0, until, 1, 12, 60_000)).toEqual({ taken: false, woken: [] })
    // A lapsed lease taken back hands the other free ones on: those woken follow the record.
    expect(await store.take('we_A', 'j1', until + 1, until + 30_000, 3, 10, 60_000)).toEqual({ taken: true, woken: ['j2', 'j3'], record })
    expect(await store.take('we_Z', 'j9', T0, until, 1, 13, 60_000)).toEqual({ taken: true, woken: [] })
  })

  it('takes the record as it is now after a change, not the one it read before', async () => {
    const { store } = fresh()
    await store.create(endpoint('we_A'), 10)
    const until = T0 + 30_000
    expect(await store.take('we_A', 'j1', T0, until, 5, 10, 60_000)).toEqual({ taken: true, woken: [], record: endpoint('we_A') })
    await store.update('we_A', (record) => ({ ...record, failingSince: T0 }))
    expect(await store.take('we_A', 'j2', T0, until, 5, 11, 60_000)).toEqual({ taken: true, woken: [], record: endpoint('we_A', { failingSince: T0 }) })
    await store.update('we_A', (record) => ({ ...record, failingSince: null }))
    expect(await store.take('we_A', 'j3', T0, until, 5, 12, 60_000)).toEqual({ taken: true, woken: [], record: endpoint('we_A') })
  })

  it('takes back a lapsed lease: a new attempt takes it, and its parked deliveries get it', async () => {
    const { store, base } = fresh()
    await store.acquire('we_A', 'j1', T0, T0 + 1000, 1, 1, 60_000)
    await store.acquire('we_A', 'j2', T0, T0 + 1000, 1, 2, 60_000)
    await store.acquire('we_A', 'j3', T0, T0 + 1000, 1, 3, 60_000)
    // At the lease's end, it still holds.
    expect(await store.acquire('we_A', 'j4', T0 + 999, T0 + 5000, 1, 4, 60_000)).toEqual({ taken: false, woken: [] })
    // Past it, the lease lapsed: j5 takes it, and hands none (one lease).
    expect(await store.acquire('we_A', 'j5', T0 + 1000, T0 + 5000, 1, 0, 60_000)).toEqual({ taken: true, woken: [] })
    expect(await store.holds('we_A', 'j1')).toBe(false)
    // j5's lease lapses; j6 releases nothing of its own, and the oldest parked gets the lease.
    expect(await store.release('we_A', 'j6', T0 + 5000, T0 + 9000, 1)).toEqual(['j2'])
    // With two leases, one acquire hands the other to the oldest parked.
    expect(await store.acquire('we_A', 'j7', T0 + 8000, T0 + 20_000, 3, 7, 60_000)).toEqual({ taken: true, woken: ['j3'] })
    expect(await redis.zrange(`${base}slot:we_A`, '0', '-1')).toEqual(['j2', 'j3', 'j7'])
    expect(await redis.pexpiretime(`${base}slot:we_A`)).toBe(T0 + 20_000)
    expect(await redis.zrange(`${base}park:we_A`, '0', '-1')).toEqual(['j4'])
  })
})

describe('the bound of deliveries a partner asked for', () => {
  it('admits the first ids while fewer than the bound are outstanding, forgets a finished one or one too old, and refuses a gone endpoint', async () => {
    const { store, base } = fresh()
    await store.create(endpoint('we_A'), 10)
    expect(await store.admitManual('we_A', [], 2, T0, 60_000)).toBe(0)
    expect(await store.admitManual('we_A', ['m1', 'm2', 'm3'], 2, T0, 60_000)).toBe(2)
    expect(await redis.zrange(`${base}manual:we_A`, '0', '-1')).toEqual(['m1', 'm2'])
    const ttl = await redis.pttl(`${base}manual:we_A`)
    expect(ttl).toBeGreaterThan(50_000)
    expect(ttl).toBeLessThanOrEqual(60_000)
    expect(await store.admitManual('we_A', ['m3'], 2, T0 + 1, 60_000)).toBe(0)
    await store.finishManual('we_A', 'm1')
    expect(await store.admitManual('we_A', ['m3', 'm4'], 2, T0 + 2, 60_000)).toBe(1)
    // m2 was admitted at T0: forgotten once 60 s have passed since.
    expect(await store.admitManual('we_A', ['m5'], 2, T0 + 59_999, 60_000)).toBe(0)
    expect(await store.admitManual('we_A', ['m5', 'm6'], 2, T0 + 60_000, 60_000)).toBe(1)
    expect(await redis.zrange(`${base}manual:we_A`, '0', '-1', 'WITHSCORES')).toEqual(['m3', String(T0 + 2), 'm5', String(T0 + 60_000)])
    expect(await store.admitManual('we_Z', ['m1'], 2, T0, 60_000)).toBe(-1)
  })
})

describe('sealing again under a new key', () => {
  it('seals under the current key every secret a previous key sealed, and names the endpoints with a live secret no key opens', async () => {
    const { store } = fresh()
    const old = new SecretBox('old'.repeat(11))
    const box = new SecretBox('new'.repeat(11), ['old'.repeat(11)])
    const lost = new SecretBox('lost'.repeat(8))
    const seal = (b: SecretBox, id: string, text: string) => b.seal(Buffer.from(text), secretContext(id))
    await store.create(endpoint('we_A', { secrets: [{ sealed: seal(box, 'we_A', 'a'), expiresAt: null }] }), 10)
    await store.create(endpoint('we_B', { secrets: [{ sealed: seal(old, 'we_B', 'b'), expiresAt: null }, { sealed: seal(lost, 'we_B', 'x'), expiresAt: Date.now() - 1 }] }), 10)
    await store.create(endpoint('we_C', { secrets: [{ sealed: seal(box, 'we_C', 'c'), expiresAt: null }, { sealed: seal(lost, 'we_C', 'y'), expiresAt: Date.now() + DAY }] }), 10)
    expect(await resealAll(store, box)).toEqual({ resealed: 1, current: 2, unreadable: ['we_C'] })
    const b = await store.get('we_B')
    expect(box.open(b?.secrets[0]?.sealed as string, secretContext('we_B'))).toEqual({ plain: Buffer.from('b'), current: true })
    expect(await resealAll(store, box)).toEqual({ resealed: 0, current: 3, unreadable: ['we_C'] })
  })
})

describe('the reseal tool', () => {
  it('seals every secret under WEBHOOKS_SECRET_KEY, says how many, and names the endpoints no key opens', async () => {
    const { store, ns } = fresh()
    const oldKey = 'old'.repeat(11)
    const newKey = 'new'.repeat(11)
    await store.create(endpoint('we_A', { secrets: [{ sealed: new SecretBox(oldKey).seal(Buffer.from('a'), secretContext('we_A')), expiresAt: null }] }), 10)
    await store.create(endpoint('we_B', { secrets: [{ sealed: new SecretBox(newKey).seal(Buffer.from('b'), secretContext('we_B')), expiresAt: null }] }), 10)
    const env = { CONFIG_FILE: 'config/default.json', REDIS_URL, REDIS_PREFIX: ns }
    const run = async (argv: string[], extra: Record<string, string>): Promise<{ code: number; out: string[]; err: string[] }> => {
      const out: string[] = []
      const err: string[] = []
      const code = await runWebhookTool(argv, { ...env, ...extra }, { out: (l) => out.push(l), err: (l) => err.push(l) })
      return { code, out, err }
    }
    expect(await run(['reseal'], { WEBHOOKS_SECRET_KEY: newKey, WEBHOOKS_SECRET_KEY_PREVIOUS: oldKey }))
      .toEqual({ code: 0, out: ['sealed again under WEBHOOKS_SECRET_KEY: 1 endpoint(s); already under it: 1'], err: [] })
    expect(await run(['reseal'], { WEBHOOKS_SECRET_KEY: newKey })).toEqual({ code: 0, out: ['sealed again under WEBHOOKS_SECRET_KEY: 0 endpoint(s); already under it: 2'], err: [] })
    const lost = await run(['reseal'], { WEBHOOKS_SECRET_KEY: 'lost'.repeat(8) })
    expect(lost.code).toBe(1)
    expect(lost.out).toEqual(['sealed again under WEBHOOKS_SECRET_KEY: 0 endpoint(s); already under it: 2'])
    expect(lost.err).toHaveLength(1)
    expect(lost.err[0]).toMatch(/^no configured key opens a signing secret of 2 endpoint\(s\): we_[AB], we_[AB]; add the key they were sealed under to WEBHOOKS_SECRET_KEY_PREVIOUS, or have their partners rotate their secrets$/)
    expect(await run(['reseal'], {})).toEqual({ code: 2, out: [], err: ['environment WEBHOOKS_SECRET_KEY: required (the key to seal under), with WEBHOOKS_SECRET_KEY_PREVIOUS naming the keys to open with'] })
    for (const argv of [[], ['reseal', 'now'], ['rotate']]) expect(await run(argv, { WEBHOOKS_SECRET_KEY: newKey })).toEqual({ code: 2, out: [], err: ['usage: npm run webhooks -- reseal'] })
    const bad = await run(['reseal'], { WEBHOOKS_SECRET_KEY: 'short' })
    expect(bad.code).toBe(2)
    expect(bad.out).toEqual([])
    expect(bad.err).toHaveLength(1)
    expect(bad.err[0]).toContain('WEBHOOKS_SECRET_KEY')
  })
})

/** A delivery queue that keeps what is added, and answers for the jobs a test says it holds. */
class RecordingQueue implements RecoveryQueue {
  added: { name: string; data: unknown; opts: unknown }[] = []
  jobs = new Map<string, { finishedOn?: number; returnvalue?: string }>()
  async addBulk(jobs: { name: string; data: unknown; opts: unknown }[]): Promise<unknown> {
    this.added.push(...jobs)
    return jobs
  }
  async getJob(id: string): Promise<never> {
    return this.jobs.get(id) as never
  }
}

/** `count` ULIDs from `from`, one a second. */
function events(count: number, from: number): string[] {
  const ulids = new UlidFactory()
  return Array.from({ length: count }, (_, i) => ulids.next(from + i * 1000).text)
}


/** Recovery wr_X of endpoint we_A over the day before T0, running, with `queued` events due. */
function runningView(queued: number): RecoveryView {
  return { id: 'wr_X', endpointId: 'we_A', since: new Date(T0 - DAY).toISOString(), until: new Date(T0).toISOString(), include: 'all', status: 'running', queued, delivered: 0, failed: 0, createdAt: new Date(T0).toISOString() }
}

describe('recoveries', () => {
  function setup(over: { concurrency?: number; maxManual?: number; maxEvents?: number } = {}) {
    const { store: endpoints, base } = fresh()
    const store = new RecoveryStore(redis, endpoints)
    const queue = new RecordingQueue()
    let now = T0
    const recoveries = new Recoveries({
      store, queue, jobOptions: (jobId) => ({ jobId, removeOnComplete: true }),
      settings: { endpointConcurrency: over.concurrency ?? 2, maxManualDeliveriesPerEndpoint: over.maxManual ?? 100, maxRecoveryEvents: over.maxEvents ?? 10, retentionMs: DAY },
      lifetimeMs: 60_000, logger: pino({ level: 'silent' }), now: () => now,
    })
    return { endpoints, store, queue, recoveries, base, at: (t: number) => { now = t } }
  }

  const all = { since: T0 - DAY, until: T0, include: 'all' as const }
  const failedOnly = { ...all, include: 'failed' as const }

  it('writes a delivered attempt and its event as received in one call, only while the endpoint exists, and answers its record', async () => {
    const { endpoints, store, base } = setup()
    const [e1, e2, e3] = events(3, T0 - 10_000) as [string, string, string]
    await store.recordDue([e1, e2, e3].map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    expect(await endpoints.recordDelivered('we_A', attempt(1, T0), store.received('we_A', e2, T0, DAY))).toEqual({ released: false, woken: [] })
    expect(await redis.exists(`${base}att:we_A`, `${base}ok:we_A`)).toBe(0)
    const record = endpoint('we_A', { failingSince: T0 - 5000 })
    await endpoints.create(record, 10)
    expect(await endpoints.recordDelivered('we_A', attempt(2, T0), store.received('we_A', e2, T0, DAY))).toEqual({ record, released: false, woken: [] })
    // A test event is in no log: its attempt is written, nothing is received.
    expect(await endpoints.recordDelivered('we_A', attempt(3, T0))).toEqual({ record, released: false, woken: [] })
    expect(await endpoints.attempts('we_A', T0)).toEqual([attempt(3, T0), attempt(2, T0)])
    expect(await store.select('we_A', { since: T0 - DAY, until: T0, include: 'failed' }, 10)).toEqual([e1, e3])
    const ttl = await redis.pttl(`${base}ok:we_A`)
    expect(ttl).toBeGreaterThan(DAY - 60_000)
    expect(ttl).toBeLessThanOrEqual(DAY)
    // What is past the retention goes when the next one is written.
    await endpoints.recordDelivered('we_A', attempt(4, T0 + DAY), store.received('we_A', e3, T0 + DAY - 8500, DAY))
    expect(await redis.zrange(`${base}ok:we_A`, '0', '-1')).toEqual([e3])
  })

  it('frees the lease with a delivered attempt when the endpoint was not failing, handing it on; keeps it when it was', async () => {
    const { endpoints, base } = setup()
    const until = T0 + 30_000
    await endpoints.create(endpoint('we_A'), 10)
    await endpoints.create(endpoint('we_B', { failingSince: T0 - 5000 }), 10)
    for (const id of ['we_A', 'we_B']) {
      await endpoints.acquire(id, 'j1', T0, until, 1, 1, 60_000)
      await endpoints.acquire(id, 'j2', T0, until, 1, 2, 60_000)
    }
    const lease = { holder: 'j1', now: T0 + 10, until: until + 5, limit: 1 }
    expect(await endpoints.recordDelivered('we_A', attempt(1, T0), undefined, lease)).toEqual({ released: true, woken: ['j2'] })
    expect(await redis.zrange(`${base}slot:we_A`, '0', '-1', 'WITHSCORES')).toEqual(['j2', String(until + 5)])
    expect(await redis.pexpiretime(`${base}slot:we_A`)).toBe(until + 5)
    // Failing: its bookkeeping is to be written first, so the lease is freed after it (`release`).
    expect(await endpoints.recordDelivered('we_B', attempt(1, T0), undefined, lease)).toEqual({ record: endpoint('we_B', { failingSince: T0 - 5000 }), released: false, woken: [] })
    expect(await endpoints.holds('we_B', 'j1')).toBe(true)
  })

  it('chooses the events of the range the endpoint was due: all, or those it did not receive, oldest first; none past the bound', async () => {
    const { store, base } = setup()
    const [e1, e2, e3, e4] = events(4, T0 - 10_000) as [string, string, string, string]
    await store.recordDue([{ endpointId: 'we_A', ulid: e3 }, { endpointId: 'we_A', ulid: e1 }, { endpointId: 'we_B', ulid: e2 }, { endpointId: 'we_A', ulid: e4 }], T0, DAY)
    await store.recordDue([], T0, DAY)
    await store.recordDelivered('we_A', e3, T0, DAY)
    expect(await store.select('we_A', all, 10)).toEqual([e1, e3, e4])
    expect(await store.select('we_A', failedOnly, 10)).toEqual([e1, e4])
    expect(await store.select('we_A', { ...all, since: T0 - 9000, until: T0 - 7001 }, 10)).toEqual([e3])
    expect(await store.select('we_A', { ...all, since: T0 - 8000, until: T0 - 7000 }, 10)).toEqual([e3, e4])
    expect(await store.select('we_A', all, 3)).toEqual([e1, e3, e4])
    expect(await store.select('we_A', all, 2)).toBeUndefined()
    expect(await store.select('we_A', failedOnly, 2)).toEqual([e1, e4])
    expect(await store.select('we_A', failedOnly, 1)).toBeUndefined()
    expect(await store.select('we_C', all, 0)).toEqual([])
    const ttl = await redis.pttl(`${base}due:we_A`)
    expect(ttl).toBeGreaterThan(DAY - 60_000)
    expect(ttl).toBeLessThanOrEqual(DAY)
    // What is past the retention goes when the next is written.
    const [late] = events(1, T0 + DAY - 5000)
    await store.recordDue([{ endpointId: 'we_A', ulid: late as string }], T0 + DAY - 9000, DAY)
    expect(await redis.zrange(`${base}due:we_A`, '0', '-1')).toEqual([e3, e4, late])
    await store.recordDelivered('we_A', late as string, T0 + DAY, DAY)
    expect(await redis.zrange(`${base}ok:we_A`, '0', '-1')).toEqual([late])
  })

  it('chooses across more events than one read holds', async () => {
    const { store } = setup()
    const many = events(2500, T0 - 3_000_000)
    await store.recordDue(many.map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    await store.recordDelivered('we_A', many[1500] as string, T0, DAY)
    const chosen = await store.select('we_A', { ...failedOnly, since: 0 }, 10_000)
    expect(chosen).toEqual(many.filter((_, i) => i !== 1500))
    expect(await store.select('we_A', { ...failedOnly, since: 0 }, 2000)).toBeUndefined()
  })

  it('starts a recovery, feeds the queue one delivery per lease, counts each as it finishes, and is done after the last', async () => {
    const { endpoints, store, queue, recoveries, base, at } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    const due = events(3, T0 - 10_000)
    await store.recordDue(due.map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    at(T0 + 5)
    const started = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all)
    expect(started.kind).toBe('started')
    const view = (started as { recovery: RecoveryView }).recovery
    expect(view.id).toMatch(/^wr_01XEF6B5G5[0-9A-HJKMNP-TV-Z]{16}$/)
    const expected: RecoveryView = { id: view.id, endpointId: 'we_A', since: '2036-11-27T12:00:00.000Z', until: '2036-11-28T12:00:00.000Z', include: 'all', status: 'running', queued: 3, delivered: 0, failed: 0, createdAt: '2036-11-28T12:00:00.005Z' }
    expect(view).toEqual(expected)
    const job = (ulid: string) => `r.${view.id.slice(3)}.${ulid}`
    const data = (ulid: string) => ({ ulid, brand: 'acme', mode: 'live', endpointId: 'we_A', kind: 'recovery', recoveryId: view.id })
    expect(queue.added).toEqual(due.slice(0, 2).map((ulid) => ({ name: 'recovery', data: data(ulid), opts: { jobId: job(ulid), removeOnComplete: true, attempts: 1 } })))
    expect(await redis.zrange(`${base}manual:we_A`, '0', '-1')).toEqual(due.slice(0, 2).map(job).sort())
    expect(await store.runningOf('we_A')).toBe(view.id)
    expect(await store.live(view.id, job(due[0] as string))).toBe(true)
    expect(await store.live(view.id, job(due[2] as string))).toBe(false)
    expect(await recoveries.live({}, job(due[0] as string))).toBe(false)
    expect(await recoveries.live({ recoveryId: view.id }, job(due[0] as string))).toBe(true)
    expect(await store.allRunning()).toEqual([{ id: view.id, endpointId: 'we_A' }])
    expect(await store.brandMode(view.id)).toEqual({ brand: 'acme', mode: 'live' })
    // A second recovery waits for this one.
    expect(await store.create({ ...expected, id: 'wr_OTHER' }, 'acme', 'live', due, T0)).toEqual({ kind: 'running', id: view.id })
    expect(await redis.exists(`${base}wrq:wr_OTHER`)).toBe(0)

    await recoveries.finished({ endpointId: 'we_A', recoveryId: view.id }, job(due[0] as string), 'delivered', false)
    expect(queue.added.map((j) => (j.data as { ulid: string }).ulid)).toEqual(due)
    // Counted once.
    await recoveries.finished({ endpointId: 'we_A', recoveryId: view.id }, job(due[0] as string), 'delivered', false)
    await recoveries.finished({ endpointId: 'we_A' }, job(due[1] as string), 'delivered', false)
    await recoveries.finished({ endpointId: 'we_A', recoveryId: view.id }, job(due[1] as string), 'failed', false)
    expect(await store.get('we_A', view.id)).toEqual({ ...expected, delivered: 1, failed: 1 })
    await recoveries.finished({ endpointId: 'we_A', recoveryId: view.id }, job(due[2] as string), undefined, true)
    expect(await store.get('we_A', view.id)).toEqual({ ...expected, status: 'done', delivered: 1, failed: 1 })
    expect(await store.runningOf('we_A')).toBeUndefined()
    expect(await store.allRunning()).toEqual([])
    expect(await redis.exists(`${base}wrq:${view.id}`)).toBe(0)
    const ttl = await redis.pttl(`${base}wr:${view.id}`)
    expect(ttl).toBeGreaterThan(7 * DAY - 60_000)
    expect(ttl).toBeLessThanOrEqual(7 * DAY)
    expect(await store.get('we_B', view.id)).toBeUndefined()
    expect(await store.list('we_A', T0)).toEqual([{ ...expected, status: 'done', delivered: 1, failed: 1 }])
    expect(queue.added).toHaveLength(3)
  })

  it('is done at once with no event to send; refused for an endpoint gone, or more events than it may send', async () => {
    const { endpoints, store, queue, recoveries } = setup({ maxEvents: 1 })
    await endpoints.create(endpoint('we_A'), 10)
    const started = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all)
    expect(started).toMatchObject({ kind: 'started', recovery: { status: 'done', queued: 0 } })
    expect(await store.runningOf('we_A')).toBeUndefined()
    expect(await store.allRunning()).toEqual([])
    expect(queue.added).toEqual([])
    await store.recordDue(events(2, T0 - 5000).map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    expect(await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all)).toEqual({ kind: 'too many' })
    await store.recordDue(events(1, T0 - 5000).map((ulid) => ({ endpointId: 'we_GONE', ulid })), T0, DAY)
    expect(await recoveries.start({ id: 'we_GONE', brand: 'acme', mode: 'live' }, all)).toEqual({ kind: 'gone' })
    expect(await store.brandMode('wr_NONE')).toBeUndefined()
  })

  it('feeds no more than the endpoint\'s bound of deliveries asked for leaves room for', async () => {
    const { endpoints, store, queue, recoveries, base } = setup({ concurrency: 4, maxManual: 3 })
    await endpoints.create(endpoint('we_A'), 10)
    await endpoints.admitManual('we_A', ['test1', 'test2'], 3, T0, 60_000)
    const due = events(5, T0 - 10_000)
    await store.recordDue(due.map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    const started = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all) as { recovery: RecoveryView }
    expect(queue.added).toHaveLength(1)
    await endpoints.finishManual('we_A', 'test1')
    await endpoints.finishManual('we_A', 'test2')
    await recoveries.feed('we_A', started.recovery.id)
    expect(queue.added.map((j) => (j.data as { ulid: string }).ulid)).toEqual(due.slice(0, 3))
    expect(await redis.hget(`${base}wr:${started.recovery.id}`, 'cursor')).toBe('3')
  })

  it('cancels a running recovery: its deliveries leave the bound, it ends, and cancelling again does nothing', async () => {
    const { endpoints, store, queue, recoveries, base } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    await endpoints.admitManual('we_A', ['test1'], 100, T0, 60_000)
    await store.recordDue(events(3, T0 - 10_000).map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    const { recovery } = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all) as { recovery: RecoveryView }
    expect(await store.cancel('we_A', recovery.id)).toBe(true)
    expect(await redis.zrange(`${base}manual:we_A`, '0', '-1')).toEqual(['test1'])
    expect(await store.get('we_A', recovery.id)).toEqual({ ...recovery, status: 'cancelled' })
    expect(await store.runningOf('we_A')).toBeUndefined()
    expect(await store.allRunning()).toEqual([])
    expect(await store.cancel('we_A', recovery.id)).toBe(false)
    // Its deliveries still queued end unsent.
    expect(await store.live(recovery.id, `r.${recovery.id.slice(3)}.x`)).toBe(false)
    await recoveries.feed('we_A', recovery.id)
    expect(queue.added).toHaveLength(2)
  })

  it('keeps the deliveries a recovery queued as long as the recovery, running or cancelled', async () => {
    const { endpoints, store, recoveries, base } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    await store.recordDue(events(3, T0 - 10_000).map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    const { recovery } = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all) as { recovery: RecoveryView }
    const queued = `${base}wrl:${recovery.id}`
    expect(await redis.zcard(queued)).toBe(2)
    // When each expires (epoch ms; the scripts copy the record's expiry to the list, so equal): the list with the recovery.
    const expiry = async (key: string): Promise<number> => redis.pexpiretime(key)
    const running = await expiry(`${base}wr:${recovery.id}`)
    expect(running).toBeGreaterThan(Date.now())
    expect(await expiry(queued)).toBe(running)
    // Cancelled with two deliveries never counted: the list goes when the cancelled recovery is no
    // longer shown, which the cancel set anew.
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(await store.cancel('we_A', recovery.id)).toBe(true)
    expect(await redis.zcard(queued)).toBe(2)
    const cancelled = await expiry(`${base}wr:${recovery.id}`)
    expect(cancelled).toBeGreaterThan(running)
    expect(await expiry(queued)).toBe(cancelled)
  })

  it('stops listing for the sweep a running recovery whose record expired', async () => {
    const { endpoints, store, recoveries, base } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    await endpoints.create(endpoint('we_B'), 10)
    for (const id of ['we_A', 'we_B']) await store.recordDue(events(3, T0 - 10_000).map((ulid) => ({ endpointId: id, ulid })), T0, DAY)
    const { recovery: a } = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all) as { recovery: RecoveryView }
    const { recovery: b } = await recoveries.start({ id: 'we_B', brand: 'acme', mode: 'live' }, all) as { recovery: RecoveryView }
    expect(new Set(await store.allRunning())).toEqual(new Set([{ id: a.id, endpointId: 'we_A' }, { id: b.id, endpointId: 'we_B' }]))
    // As when its time ran out with no instance to end it.
    await redis.del(`${base}wr:${a.id}`)
    expect(await store.allRunning()).toEqual([{ id: b.id, endpointId: 'we_B' }])
    expect(await redis.zrange(`${base}wrrunning`, '0', '-1')).toEqual([b.id])
  })

  it('ends unsent a delivery a cancelled recovery had already claimed and queued', async () => {
    const { endpoints, store, queue, recoveries } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    await store.recordDue(events(3, T0 - 10_000).map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    const { recovery } = await recoveries.start({ id: 'we_A', brand: 'acme', mode: 'live' }, all) as { recovery: RecoveryView }
    const claimed = (queue.added[0]?.opts as { jobId: string }).jobId
    expect(await recoveries.live({ recoveryId: recovery.id }, claimed)).toBe(true)
    await store.cancel('we_A', recovery.id)
    // Claimed and still uncounted, yet the recovery no longer runs: its delivery is not to be made.
    expect(await store.live(recovery.id, claimed)).toBe(false)
    expect(await recoveries.live({ recoveryId: recovery.id }, claimed)).toBe(false)
  })

  it('lists the recoveries of the last 7 days, newest first, and deletes all of an endpoint\'s', async () => {
    const { endpoints, store, base } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    const view = (id: string, createdAt: number): RecoveryView => ({
      id, endpointId: 'we_A', since: new Date(T0 - DAY).toISOString(), until: new Date(T0).toISOString(), include: 'failed', status: 'done', queued: 0, delivered: 0, failed: 0, createdAt: new Date(createdAt).toISOString(),
    })
    await store.create(view('wr_OLD', T0 - 7 * DAY - 1), 'acme', 'live', [], T0 - 7 * DAY - 1)
    await store.create(view('wr_EDGE', T0 - 7 * DAY), 'acme', 'live', [], T0 - 7 * DAY)
    await store.create(view('wr_NEW', T0), 'acme', 'live', [], T0)
    expect(await store.list('we_A', T0)).toEqual([view('wr_NEW', T0), view('wr_EDGE', T0 - 7 * DAY)])
    expect(await store.list('we_B', T0)).toEqual([])
    const due = events(2, T0 - 5000)
    await store.recordDue(due.map((ulid) => ({ endpointId: 'we_A', ulid })), T0, DAY)
    await store.recordDelivered('we_A', due[0] as string, T0, DAY)
    const running = await store.create({ ...view('wr_RUN', T0), status: 'running', queued: 2 }, 'acme', 'live', due, T0)
    expect(running.kind).toBe('started')
    await store.claim('we_A', 'wr_RUN', T0, 1, 100, 60_000)
    await store.removeAllOf('we_A')
    expect((await keysUnder(redis, base)).sort()).toEqual([`${base}cred:key_1`, `${base}ep`, `${base}manual:we_A`, `${base}part:acme:live`, `${base}wr:wr_OLD`])
    expect(await store.allRunning()).toEqual([])
  })

  it('lists every recovery of the last 7 days, however many, newest first', async () => {
    const { endpoints, store } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    const view = (id: string, createdAt: number): RecoveryView => ({
      id, endpointId: 'we_A', since: new Date(T0 - DAY).toISOString(), until: new Date(T0).toISOString(), include: 'all', status: 'done', queued: 0, delivered: 0, failed: 0, createdAt: new Date(createdAt).toISOString(),
    })
    const made = [view('wr_1', T0 - 3 * DAY), view('wr_2', T0 - 2 * DAY), view('wr_3', T0 - DAY), view('wr_4', T0)]
    for (const v of made) await store.create(v, 'acme', 'live', [], Date.parse(v.createdAt))
    expect(await store.list('we_A', T0)).toEqual([...made].reverse())
  })

  it('claims nothing for a recovery that is not running, of an endpoint gone, or with no room', async () => {
    const { endpoints, store } = setup()
    await endpoints.create(endpoint('we_A'), 10)
    const due = events(2, T0 - 5000)
    const view = runningView(2)
    await store.create(view, 'globex', 'test', due, T0)
    expect(await store.claim('we_B', 'wr_X', T0, 2, 100, 60_000)).toBeUndefined()
    expect(await store.claim('we_A', 'wr_NONE', T0, 2, 100, 60_000)).toBeUndefined()
    expect(await store.claim('we_A', 'wr_X', T0, 0, 100, 60_000)).toBeUndefined()
    expect(await store.claim('we_A', 'wr_X', T0, 2, 0, 60_000)).toBeUndefined()
    expect(await store.claim('we_A', 'wr_X', T0, 1, 100, 60_000)).toEqual({ brand: 'globex', mode: 'test', jobIds: [`r.X.${due[0] as string}`] })
    // The window is full: one queued and not yet counted.
    expect(await store.claim('we_A', 'wr_X', T0, 1, 100, 60_000)).toBeUndefined()
    expect(await store.claim('we_A', 'wr_X', T0, 5, 100, 60_000)).toEqual({ brand: 'globex', mode: 'test', jobIds: [`r.X.${due[1] as string}`] })
    // Every event claimed.
    expect(await store.claim('we_A', 'wr_X', T0, 5, 100, 60_000)).toBeUndefined()
    expect(await store.queuedBefore('wr_X', T0)).toEqual([])
    expect(await store.queuedBefore('wr_X', T0 + 1)).toEqual([`r.X.${due[0] as string}`, `r.X.${due[1] as string}`])
  })

  it('repairs what a dead instance left: a delivery claimed but never queued, one finished but never counted, a feed not made', async () => {
    const { endpoints, store, queue, recoveries, at } = setup({ concurrency: 3 })
    await endpoints.create(endpoint('we_A'), 10)
    const due = events(4, T0 - 10_000)
    const view = runningView(4)
    await store.create(view, 'acme', 'live', due, T0)
    // Claimed by an instance that died before queuing them.
    const claimed = await store.claim('we_A', 'wr_X', T0, 2, 100, 60_000)
    const [lost, finished] = claimed?.jobIds as [string, string]
    queue.jobs.set(finished, { finishedOn: T0 + 10, returnvalue: 'delivered' })
    at(T0 + REPAIR_AFTER_MS)
    await recoveries.sweep()
    // Not old enough yet: only the feed is made (one more, the window being 3).
    expect(queue.added.map((j) => j.opts)).toEqual([{ jobId: `r.X.${due[2] as string}`, removeOnComplete: true, attempts: 1 }])
    at(T0 + REPAIR_AFTER_MS + 1)
    await recoveries.sweep()
    expect(queue.added.map((j) => (j.opts as { jobId: string }).jobId)).toEqual([`r.X.${due[2] as string}`, lost, `r.X.${due[3] as string}`])
    expect(await store.get('we_A', 'wr_X')).toEqual({ ...view, delivered: 1 })
  })

  it('leaves uncounted a delivery still waiting in the queue, however long after its claim', async () => {
    const { endpoints, store, queue, recoveries, at } = setup({ concurrency: 1 })
    await endpoints.create(endpoint('we_A'), 10)
    const due = events(2, T0 - 10_000)
    const view = runningView(2)
    await store.create(view, 'acme', 'live', due, T0)
    const claimed = await store.claim('we_A', 'wr_X', T0, 1, 100, 60_000)
    const [waiting] = claimed?.jobIds as [string]
    // In the queue, not yet run (a busy endpoint): no finishedOn.
    queue.jobs.set(waiting, {})
    at(T0 + REPAIR_AFTER_MS + 1)
    await recoveries.sweep()
    expect(await store.get('we_A', 'wr_X')).toEqual(view)
    expect(await store.live('wr_X', waiting)).toBe(true)
    // Neither queued again nor a next one fed in its place: the window of one is still taken.
    expect(queue.added).toEqual([])
  })
})
