import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { requestIdAt } from '../../src/http/request-id.js'
import { entryJson, storedEntry, storedEntryJson, type RequestLogRecord } from '../../src/request-log/entry.js'
import { indexLine, matchLine, type RequestLogFilters } from '../../src/request-log/filters.js'
import { LogLines, MINUTE_MS as MINUTE } from '../../src/request-log/batch.js'
import { logsByMinute, LOGS_PER_CALL, RequestLogStore, WRITE_SCRIPT, writeCalls, type LogText } from '../../src/request-log/store.js'
import { commandCalls, PrivateRedis, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The request log's store over real Redis, without a gateway: a batch goes as one argument
// per log that a script splits, so each entry must come back as it went, whatever its fields
// hold; and a page with filters is found by a script, which must pick what matchLine picks.

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
// Noon of today (UTC): the keys expire a retention after it by the real clock, so a fixed date
// would have them gone at once once the retention after it has passed.
const NOW = Math.floor(Date.now() / 86_400_000) * 86_400_000 + 12 * 3_600_000
const DAY = 86_400_000

afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
})

/** The test's name of each request id made by `rid`. */
const names = new Map<string, string>()

/** A request id as the gateway makes them (src/http/request-id.ts): the time in it `atMs`, the rest drawn from the test's name for it. */
function rid(name: string, atMs: number = NOW): string {
  const id = requestIdAt(atMs, createHash('sha256').update(name).digest('hex').slice(0, 20))
  names.set(id, name)
  return id
}

/** The test's name of a request id. */
const nameOf = (id: string): string => names.get(id) ?? id

function record(name: string, fields: Partial<RequestLogRecord> = {}): RequestLogRecord {
  const atMs = fields.atMs ?? NOW
  return {
    id: rid(name, atMs), atMs, credentialId: 'key_store', secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties', path: '/v1/properties',
    queryParameters: [], status: 200, code: null, durationMs: 1.5, cache: null, idempotencyKey: null, replayed: false, clientIp: '127.0.0.1', userAgent: 'x/1', traceId: null, ...fields,
  }
}

/** The entry as a reader sees it: every field, its time in ISO form. */
function seen(r: RequestLogRecord): Record<string, unknown> {
  const { atMs, id, ...rest } = r
  return { id, at: new Date(atMs).toISOString(), ...rest }
}

/** The test's names of a page's entries, in its order. */
const idsOf = (json: string): string[] => (JSON.parse(json) as { id: string }[]).map((e) => nameOf(e.id))

const ODD: RequestLogRecord[] = [
  record('req_plain'),
  record('req_quotes', { userAgent: 'say "hi" \\ back\\slash', path: '/v1/properties/"x"', queryParameters: ['a "b"', 'c\\d'] }),
  record('req_lines', { userAgent: 'line one\nline two\r\n\ttabbed \u0000 \u001f end', queryParameters: ['new\nline'] }),
  record('req_unicode', { userAgent: 'Zürich 東京 🚀 \u2028 \u2029', path: '/v1/properties/caf\u00e9', clientIp: '::ffff:203.0.113.7' }),
  record('req_surrogate', { userAgent: 'lone \ud800 high and \udc00 low', queryParameters: ['\ud83d'] }),
  record('req_spaces', { userAgent: '  spaced  out  ', path: '/v1/properties/a b', queryParameters: ['a b', ' '], secret: null, cache: 'hit', replayed: true,
    code: 'PROPERTY_NOT_FOUND', status: 404, idempotencyKey: 'k-1', traceId: '4bf92f3577b34da6a3ce929d0e0e4736', durationMs: 0, route: null }),
  record('req_empty', { path: '', clientIp: null, userAgent: null, durationMs: 1234.5, atMs: NOW - 1 }),
]

describe('an entry written by hand', () => {
  it('is the JSON the generic serialiser writes of it, whatever its strings hold', () => {
    for (const r of ODD) expect(entryJson(r)).toBe(JSON.stringify(seen(r)))
  })

  it('is made again whole from what Redis keeps of it, its credential and mode from the log', () => {
    for (const r of ODD) expect(storedEntryJson(storedEntry(r), r.credentialId, r.mode)).toBe(JSON.stringify(seen(r)))
    expect(storedEntryJson(storedEntry(record('req_test', { mode: 'test' })), 'key_store', 'test')).toBe(JSON.stringify(seen(record('req_test', { mode: 'test' }))))
  })
})

