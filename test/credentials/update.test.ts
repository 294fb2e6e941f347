import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ACME_HOST } from '../helpers/config.js'
import { TestGateway } from '../helpers/gateway.js'
import { keyTool, keyToolJson } from '../helpers/oauth.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { checkAnswer } from '../helpers/contract.js'

// `keys update` (docs/operations.md, "The key tool"): each field changes on the running
// instances within a second, as a suspension does; the same rules as `create` (exit 2 and one
// line); and the expiry policy (`keys.maxLifetimeDays`). Two gateways over real sockets, key
// records cached for a minute.

let t: TestGateway
let twin: Awaited<ReturnType<TestGateway['twin']>>
const redis = new Redis(REDIS_URL)
let propertyA: string
let propertyB: string

beforeAll(async () => {
  t = await TestGateway.start({ config: { keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } } })
  twin = await t.twin()
  expect(await eventually(async () => (await redis.pubsub('NUMSUB', `${t.prefix}keys:changed`))[1] === 2, 5000)).toBe(true)
  const acme = t.pms.hotels.filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid))
  propertyA = acme[0] as string
  propertyB = acme[1] as string
})

afterAll(async () => {
  await twin.close()
  await t.close()
  redis.disconnect()
})

const tool = (...argv: string[]) => keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix }, ...argv)

const json = <T>(...argv: string[]) => keyToolJson<T>({ REDIS_URL, REDIS_PREFIX: t.prefix }, ...argv)

async function call(on: 'a' | 'b', key: string, path = '/v1/properties') {
  const res = await request(`${on === 'a' ? t.url : twin.url}${path}`, { headers: { host: ACME_HOST, 'user-agent': 'update-test/1.0', authorization: `Bearer ${key}` } })
  const answer = { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
  checkAnswer('GET', path, answer, t.gateway.app.gatewayConfig)
  return answer
}

/** Polls both instances until `path` answers `status` on each: the change reached them. */
async function reached(key: string, status: number, path = '/v1/properties'): Promise<void> {
  for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, key, path)).statusCode === status, 1000), `${on} ${path}`).toBe(true)
}

