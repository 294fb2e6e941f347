import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway, type Gateway } from '../src/gateway.js'
import { digestKey, generateKey, keyMode } from '../src/keys/format.js'
import type { KeyStore } from '../src/keys/store.js'
import { runKeyTool } from '../src/credentials/tool.js'
import { ACME_HOST, GLOBEX_HOST, testConfig } from './helpers/config.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource, property } from './helpers/memory-source.js'
import { expectEnvelope, expectProblem } from './helpers/problem.js'
import { eventually, keysUnder, REDIS_URL, removePrefix, testPrefix } from './helpers/redis.js'
import { contractChecked } from './helpers/contract.js'

const ALLOWED = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const OTHER = '5a7e5b9c-1d2e-4f30-8a4b-6c7d8e9f0a1b'
const prefix = testPrefix()
// The key tool's audit lines on stderr are the subject of test/credentials/audit.test.ts.
const env = { CONFIG_FILE: 'config/default.json', REDIS_URL, REDIS_PREFIX: prefix, LOG_LEVEL: 'warn' }
const redis = new Redis(REDIS_URL)
const logsA = captureLogs()
const logsB = captureLogs()
let a: Gateway
let b: Gateway

const source = new MemorySource([
  { chainCode: 'ACME', property: property({ id: ALLOWED }) },
  { chainCode: 'ACME', property: property({ id: OTHER, name: 'Acme Lyon' }) },
])

async function keyTool(...argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = []
  const err: string[] = []
  const code = await runKeyTool(argv, env, { out: (l) => out.push(l), err: (l) => err.push(l) })
  return { code, out, err }
}

async function createKey(...flags: string[]): Promise<{ id: string; key: string }> {
  const { code, out } = await keyTool('create', '--json', ...flags)
  expect(code).toBe(0)
  return JSON.parse(out[0] as string) as { id: string; key: string }
}

function call(gateway: Gateway, key: string | undefined, url = '/v1/properties', host = ACME_HOST) {
  const headers: Record<string, string> = { host, 'user-agent': 'auth-test/1.0' }
  if (key !== undefined) headers.authorization = `Bearer ${key}`
  return gateway.app.inject({ url, headers })
}

// A long key-cache lifetime: anything seen within a second is the publication, not expiry.
const config = testConfig({ keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } }, env)

beforeAll(async () => {
  a = await createGateway({ config, logger: logsA.logger, properties: source })
  b = await createGateway({ config, logger: logsB.logger, properties: source })
  contractChecked(a.app)
  contractChecked(b.app)
  await Promise.all([a.app.ready(), b.app.ready()])
  expect(await eventually(async () => a.redis?.status === 'ready' && b.redis?.status === 'ready', 5000)).toBe(true)
  // Both instances subscribed before any test publishes.
  expect(await eventually(async () => (await redis.pubsub('NUMSUB', `${prefix}keys:changed`))[1] === 2, 5000)).toBe(true)
})

afterAll(async () => {
  await Promise.all([a.app.close(), b.app.close()])
  await removePrefix(redis, prefix)
  redis.disconnect()
})

const CHALLENGE = { 'www-authenticate': 'Bearer' }