describe('a batch written as one argument per log', () => {
  it('comes back entry by entry as it went, for each credential and mode, and found by its request id', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 100 }, () => NOW)
    const others = [record('req_other_test', { mode: 'test' }), record('req_other_key', { credentialId: 'key_other', userAgent: 'ü\n"' })]
    await store.write([...ODD, ...others])
    for (const r of [...ODD, ...others]) {
      // Kept as storedEntry makes it, byte for byte: the script takes the line whole, without its line break.
      expect(await redis.zrangebyscore(`${prefix}reqlog:{${r.credentialId}}:${r.mode}:lines`, r.atMs, r.atMs)).toContain(storedEntry(r))
      const json = await store.get(r.credentialId, r.mode, r.id)
      expect(JSON.parse(json ?? 'null')).toEqual(seen(r))
      expect(JSON.parse(await store.find(r.id) ?? 'null')).toEqual(seen(r))
    }
    const page = await store.list('key_store', 'live', {}, 1, 50)
    expect(page.total).toBe(ODD.length)
    expect(idsOf(page.json).sort()).toEqual(ODD.map((r) => nameOf(r.id)).sort())
    expect(await store.get('key_store', 'test', rid('req_plain'))).toBeUndefined()
    expect(await store.get('key_other', 'live', rid('req_other_key'))).toBe(entryJson(others[1] as RequestLogRecord))
    // One export's chunk parses to what was written.
    const exported: unknown[] = []
    for await (const chunk of store.entries('key_store', 'live', undefined, NOW + 1)) exported.push(...chunk)
    expect(exported).toHaveLength(ODD.length)
    expect(exported).toContainEqual(seen(ODD[2] as RequestLogRecord))
  })

  it('reads an entry kept whole as JSON, as entries were kept before, as it is', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 100 }, () => NOW)
    const old = record('req_kept_whole', { credentialId: 'key_whole' })
    await redis.zadd(`${prefix}reqlog:{key_whole}:live:lines`, NOW, indexLine(old))
    await redis.hset(`${prefix}reqlog:{key_whole}:live:entries`, old.id, JSON.stringify(seen(old)))
    await store.write([record('req_after', { credentialId: 'key_whole', atMs: NOW + 1 })])
    expect(JSON.parse(await store.get('key_whole', 'live', old.id) ?? 'null')).toEqual(seen(old))
    const page = await store.list('key_whole', 'live', { status: { kind: 'exact', status: 200 } }, 1, 10)
    expect([page.total, JSON.parse(page.json)]).toEqual([2, [seen(record('req_after', { credentialId: 'key_whole', atMs: NOW + 1 })), seen(old)]])
  })

  it('reads a log kept in the layout before (index lines, a hash of entries) among entries written after it, and trims both', async () => {
    const store = new RequestLogStore(redis, `${prefix}before:`, { retentionDays: 1, maxPerCredential: 4 }, () => NOW)
    const lines = `${prefix}before:reqlog:{key_before}:live:lines`
    const entries = `${prefix}before:reqlog:{key_before}:live:entries`
    const day = `${prefix}before:reqlog:ids:${new Date(NOW).toISOString().slice(0, 10)}`
    // As the layout before wrote them: the index line the member, the entry in the hash, the
    // day's index without the arrival. One arrives between the two written after (an instance
    // of the version before still writing while a deploy replaces instances).
    const old = [record('req_before_gone', { credentialId: 'key_before', atMs: NOW - 86_400_001 }),
      ...Array.from({ length: 3 }, (_, i) => record(`req_before_${i}`, { credentialId: 'key_before', atMs: NOW - 30 + i, status: 404 + i })),
      record('req_before_late', { credentialId: 'key_before', atMs: NOW - 15, status: 500 })]
    for (const r of old) {
      await redis.zadd(lines, r.atMs, indexLine(r))
      await redis.hset(entries, r.id, storedEntry(r))
      await redis.hset(day, r.id, 'key_before live')
    }
    const [, before0, before1, before2, late] = old as [RequestLogRecord, RequestLogRecord, RequestLogRecord, RequestLogRecord, RequestLogRecord]
    expect(idsOf((await store.list('key_before', 'live', {}, 1, 10)).json)).toEqual(['req_before_late', 'req_before_2', 'req_before_1', 'req_before_0', 'req_before_gone'])
    const after = [record('req_after_0', { credentialId: 'key_before', atMs: NOW - 20, status: 404 }), record('req_after_1', { credentialId: 'key_before', atMs: NOW - 10 })] as [RequestLogRecord, RequestLogRecord]
    await store.write(after)
    // Past the retention and past the count: the oldest lines go, of either layout.
    const kept = [after[1], late, after[0], before2]
    const all = await store.list('key_before', 'live', {}, 1, 10)
    expect([all.total, JSON.parse(all.json)]).toEqual([4, kept.map(seen)])
    const notFound = await store.list('key_before', 'live', { status: { kind: 'exact', status: 404 } }, 1, 10)
    expect([notFound.total, JSON.parse(notFound.json)]).toEqual([1, [seen(after[0])]])
    const errors = await store.list('key_before', 'live', { status: { kind: 'errors' } }, 1, 10)
    expect([errors.total, JSON.parse(errors.json)]).toEqual([3, [late, after[0], before2].map(seen)])
    const errorsFrom2 = await store.list('key_before', 'live', { status: { kind: 'errors' } }, 2, 2)
    expect([errorsFrom2.total, idsOf(errorsFrom2.json)]).toEqual([3, ['req_before_2']])
    const exported: unknown[] = []
    for await (const chunk of store.entries('key_before', 'live', undefined, NOW)) exported.push(...chunk)
    expect(exported).toEqual(kept.map(seen))
    for (const r of kept) expect([await store.get('key_before', 'live', r.id), await store.find(r.id)], r.id).toEqual([entryJson(r), entryJson(r)])
    // An entry of the layout before goes with its line, from the hash too.
    expect((await redis.hkeys(entries)).map(nameOf).sort()).toEqual(['req_before_2', 'req_before_late'])
    expect([await store.get('key_before', 'live', before0.id), await store.get('key_before', 'live', before1.id), await store.get('key_before', 'live', (old[0] as RequestLogRecord).id)])
      .toEqual([undefined, undefined, undefined])
    // Another credential's entry, either layout, is not this one's.
    expect([await store.get('key_other', 'live', late.id), await store.get('key_other', 'live', after[1].id), await store.get('key_before', 'test', after[1].id)])
      .toEqual([undefined, undefined, undefined])
    // Once the last of them is trimmed, the hash is gone and the log is one key.
    await store.write(Array.from({ length: 4 }, (_, i) => record(`req_after_${2 + i}`, { credentialId: 'key_before', atMs: NOW - 5 + i })))
    expect([await redis.exists(entries), await redis.zcard(lines)]).toEqual([0, 4])
  })

  it('writes more entries of one log than one call of the script takes at once', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 2000 }, () => NOW)
    const many = Array.from({ length: 1200 }, (_, i) => record(`req_many_${i}`, { credentialId: 'key_many', atMs: NOW - 1200 + i }))
    await store.write(many)
    const page = await store.list('key_many', 'live', {}, 1, 3)
    expect([page.total, idsOf(page.json)]).toEqual([1200, ['req_many_1199', 'req_many_1198', 'req_many_1197']])
    expect(await store.find(rid('req_many_0', NOW - 1200))).toBe(entryJson(many[0] as RequestLogRecord))
  })
})

