import { randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import { setImmediate, setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { requestIdAt } from '../src/http/request-id.js'
import { createLogger } from '../src/logger.js'
import type { RequestLogRecord } from '../src/request-log/entry.js'
import { RequestLogStore } from '../src/request-log/store.js'
import { BATCH, RequestLogWriter } from '../src/request-log/writer.js'
import { redisCpuUs } from './webhook-attempts.js'

// The request log's own figures (docs/performance.md, "The request log"): how many entries one
// instance's writer puts into Redis per second, and the Redis memory each costs, on a Redis of
// the bench's own; and the entries a page row reads (a credential holding 50,000 of them,
// written straight to the store as the writer would have).

const SETTINGS = { retentionDays: 7, maxPerCredential: 50_000 }
const STATUSES = [200, 200, 200, 200, 200, 200, 200, 304, 404, 429] as const

/** A realistic entry: a property path, a User-Agent, a trace id; one in ten a 404, as a partner's mistakes go. */
export function benchEntry(credentialId: string, at: number, i: number): RequestLogRecord {
  const status = STATUSES[i % STATUSES.length] as number
  return {
    id: requestIdAt(at, randomUUID().replaceAll('-', '').slice(0, 20)), atMs: at, credentialId, secret: 'current', mode: 'live', method: 'GET',
    route: '/v1/properties/{propertyId}', path: `/v1/properties/${randomUUID()}`, queryParameters: i % 3 === 0 ? ['include'] : [],
    status, code: status === 404 ? 'PROPERTY_NOT_FOUND' : status === 429 ? 'RATE_LIMITED' : null, durationMs: 3.4, cache: status === 200 ? 'hit' : null,
    idempotencyKey: null, replayed: false, clientIp: '203.0.113.7', userAgent: 'acme-sync/2.1 (+https://acme.example.com)', traceId: randomUUID().replaceAll('-', ''),
  }
}

/** Writes `count` entries of one credential, newest last, ending now: what the page row reads. */
export async function fillRequestLog(redisUrl: string, namespace: string, credentialId: string, count: number): Promise<void> {
  const redis = new Redis(redisUrl)
  try {
    const store = new RequestLogStore(redis, namespace, SETTINGS)
    const start = Date.now() - count * 10
    for (let i = 0; i < count; i += 500) {
      await store.write(Array.from({ length: Math.min(500, count - i) }, (_, j) => benchEntry(credentialId, start + (i + j) * 10, i + j)))
    }
  } finally {
    redis.disconnect()
  }
}

export interface RequestLogWriteCost {
  entries: number
  credentials: number
  /** Entries written per second by one writer, its batches one after another. */
  perSecond: number
  /** CPU of this process per entry written (the instance's side of the write), µs. */
  cpuUsPerEntry: number
  /** used_memory grown per entry kept, with its share of the sets of the minutes' logs. */
  bytesPerEntry: number
  /** Redis's own CPU per entry written (its scripts parsing the batches, the log's sorted set, the minutes' sets of logs), µs. */
  redisCpuUsPerEntry: number
}

/**
 * One writer on a Redis of its own: `entries` entries of 100 credentials, added 500 at a time
 * as answers would add them, `used_memory` before and after. Beside the batch being written,
 * the writer holds at most two more, as a gateway's writes keep up: entries are added while a
 * write is under way and wait while two batches do, so the rate is what Redis and the writer
 * sustain together. No entry is made long before it is added (made all at first, 200,000
 * entries held at once made the collector's marking most of the CPU the row read): each is a
 * copy of one of 500 made beforehand, with an id of its own and the time of its millisecond (the
 * copy is in the CPU per entry).
 */
/** Entries arriving in one millisecond in the writer's row: some 70,000 a second, as its rate reads. */
const ENTRIES_PER_MS = 64

export async function requestLogWriteCost(redisUrl: string, entries: number): Promise<RequestLogWriteCost> {
  const redis = new Redis(redisUrl)
  try {
    const credentials = 100
    const store = new RequestLogStore(redis, 'bench-log:', { ...SETTINGS, maxPerCredential: 1_000_000 })
    const logger = createLogger({ level: 'warn', destination: new Writable({ write(_chunk, _encoding, done) { done() } }) })
    const writer = new RequestLogWriter(store, { flushMs: 60_000, bufferMax: 4 * BATCH, logger })
    const now = Date.now()
    // Warm: the script loaded, the keys of every credential made.
    await store.write(Array.from({ length: credentials }, (_, i) => benchEntry(`key_bench${i}`, now - entries - 1, i)))
    const used = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1])
    const templates = Array.from({ length: BATCH }, (_, i) => benchEntry(`key_bench${i % credentials}`, now, i))
    // Each id holds its entry's arrival, as the gateway's do, and is its own by the count after a random part.
    const idRandom = randomUUID().replaceAll('-', '').slice(0, 4)
    let made = 0
    let idMs = -1
    let idPrefix = ''
    const addAll = async (count: number): Promise<void> => {
      for (let added = 0; added < count; added += BATCH) {
        // A millisecond at a time, not a turn of the loop: a writer waiting on Redis is not spun for.
        while (writer.size >= 2 * BATCH) {
          // A write that failed leaves its writer waiting for the next add: nothing would end the wait.
          if (writer.dropped.redis > 0 || writer.dropped.buffer_full > 0) throw new Error(`the writer dropped entries: ${JSON.stringify(writer.dropped)}`)
          await sleep(1)
        }
        for (let i = 0; i < BATCH && added + i < count; i += 1) {
          made += 1
          const atMs = now - 2 * entries + Math.floor(made / ENTRIES_PER_MS)
          // The gateway makes an id whether the log is on or not, its time's digits once a
          // millisecond (generateRequestId): not the log's CPU, so not made anew per entry here.
          if (atMs !== idMs) {
            idMs = atMs
            idPrefix = requestIdAt(atMs, '')
          }
          writer.add({ ...(templates[i] as RequestLogRecord), id: `${idPrefix}${idRandom}${made.toString(16).padStart(16, '0')}`, atMs })
        }
        await setImmediate()
      }
      await writer.flush()
    }
    // Warm, outside the measure: the writer's and the store's code compiled as a gateway's is.
    await addAll(Math.min(10_000, entries))
    const warm = writer.written
    const before = await used()
    const redisBefore = await redisCpuUs(redis)
    const cpu = process.cpuUsage()
    const started = performance.now()
    await addAll(entries)
    const seconds = (performance.now() - started) / 1000
    const used_ = process.cpuUsage(cpu)
    const redisUs = await redisCpuUs(redis) - redisBefore
    if (writer.written - warm !== entries) throw new Error(`the writer wrote ${writer.written - warm} of ${entries} entries`)
    const after = await used()
    return {
      entries, credentials, perSecond: Math.round(entries / seconds), cpuUsPerEntry: Math.round(((used_.user + used_.system) / entries) * 10) / 10,
      bytesPerEntry: Math.round((after - before) / entries), redisCpuUsPerEntry: Math.round((redisUs / entries) * 10) / 10,
    }
  } finally {
    redis.disconnect()
  }
}

