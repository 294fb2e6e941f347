import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { Webhook } from 'standardwebhooks'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MockPms } from '../../mocks/pms/server.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { ACME_HOST } from '../helpers/config.js'
import { accepted, hotelChanged, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, freePort, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { WAIT_MS } from '../helpers/webhooks.js'
import { DEVELOPMENT_KEY } from '../../src/webhooks/secrets.js'

// At least once across instances (docs/architecture.md, "Webhooks"), with the real process
// (`npm start` runs dist/src/server.js): an instance killed with SIGKILL mid-attempt, and one
// stopped with SIGTERM mid-attempt; another instance delivers the event, with the same
// `webhook-id`, and the receiver verifies it.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
let pms: MockPms
let key: string
let configFile: string
let hotel: string
const children: ChildProcess[] = []

beforeAll(async () => {
  pms = await new MockPms({ token: 'instances-token' }).listen()
  hotel = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
  const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as { events: Record<string, unknown> }
  const dir = mkdtempSync(join(tmpdir(), 'gw-webhooks-'))
  configFile = join(dir, 'config.json')
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: [ACME_HOST] }],
    cache: { ttlMs: 0 },
    loadShedding: { maxEventLoopDelayMs: 0 },
    shutdown: { drainMs: 0, timeoutMs: 8000 },
    // A short lock: a dead instance's attempt is taken over within about a second.
    events: { ...shipped.events, allowHttp: true, allowPrivateTargets: true, retrySchedule: [0.2, 0.2], deliveryLockSeconds: 1 },
  }))
})

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await once(child, 'exit')
    }
  }
})

afterAll(async () => {
  await pms.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

interface Instance { child: ChildProcess; base: string; admin: string; printed: () => string }

async function startInstance(): Promise<Instance> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const child = spawn(process.execPath, ['dist/src/server.js'], {
    env: {
      ...process.env, ...PUBLISHER_TOKENS, PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: prefix,
      PMS_URL: pms.url, PMS_TOKEN: 'instances-token', LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let text = ''
  child.stdout?.on('data', (c: Buffer) => { text += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { text += c.toString() })
  const base = `http://127.0.0.1:${port}`
  const up = await eventually(async () => (await request(`${base}/v1/health`, { headers: { host: ACME_HOST } }).then((r) => r.body.text().then(() => r.statusCode)).catch(() => 0)) === 200, 15_000, 50)
  if (!up) throw new Error(`the instance did not start: ${text}`)
  return { child, base, admin: `http://127.0.0.1:${adminPort}`, printed: () => text }
}

async function call(base: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; data: unknown }> {
  const res = await request(`${base}${path}`, {
    method, headers: { host: ACME_HOST, 'user-agent': 'instances/1.0', authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.statusCode, data: (JSON.parse(await res.body.text()) as { data: unknown }).data }
}

/** What an instance printed at LOG_LEVEL=warn: the messages, in order. */
function messages(printed: string): string[] {
  return printed.split('\n').filter((line) => line !== '').map((line) => (JSON.parse(line) as { msg: string }).msg)
}

/** The flags of this config are for tests and the demo only: every start says so, and nothing else. */
const FLAG_WARNINGS = [
  'events.allowPrivateTargets is set: webhooks may be delivered to loopback and internal addresses; for tests and the demo only',
  'events.allowHttp is set: webhook endpoints may use plain http:; for tests and the demo only',
]

// Two instances start one after the other, each up to 15 s on a loaded machine, and each wait is up to WAIT_MS.
describe('an instance that stops mid-attempt', { timeout: 90_000 }, () => {
  it.each(['SIGKILL', 'SIGTERM'] as const)('loses nothing on %s: another instance delivers, with the same webhook-id', async (signal) => {
    // The first request hangs (the attempt in flight when the instance stops); later ones succeed.
    const receiver = await new Receiver((n) => (n === 1 ? 'hang' : 200)).listen()
    try {
      const first = await startInstance()
      const created = await call(first.base, 'POST', '/v1/webhook-endpoints', { url: receiver.url, eventTypes: ['property.updated'] })
      expect(created.status).toBe(201)
      const { id: endpointId, secret } = created.data as { id: string; secret: string }
      const [event] = accepted(await publish(first.admin, hotelChanged(hotel)))
      const eventId = event?.eventId as string
      expect(await eventually(async () => receiver.received.length === 1, WAIT_MS)).toBe(true)
      first.child.kill(signal)
      const [code] = await once(first.child, 'exit') as [number | null]
      // SIGTERM: attempts in flight are handed back, and the process exits 0 without waiting for the hanging endpoint.
      if (signal === 'SIGTERM') expect({ code, printed: messages(first.printed()) }).toEqual({ code: 0, printed: FLAG_WARNINGS })
      const second = await startInstance()
      expect(await eventually(async () => receiver.of(eventId).length === 2, WAIT_MS)).toBe(true)
      const [hung, delivered] = receiver.of(eventId)
      expect(delivered?.headers['webhook-id']).toBe(hung?.headers['webhook-id'])
      expect(new Webhook(secret).verify(delivered?.body as string, delivered?.headers as Record<string, string>)).toMatchObject({ id: eventId })
      // The attempt handed back (SIGTERM) is not counted; the one the killed instance never finished is not recorded.
      expect(await eventually(async () => ((await call(second.base, 'GET', `/v1/webhook-endpoints/${endpointId}/deliveries`)).data as unknown[]).length === 1, WAIT_MS)).toBe(true)
      expect((await call(second.base, 'GET', `/v1/webhook-endpoints/${endpointId}/deliveries`)).data).toEqual([
        { eventId, attempt: 1, at: expect.any(String), status: 200, outcome: 'delivered', durationMs: expect.any(Number) },
      ])
      // The log is written asynchronously: wait for the start's lines rather than assume them flushed.
      expect(await eventually(async () => messages(second.printed()).length >= FLAG_WARNINGS.length, WAIT_MS)).toBe(true)
      expect(messages(second.printed())).toEqual(FLAG_WARNINGS)
    } finally {
      await receiver.close()
    }
  })
})
