import { spawn, type ChildProcess } from 'node:child_process'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockPms } from '../../mocks/pms/server.js'
import { MockService } from '../../mocks/service/server.js'
import { loadConfig } from '../../src/config.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { DEVELOPMENT_KEY } from '../../src/webhooks/secrets.js'
import { ACME_HOST } from '../helpers/config.js'
import { checkAnswer } from '../helpers/contract.js'
import { SERVICE_TOKEN } from '../helpers/declared.js'
import { PUBLISHER_TOKENS } from '../helpers/events.js'
import { PMS_TOKEN, TestGateway } from '../helpers/gateway.js'
import { ConfigFile, configInForce, shippedRoutes, shippedWith } from '../helpers/reload.js'
import { eventually, freePort, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// What starts a reload besides the admin route: SIGHUP to the real process (`npm start` runs
// dist/src/server.js), and a change of the file when `server.watchConfig` is set.

let pms: MockPms
let service: MockService
let propertyId: string

beforeAll(async () => {
  pms = await new MockPms({ token: PMS_TOKEN }).listen()
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  propertyId = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
})
afterAll(async () => {
  await service.close()
  await pms.close()
})

const bookings = (): Record<string, unknown> => ({ bookings: { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs: 2000 } })

/** GET /v1/rooms of the property at `base`, checked against the contract of the config in force. */
async function rooms(base: string, key: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const res = await request(`${base}/v1/rooms`, { headers: { host: ACME_HOST, 'user-agent': 'reload-test/1.0', authorization: `Bearer ${key}`, 'service-property-id': propertyId } })
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
}

describe('a reload by SIGHUP', () => {
  const prefix = testPrefix()
  const redis = new Redis(REDIS_URL)
  const file = new ConfigFile()
  afterAll(async () => {
    await removePrefix(redis, prefix)
    redis.disconnect()
    file.remove()
  })

  it('re-reads the file, serves the route it adds, and keeps running', { timeout: 90_000 }, async () => {
    const key = (await new RedisKeyStore(redis, prefix).create({ brand: 'acme', mode: 'live', properties: '*' })).key
    file.write(shippedWith({ upstreams: bookings(), routes: shippedRoutes(['/v1/guests']) }))
    const [port, adminPort] = [await freePort(), await freePort()]
    const child: ChildProcess = spawn(process.execPath, ['dist/src/server.js'], {
      env: {
        ...process.env, PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: file.path, REDIS_URL, REDIS_PREFIX: prefix,
        PMS_URL: pms.url, PMS_TOKEN, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN, WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY, LOG_LEVEL: 'warn', ...PUBLISHER_TOKENS,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let printed = ''
    child.stdout?.on('data', (c: Buffer) => { printed += c.toString() })
    child.stderr?.on('data', (c: Buffer) => { printed += c.toString() })
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    const base = `http://127.0.0.1:${port}`
    const admin = `http://127.0.0.1:${adminPort}`
    try {
      const up = await eventually(async () => (await rooms(base, key).catch(() => ({ status: 0 }))).status !== 0, 30_000, 100)
      expect({ up, printed: up ? '' : printed }).toEqual({ up: true, printed: '' })
      const before = await rooms(base, key)
      expect(JSON.parse(before.body)).toMatchObject({ status: 404, code: 'ROUTE_NOT_FOUND', instance: '/v1/rooms' })

      const added = file.write(shippedWith({ upstreams: bookings(), routes: shippedRoutes(['/v1/guests', '/v1/rooms']) }))
      child.kill('SIGHUP')
      const served = await eventually(async () => (await rooms(base, key)).status === 200, 30_000, 100)
      expect({ served, printed: served ? '' : printed }).toEqual({ served: true, printed: '' })
      const after = await rooms(base, key)
      checkAnswer('GET', '/v1/rooms', { statusCode: after.status, headers: after.headers, body: after.body }, loadConfig({ CONFIG_FILE: file.path, REDIS_URL, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN }))
      expect((JSON.parse(after.body) as { data: unknown[] }).data.length).toBeGreaterThan(0)
      expect((await configInForce(admin)).hash).toBe(added)
      expect(child.exitCode).toBeNull()
    } finally {
      child.kill('SIGTERM')
    }
    expect({ code: await exited, printed }).toEqual({ code: 0, printed: '' })
  })
})

describe('a reload by the file watch (server.watchConfig)', () => {
  const file = new ConfigFile()
  let t: TestGateway
  let admin: string
  let key: string
  const content = (paths: string[]): Record<string, unknown> => shippedWith({ server: { watchConfig: true }, upstreams: bookings(), routes: shippedRoutes(paths) })

  beforeAll(async () => {
    const first = content(['/v1/guests'])
    file.write(first)
    const env = { CONFIG_FILE: file.path, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN }
    t = await TestGateway.start({
      pms, env,
      config: { server: { watchConfig: true }, upstreams: first.upstreams as never, routes: first.routes as never },
      gateway: { reload: { load: () => loadConfig({ ...env, REDIS_URL, PMS_URL: pms.url, PMS_TOKEN }), text: file.text } },
    })
    await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
    admin = `http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}`
    key = await t.key()
  })
  afterAll(async () => {
    // The stand-in PMS is this file's, closed above.
    await t.gateway.app.close()
    file.remove()
  })

  it('serves what the edited file says, without a signal or a request', { timeout: 60_000 }, async () => {
    expect((await rooms(t.url, key)).status).toBe(404)
    const added = file.write(content(['/v1/guests', '/v1/rooms']))
    expect(await eventually(async () => (await configInForce(admin)).hash === added, 30_000, 100)).toBe(true)
    const served = await t.call('GET', '/v1/rooms', { key, headers: { 'service-property-id': propertyId } })
    expect(served.statusCode).toBe(200)
    expect(t.logs.records().filter((l) => l.msg === 'config reloaded').map((l) => (l as { trigger?: unknown }).trigger)).toEqual(['file watch'])
  })
})