describe('the logs of a batch, written by one call', () => {
  it('trims each log to its own bounds, by age and by count, and sets each one\'s expiry', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 1, maxPerCredential: 3 }, () => NOW)
    const at = (i: number): number => NOW - 10 + i
    const a = Array.from({ length: 5 }, (_, i) => record(`req_trim_a_${i}`, { credentialId: 'key_trim_a', atMs: at(i) }))
    const aTest = Array.from({ length: 2 }, (_, i) => record(`req_trim_at_${i}`, { credentialId: 'key_trim_a', mode: 'test', atMs: at(i) }))
    // One past the retention (a day): it goes, the three after it stay.
    const b = [record('req_trim_b_old', { credentialId: 'key_trim_b', atMs: NOW - 86_400_000 - 1 }),
      ...Array.from({ length: 3 }, (_, i) => record(`req_trim_b_${i}`, { credentialId: 'key_trim_b', atMs: at(i) }))]
    // Interleaved, as a batch of several credentials' answers arrives.
    await store.write([a[0], b[0], aTest[0], a[1], b[1], a[2], aTest[1], b[2], a[3], b[3], a[4]] as RequestLogRecord[])
    const ids = async (credentialId: string, mode: string): Promise<string[]> => {
      const page = await store.list(credentialId, mode, {}, 1, 10)
      return idsOf(page.json)
    }
    expect(await ids('key_trim_a', 'live')).toEqual(['req_trim_a_4', 'req_trim_a_3', 'req_trim_a_2'])
    expect(await ids('key_trim_a', 'test')).toEqual(['req_trim_at_1', 'req_trim_at_0'])
    expect(await ids('key_trim_b', 'live')).toEqual(['req_trim_b_2', 'req_trim_b_1', 'req_trim_b_0'])
    for (const key of ['{key_trim_a}:live', '{key_trim_a}:test', '{key_trim_b}:live']) {
      expect(await redis.zcard(`${prefix}reqlog:${key}:lines`), key).toBe(key.endsWith(':test') ? 2 : 3)
      expect(await redis.pexpiretime(`${prefix}reqlog:${key}:lines`), key).toBe(NOW + 86_400_000)
      // One key a log: the hash of the layout before is not made.
      expect(await redis.exists(`${prefix}reqlog:${key}:entries`), key).toBe(0)
    }
  })
})

describe('a log past its bounds by thousands', () => {
  it('keeps the newest within the retention and the count, whatever a write adds and drops', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 1, maxPerCredential: 3000 }, () => NOW)
    const lines = `${prefix}reqlog:{key_bulk}:live:lines`
    // 2,300 past the retention and 2,000 within it: more than a thousand go by age, under the
    // count's bound (a trim by count alone would keep 3,000).
    const old = Array.from({ length: 2300 }, (_, i) => record(`req_bulk_old_${i}`, { credentialId: 'key_bulk', atMs: NOW - 86_400_000 - 3000 + i }))
    const recent = Array.from({ length: 6510 }, (_, i) => record(`req_bulk_${i}`, { credentialId: 'key_bulk', atMs: NOW - 6510 + i }))
    await store.write([...old, ...recent.slice(0, 2000)])
    expect(await redis.zcard(lines)).toBe(2000)
    // 4,510 more of one log in one write: added 500 a command (a single ZADD of them would pass
    // Lua's bound on unpack), and more than a thousand of the oldest go by count.
    await store.write(recent.slice(2000))
    expect(await redis.zcard(lines)).toBe(3000)
    const newest = await store.list('key_bulk', 'live', {}, 1, 2)
    const oldest = await store.list('key_bulk', 'live', {}, 1500, 2)
    expect([newest.total, idsOf(newest.json), idsOf(oldest.json)])
      .toEqual([3000, ['req_bulk_6509', 'req_bulk_6508'], ['req_bulk_3511', 'req_bulk_3510']])
    expect([await store.get('key_bulk', 'live', (recent[3509] as RequestLogRecord).id), await store.get('key_bulk', 'live', (recent[3510] as RequestLogRecord).id)])
      .toEqual([undefined, entryJson(recent[3510] as RequestLogRecord)])
  })
})

