import { execFile, spawn } from 'node:child_process'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { generateHotels } from '../mocks/pms/data.js'
import { eventually, REDIS_URL, removePrefix, testPrefix } from './helpers/redis.js'

// `npm run demo` as a newcomer runs it: the curl lines it prints must work as printed.

const run = promisify(execFile)
const prefix = testPrefix()

afterAll(async () => {
  const redis = new Redis(REDIS_URL)
  await removePrefix(redis, prefix)
  redis.disconnect()
})

async function demo(env: Record<string, string>, check: (printed: string, now: () => string) => Promise<void>): Promise<void> {
  const child = spawn('npm', ['run', '--silent', 'demo'], {
    env: { ...process.env, PORT: '0', ADMIN_PORT: '0', MOCK_PMS_PORT: '0', MOCK_IDP_PORT: '0', MOCK_WEBHOOK_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, signalled whole as Ctrl-C in a terminal would (npm does not
    // pass a signal on to the script it runs).
    detached: true,
  })
  let printed = ''
  child.stdout.on('data', (c: Buffer) => { printed += c.toString() })
  child.stderr.on('data', (c: Buffer) => { printed += c.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  try {
    // A whole demo starts here (stand-ins, gateway, keys): on a loaded machine that takes a
    // while, and nothing here is about how long.
    const deadline = Date.now() + 90_000
    while (!printed.includes('Ctrl-C stops it.') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(printed).toContain('Ctrl-C stops it.')
    await check(printed, () => printed)
  } finally {
    process.kill(-(child.pid as number), 'SIGINT')
    await exited
  }
}

async function curl(printed: string, fragment: string): Promise<unknown> {
  const line = printed.split('\n').find((l) => l.startsWith('curl ') && l.includes(fragment))
  expect(line).toBeDefined()
  const { stdout } = await run('sh', ['-c', line as string])
  return JSON.parse(stdout) as unknown
}

/** The three lines of the access-token example: the token request alone, then the token into $TOKEN and the call with it. */
async function tokenLines(printed: string): Promise<{ token: unknown; properties: unknown }> {
  const lines = printed.split('\n')
  const start = lines.findIndex((l) => l.startsWith('With an OAuth 2.0 access token'))
  expect(start).toBeGreaterThan(0)
  const [getToken, keepToken, call] = lines.slice(start + 1, start + 4) as [string, string, string]
  expect({ getToken: getToken.startsWith('curl '), keepToken: keepToken.startsWith('TOKEN=$(curl '), call: call.startsWith('curl ') })
    .toEqual({ getToken: true, keepToken: true, call: true })
  const token = JSON.parse((await run('sh', ['-c', getToken])).stdout) as unknown
  // As a newcomer pastes them: the second line, then the third, in one shell.
  const properties = JSON.parse((await run('sh', ['-c', `${keepToken}\n${call}`])).stdout) as unknown
  return { token, properties }
}

describe('npm run demo', { timeout: 180_000 }, () => {
  it('with Redis: prints curl lines that get an access token and call with it', async () => {
    await demo({ REDIS_URL, REDIS_PREFIX: prefix }, async (printed) => {
      expect(printed).toMatch(/Identity provider \(stand-in\): http:\/\/127\.0\.0\.1:\d+\/realms\/partners; client "demo-partner" registered as cli_[0-9A-Za-z]{17}, all properties of acme/)
      const { token, properties } = await tokenLines(printed)
      expect(token).toEqual({ access_token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/), token_type: 'Bearer', expires_in: 300, scope: 'properties:read' })
      const list = properties as { data: { object: string }[]; meta: { pagination: { perPage: number } } }
      expect(list.data).toHaveLength(3)
      expect(list.data.every((p) => p.object === 'property')).toBe(true)
      expect(list.meta.pagination.perPage).toBe(3)
    })
  })

  it('with Redis: prints curl lines that return properties', async () => {
    await demo({ REDIS_URL, REDIS_PREFIX: prefix }, async (printed) => {
      expect(printed).toContain('Redis at redis://127.0.0.1:6379 answers')
      const list = await curl(printed, 'perPage=3') as { data: { object: string }[]; meta: { pagination: { total: number } } }
      expect(list.data).toHaveLength(3)
      expect(list.data.every((p) => p.object === 'property')).toBe(true)
      expect(list.meta.pagination.total).toBeGreaterThan(3)
      const rooms = await curl(printed, '/v1/rooms') as { data: { object: string }[]; meta: { pagination: { perPage: number; total: number } } }
      expect(rooms.data).toHaveLength(3)
      expect(rooms.data.every((r) => r.object === 'room')).toBe(true)
      expect(rooms.meta.pagination).toMatchObject({ page: 1, perPage: 3 })
      const guest = await curl(printed, '/v1/guests/') as { data: { object: string; messages: unknown[]; reservations: unknown[] } }
      expect(guest.data).toMatchObject({ object: 'guest', messages: expect.any(Array), reservations: expect.any(Array) })
      // The test key, printed with curl lines of its own: answered by the sandboxes (seed 99).
      expect(printed).toMatch(/Test key: +key_[0-9A-Za-z]+, all properties of acme in the sandboxes/)
      expect(printed).toMatch(/curl -s -H 'Authorization: Bearer svc_test_[0-9A-Za-z]{28}' /)
      const sandboxAcme = new Set(generateHotels(99).filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid)))
      const liveAcme = new Set(generateHotels().filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid)))
      const sandboxList = await curl(printed, 'perPage=2') as { data: { object: string; id: string }[] }
      expect(sandboxList.data.map((p) => ({ object: p.object, sandbox: sandboxAcme.has(p.id), live: liveAcme.has(p.id) })))
        .toEqual([{ object: 'property', sandbox: true, live: false }, { object: 'property', sandbox: true, live: false }])
      const sandboxRooms = await curl(printed, '/v1/rooms?perPage=2') as { data: { object: string }[] }
      expect(sandboxRooms.data.map((r) => r.object)).toEqual(['room', 'room'])
      expect(await curl(printed, '/v1/health')).toEqual({ status: 'ok' })
      expect(await curl(printed, '/status')).toMatchObject({ status: 'ok', redis: { status: 'up' } })
    })
  })

  /** The demo's event lines, run in order: a hotel changed in the PMS, then the events read; a guest created, then the events read. */
  async function eventLines(printed: string): Promise<void> {
    const changed = await curl(printed, '/__mock/hotels/') as { hotel: { hotel_uuid: string; display_name: string }; published: { status: number } }
    expect({ name: changed.hotel.display_name, status: changed.published.status }).toEqual({ name: 'Acme Demo Renamed', status: 202 })
    const events = await curl(printed, 'type=property.updated') as { data: { type: string; propertyId: string; object: { path: string } }[] }
    expect(events.data.map((e) => [e.type, e.propertyId, e.object.path])).toEqual([['property.updated', changed.hotel.hotel_uuid, `/v1/properties/${changed.hotel.hotel_uuid}`]])
    const created = await curl(printed, "-d '{\"firstName\"") as { data: { id: string } }
    const guests = await curl(printed, 'type=guest.created') as { data: { type: string; object: { id: string } }[] }
    expect(guests.data.map((e) => [e.type, e.object.id])).toEqual([['guest.created', created.data.id]])
  }

  it('with Redis: prints curl lines that make a change and read the event it became', async () => {
    await demo({ REDIS_URL, REDIS_PREFIX: prefix }, eventLines)
  })

  it('with Redis: the stand-in receiver verifies and prints the webhooks the printed lines make', async () => {
    await demo({ REDIS_URL, REDIS_PREFIX: prefix }, async (printed, now) => {
      expect(printed).toMatch(/Webhooks: the demo key has endpoint we_[0-9A-Z]{26} for property\.updated and guest\.created/)
      const changed = await curl(printed, '/__mock/hotels/') as { hotel: { hotel_uuid: string } }
      const verified = (type: string, id: string): boolean => now().split('\n').some((l) => l.startsWith('[receiver] webhook verified: evt_') && l.includes(` ${type} `) && l.includes(id))
      expect(await eventually(async () => verified('property.updated', changed.hotel.hotel_uuid), 20_000)).toBe(true)
      const test = await curl(printed, "/test'") as { data: { eventId: string } }
      expect(await eventually(async () => now().includes(`[receiver] webhook verified: ${test.data.eventId} webhook.test webhook_endpoint we_`), 20_000)).toBe(true)
      expect(now()).not.toContain('webhook refused')
    })
  })

  it('with Redis: prints a portal link of the demo key that opens one session, once', async () => {
    await demo({ REDIS_URL, REDIS_PREFIX: prefix }, async (printed) => {
      const lines = printed.split('\n')
      const link = lines[lines.findIndex((l) => l.startsWith('The partner portal of the demo key')) + 1] as string
      const match = /^(http:\/\/localhost:\d+)\/portal\/enter#([A-Za-z0-9_-]{43})$/.exec(link)
      expect(match).not.toBeNull()
      const [, base, token] = match as unknown as [string, string, string]
      const enter = async () => {
        const res = await fetch(`${base}/portal/session`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify({ token }) })
        return { status: res.status, body: await res.json() as { data?: { capabilities: string[]; label: string }; code?: string } }
      }
      const first = await enter()
      expect({ status: first.status, capabilities: first.body.data?.capabilities, label: first.body.data?.label })
        .toEqual({ status: 201, capabilities: ['view', 'manage_webhooks', 'replay', 'roll_credential'], label: 'npm run demo' })
      const second = await enter()
      expect({ status: second.status, code: second.body.code }).toEqual({ status: 401, code: 'PORTAL_SESSION_INVALID' })
      // The page the link opens is served.
      const page = await fetch(`${base}/portal/enter`, { headers: { accept: 'text/html' } })
      expect({ status: page.status, type: page.headers.get('content-type') }).toEqual({ status: 200, type: 'text/html; charset=utf-8' })
    })
  })

  it('without Redis: says so plainly and serves from an in-memory key store', async () => {
    await demo({ REDIS_URL: 'redis://127.0.0.1:1' }, async (printed) => {
      expect(printed).toContain('No Redis answers at redis://127.0.0.1:1: this demo keeps its key and rate limits in memory.')
      expect(printed).toContain('The partner portal needs Redis (its sessions live there): start one and run the demo again for a portal link.')
      const one = await curl(printed, '/v1/properties/') as { data: { object: string; id: string } }
      expect(one.data.object).toBe('property')
      const refused = await curl(printed, 'per_page') as { code: string; errors: { detail: string }[] }
      expect(refused.code).toBe('UNKNOWN_QUERY_PARAMETER')
      expect(refused.errors[0]?.detail).toBe("Did you mean 'perPage'?")
      const { properties } = await tokenLines(printed)
      expect((properties as { data: { object: string }[] }).data.map((p) => p.object)).toEqual(['property', 'property', 'property'])
      // Its event log is in memory too.
      await eventLines(printed)
    })
  })
})