describe('keys update, on running instances', () => {
  it('changes each field of a key, each change reaching every instance within a second', async () => {
    const { id, key } = await json<{ id: string; key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    // Both instances hold the key.
    for (const on of ['a', 'b'] as const) expect((await call(on, key)).statusCode).toBe(200)
    const credential = async (on: 'a' | 'b') => expectEnvelope(await call(on, key, '/v1/credential')) as Record<string, unknown>

    // The name.
    expect(await json('update', id, '--name', 'Channel sync')).toMatchObject({ id, name: 'Channel sync' })
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await credential(on)).name === 'Channel sync', 1000)).toBe(true)

    // The scopes: the properties are refused, GET /v1/credential needs none.
    await tool('update', id, '--scopes', 'guests:read')
    await reached(key, 403)
    for (const on of ['a', 'b'] as const) {
      expectProblem(await call(on, key), { code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties', detail: "This API key lacks the scope 'properties:read' that this request needs." })
      expect(await credential(on)).toMatchObject({ scopes: ['guests:read'] })
    }
    await tool('update', id, '--scopes', 'properties:read')
    await reached(key, 200)

    // The properties.
    await tool('update', id, '--properties', propertyA)
    await reached(key, 403, `/v1/properties/${propertyB}`)
    expectProblem(await call('b', key, `/v1/properties/${propertyB}`), { code: 'PROPERTY_ACCESS_DENIED', instance: `/v1/properties/${propertyB}` })
    expect((await call('b', key, `/v1/properties/${propertyA}`)).statusCode).toBe(200)
    await tool('update', id, '--all-properties')
    await reached(key, 200, `/v1/properties/${propertyB}`)

    // The quota.
    await tool('update', id, '--rate-limit', '5')
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, key)).headers['ratelimit-limit'] === '5', 1000)).toBe(true)
    await tool('update', id, '--default-rate-limit')
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, key)).headers['ratelimit-limit'] === '1000', 1000)).toBe(true)

    // The expiry: soon (the warning header), past (401), none.
    const soon = new Date(Date.now() + 3 * 86_400_000).toISOString()
    await tool('update', id, '--expires-at', soon)
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, key)).headers['service-credential-expires'] === soon, 1000)).toBe(true)
    await tool('update', id, '--expires-at', '2020-01-01T00:00:00Z')
    await reached(key, 401)
    expectProblem(await call('a', key), { code: 'API_KEY_EXPIRED', instance: '/v1/properties', detail: 'The API key expired at 2020-01-01T00:00:00.000Z.', headers: { 'www-authenticate': 'Bearer' } })
    await tool('update', id, '--no-expiry')
    await reached(key, 200)
    expect((await call('b', key)).headers['service-credential-expires']).toBeUndefined()

    // Where it may be used from (the tests call from 127.0.0.1).
    await tool('update', id, '--allow-ips', '10.0.0.0/8,2001:db8::/32')
    await reached(key, 403)
    expectProblem(await call('b', key), { code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'This API key may not be used from the address 127.0.0.1.' })
    await tool('update', id, '--allow-ips', '127.0.0.0/8')
    await reached(key, 200)
    await tool('update', id, '--any-ip')
    await reached(key, 200)

    // (When it was last used depends on whether a flush came since: usage.test.ts is about it.)
    const { lastUsedAt, ...now } = await credential('a')
    expect(now).toEqual({
      id, type: 'api_key', name: 'Channel sync', brand: 'acme', mode: 'live', scopes: ['properties:read'], properties: '*',
      rateLimit: { limit: 1000, windowSeconds: 60 }, expiresAt: null, allowedIps: null, previousSecretExpiresAt: null,
    })
    expect(lastUsedAt === null || /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/.test(String(lastUsedAt))).toBe(true)
    // Each change is one entry of the audit trail.
    const entries = await json<{ action: string; changes: Record<string, unknown> }[]>('audit', '--id', id)
    expect(entries.map((e) => `${e.action} ${Object.keys(e.changes).join(',')}`).reverse()).toEqual([
      'create brand,mode,scopes,properties,status', 'update name', 'update scopes', 'update scopes', 'update properties', 'update properties',
      'update rateLimit', 'update rateLimit', 'update expiresAt', 'update expiresAt', 'update expiresAt', 'update allowedIps', 'update allowedIps', 'update allowedIps',
    ])
  })

  it('prints the key as it is now, with --json as show does', async () => {
    const { id } = await json<{ id: string }>('create', '--brand', 'acme', '--mode', 'test', '--all-properties')
    const updated = await json<Record<string, unknown>>('update', id, '--name', 'Night audit', '--rate-limit', '70', '--allow-ips', '192.0.2.10, 2001:DB8::1')
    expect(updated).toEqual(await json('show', id))
    expect(updated).toMatchObject({ name: 'Night audit', rateLimit: 70, allowedIps: ['192.0.2.10', '2001:db8::1'] })
    const text = await tool('update', id, '--name', '')
    expect(text.out[0]).toMatch(new RegExp(`^updated ${id}: ${id}  acme  test  active  all properties  expires never  rate limit 70  scopes \\*  created \\S+  from 192\\.0\\.2\\.10,2001:db8::1  last used never$`))
  })

  it.each([
    [['--scopes', 'everything'], "unknown scope 'everything' (known: events:read, guests:read, guests:write, properties:read, request-logs:read, rooms:read, webhooks:read, webhooks:write)"],
    [['--properties', 'not-a-uuid'], "malformed property UUID 'not-a-uuid'"],
    [['--expires-at', 'tomorrow'], "--expires-at 'tomorrow' is not a date-time that exists, with an offset (e.g. 2027-06-30T00:00:00Z)"],
    [['--rate-limit', '0'], '--rate-limit takes a whole number of requests above 0'],
    [['--allow-ips', '10.0.0.0/33'], "--allow-ips: '10.0.0.0/33' is not an IPv4 or IPv6 address or CIDR block"],
    [['--allow-ips', '10.0.0.1/8'], "--allow-ips: '10.0.0.1/8' has bits set past its prefix; the block is 10.0.0.0/8"],
    [['--allow-ips', Array.from({ length: 33 }, (_, i) => `10.0.0.${i}`).join(',')], '--allow-ips takes 1 to 32 IPv4 or IPv6 addresses and CIDR blocks, or null for any address'],
    [['--rate-limit', '5', '--default-rate-limit'], '--rate-limit and --default-rate-limit cannot be combined'],
    [['--allow-ips', '10.0.0.1', '--any-ip'], '--allow-ips and --any-ip cannot be combined'],
    [['--expires-at', '2030-01-01T00:00:00Z', '--no-expiry'], '--expires-at and --no-expiry cannot be combined'],
    [['--properties', 'c0ffee00-0000-4000-8000-00000000000a', '--all-properties'], '--properties and --all-properties cannot be combined'],
    [[], 'update needs a change: --name, --scopes, --properties or --all-properties, --rate-limit or --default-rate-limit, --expires-at or --no-expiry, --allow-ips or --any-ip'],
  ])('refuses update %j with exit 2 and one line, as create does, leaving the key as it was', async (flags, message) => {
    const { id } = await json<{ id: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    const before = await json('show', id)
    expect(await tool('update', id, ...flags)).toEqual({ code: 2, out: [], err: [message] })
    expect(await json('show', id)).toEqual(before)
  })

  it('refuses the same values on create', async () => {
    expect(await tool('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--allow-ips', 'localhost'))
      .toEqual({ code: 2, out: [], err: ["--allow-ips: 'localhost' is not an IPv4 or IPv6 address or CIDR block"] })
    expect(await tool('update', 'key_00000000000000000', '--name', 'x')).toEqual({ code: 2, out: [], err: ["no key with id 'key_00000000000000000'"] })
  })

  it('changes a grant\'s fields too, but never its expiry', async () => {
    const env = { REDIS_URL, REDIS_PREFIX: t.prefix, OAUTH_ISSUER: 'https://id.example.com', OAUTH_JWKS_URI: 'https://id.example.com/jwks', OAUTH_AUDIENCE: 'partner-api' }
    const made = await keyTool(env, 'grant-client', '--issuer', 'https://id.example.com', '--client-id', 'updater', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json')
    const { id } = JSON.parse(made.out[0] as string) as { id: string }
    const updated = await keyTool(env, 'update', id, '--scopes', 'rooms:read', '--allow-ips', '10.0.0.0/8', '--rate-limit', '9', '--json')
    expect(JSON.parse(updated.out[0] as string)).toMatchObject({ id, type: 'oauth_client', scopes: ['rooms:read'], allowedIps: ['10.0.0.0/8'], rateLimit: 9, expiresAt: null })
    expect(await keyTool(env, 'update', id, '--expires-at', '2030-01-01T00:00:00Z')).toEqual({
      code: 2, out: [], err: ["a client's grant has no expiry (its access tokens expire): --expires-at is for API keys"],
    })
  })
})