describe('the calls of a write', () => {
  const THIS_MINUTE = Math.floor(NOW / MINUTE)
  /** A log's text of the entries of `credentialId` that arrived in `minutes`, in that order. */
  const text = (credentialId: string, ...minutes: number[]): LogText => {
    const log = new LogLines(credentialId, 'live', minutes[0] as number)
    for (const minute of minutes.slice(1)) log.arrivedIn(minute)
    return { log, start: 0, end: 1 }
  }
  const shown = (texts: readonly LogText[], cluster: boolean): string[][] => writeCalls(texts, cluster).map((call) => call.map(({ log }) => log.credentialId))

  it(`groups up to ${LOGS_PER_CALL} logs a call; on a Cluster, where each log is in its credential's slot, one`, () => {
    const texts = Array.from({ length: LOGS_PER_CALL + 3 }, (_, i) => text(`key_${i}`, THIS_MINUTE))
    expect(shown(texts, false)).toEqual([texts.slice(0, LOGS_PER_CALL).map(({ log }) => log.credentialId), texts.slice(LOGS_PER_CALL).map(({ log }) => log.credentialId)])
    expect(shown(texts.slice(0, 3), true)).toEqual([['key_0'], ['key_1'], ['key_2']])
    expect([shown([], false), shown([], true)]).toEqual([[], []])
  })

  it('notes each log in each minute its entries arrived in, once, whatever their order', () => {
    const logs = [text('key_a', THIS_MINUTE, THIS_MINUTE - 1, THIS_MINUTE, THIS_MINUTE - 1), text('key_b', THIS_MINUTE), text('key_c', THIS_MINUTE - 3, THIS_MINUTE - 1)]
    expect([...logsByMinute(logs.map(({ log }) => log))].map(([minute, owners]) => [minute - THIS_MINUTE, owners]))
      .toEqual([[0, ['key_a live', 'key_b live']], [-1, ['key_a live', 'key_c live']], [-3, ['key_c live']]])
  })

  it('writes each log\'s entries and none of its ids to an index', async () => {
    const namespace = `${prefix}alone:`
    const lines = (records: readonly RequestLogRecord[]): string => records.map((r) => `${storedEntry(r)}\n`).join('')
    const a = [record('req_alone_0', { credentialId: 'key_alone_a', atMs: NOW }), record('req_alone_1', { credentialId: 'key_alone_a', atMs: NOW - DAY })]
    const b = [record('req_alone_2', { credentialId: 'key_alone_b', mode: 'test', atMs: NOW + 1 })]
    const keys = [`${namespace}reqlog:{key_alone_a}:live:lines`, `${namespace}reqlog:{key_alone_a}:live:entries`, `${namespace}reqlog:{key_alone_b}:test:lines`, `${namespace}reqlog:{key_alone_b}:test:entries`]
    expect(await redis.eval(WRITE_SCRIPT, 4, ...keys, NOW - 2 * DAY, 1000, NOW + DAY, lines(a), lines(b))).toBe(3)
    expect([await redis.zrangebyscore(keys[0] as string, '-inf', '+inf', 'WITHSCORES'), await redis.zrangebyscore(keys[2] as string, '-inf', '+inf', 'WITHSCORES')])
      .toEqual([[storedEntry(a[1] as RequestLogRecord), `${NOW - DAY}`, storedEntry(a[0] as RequestLogRecord), `${NOW}`], [storedEntry(b[0] as RequestLogRecord), `${NOW + 1}`]])
    expect((await redis.keys(`${namespace}*`)).sort()).toEqual([keys[0], keys[2]])
  })

  it(`writes up to ${LOGS_PER_CALL} logs a call, and each minute's logs in one`, async () => {
    // A server of the test's own: its command statistics count this test's calls alone.
    const server = await PrivateRedis.start()
    const own = new Redis(server.url)
    try {
      const store = new RequestLogStore(own, 'calls:', { retentionDays: 1, maxPerCredential: 1000 }, () => NOW)
      // Loaded once, so that every call below is an EVALSHA.
      await store.write([record('req_warm', { credentialId: 'key_warm' })])
      await own.config('RESETSTAT')
      const credentials = LOGS_PER_CALL + 8
      // The first log's 600 entries arrive in two minutes, 501 in the minute before.
      const before = Array.from({ length: 501 }, (_, i) => record(`req_before_${i}`, { credentialId: 'key_calls0', atMs: NOW - MINUTE + i }))
      const now = Array.from({ length: 99 }, (_, i) => record(`req_now_${i}`, { credentialId: 'key_calls0', atMs: NOW + i }))
      const others = Array.from({ length: credentials * 2 }, (_, i) => record(`req_calls_${i}`, { credentialId: `key_calls${i % credentials}` }))
      await store.write([...before, ...others, ...now])
      const calls = await commandCalls(own)
      // Two calls of the logs' script, one of the minutes' for each of the two minutes.
      expect(calls.evalsha).toBe(2 + 2)
      // Each log added to once, the first in two ZADDs (500 and 102): no log in two calls.
      expect(calls.zadd).toBe(credentials + 1)
      // Each minute's logs in one SADD; each log's key and each minute's set given its expiry.
      expect([calls.sadd, calls.pexpireat, calls.hset]).toEqual([2, credentials + 2, undefined])
      const minuteKey = (at: number): string => `calls:reqlog:logs:${new Date(at).toISOString().slice(0, 16)}`
      // This minute's set holds the warming write's log too.
      expect([await own.smembers(minuteKey(NOW - MINUTE)), (await own.smembers(minuteKey(NOW))).length]).toEqual([['key_calls0 live'], credentials + 1])
      expect([await own.pexpiretime(minuteKey(NOW - MINUTE)), await own.pexpiretime(minuteKey(NOW))]).toEqual([NOW + DAY, NOW + MINUTE + DAY])
      for (const r of [before[0], before[500], now[98], others[0], others[credentials * 2 - 1]] as RequestLogRecord[]) {
        expect([await store.get(r.credentialId, 'live', r.id), await store.find(r.id)], r.id).toEqual([entryJson(r), entryJson(r)])
      }
      for (let i = 1; i < credentials; i += 13) expect((await store.list(`key_calls${i}`, 'live', {}, 1, 10)).total).toBe(2)
    } finally {
      own.disconnect()
      await server.stop()
    }
  })
})

