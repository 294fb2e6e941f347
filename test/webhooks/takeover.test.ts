import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockPms } from '../../mocks/pms/server.js'
import { loadConfig } from '../../src/config.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { DEVELOPMENT_KEY } from '../../src/webhooks/secrets.js'
import { ACME_HOST } from '../helpers/config.js'
import { accepted, hotelChanged, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, freePort, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// An instance killed mid-attempt has its attempt made again by another within
// `deliveryTimeoutMs` + 30 s (docs/partners.md, "Retries, duplicates, order and disabling"),
// with the default settings: BullMQ's lock and stalled-job check and our per-endpoint lease
// all count. The real process (`npm start`), killed with SIGKILL; one lease per endpoint, so
// that the dead instance's lease would hold the attempt back if it could.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
let pms: MockPms
let key: string
let configFile: string
let hotel: string
const children: ChildProcess[] = []

beforeAll(async () => {
  pms = await new MockPms({ token: 'takeover-token' }).listen()
  hotel = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
  const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as { events: Record<string, unknown> }
  configFile = join(mkdtempSync(join(tmpdir(), 'gw-takeover-')), 'config.json')
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: [ACME_HOST] }],
    loadShedding: { maxEventLoopDelayMs: 0 },
    events: { ...shipped.events, allowHttp: true, allowPrivateTargets: true, endpointConcurrency: 1 },
  }))
})

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await once(child, 'exit')
    }
  }
  await pms.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

async function startInstance(): Promise<{ child: ChildProcess; base: string; admin: string }> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const child = spawn(process.execPath, ['dist/src/server.js'], {
    env: {
      ...process.env, ...PUBLISHER_TOKENS, PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix,
      PMS_URL: pms.url, PMS_TOKEN: 'takeover-token', LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  children.push(child)
  const base = `http://127.0.0.1:${port}`
  const up = await eventually(async () => (await request(`${base}/v1/health`, { headers: { host: ACME_HOST } }).then((r) => r.body.text().then(() => r.statusCode)).catch(() => 0)) === 200, 15_000, 50)
  if (!up) throw new Error('the instance did not start')
  return { child, base, admin: `http://127.0.0.1:${adminPort}` }
}

describe('an instance killed mid-attempt, with the default settings', () => {
  it('has its attempt made again by another instance within deliveryTimeoutMs + 30 s', async () => {
    const { deliveryTimeoutMs, deliveryLockSeconds, endpointConcurrency } = loadConfig({ CONFIG_FILE: configFile }).events
    expect({ deliveryTimeoutMs, deliveryLockSeconds, endpointConcurrency }).toEqual({ deliveryTimeoutMs: 15_000, deliveryLockSeconds: 20, endpointConcurrency: 1 })
    const arrivals: number[] = []
    const receiver = await new Receiver((n) => {
      arrivals.push(Date.now())
      return n === 1 ? 'hang' : 204
    }).listen()
    try {
      const first = await startInstance()
      const created = await request(`${first.base}/v1/webhook-endpoints`, {
        method: 'POST', headers: { host: ACME_HOST, 'user-agent': 'takeover/1.0', authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, eventTypes: ['property.updated'] }),
      })
      expect(created.statusCode).toBe(201)
      await created.body.dump()
      const [event] = accepted(await publish(first.admin, hotelChanged(hotel)))
      const eventId = event?.eventId as string
      expect(await eventually(async () => receiver.received.length === 1, 20_000)).toBe(true)
      // Another instance is up before the first one dies in the middle of its attempt.
      await startInstance()
      first.child.kill('SIGKILL')
      await once(first.child, 'exit')
      expect(await eventually(async () => receiver.of(eventId).length === 2, deliveryTimeoutMs + 60_000, 100)).toBe(true)
      const [started, again] = arrivals
      expect((again as number) - (started as number)).toBeLessThanOrEqual(deliveryTimeoutMs + 30_000)
    } finally {
      await receiver.close()
    }
  }, 150_000)
})