describe('API keys (docs/architecture.md, "Order of checks", step 4)', () => {
  it('serves a key with all properties of its brand', async () => {
    const { key } = await createKey('--brand', 'acme', '--mode', 'live', '--all-properties')
    expectEnvelope(await call(a, key), { page: 1, perPage: 20, total: 2 })
  })

  it('limits a key to its properties', async () => {
    const { key } = await createKey('--brand', 'acme', '--mode', 'live', '--properties', ALLOWED.toUpperCase())
    const list = expectEnvelope(await call(a, key), { page: 1, perPage: 20, total: 1 }) as { id: string }[]
    expect(list.map((p) => p.id)).toEqual([ALLOWED])
    expectProblem(await call(a, key, `/v1/properties/${OTHER}`), {
      code: 'PROPERTY_ACCESS_DENIED', instance: `/v1/properties/${OTHER}`, detail: `Your API key is not authorised for property '${OTHER}'.`,
    })
  })

  it('answers a missing header with MISSING_AUTH_HEADER', async () => {
    expectProblem(await call(a, undefined), { code: 'MISSING_AUTH_HEADER', instance: '/v1/properties', headers: CHALLENGE })
  })

  it.each([
    ['an unknown key', () => generateKey('live')],
    ['a key with a wrong checksum', () => { const k = generateKey('live'); return `${k.slice(0, -1)}${k.endsWith('0') ? '1' : '0'}` }],
    ['a key without the svc_ prefix', () => generateKey('live').replace('svc_live_', 'sk_live_')],
    ['a malformed key', () => 'svc_live_short'],
  ])('answers %s with INVALID_API_KEY', async (_name, make) => {
    expectProblem(await call(a, make()), {
      code: 'INVALID_API_KEY', instance: '/v1/properties', detail: 'The API key is not valid.', headers: CHALLENGE,
    })
  })

  it('answers an expired key with API_KEY_EXPIRED', async () => {
    const { key } = await createKey('--brand', 'acme', '--mode', 'live', '--all-properties', '--expires-at', '2020-01-01T00:00:00+02:00')
    expectProblem(await call(a, key), {
      code: 'API_KEY_EXPIRED', instance: '/v1/properties', headers: CHALLENGE, detail: 'The API key expired at 2019-12-31T22:00:00.000Z.',
    })
  })

  it('answers a key of another brand with BRAND_ACCESS_DENIED', async () => {
    const { key } = await createKey('--brand', 'globex', '--mode', 'live', '--all-properties')
    expectProblem(await call(a, key), { code: 'BRAND_ACCESS_DENIED', instance: '/v1/properties' })
    expectEnvelope(await call(a, key, '/v1/properties', GLOBEX_HOST), { page: 1, perPage: 20, total: 0 })
  })

  it('tells a test key from a live key by its prefix', async () => {
    const { key } = await createKey('--brand', 'acme', '--mode', 'test', '--all-properties')
    expect(keyMode(key)).toBe('test')
    expect(key).toMatch(/^svc_test_[0-9A-Za-z]{28}$/)
  })

  it.each([['live', 'test'], ['test', 'live']] as const)('answers a %s key whose stored record says %s with INVALID_API_KEY (docs/architecture.md, "Test mode")', async (mode, stored) => {
    const { key } = await createKey('--brand', 'acme', '--mode', mode, '--all-properties')
    // The record altered behind the key tool's back, before the gateway has seen the key.
    await redis.hset(`${prefix}key:${digestKey(key)}`, 'mode', stored)
    expectProblem(await call(a, key), { code: 'INVALID_API_KEY', instance: '/v1/properties', detail: 'The API key is not valid.', headers: CHALLENGE })
  })

  it('keeps health unauthenticated', async () => {
    const res = await a.app.inject({ url: '/v1/health', headers: { authorization: 'Bearer nonsense' } })
    expect(res.statusCode).toBe(200)
    expect(res.body).toBe('{"status":"ok"}')
  })
})

describe('suspend, resume and revoke reach every instance within a second', () => {
  it('suspends and resumes a key on the other instance', async () => {
    const { id, key } = await createKey('--brand', 'acme', '--mode', 'live', '--all-properties')
    // Both instances hold the key in their caches.
    expectEnvelope(await call(a, key), { page: 1, perPage: 20, total: 2 })
    expectEnvelope(await call(b, key), { page: 1, perPage: 20, total: 2 })

    expect(await keyTool('suspend', id)).toEqual({ code: 0, out: [`suspended ${id}`], err: [] })
    expect(await eventually(async () => (await call(b, key)).statusCode === 403, 1000)).toBe(true)
    expectProblem(await call(b, key), { code: 'API_KEY_SUSPENDED', instance: '/v1/properties', detail: 'The API key is suspended.' })
    expectProblem(await call(a, key), { code: 'API_KEY_SUSPENDED', instance: '/v1/properties', detail: 'The API key is suspended.' })

    expect(await keyTool('resume', id)).toEqual({ code: 0, out: [`resumed ${id}`], err: [] })
    expect(await eventually(async () => (await call(b, key)).statusCode === 200, 1000)).toBe(true)
  })

  it('revokes a key on the other instance', async () => {
    const { id, key } = await createKey('--brand', 'acme', '--mode', 'live', '--all-properties')
    expectEnvelope(await call(b, key), { page: 1, perPage: 20, total: 2 })
    expect(await keyTool('revoke', id)).toEqual({ code: 0, out: [`revoked ${id}`], err: [] })
    expect(await eventually(async () => (await call(b, key)).statusCode === 401, 1000)).toBe(true)
    expectProblem(await call(b, key), { code: 'INVALID_API_KEY', instance: '/v1/properties', headers: CHALLENGE })
  })
})