describe('a batch', () => {
  it('counts its entries, and indexes a log\'s on each day they arrived on, in whatever order they came', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    const batch = store.batch()
    const later = [record('req_order_0', { credentialId: 'key_order_a', atMs: NOW }), record('req_order_1', { credentialId: 'key_order_a', atMs: NOW - DAY })]
    for (const r of later) batch.add(r)
    expect(batch.size).toBe(2)
    await store.send(batch)
    // Yesterday, today, yesterday: the log's days are the first and the last of all three.
    const mixed = [record('req_order_2', { credentialId: 'key_order_b', atMs: NOW - DAY }), record('req_order_3', { credentialId: 'key_order_b', atMs: NOW }),
      record('req_order_4', { credentialId: 'key_order_b', atMs: NOW - DAY + 1 })]
    await store.write(mixed)
    for (const r of [...later, ...mixed]) expect(await store.get(r.credentialId, 'live', r.id), r.id).toBe(entryJson(r))
  })

  it('is written whole after a batch of one log\'s, and two batches filled at once each have bytes of their own', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    const one = [record('req_reuse_0', { credentialId: 'key_reuse_a', atMs: NOW - 3 }), record('req_reuse_1', { credentialId: 'key_reuse_a', atMs: NOW - 2 })] as const
    await store.write(one)
    const two = [record('req_reuse_2', { credentialId: 'key_reuse_b', atMs: NOW - 1 }), record('req_reuse_3', { credentialId: 'key_reuse_a', atMs: NOW, userAgent: 'a longer agent' }),
      record('req_reuse_4', { credentialId: 'key_reuse_b', atMs: NOW })] as const
    await store.write(two)
    await store.write([record('req_reuse_5', { credentialId: 'key_reuse_b', atMs: NOW + 1 })])
    // Two batches filled at once (the writer's, while the one before is sent) each have bytes of their own.
    const [first, second] = [store.batch(), store.batch()]
    first.add(record('req_reuse_6', { credentialId: 'key_reuse_c', atMs: NOW }))
    second.add(record('req_reuse_7', { credentialId: 'key_reuse_d', atMs: NOW }))
    await Promise.all([store.send(first), store.send(second)])
    expect([idsOf((await store.list('key_reuse_c', 'live', {}, 1, 10)).json), idsOf((await store.list('key_reuse_d', 'live', {}, 1, 10)).json)]).toEqual([['req_reuse_6'], ['req_reuse_7']])
    expect([JSON.parse((await store.list('key_reuse_a', 'live', {}, 1, 10)).json), JSON.parse((await store.list('key_reuse_b', 'live', {}, 1, 10)).json)])
      .toEqual([[two[1], one[1], one[0]].map(seen), [record('req_reuse_5', { credentialId: 'key_reuse_b', atMs: NOW + 1 }), two[2], two[0]].map(seen)])
  })
})