describe('the expiry policy (keys.maxLifetimeDays)', () => {
  const file = join(mkdtempSync(join(tmpdir(), 'gw-policy-')), 'config.json')
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync('config/default.json', 'utf8')) as object, keys: { maxLifetimeDays: 30 } }))
  const policyTool = (...argv: string[]) => keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix, CONFIG_FILE: file }, ...argv)
  const days = (n: number): string => new Date(Date.now() + n * 86_400_000).toISOString()

  it('refuses a key without an expiry, or with one too far ahead, on create and on update', async () => {
    const missing = await policyTool('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    expect({ code: missing.code, out: missing.out, lines: missing.err.length }).toEqual({ code: 2, out: [], lines: 1 })
    expect(missing.err[0]).toMatch(/^keys\.maxLifetimeDays is 30: an API key must expire, --expires-at at most \d{4}-\d{2}-\d{2}T\S+Z$/)
    const far = await policyTool('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--expires-at', days(31))
    expect({ code: far.code, out: far.out, lines: far.err.length }).toEqual({ code: 2, out: [], lines: 1 })
    expect(far.err[0]).toMatch(/^keys\.maxLifetimeDays is 30: --expires-at may be at most \d{4}-\d{2}-\d{2}T\S+Z$/)

    const made = await policyTool('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--expires-at', days(29), '--json')
    expect(made.code).toBe(0)
    const { id } = JSON.parse(made.out[0] as string) as { id: string }
    const lifted = await policyTool('update', id, '--no-expiry')
    expect(lifted.code).toBe(2)
    expect(lifted.err[0]).toMatch(/^keys\.maxLifetimeDays is 30: an API key must expire/)
    const later = await policyTool('update', id, '--expires-at', days(45))
    expect(later.code).toBe(2)
    expect(later.err[0]).toMatch(/^keys\.maxLifetimeDays is 30: --expires-at may be at most /)
    expect((await policyTool('update', id, '--expires-at', days(20))).code).toBe(0)
    // A change of another field of a key within the policy is no change of its expiry.
    expect((await policyTool('update', id, '--name', 'Within policy')).code).toBe(0)
  })

  it('leaves grants alone: their tokens expire', async () => {
    const run = await keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix, CONFIG_FILE: file, OAUTH_ISSUER: 'https://id.example.com', OAUTH_JWKS_URI: 'https://id.example.com/jwks', OAUTH_AUDIENCE: 'partner-api' },
      'grant-client', '--issuer', 'https://id.example.com', '--client-id', 'policy-free', '--brand', 'acme', '--mode', 'live', '--all-properties')
    expect(run.code).toBe(0)
  })
})
