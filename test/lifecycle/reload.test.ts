import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockPms } from '../../mocks/pms/server.js'
import { MockService } from '../../mocks/service/server.js'
import { loadConfig } from '../../src/config.js'
import { NO_LOAD_SHEDDING, NO_OAUTH } from '../helpers/config.js'
import { SERVICE_TOKEN } from '../helpers/declared.js'
import { PMS_TOKEN, TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'
import { parseResponses, rawExchange } from '../helpers/raw.js'
import { REDIS_URL } from '../helpers/redis.js'

// Reloading the configuration over real sockets (docs/operations.md, "Changing the
// configuration"): routes added and removed, a refused reload that leaves the old one serving,
// an unchanged file, and a steady load that sees no failure across reloads.

const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as Record<string, unknown> & { routes: { path: string }[] }
const dir = mkdtempSync(join(tmpdir(), 'gateway-reload-'))
const file = join(dir, 'config.json')

let pms: MockPms
let service: MockService
let t: TestGateway
let admin: string
let key: string
let propertyId: string

function fileWith(paths: string[], change: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...shipped,
    oauth: NO_OAUTH,
    loadShedding: NO_LOAD_SHEDDING,
    upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs: 2000 } },
    routes: shipped.routes.filter((r) => paths.includes(r.path)),
    ...change,
  }
}

/** Writes the file; returns the hash it goes by. */
function write(content: Record<string, unknown>): string {
  const text = `${JSON.stringify(content, null, 2)}\n`
  writeFileSync(file, text)
  return createHash('sha256').update(text).digest('hex').slice(0, 16)
}