describe('the reads of a log', () => {
  const log = Array.from({ length: 620 }, (_, i) => record(`req_read_${i}`, { credentialId: 'key_read', atMs: NOW - 620 + i }))

  it('lists a page newest first within a window, each bound exclusive, with how many the window holds', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    await store.write(log)
    const all = await store.list('key_read', 'live', {}, 2, 3)
    expect([all.total, idsOf(all.json)]).toEqual([620, ['req_read_616', 'req_read_615', 'req_read_614']])
    const window = await store.list('key_read', 'live', { createdAfter: NOW - 10, createdBefore: NOW - 5 }, 1, 10)
    expect([window.total, idsOf(window.json)]).toEqual([4, ['req_read_614', 'req_read_613', 'req_read_612', 'req_read_611']])
    expect(await store.list('key_read', 'live', {}, 1000, 10)).toEqual({ json: '[]', total: 620 })
    expect(await store.list('key_read', 'test', {}, 1, 10)).toEqual({ json: '[]', total: 0 })
    expect([await store.count('key_read', 'live', undefined, undefined), await store.count('key_read', 'live', NOW - 10, undefined), await store.count('key_read', 'live', undefined, NOW - 610), await store.count('key_read', 'live', NOW - 10, NOW - 5)])
      .toEqual([620, 9, 10, 4])
  })

  it('exports a window newest first, 500 entries a chunk', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    await store.write(log)
    const chunks: string[][] = []
    for await (const chunk of store.entries('key_read', 'live', undefined, NOW)) chunks.push(chunk.map((e) => e.id))
    expect(chunks.map((c) => c.length)).toEqual([500, 120])
    expect(chunks.flat()).toEqual(log.map((r) => r.id).reverse())
    const narrow: string[][] = []
    for await (const chunk of store.entries('key_read', 'live', NOW - 4, NOW - 1)) narrow.push(chunk.map((e) => nameOf(e.id)))
    expect(narrow).toEqual([['req_read_618', 'req_read_617']])
    const none: string[][] = []
    for await (const chunk of store.entries('key_read', 'test', undefined, NOW)) none.push(chunk.map((e) => e.id))
    expect(none).toEqual([])
  })

  it('finds each request id, whatever its credential and mode, through the logs of its minute, in a batch of several of each', async () => {
    // A namespace of its own: the minutes' sets then hold these logs and nothing else.
    const namespace = `${prefix}mix:`
    const store = new RequestLogStore(redis, namespace, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    const batch = [
      record('req_mix_1', { credentialId: 'key_mix_a', atMs: NOW - DAY }), record('req_mix_2', { credentialId: 'key_mix_b', mode: 'test' }),
      record('req_mix_3', { credentialId: 'key_mix_a' }), record('req_mix_4', { credentialId: 'key_mix_b', mode: 'test', atMs: NOW - DAY }),
      record('req_mix_5', { credentialId: 'key_mix_a', mode: 'test' }), record('req_mix_6', { credentialId: 'key_mix_a', atMs: NOW - DAY }),
    ]
    await store.write(batch)
    const minuteKey = (at: number): string => `${namespace}reqlog:logs:${new Date(at).toISOString().slice(0, 16)}`
    expect([(await redis.smembers(minuteKey(NOW - DAY))).sort(), (await redis.smembers(minuteKey(NOW))).sort()])
      .toEqual([['key_mix_a live', 'key_mix_b test'], ['key_mix_a live', 'key_mix_a test', 'key_mix_b test']])
    for (const r of batch) expect(await store.find(r.id)).toBe(entryJson(r))
    // Another credential's id, one of another mode, one of a minute nobody wrote in, and a string that is no id of ours.
    const [one, two] = batch as [RequestLogRecord, RequestLogRecord]
    expect([await store.get('key_mix_b', 'test', one.id), await store.get('key_mix_a', 'test', one.id), await store.get('key_mix_b', 'live', two.id),
      await store.find(rid('req_mix_none', NOW - 3 * MINUTE)), await store.find('req_mix_1')]).toEqual([undefined, undefined, undefined, undefined, undefined])
    expect(idsOf((await store.list('key_mix_a', 'live', {}, 1, 10)).json)).toEqual(['req_mix_3', 'req_mix_6', 'req_mix_1'])
  })

  it('finds a request id among more logs of its minute than it reads at once', async () => {
    const namespace = `${prefix}crowd:`
    const store = new RequestLogStore(redis, namespace, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    // 150 credentials in one minute: read 64 logs at a time, the last in the third round.
    const crowd = Array.from({ length: 150 }, (_, i) => record(`req_crowd_${i}`, { credentialId: `key_crowd_${i}`, atMs: NOW + i }))
    await store.write(crowd)
    expect((await redis.smembers(`${namespace}reqlog:logs:${new Date(NOW).toISOString().slice(0, 16)}`)).length).toBe(150)
    for (const r of [crowd[0], crowd[70], crowd[149]] as RequestLogRecord[]) expect(await store.find(r.id), r.id).toBe(entryJson(r))
    expect(await store.find(rid('req_crowd_none', NOW + 1))).toBeUndefined()
  })

  it('finds an entry indexed by its day, as the layout before wrote it, on each day of the retention, and not after it', async () => {
    const namespace = `${prefix}days:`
    const store = (now: number): RequestLogStore => new RequestLogStore(redis, namespace, { retentionDays: 7, maxPerCredential: 1000 }, () => now)
    // Request ids then held no time: 32 random hex digits, read as a time nobody wrote in.
    const entry = { ...record('req_days', { credentialId: 'key_days', mode: 'test' }), id: 'req_f0e1d2c3b4a5968778695a4b3c2d1e0f' }
    await store(NOW).write([entry])
    await redis.del(`${namespace}reqlog:logs:${new Date(NOW).toISOString().slice(0, 16)}`)
    await redis.hset(`${namespace}reqlog:ids:${new Date(NOW).toISOString().slice(0, 10)}`, entry.id, `key_days test ${NOW}`)
    expect([await store(NOW).locate(entry.id), await store(NOW + 7 * DAY).locate(entry.id), await store(NOW + 8 * DAY).locate(entry.id), await store(NOW - DAY).locate(entry.id)])
      .toEqual([{ credentialId: 'key_days', mode: 'test', atMs: NOW }, { credentialId: 'key_days', mode: 'test', atMs: NOW }, undefined, undefined])
    expect([await store(NOW).find(entry.id), await store(NOW).get('key_days', 'test', entry.id), await store(NOW).get('key_days', 'live', entry.id), await store(NOW).find('req_nobody')])
      .toEqual([entryJson(entry), entryJson(entry), undefined, undefined])
  })

  it('keeps each minute\'s set of logs a retention after its minute ends (an instant, whatever the clock says now)', async () => {
    const namespace = `${prefix}expiry:`
    await new RequestLogStore(redis, namespace, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW).write([record('req_expiry', { credentialId: 'key_expiry', atMs: NOW + 61_500 })])
    expect(await redis.pexpiretime(`${namespace}reqlog:logs:${new Date(NOW + 60_000).toISOString().slice(0, 16)}`)).toBe(NOW + 120_000 + 7 * DAY)
  })

  it('writes a batch larger than the buffer it starts with, and the next batch after it', async () => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    // Six entries of 150,000 characters, ~450 KB each in UTF-8: the buffer (512 KiB) grows to take them.
    const large = Array.from({ length: 6 }, (_, i) => record(`req_large_${i}`, { credentialId: 'key_large', atMs: NOW - 10 + i, userAgent: `${i}${'é'.repeat(75_000)}${'x'.repeat(75_000)}` }))
    await store.write(large)
    const after = record('req_after_large', { credentialId: 'key_large', atMs: NOW })
    await store.write([after])
    for (const r of [...large, after]) expect(JSON.parse(await store.get('key_large', 'live', r.id) ?? 'null')).toEqual(seen(r))
  })

  it('throws when the logs\' script fails after the minutes\' sets were written: a set then names logs without the entries, which a look-up reads for nothing', async () => {
    const namespace = `${prefix}wrong:`
    const store = new RequestLogStore(redis, namespace, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    // A key of another type where a log's sorted set goes: Redis refuses that log's ZADD.
    await redis.set(`${namespace}reqlog:{key_wrong_a}:live:lines`, 'not a sorted set')
    const sent = [record('req_wrong_0', { credentialId: 'key_wrong_a' }), record('req_wrong_1', { credentialId: 'key_wrong_b' })]
    await expect(store.write(sent)).rejects.toThrow(/WRONGTYPE/)
    expect([(await redis.smembers(`${namespace}reqlog:logs:${new Date(NOW).toISOString().slice(0, 16)}`)).sort(), idsOf((await store.list('key_wrong_b', 'live', {}, 1, 10)).json)])
      .toEqual([['key_wrong_a live', 'key_wrong_b live'], []])
    // The script stopped at the first log's ZADD, before the second's, whose entry is then not found by its id.
    expect(await store.get('key_wrong_b', 'live', (sent[1] as RequestLogRecord).id)).toBeUndefined()
  })

  it('throws when Redis refuses a write, and writes the next batch whole once it answers', async () => {
    // Not connected, and no queue of commands for later: the write is refused at once.
    const client = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false })
    try {
      const store = new RequestLogStore(client, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
      await expect(store.write([record('req_refused', { credentialId: 'key_refused' })])).rejects.toThrow()
      // The refused write may have begun connecting already.
      await client.connect().catch(() => undefined)
      if (client.status !== 'ready') await once(client, 'ready')
      await store.write([record('req_next', { credentialId: 'key_refused' })])
      expect(idsOf((await store.list('key_refused', 'live', {}, 1, 10)).json)).toEqual(['req_next'])
      expect(await store.get('key_refused', 'live', rid('req_next'))).toBe(entryJson(record('req_next', { credentialId: 'key_refused' })))
    } finally {
      client.disconnect()
    }
  })
})

