import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockPms } from '../mocks/pms/server.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { ACME_HOST } from './helpers/config.js'
import { eventually, freePort, REDIS_URL, removePrefix, testPrefix } from './helpers/redis.js'
import { checkAnswer } from './helpers/contract.js'
import { DEVELOPMENT_KEY } from '../src/webhooks/secrets.js'

// The real process (`npm start` runs dist/src/server.js) receiving SIGTERM with requests in flight.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
let pms: MockPms
let key: string
let configFile: string

beforeAll(async () => {
  pms = await new MockPms({ token: 'shutdown-token' }).listen()
  key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
  const dir = mkdtempSync(join(tmpdir(), 'gw-shutdown-'))
  configFile = join(dir, 'config.json')
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: [ACME_HOST] }],
    cache: { ttlMs: 0 },
    loadShedding: { maxEventLoopDelayMs: 0 },
    // A drain long enough for the checks below on a busy machine.
    shutdown: { drainMs: 2000, timeoutMs: 8000 },
  }))
})

afterAll(async () => {
  await pms.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

function start(port: number, adminPort: number): ChildProcess {
  return spawn(process.execPath, ['dist/src/server.js'], {
    env: {
      ...process.env, PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix,
      PMS_URL: pms.url, PMS_TOKEN: 'shutdown-token', LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
}

function output(child: ChildProcess): () => string {
  let text = ''
  child.stdout?.on('data', (c: Buffer) => { text += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { text += c.toString() })
  return () => text
}

describe('graceful shutdown', () => {
  it('turns unhealthy at once, serves through the drain, finishes in-flight requests and exits 0', async () => {
    const port = await freePort()
    const child = start(port, await freePort())
    const printed = output(child)
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    const base = `http://127.0.0.1:${port}`
    const get = async (path: string, headers: Record<string, string> = {}) => {
      const res = await request(`${base}${path}`, { headers: { host: ACME_HOST, 'user-agent': 'shutdown/1.0', authorization: `Bearer ${key}`, ...headers } })
      const body = await res.body.text()
      checkAnswer('GET', path, { statusCode: res.statusCode, headers: res.headers, body })
      return { status: res.statusCode, headers: res.headers, body }
    }
    const up = await eventually(async () => (await get('/v1/health').catch(() => ({ status: 0 }))).status === 200, 15_000, 50)
    expect({ up, printed: up ? '' : printed() }).toEqual({ up: true, printed: '' })

    // Requests in flight when the signal comes: the PMS takes 1.2 s to answer each.
    pms.setFailure({ mode: 'latency', latencyMs: 1200 })
    const id = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
    const asked = pms.received.length
    const inFlight = Array.from({ length: 5 }, async () => get(`/v1/properties/${id}`))
    // In flight: every one of them has reached the PMS, which holds it.
    expect(await eventually(async () => pms.received.length === asked + 5, 10_000)).toBe(true)
    child.kill('SIGTERM')

    // The signal arrives when it arrives: wait for the health answer to turn.
    let health = { status: 0, headers: {} as Record<string, unknown>, body: '' }
    expect(await eventually(async () => (health = await get('/v1/health')).status !== 200, 2000)).toBe(true)
    expect({ status: health.status, body: health.body, connection: health.headers.connection }).toEqual({ status: 503, body: '{"status":"unhealthy"}', connection: 'close' })
    // Still served while draining.
    pms.setFailure(undefined)
    expect((await get('/v1/properties?perPage=1')).status).toBe(200)

    const finished = await Promise.all(inFlight)
    expect(finished.map((r) => r.status)).toEqual([200, 200, 200, 200, 200])
    expect({ code: await exited, printed: printed() }).toEqual({ code: 0, printed: '' })
  })
})