async function reload() {
  const res = await request(`${admin}/admin/v1/config/reload`, { method: 'POST' })
  return { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
}

async function adminGet(path: string): Promise<string> {
  return (await request(`${admin}${path}`)).body.text()
}

let startHash: string
const GUEST = '6f1c2a4e-8d3b-4c7a-9e2f-1a5b7c9d0e3f'

beforeAll(async () => {
  pms = await new MockPms({ token: PMS_TOKEN }).listen()
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  const first = fileWith(['/v1/guests'])
  startHash = write(first)
  const env = { CONFIG_FILE: file, REDIS_URL, PMS_URL: pms.url, PMS_TOKEN, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN }
  t = await TestGateway.start({
    pms,
    env: { CONFIG_FILE: file, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
    config: { upstreams: first.upstreams as never, routes: first.routes as never },
    gateway: { reload: { load: () => loadConfig(env), text: readFileSync(file, 'utf8') } },
  })
  await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  admin = `http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}`
  // The steady load below sends as fast as the gateway answers, on a fast machine more than
  // the shipped quota of 1,000 requests a minute: those 429s would be the quota's answers, not
  // requests a reload lost.
  key = await t.key({ rateLimit: 1_000_000 })
  propertyId = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
})
afterAll(async () => {
  await t.close()
  await service.close()
  rmSync(dir, { recursive: true, force: true })
})

const rooms = (): Promise<Answer> => t.call('GET', '/v1/rooms', { key, headers: { 'service-property-id': propertyId } })

describe('a reload', () => {
  it('shows the configuration in force at start', async () => {
    const status = JSON.parse(await adminGet('/status')) as { config: unknown }
    expect(status.config).toEqual({ hash: startHash, loadedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/) })
    expect(await adminGet('/metrics')).toContain(`gateway_config_info{hash="${startHash}"} 1`)
  })

  it('adds a route, then removes one', async () => {
    expectProblem(await rooms(), { code: 'ROUTE_NOT_FOUND', instance: '/v1/rooms' })
    const added = write(fileWith(['/v1/guests', '/v1/rooms']))
    const res = await reload()
    expect({ status: res.statusCode, type: res.headers['content-type'], body: JSON.parse(res.body) as unknown }).toEqual({
      status: 200, type: 'application/json; charset=utf-8',
      body: { data: { changed: true, hash: added, loadedAt: expect.any(String) }, meta: { requestId: expect.any(String), timestamp: expect.any(String) } },
    })
    const served = await rooms()
    expect(served.statusCode).toBe(200)
    expect((JSON.parse(served.body) as { data: unknown[] }).data.length).toBeGreaterThan(0)

    write(fileWith(['/v1/rooms']))
    expect((await reload()).statusCode).toBe(200)
    expectProblem(await t.get('/v1/guests', key), { code: 'ROUTE_NOT_FOUND', instance: '/v1/guests' })
    expect((await rooms()).statusCode).toBe(200)
  })

  it('changes nothing when the file is as it was', async () => {
    const before = JSON.parse(await adminGet('/status')) as { config: { hash: string; loadedAt: string } }
    const res = await reload()
    expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown }).toEqual({
      status: 200, body: { data: { changed: false, ...before.config }, meta: { requestId: expect.any(String), timestamp: expect.any(String) } },
    })
    expect(await adminGet('/metrics')).toMatch(/gateway_config_reloads_total\{outcome="unchanged"\} [1-9]/)
  })

  it('refuses a bad file, naming every reason, and the old configuration keeps serving', async () => {
    const before = JSON.parse(await adminGet('/status')) as { config: { hash: string; loadedAt: string } }
    write(fileWith(['/v1/rooms', '/v1/guests'], { docsUrl: 'https://elsewhere.example', upstreams: {} }))
    const res = await reload()
    expectProblem(res, {
      code: 'VALIDATION_FAILED', instance: '/admin/v1/config/reload',
      detail: `The configuration was not reloaded (2 reasons); the one loaded at ${before.config.loadedAt} keeps serving.`,
      errors: [
        { field: 'routes[0].upstream', code: 'INVALID_FORMAT', detail: "no upstream named 'bookings'" },
        { field: 'routes[1].upstream', code: 'INVALID_FORMAT', detail: "no upstream named 'bookings'" },
      ],
    })
    write(fileWith(['/v1/rooms'], { docsUrl: 'https://elsewhere.example' }))
    expectProblem(await reload(), {
      code: 'VALIDATION_FAILED', instance: '/admin/v1/config/reload',
      errors: [{ field: 'docsUrl', code: 'NOT_ALLOWED', detail: 'needs a restart: the admin listener, made once at start, links its problems with it too' }],
    })
    expect(t.logs.records().filter((l) => l.msg === 'config reload refused; the old configuration keeps serving').length).toBe(2)
    expect((JSON.parse(await adminGet('/status')) as { config: unknown }).config).toEqual(before.config)
    expect((await rooms()).statusCode).toBe(200)
    expect(await adminGet('/metrics')).toMatch(/gateway_config_reloads_total\{outcome="refused"\} 2/)
  })

  it('loses no request under a steady load, a changed upstream included', async () => {
    let running = true
    const statuses: number[] = []
    const worker = async (): Promise<void> => {
      while (running) statuses.push((await rooms()).statusCode, (await t.get('/v1/properties', key)).statusCode)
    }
    const workers = [worker(), worker(), worker()]
    const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
    const outcomes: number[] = []
    for (const timeoutMs of [2500, 3000, 2500]) {
      await wait(100)
      write(fileWith(['/v1/rooms', '/v1/guests'], { upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs } } }))
      outcomes.push((await reload()).statusCode)
      await wait(100)
      write(fileWith(['/v1/rooms'], { upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs } } }))
      outcomes.push((await reload()).statusCode)
    }
    await wait(100)
    running = false
    await Promise.all(workers)
    expect(outcomes).toEqual([200, 200, 200, 200, 200, 200])
    expect(statuses.length).toBeGreaterThan(12)
    expect(statuses.filter((s) => s !== 200)).toEqual([])
  })

  it('answers on the listener from the routes in force: CONNECT to a route a reload added names its methods', async () => {
    // Not among the routes at start: the index of the app built then does not know it.
    write(fileWith(['/v1/rooms', '/v1/guests/{guestId}']))
    expect((await reload()).statusCode).toBe(200)
    const port = Number(new URL(t.url).port)
    const { text } = await rawExchange(port, [`CONNECT /v1/guests/${GUEST} HTTP/1.1\r\nHost: api.acme-hotels.example\r\n\r\n`])
    const [answer] = parseResponses(text)
    expect({ status: answer?.statusCode, allow: answer?.headers.allow, body: JSON.parse(answer?.body ?? '{}') as unknown }).toMatchObject({
      status: 405, allow: 'GET, HEAD, PATCH',
      body: { code: 'METHOD_NOT_ALLOWED', instance: `/v1/guests/${GUEST}`, detail: 'CONNECT is not supported; this API tunnels nothing. Use GET, HEAD, PATCH on its paths.' },
    })
  })

  it('reports the circuit breakers of the upstreams in force only', async () => {
    const bookings = { url: service.url, tokenHeader: 'X-Service-Token', timeoutMs: 2000 }
    write(fileWith(['/v1/rooms'], { upstreams: { bookings, spare: { url: service.url } } }))
    expect((await reload()).statusCode).toBe(200)
    expect(await adminGet('/metrics')).toContain('gateway_circuit_breaker_state{upstream="spare"} 0')
    write(fileWith(['/v1/rooms'], { upstreams: { bookings } }))
    expect((await reload()).statusCode).toBe(200)
    const metrics = await adminGet('/metrics')
    expect(metrics).toContain('gateway_circuit_breaker_state{upstream="bookings"} 0')
    expect(metrics).not.toContain('upstream="spare"} ')
  })
})