/** The rows of the request log in run.ts's table. */
export const REQUEST_LOG_ROWS = {
  cached: 'GET /v1/properties/{id}, cache hit, request log on, against it off',
  passThrough: 'GET /v1/guests, declared pass-through route, request log on, against it off',
  page: 'GET /v1/request-logs?status=404, a credential of 50,000 entries',
} as const

interface RowFigures {
  scenario: string
  gateway: { cpuUs: number; rps: number; p99Us: number }
  references: { measure: { cpuUs: number; rps: number } }[]
  paired?: { cpuRatio: number; ratios: number }
}

/** The request log's target: a row with it on costs at most this much more CPU per answer than with it off. */
export const REQUEST_LOG_TARGET_PERCENT = 5

/** The lines of the report under the table: the on/off ratios, the page, the writer's rate and memory. */
export function requestLogLines(rows: readonly RowFigures[], writes: RequestLogWriteCost | undefined): string[] {
  const lines: string[] = []
  for (const name of [REQUEST_LOG_ROWS.cached, REQUEST_LOG_ROWS.passThrough]) {
    const row = rows.find((r) => r.scenario === name)
    const off = row?.references[0]?.measure
    if (row === undefined || off === undefined) continue
    // The paired figure when the row has one (its loads alternated within each round): the medians of each side a round apart move with the machine.
    // Judged as printed: a figure that reads +5.0 % holds.
    const more = Number(((row.paired === undefined ? row.gateway.cpuUs / off.cpuUs - 1 : 1 / row.paired.cpuRatio - 1) * 100).toFixed(1))
    const how = row.paired === undefined ? 'the medians of each side' : `the median of ${row.paired.ratios} ratios of loads run one after the other, each against the mean of the two loads of the other side on either side of it`
    lines.push(`Request log, ${name}: CPU per answer ${more >= 0 ? '+' : ''}${more.toFixed(1)} % with it on (${how}; target at most ${REQUEST_LOG_TARGET_PERCENT} % more: ${more <= REQUEST_LOG_TARGET_PERCENT ? 'held' : 'missed'}); `
      + `medians ${row.gateway.cpuUs.toFixed(1)} µs on, ${off.cpuUs.toFixed(1)} µs off; ${row.gateway.rps} req/s on, ${off.rps} off (${((row.gateway.rps / off.rps - 1) * 100).toFixed(1)} %).`)
  }
  const page = rows.find((r) => r.scenario === REQUEST_LOG_ROWS.page)
  if (page !== undefined) lines.push(`Request log, a page filtered by status over 50,000 entries: ${page.gateway.cpuUs.toFixed(0)} µs of the gateway's CPU, p99 ${(page.gateway.p99Us / 1000).toFixed(1)} ms, ${page.gateway.rps} pages/s.`)
  if (writes !== undefined) {
    lines.push(`Request log, one instance's writer (a Redis of its own, ${writes.entries} entries of ${writes.credentials} credentials, batches of 500): ${writes.perSecond} entries written per second, `
      + `${writes.cpuUsPerEntry} µs of the instance's CPU per entry, ${writes.redisCpuUsPerEntry} µs of Redis's own (\`INFO cpu\` before and after); Redis memory ${writes.bytesPerEntry} bytes per entry kept (the entry and its share of the minutes' sets of logs; \`used_memory\` before and after).`)
  }
  return lines.length === 0 ? [] : [...lines, '']
}
