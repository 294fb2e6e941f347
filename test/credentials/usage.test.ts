import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockPms } from '../../mocks/pms/server.js'
import { MemoryUsageStore, UsageRecorder, type UsageBatch, type UsageStore } from '../../src/credentials/usage.js'
import type { Principal } from '../../src/keys/principal.js'
import { ACME_HOST } from '../helpers/config.js'
import { checkAnswer } from '../helpers/contract.js'
import { captureLogs } from '../helpers/logs.js'
import { keyTool, keyToolJson } from '../helpers/oauth.js'
import { eventually, freePort, keysUnder, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { DEVELOPMENT_KEY } from '../../src/webhooks/secrets.js'

// Usage and last use (docs/architecture.md, "Usage and last use"): counted in memory by UTC
// day, route template and status class (429s apart), written to Redis every
// usage.flushSeconds and at graceful shutdown, never per request. The gateway here is the real
// process (`npm start` runs dist/src/server.js), stopped with SIGTERM and started again: the
// counts equal the requests sent.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
let pms: MockPms
let configFile: string

beforeAll(async () => {
  pms = await new MockPms({ token: 'usage-token' }).listen()
  const dir = mkdtempSync(join(tmpdir(), 'gw-usage-'))
  configFile = join(dir, 'config.json')
  writeFileSync(configFile, JSON.stringify({
    ...JSON.parse(readFileSync('config/default.json', 'utf8')) as object,
    // No publishers: their unset tokens would print a warning at start.
    upstreams: {}, routes: [], oauth: { issuers: [] }, events: {},
    loadShedding: { maxEventLoopDelayMs: 0 },
    shutdown: { drainMs: 100, timeoutMs: 8000 },
    // No flush but the one at shutdown within this test.
    usage: { flushSeconds: 3600 },
  }))
})

afterAll(async () => {
  await pms.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

const tool = (...argv: string[]) => keyTool({ REDIS_URL, REDIS_PREFIX: prefix }, ...argv)

const json = <T>(...argv: string[]) => keyToolJson<T>({ REDIS_URL, REDIS_PREFIX: prefix }, ...argv)

interface Running { child: ChildProcess; url: string; exited: Promise<number | null>; printed: () => string }

async function start(): Promise<Running> {
  const port = await freePort()
  const child = spawn(process.execPath, ['dist/src/server.js'], {
    env: {
      ...process.env, PORT: String(port), ADMIN_PORT: String(await freePort()), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix,
      PMS_URL: pms.url, PMS_TOKEN: 'usage-token', LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  child.stdout?.on('data', (c: Buffer) => { text += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { text += c.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const url = `http://127.0.0.1:${port}`
  const up = await eventually(async () => (await request(`${url}/v1/health`).then(async (r) => { await r.body.dump(); return r.statusCode }).catch(() => 0)) === 200, 15_000, 50)
  expect({ up, printed: up ? '' : text }).toEqual({ up: true, printed: '' })
  return { child, url, exited, printed: () => text }
}

async function stop(running: Running): Promise<void> {
  running.child.kill('SIGTERM')
  expect({ code: await running.exited, printed: running.printed() }).toEqual({ code: 0, printed: '' })
}

async function get(running: Running, key: string, path: string): Promise<number> {
  const res = await request(`${running.url}${path}`, { headers: { host: ACME_HOST, 'user-agent': 'usage-test/1.0', authorization: `Bearer ${key}` } })
  const body = await res.body.text()
  checkAnswer('GET', path, { statusCode: res.statusCode, headers: res.headers, body })
  return res.statusCode
}

const MINUTE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/

describe('usage per credential, across a graceful restart', () => {
  it('counts every request by route and status class, the 429s apart, written at shutdown and never per request', async () => {
    const { id, key } = await json<{ id: string; key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    const limited = await json<{ id: string; key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--rate-limit', '2')
    const missing = '00000000-0000-4000-8000-000000000000'

    const first = await start()
    const sent: number[] = []
    for (let i = 0; i < 5; i += 1) sent.push(await get(first, key, '/v1/properties'))
    for (let i = 0; i < 3; i += 1) sent.push(await get(first, key, '/v1/properties?bogus=1'))
    for (let i = 0; i < 2; i += 1) sent.push(await get(first, key, `/v1/properties/${missing}`))
    for (let i = 0; i < 4; i += 1) sent.push(await get(first, limited.key, '/v1/properties'))
    expect(sent).toEqual([200, 200, 200, 200, 200, 400, 400, 400, 404, 404, 200, 200, 429, 429])
    // Nothing of it in Redis yet: counted in memory.
    expect((await keysUnder(redis, prefix)).filter((k) => k.includes('usage:') || k.includes('lastused:'))).toEqual([])
    await stop(first)

    const second = await start()
    for (let i = 0; i < 4; i += 1) expect(await get(second, key, '/v1/properties')).toBe(200)
    for (let i = 0; i < 2; i += 1) expect(await get(second, key, '/v1/credential')).toBe(200)
    await stop(second)

    const today = new Date().toISOString().slice(0, 10)
    const usage = await json<{ id: string; days: number; from: string; to: string; rows: Record<string, unknown>[]; totals: Record<string, number> }>('usage', id, '--days', '1')
    expect(usage).toEqual({
      id, days: 1, from: today, to: today,
      rows: [
        { date: today, route: 'GET /v1/credential', '2xx': 2, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0, total: 2 },
        { date: today, route: 'GET /v1/properties', '2xx': 9, '3xx': 0, '4xx': 3, '429': 0, '5xx': 0, total: 12 },
        { date: today, route: 'GET /v1/properties/{propertyId}', '2xx': 0, '3xx': 0, '4xx': 2, '429': 0, '5xx': 0, total: 2 },
      ],
      totals: { '2xx': 11, '3xx': 0, '4xx': 5, '429': 0, '5xx': 0, total: 16 },
    })
    expect((await json<{ rows: unknown[] }>('usage', limited.id)).rows).toEqual([
      { date: today, route: 'GET /v1/properties', '2xx': 2, '3xx': 0, '4xx': 0, '429': 2, '5xx': 0, total: 4 },
    ])
    const shown = await json<{ lastUsedAt: string }>('show', id)
    expect(shown.lastUsedAt).toMatch(MINUTE)
    expect(Date.now() - Date.parse(shown.lastUsedAt)).toBeLessThan(10 * 60_000)

    const text = await tool('usage', id, '--days', '1')
    expect(text).toEqual({
      code: 0, err: [], out: [
        'date        route                            2xx  3xx  4xx  429  5xx  total',
        `${today}  GET /v1/credential               2    0    0    0    0    2`,
        `${today}  GET /v1/properties               9    0    3    0    0    12`,
        `${today}  GET /v1/properties/{propertyId}  0    0    2    0    0    2`,
        'total                                        11   0    5    0    0    16',
      ],
    })
  }, 90_000)

  it('says so when nothing was counted, and refuses a bad --days or an unknown id', async () => {
    const { id } = await json<{ id: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    const run = await tool('usage', id)
    expect(run.code).toBe(0)
    expect(run.out).toEqual([expect.stringMatching(new RegExp(`^no requests counted for ${id} from \\d{4}-\\d{2}-\\d{2} to \\d{4}-\\d{2}-\\d{2}$`))])
    expect(await tool('usage', id, '--days', '0')).toEqual({ code: 2, out: [], err: ['--days takes a whole number from 1 to 90'] })
    expect(await tool('usage', id, '--days', '91')).toEqual({ code: 2, out: [], err: ['--days takes a whole number from 1 to 90'] })
    expect(await tool('usage', 'key_00000000000000000')).toEqual({ code: 2, out: [], err: ["no key with id 'key_00000000000000000'"] })
  })
})

// The recorder alone, at the edge of its store.
const principal = (keyId: string, previousSecret = false): Principal => ({
  keyId, kind: 'apiKey', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all', ...(previousSecret ? { previousSecret: true as const } : {}),
})

class FlakyStore implements UsageStore {
  readonly inner = new MemoryUsageStore()
  failing = true
  writes: UsageBatch[] = []
  async write(batch: UsageBatch, retentionMs: number): Promise<void> {
    if (this.failing) throw new Error('Connection is closed.')
    this.writes.push(batch)
    await this.inner.write(batch)
    void retentionMs
  }

  counts = this.inner.counts.bind(this.inner)
  lastUse = this.inner.lastUse.bind(this.inner)
  resetPrevious = this.inner.resetPrevious.bind(this.inner)
  forget = this.inner.forget.bind(this.inner)
}

const at = (iso: string): number => Date.parse(iso)

describe('the usage recorder', () => {
  it('counts into the UTC day of each answer, by route and status class', async () => {
    const store = new MemoryUsageStore()
    const recorder = new UsageRecorder(store, { flushMs: 3_600_000, retentionMs: 86_400_000, logger: captureLogs().logger })
    const p = principal('key_a')
    recorder.count(p, 'GET /v1/properties', 200, at('2026-03-01T23:59:59.999Z'))
    recorder.count(p, 'GET /v1/properties', 304, at('2026-03-01T23:59:59.999Z'))
    recorder.count(p, 'GET /v1/properties', 429, at('2026-03-02T00:00:00.000Z'))
    recorder.count(p, 'GET /v1/properties', 428, at('2026-03-02T00:00:00.000Z'))
    recorder.count(p, 'GET /v1/properties', 499, at('2026-03-02T00:00:00.000Z'))
    recorder.count(p, 'GET /v1/properties', 500, at('2026-03-02T00:00:00.001Z'))
    recorder.count(p, 'GET /v1/properties', 299, at('2026-03-02T00:00:00.001Z'))
    recorder.count(p, 'GET /v1/properties', 300, at('2026-03-02T00:00:00.001Z'))
    recorder.count(p, 'GET /v1/properties', 399, at('2026-03-02T00:00:00.001Z'))
    recorder.count(p, 'GET /v1/properties', 400, at('2026-03-02T00:00:00.001Z'))
    await recorder.flush()
    expect(await store.counts('key_a', ['2026-03-01', '2026-03-02'])).toEqual(new Map([
      ['2026-03-01', { 'GET /v1/properties|2xx': 1, 'GET /v1/properties|3xx': 1 }],
      ['2026-03-02', { 'GET /v1/properties|429': 1, 'GET /v1/properties|4xx': 3, 'GET /v1/properties|5xx': 1, 'GET /v1/properties|2xx': 1, 'GET /v1/properties|3xx': 2 }],
    ]))
  })

  it('notes the minute each credential, and a previous secret, was last used, and writes each minute once', async () => {
    const store = new FlakyStore()
    store.failing = false
    const recorder = new UsageRecorder(store, { flushMs: 3_600_000, retentionMs: 86_400_000, logger: captureLogs().logger })
    recorder.count(principal('key_a'), 'GET /v1/health', 200, at('2026-03-01T10:00:59.999Z'))
    recorder.count(principal('key_a', true), 'GET /v1/health', 200, at('2026-03-01T10:00:30.000Z'))
    await recorder.flush()
    expect(await store.lastUse(['key_a', 'key_b'])).toEqual(new Map([
      ['key_a', { any: at('2026-03-01T10:00:00.000Z'), previous: at('2026-03-01T10:00:00.000Z') }],
      ['key_b', { any: null, previous: null }],
    ]))
    // The same minute again: counted, and no last use written again.
    recorder.count(principal('key_a'), 'GET /v1/health', 200, at('2026-03-01T10:00:45.000Z'))
    await recorder.flush()
    expect(store.writes.at(-1)?.lastUsed).toEqual(new Map())
    recorder.count(principal('key_a'), 'GET /v1/health', 200, at('2026-03-01T10:01:00.000Z'))
    await recorder.flush()
    expect(store.writes.at(-1)?.lastUsed).toEqual(new Map([['key_a', { any: at('2026-03-01T10:01:00.000Z') }]]))
    // Nothing counted: nothing written.
    const writes = store.writes.length
    await recorder.flush()
    expect(store.writes.length).toBe(writes)
  })

  it('keeps what a failed flush could not write for the next one, and says so once', async () => {
    const store = new FlakyStore()
    const logs = captureLogs()
    const recorder = new UsageRecorder(store, { flushMs: 3_600_000, retentionMs: 86_400_000, logger: logs.logger })
    recorder.count(principal('key_a'), 'GET /v1/health', 200, at('2026-03-01T10:00:00.000Z'))
    await recorder.flush()
    recorder.count(principal('key_a'), 'GET /v1/health', 200, at('2026-03-01T10:00:01.000Z'))
    await recorder.flush()
    expect(logs.records().map((r) => r.msg)).toEqual(['usage counts could not be written to Redis; they are kept for the next flush'])
    store.failing = false
    recorder.count(principal('key_a'), 'GET /v1/health', 500, at('2026-03-01T10:00:02.000Z'))
    await recorder.close()
    expect(await store.counts('key_a', ['2026-03-01'])).toEqual(new Map([['2026-03-01', { 'GET /v1/health|2xx': 2, 'GET /v1/health|5xx': 1 }]]))
    expect(logs.records().map((r) => r.msg)).toEqual([
      'usage counts could not be written to Redis; they are kept for the next flush', 'usage counts are written to Redis again',
    ])
  })

  it('flushes on its own every flushMs', async () => {
    const store = new FlakyStore()
    store.failing = false
    const recorder = new UsageRecorder(store, { flushMs: 50, retentionMs: 86_400_000, logger: captureLogs().logger })
    recorder.start()
    try {
      recorder.count(principal('key_a'), 'GET /v1/health', 200)
      expect(await eventually(async () => store.writes.length === 1, 5000)).toBe(true)
    } finally {
      await recorder.close()
    }
  })
})

describe('the usage counts in Redis', () => {
  it('expire usage.retentionDays after their day', async () => {
    const { id } = await json<{ id: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    const { RedisUsageStore } = await import('../../src/credentials/usage.js')
    const store = new RedisUsageStore(redis, prefix)
    const recorder = new UsageRecorder(store, { flushMs: 3_600_000, retentionMs: 90 * 86_400_000, logger: captureLogs().logger })
    const now = Date.now()
    const day = new Date(now).toISOString().slice(0, 10)
    recorder.count(principal(id), 'GET /v1/properties', 200, now)
    await recorder.close()
    expect(await redis.hgetall(`${prefix}usage:{${id}}:${day}`)).toEqual({ 'GET /v1/properties|2xx': '1' })
    expect(await redis.pexpiretime(`${prefix}usage:{${id}}:${day}`)).toBe(at(`${day}T00:00:00.000Z`) + 86_400_000 + 90 * 86_400_000)
    expect(await redis.hgetall(`${prefix}lastused:{${id}}`)).toEqual({ any: String(now - (now % 60_000)) })
  })
})
