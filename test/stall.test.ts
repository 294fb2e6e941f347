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
import { DEVELOPMENT_KEY } from '../src/webhooks/secrets.js'

// The real process (`npm start` runs dist/src/server.js): load shedding with its shipped
// settings must tell a stall from overload (docs/security.md, "Load shedding"), and the start
// warns about a PMS reached over plain http: across the network.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
let pms: MockPms
let key: string
let configFile: string

beforeAll(async () => {
  pms = await new MockPms({ token: 'stall-token' }).listen()
  key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
  configFile = join(mkdtempSync(join(tmpdir(), 'gw-stall-')), 'config.json')
  // Load shedding as shipped (no loadShedding key): the subject of this test.
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: [ACME_HOST] }],
    shutdown: { drainMs: 0, timeoutMs: 5000 },
  }))
})

afterAll(async () => {
  await pms.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

function start(port: number, env: NodeJS.ProcessEnv = {}): { child: ChildProcess; printed: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['dist/src/server.js'], {
    env: {
      ...process.env, PORT: String(port), ADMIN_PORT: '0', CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix,
      PMS_URL: pms.url, PMS_TOKEN: 'stall-token', LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY, ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  child.stdout?.on('data', (c: Buffer) => { text += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { text += c.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, printed: () => text, exited }
}

describe('a process paused for 1.5 s (docs/architecture.md §D17)', () => {
  it('answers every request that waited, and sheds nothing afterwards', async () => {
    const port = await freePort()
    const { child, printed, exited } = start(port)
    const base = `http://127.0.0.1:${port}`
    const get = async (path: string) => {
      const res = await request(`${base}${path}`, { headers: { host: ACME_HOST, 'user-agent': 'stall/1.0', authorization: `Bearer ${key}` } })
      return { status: res.statusCode, body: await res.body.text() }
    }
    try {
      const up = await eventually(async () => (await get('/v1/health').catch(() => ({ status: 0 }))).status === 200, 15_000, 50)
      expect({ up, printed: up ? '' : printed() }).toEqual({ up: true, printed: '' })
      // Warm: the key and the page are cached, so what follows measures the gateway alone.
      expect((await get('/v1/properties?perPage=5')).status).toBe(200)

      child.kill('SIGSTOP')
      // These wait in the kernel while the process is stopped.
      const waiting = Array.from({ length: 20 }, async () => get('/v1/properties?perPage=5'))
      await new Promise((r) => setTimeout(r, 1500))
      child.kill('SIGCONT')
      expect((await Promise.all(waiting)).map((r) => r.status)).toEqual(Array.from({ length: 20 }, () => 200))

      // Then, for three sample intervals and more, a steady client: nothing shed, health ok.
      const after: number[] = []
      for (let i = 0; i < 40; i += 1) {
        after.push((await get('/v1/properties?perPage=5')).status, (await get('/v1/health')).status)
        await new Promise((r) => setTimeout(r, 100))
      }
      expect(after.filter((s) => s !== 200)).toEqual([])
    } finally {
      child.kill('SIGCONT')
      child.kill('SIGTERM')
      await exited
    }
  })
})

describe('the start', () => {
  it('warns when PMS_URL is plain http: to a host that is not loopback, and not otherwise', async () => {
    const remote = start(await freePort(), { PMS_URL: 'http://pms.internal.example:4010' })
    const warned = await eventually(async () => remote.printed().includes('"variable":"PMS_URL"'), 15_000, 50)
    remote.child.kill('SIGTERM')
    await remote.exited
    const line = remote.printed().split('\n').find((l) => l.includes('"variable":"PMS_URL"'))
    expect({ warned, line: JSON.parse(line ?? '{}') as Record<string, unknown> }).toMatchObject({
      warned: true,
      line: { level: 'warn', variable: 'PMS_URL', host: 'pms.internal.example', msg: 'PMS_URL uses plain http: to a host that is not loopback; the PMS token travels unencrypted' },
    })

    const port = await freePort()
    const local = start(port)
    const up = await eventually(async () => (await request(`http://127.0.0.1:${port}/v1/health`).then((r) => r.body.text(), () => '')) !== '', 15_000, 50)
    local.child.kill('SIGTERM')
    await local.exited
    expect({ up, printed: local.printed() }).toEqual({ up: true, printed: '' })
  })
})