describe('secrets', () => {
  it('stores a digest, never the key, and logs the key id, never the key', async () => {
    const { id, key } = await createKey('--brand', 'acme', '--mode', 'live', '--all-properties', '--name', 'Channel manager')
    await call(a, key)
    const stored = await keysUnder(redis, prefix)
    expect(stored).toContain(`${prefix}key:${digestKey(key)}`)
    for (const name of stored) {
      expect(name).not.toContain(key)
      const type = await redis.type(name)
      const content = type === 'hash' ? JSON.stringify(await redis.hgetall(name))
        : type === 'set' ? JSON.stringify(await redis.smembers(name))
          : type === 'zset' ? JSON.stringify(await redis.zrange(name, '0', '-1')) : String(await redis.get(name))
      expect(content).not.toContain(key)
    }
    const lines = [...logsA.lines, ...logsB.lines].join('\n')
    expect(lines).not.toContain(key)
    expect(lines).toContain(`"keyId":"${id}"`)
  })

  it('refuses a key with a bad checksum without asking Redis', async () => {
    const store = (a.keyStore as KeyStore)
    let lookups = 0
    const original = store.findSecret.bind(store)
    store.findSecret = async (digest) => { lookups += 1; return original(digest) }
    try {
      const key = generateKey('live')
      await call(a, `${key.slice(0, -2)}zz`)
      expect(lookups).toBe(0)
      await call(a, key)
      await call(a, key)
      expect(lookups).toBe(1)
    } finally {
      store.findSecret = original
    }
  })
})

describe('the key tool', () => {
  it('creates a key and prints exactly one JSON object', async () => {
    const { code, out, err } = await keyTool('create', '--brand', 'acme', '--mode', 'live', '--properties', `${ALLOWED},${OTHER}`,
      '--name', 'PMS sync', '--expires-at', '2030-01-01T00:00:00Z', '--rate-limit', '50', '--json')
    expect({ code, err, lines: out.length }).toEqual({ code: 0, err: [], lines: 1 })
    expect(JSON.parse(out[0] as string)).toEqual({
      id: expect.stringMatching(/^key_[0-9A-Za-z]{17}$/), key: expect.stringMatching(/^svc_live_[0-9A-Za-z]{28}$/),
      type: 'api_key', brand: 'acme', mode: 'live', properties: [ALLOWED, OTHER], scopes: '*', status: 'active', name: 'PMS sync',
      expiresAt: '2030-01-01T00:00:00.000Z', rateLimit: 50, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null,
      createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    })
  })

  it('shows and lists keys without the secret', async () => {
    const { id, key } = await createKey('--brand', 'globex', '--mode', 'test', '--all-properties')
    const shown = await keyTool('show', id, '--json')
    expect(shown.code).toBe(0)
    expect(JSON.parse(shown.out[0] as string)).toEqual({
      id, type: 'api_key', brand: 'globex', mode: 'test', properties: '*', scopes: '*', status: 'active', name: null, expiresAt: null, rateLimit: null,
      allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt: expect.any(String),
    })
    const listed = await keyTool('list', '--brand', 'globex', '--json')
    expect((JSON.parse(listed.out[0] as string) as { id: string }[]).map((k) => k.id)).toContain(id)
    const text = await keyTool('list', '--brand', 'globex')
    expect(text.out.some((line) => line.startsWith(`${id}  globex  test  active  all properties  expires never`))).toBe(true)
    expect(JSON.stringify([shown, listed, text])).not.toContain(key)
  })

  it.each([
    [['create', '--brand', 'nope', '--mode', 'live', '--all-properties'], "unknown brand 'nope' (known: acme, globex)"],
    [['create', '--brand', 'acme', '--mode', 'live', '--properties', 'not-a-uuid'], "malformed property UUID 'not-a-uuid'"],
    [['create', '--brand', 'acme', '--mode', 'prod', '--all-properties'], 'create needs --mode live or --mode test'],
    [['create', '--brand', 'acme', '--mode', 'live'], 'create needs exactly one of --properties <uuid,...> and --all-properties'],
    [['create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--expires-at', 'tomorrow'], "--expires-at 'tomorrow' is not a date-time that exists, with an offset (e.g. 2027-06-30T00:00:00Z)"],
    [['create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--rate-limit', '0'], '--rate-limit takes a whole number of requests above 0'],
    [['show', 'key_doesnotexist'], "no key with id 'key_doesnotexist'"],
    [['suspend', 'key_doesnotexist'], "no key with id 'key_doesnotexist'"],
    [['revoke', 'key_doesnotexist'], "no key with id 'key_doesnotexist'"],
    [['suspend'], 'suspend needs a key id'],
  ])('refuses %j with exit 2 and one line', async (argv, message) => {
    expect(await keyTool(...argv)).toEqual({ code: 2, out: [], err: [message] })
  })

  it('exits 2 on an unknown flag', async () => {
    const result = await keyTool('create', '--colour', 'blue')
    expect({ code: result.code, lines: result.err.length }).toEqual({ code: 2, lines: 1 })
  })

  it('exits 1 when Redis is unreachable', async () => {
    const out: string[] = []
    const err: string[] = []
    const code = await runKeyTool(['list'], { ...env, REDIS_URL: 'redis://:secret@127.0.0.1:1' }, { out: (l) => out.push(l), err: (l) => err.push(l) })
    expect({ code, out, err }).toEqual({ code: 1, out: [], err: ['cannot reach Redis at redis://:***@127.0.0.1:1'] })
  })
})