describe('a page with filters, found in Redis', () => {
  const statuses = [200, 201, 204, 304, 400, 401, 404, 404, 409, 429, 499, 500, 502, 503]
  const methods = ['GET', 'POST', 'DELETE']
  const codes = [null, 'PROPERTY_NOT_FOUND', 'RATE_LIMITED']
  const routes = [null, '/v1/properties', '/v1/properties/{propertyId}']
  const keys = [null, 'k-1', 'k-2']
  const records = Array.from({ length: 120 }, (_, i) => record(`req_f${String(i).padStart(3, '0')}`, {
    credentialId: 'key_filters', atMs: NOW - 10_000 + Math.floor(i / 3) * 10, status: statuses[i % statuses.length] as number,
    method: methods[i % methods.length] as string, code: codes[i % codes.length] as string | null, route: routes[(i >> 1) % routes.length] as string | null,
    idempotencyKey: keys[(i >> 2) % keys.length] as string | null,
  }))
  /** What the gateway's own matching picks, newest first (ties by line, as the sorted set orders them). */
  function expected(filters: RequestLogFilters, page: number, perPage: number): [number, string[]] {
    const inWindow = records
      .filter((r) => (filters.createdAfter === undefined || r.atMs > filters.createdAfter) && (filters.createdBefore === undefined || r.atMs < filters.createdBefore))
      .map((r) => [r.atMs, indexLine(r)] as const)
      .sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : a[1] > b[1] ? -1 : 0))
    const ids = inWindow.map(([, line]) => matchLine(line, filters)).filter((id): id is string => id !== undefined)
    return [ids.length, ids.slice((page - 1) * perPage, page * perPage).map(nameOf)]
  }
  const cases: [string, RequestLogFilters][] = [
    ['an exact status', { status: { kind: 'exact', status: 404 } }],
    ['a status nobody has', { status: { kind: 'exact', status: 418 } }],
    ['a class', { status: { kind: 'class', first: 4 } }],
    ['the 2xx class', { status: { kind: 'class', first: 2 } }],
    ['errors', { status: { kind: 'errors' } }],
    ['a method', { method: 'POST' }],
    ['a code', { code: 'RATE_LIMITED' }],
    ['a route', { route: '/v1/properties/{propertyId}' }],
    ['an Idempotency-Key', { idempotencyKey: 'k-2' }],
    ['every filter at once', { status: { kind: 'errors' }, method: 'GET', code: 'PROPERTY_NOT_FOUND', route: '/v1/properties', idempotencyKey: 'k-1' }],
    ['a filter within a window', { status: { kind: 'class', first: 5 }, createdAfter: NOW - 9000, createdBefore: NOW - 2000 }],
    ['a filter with a window at a shared instant', { method: 'GET', createdAfter: NOW - 9610, createdBefore: NOW - 9590 }],
  ]

  it.each(cases)('picks what matchLine picks: %s, every page', async (_name, filters) => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    if ((await store.count('key_filters', 'live', undefined, undefined)) === 0) await store.write(records)
    for (const [page, perPage] of [[1, 5], [2, 5], [3, 7], [1, 100], [40, 5]] as const) {
      const found = await store.list('key_filters', 'live', filters, page, perPage)
      const [total, ids] = expected(filters, page, perPage)
      expect([found.total, idsOf(found.json)], `page ${page} of ${perPage}`).toEqual([total, ids])
    }
  })

  it.each(['an entry', 'the layout before'])('refuses and keeps odd index lines as matchLine does, each line that of %s', async (layout) => {
    const store = new RequestLogStore(redis, prefix, { retentionDays: 7, maxPerCredential: 1000 }, () => NOW)
    const lines = ['req_o1 404 GET - - ', 'req_o2 404 GET', 'req_o3  GET - - ', 'req_o4 404 GET - - k extra', 'req_o5 4e2 GET - - ', 'req_o6 abc GET - - ', 'req_o7 404.0 GET PROPERTY_NOT_FOUND /v1/properties k']
    const credentialId = layout === 'an entry' ? 'key_odd_entry' : 'key_odd_before'
    for (const [i, line] of lines.entries()) {
      const id = line.slice(0, line.indexOf(' '))
      const stored = storedEntry({ ...record(id, { credentialId }), id })
      if (layout === 'an entry') {
        // The line put in place of a real entry's, the rest of its fields (after the tab) as written.
        await redis.zadd(`${prefix}reqlog:{${credentialId}}:live:lines`, NOW - i, `${NOW - i} ${line}${stored.slice(stored.indexOf('\t'))}`)
      } else {
        await redis.zadd(`${prefix}reqlog:{${credentialId}}:live:lines`, NOW - i, line)
        await redis.hset(`${prefix}reqlog:{${credentialId}}:live:entries`, id, stored)
      }
    }
    const filters: RequestLogFilters[] = [{ status: { kind: 'exact', status: 404 } }, { status: { kind: 'exact', status: 400 } }, { status: { kind: 'errors' } }, { status: { kind: 'class', first: 4 } },
      { status: { kind: 'class', first: 0 } }, { method: 'GET' }, { code: 'PROPERTY_NOT_FOUND', route: '/v1/properties', idempotencyKey: 'k' }, { idempotencyKey: '' }]
    for (const f of filters) {
      const found = await store.list(credentialId, 'live', f, 1, 10)
      const ids = lines.map((line) => matchLine(line, f)).filter((id): id is string => id !== undefined)
      // The ids as written: an odd line makes an entry that is not valid JSON (a status of NaN).
      expect([found.total, [...found.json.matchAll(/\{"id":"([^"]*)"/g)].map((match) => match[1])], JSON.stringify(f)).toEqual([ids.length, ids])
    }
  })
})
