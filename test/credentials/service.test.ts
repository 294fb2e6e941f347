import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, describe, expect, it } from 'vitest'
import { AuditTrail, MemoryAuditStore, RedisAuditStore } from '../../src/credentials/audit.js'
import {
  CredentialInputError, CredentialNotFound, CredentialService, DEFAULT_OVERLAP_MS, instantMillis, isGrantId, MAX_OVERLAP_MS, overlapMs, parseOverlap, type Known,
} from '../../src/credentials/service.js'
import { lastDays, parseUsageField, RedisUsageStore, usageField, utcDay } from '../../src/credentials/usage.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The credentials service without a gateway or the key tool's process (docs/operations.md,
// "The credentials API"; docs/architecture.md, "The audit trail"): every rule of a
// credential's fields, its views, each change with its audit entry, a roll's overlap, a
// revoke, the usage counts and the audit trail in Redis. The module's mutation run uses these
// (scripts/mutation.ts).

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
})

const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const OTHER = '11111111-1111-4111-8111-111111111111'
const ISSUER = 'https://id.example.com/realms/partners'
const DAY = 86_400_000
// Near the real clock: the key store stamps records with it, and the audit trail keeps entries by it.
const NOW = Date.now() - (Date.now() % 1000)

const known: Known = {
  brands: ['acme', 'globex'], scopes: ['properties:read', 'guests:read'], issuers: [ISSUER],
  maxLifetimeDays: undefined, rateLimit: { limit: 100, windowSeconds: 60 }, usageRetentionDays: 90,
}

let namespaces = 0

function world(over: Partial<Known> = {}) {
  namespaces += 1
  const ns = `${prefix}${namespaces}:`
  const store = new RedisKeyStore(redis, ns)
  const usage = new RedisUsageStore(redis, ns)
  const audit = new AuditTrail(new RedisAuditStore(redis, ns), 400 * DAY, pino({ level: 'silent' }))
  const revoked: string[] = []
  const ended: [string, string, string][] = []
  const service = new CredentialService({
    store, usage, audit, known: { ...known, ...over }, now: () => NOW,
    onRevoke: async (id) => { revoked.push(id) },
    endPortalSessions: async (id, actor, reason) => { ended.push([id, actor, reason]) },
  })
  return { service, store, usage, audit, revoked, ended, ns }
}

/** The field errors `run` rejects with. */
async function fieldErrors(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run()
  } catch (error) {
    expect(error).toBeInstanceOf(CredentialInputError)
    return (error as CredentialInputError).errors
  }
  throw new Error('expected field errors')
}

const iso = (ms: number): string => new Date(ms).toISOString()
/** The minute a time falls in: when a credential was last used is kept to the minute. */
const minute = (ms: number): number => ms - (ms % 60_000)

describe('times and overlaps', () => {
  it('reads a date-time with an offset, or a date as its midnight UTC, that exists', () => {
    expect(instantMillis('2027-06-30T00:00:00Z')).toBe(Date.parse('2027-06-30T00:00:00Z'))
    expect(instantMillis('2027-06-30T02:00:00+02:00')).toBe(Date.parse('2027-06-30T00:00:00Z'))
    expect(instantMillis('2027-06-30')).toBe(Date.parse('2027-06-30T00:00:00Z'))
    expect(instantMillis('2027-06-30T00:00:00.0005Z')).toBe(Date.parse('2027-06-30T00:00:00Z'))
    for (const text of ['2026-02-30', '2027-06-30T00:00:00', '30/06/2027', '', '2027-6-30']) expect(instantMillis(text), text).toBeUndefined()
  })

  it('reads an overlap of seconds, minutes, hours or days up to 7 days, or 0', () => {
    expect([overlapMs('0'), overlapMs('90s'), overlapMs('30m'), overlapMs('24h'), overlapMs('7d'), overlapMs('168h')]).toEqual([0, 90_000, 1_800_000, 86_400_000, 604_800_000, 604_800_000])
    for (const text of ['8d', '169h', '00', '01h', '1', 'h', '1w', '-1d', ' 1d', '12345678s']) expect(overlapMs(text), text).toBeUndefined()
    expect(DEFAULT_OVERLAP_MS).toBe(86_400_000)
    expect(MAX_OVERLAP_MS).toBe(604_800_000)
    expect(parseOverlap(undefined, (f) => `--${f}`)).toBe(86_400_000)
    expect(parseOverlap('2h', (f) => `--${f}`)).toBe(7_200_000)
    expect(() => parseOverlap('9d', (f) => `--${f}`)).toThrow(new CredentialInputError([
      { field: 'overlap', code: 'INVALID_FORMAT', detail: '--overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once' },
    ]))
  })

  it('tells a grant\'s id from a key\'s', () => {
    expect(isGrantId('cli_abc')).toBe(true)
    expect(isGrantId('key_abc')).toBe(false)
    expect(new CredentialNotFound('cli_x').message).toBe('no grant with id \'cli_x\'')
    expect(new CredentialNotFound('key_x').message).toBe('no key with id \'key_x\'')
  })
})

describe('an API key\'s fields', () => {
  it('creates a key with every field, normalised, shows it, and audits its creation', async () => {
    const { service, audit } = world()
    const { key, view } = await service.createKey({
      type: 'api_key', brand: 'acme', mode: 'test', properties: [` ${HOTEL.toUpperCase()} `, HOTEL, OTHER], scopes: [' guests:read', 'guests:read'],
      name: 'Booking engine', expiresAt: '2099-01-31', rateLimit: 50, allowedIps: ['10.0.0.0/8', ' 10.0.0.0/8', '2001:DB8::/32'],
    }, 'ops')
    expect(key).toMatch(/^svc_test_/)
    expect(view).toEqual({
      id: view.id, type: 'api_key', brand: 'acme', mode: 'test', properties: [HOTEL, OTHER], scopes: ['guests:read'], status: 'active', name: 'Booking engine',
      expiresAt: '2099-01-31T00:00:00.000Z', rateLimit: 50, allowedIps: ['10.0.0.0/8', '2001:db8::/32'], previousSecretExpiresAt: null, lastUsedAt: null, createdAt: view.createdAt,
    })
    expect(view.id).toMatch(/^key_/)
    expect(await service.show(view.id)).toEqual(view)
    const { entries, total } = await audit.query({ id: view.id, offset: 0, limit: 10 })
    expect(total).toBe(1)
    expect(entries).toEqual([{
      id: entries[0]?.id, time: iso(NOW), actor: 'ops', action: 'create', credentialId: view.id,
      changes: {
        brand: { old: null, new: 'acme' }, mode: { old: null, new: 'test' }, name: { old: null, new: 'Booking engine' }, scopes: { old: null, new: ['guests:read'] },
        properties: { old: null, new: [HOTEL, OTHER] }, rateLimit: { old: null, new: 50 }, expiresAt: { old: null, new: '2099-01-31T00:00:00.000Z' },
        allowedIps: { old: null, new: ['10.0.0.0/8', '2001:db8::/32'] }, status: { old: null, new: 'active' },
      },
    }])
    expect(entries[0]?.id).toMatch(/^aud_[0-9a-z]{11}[0-9a-f]{8}$/)
    expect(JSON.stringify(entries)).not.toContain(key)
  })

  it('takes the defaults: every scope, no name, expiry, limit or address list', async () => {
    const { service } = world()
    const { view } = await service.createKey({ type: 'api_key', brand: 'globex', mode: 'live', properties: '*', name: '' }, 'ops')
    expect(view).toEqual({
      id: view.id, type: 'api_key', brand: 'globex', mode: 'live', properties: '*', scopes: '*', status: 'active', name: null,
      expiresAt: null, rateLimit: null, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt: view.createdAt,
    })
  })

  it('names every bad field at once, each with its rule', async () => {
    const { service } = world()
    expect(await fieldErrors(() => service.createKey({}, 'ops'))).toEqual([
      { field: 'type', code: 'REQUIRED', detail: 'type is required' },
      { field: 'brand', code: 'REQUIRED', detail: 'brand is required' },
      { field: 'mode', code: 'REQUIRED', detail: 'mode is required' },
      { field: 'properties', code: 'REQUIRED', detail: 'properties is required' },
    ])
    const label = (field: string) => `--${field}`
    expect(await fieldErrors(() => service.createKey({
      type: 'api_key', brand: 'initech', mode: 'sandbox', properties: ['not-a-uuid', HOTEL], scopes: ['admin'], name: 'evil\u202Ename',
      expiresAt: '2026-02-30', rateLimit: 0, allowedIps: ['300.1.1.1'],
    }, 'ops', label as never))).toEqual([
      { field: 'mode', code: 'INVALID_ENUM_VALUE', detail: '--mode is "live" or "test"' },
      { field: 'rateLimit', code: 'OUT_OF_RANGE', detail: '--rateLimit takes a whole number of requests above 0' },
      { field: 'brand', code: 'INVALID_ENUM_VALUE', detail: 'unknown brand \'initech\' (known: acme, globex)' },
      { field: 'properties', code: 'INVALID_FORMAT', detail: 'malformed property UUID \'not-a-uuid\'' },
      { field: 'scopes', code: 'INVALID_ENUM_VALUE', detail: 'unknown scope \'admin\' (known: properties:read, guests:read)' },
      { field: 'name', code: 'INVALID_FORMAT', detail: '--name is a text of at most 100 characters, with no control or bidirectional-control character, or null for none' },
      { field: 'expiresAt', code: 'INVALID_FORMAT', detail: '--expiresAt \'2026-02-30\' is not a date-time that exists, with an offset (e.g. 2027-06-30T00:00:00Z)' },
      { field: 'allowedIps', code: 'INVALID_FORMAT', detail: '--allowedIps: \'300.1.1.1\' is not an IPv4 or IPv6 address or CIDR block' },
    ])
    expect(await fieldErrors(() => service.createKey({ type: 'oauth_client', brand: 'acme', mode: 'live', properties: [], name: 'x'.repeat(101), rateLimit: 1.5, extra: 1 }, 'ops'))).toEqual([
      { field: 'type', code: 'INVALID_ENUM_VALUE', detail: 'type is "api_key" or "oauth_client"' },
      { field: 'properties', code: 'OUT_OF_RANGE', detail: 'properties is "*" (every property of the brand) or a list of 1 to 1000 property UUIDs' },
      { field: 'name', code: 'OUT_OF_RANGE', detail: 'name is a text of at most 100 characters, with no control or bidirectional-control character, or null for none' },
      { field: 'rateLimit', code: 'INVALID_FORMAT', detail: 'rateLimit takes a whole number of requests above 0' },
    ])
    expect(await fieldErrors(() => service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*', name: 'tab\there', allowedIps: ['10.0.0.1/8'] }, 'ops'))).toEqual([
      { field: 'name', code: 'INVALID_FORMAT', detail: 'name is a text of at most 100 characters, with no control or bidirectional-control character, or null for none' },
      { field: 'allowedIps', code: 'INVALID_FORMAT', detail: 'allowedIps: \'10.0.0.1/8\' has bits set past its prefix; the block is 10.0.0.0/8' },
    ])
    const many = Array.from({ length: 33 }, (_, i) => `10.0.0.${i}`)
    expect(await fieldErrors(() => service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*', allowedIps: many }, 'ops'))).toEqual([
      { field: 'allowedIps', code: 'OUT_OF_RANGE', detail: 'allowedIps takes 1 to 32 IPv4 or IPv6 addresses and CIDR blocks, or null for any address' },
    ])
    const { view } = await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*', allowedIps: [...many.slice(0, 31), ' 10.0.0.0'] }, 'ops')
    expect(view.allowedIps).toEqual(many.slice(0, 31))
  })

  it('keeps an expiry within keys.maxLifetimeDays when it is set, and then requires one', async () => {
    const { service } = world({ maxLifetimeDays: 30 })
    const latest = iso(NOW + 30 * DAY)
    const base = { type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }
    expect((await service.createKey({ ...base, expiresAt: latest }, 'ops')).view.expiresAt).toBe(latest)
    expect((await service.createKey({ ...base, expiresAt: '2020-01-01' }, 'ops')).view.expiresAt).toBe('2020-01-01T00:00:00.000Z')
    expect(await fieldErrors(() => service.createKey({ ...base, expiresAt: iso(NOW + 30 * DAY + 1) }, 'ops'))).toEqual([
      { field: 'expiresAt', code: 'OUT_OF_RANGE', detail: `keys.maxLifetimeDays is 30: expiresAt may be at most ${latest}` },
    ])
    const required = [{ field: 'expiresAt', code: 'NOT_ALLOWED', detail: `keys.maxLifetimeDays is 30: an API key must expire, expiresAt at most ${latest}` }]
    expect(await fieldErrors(() => service.createKey(base, 'ops'))).toEqual(required)
    expect(await fieldErrors(() => service.createKey({ ...base, expiresAt: null }, 'ops'))).toEqual(required)
    // A malformed expiry is said once, not also as missing.
    expect(await fieldErrors(() => service.createKey({ ...base, expiresAt: 5 }, 'ops'))).toEqual([
      { field: 'expiresAt', code: 'INVALID_FORMAT', detail: 'expiresAt is a date-time with an offset (RFC 3339, e.g. 2027-06-30T00:00:00Z) or a date (its midnight UTC) that exists, or null for no expiry' },
    ])
  })
})

describe('a client\'s grant', () => {
  it('grants a client of a configured issuer, once', async () => {
    const { service, audit } = world()
    const view = await service.createGrant({ type: 'oauth_client', issuer: ISSUER, clientId: 'booking-engine', brand: 'acme', mode: 'live', properties: [HOTEL], scopes: ['properties:read'], rateLimit: 10 }, 'ops')
    expect(view).toEqual({
      id: view.id, type: 'oauth_client', issuer: ISSUER, clientId: 'booking-engine', brand: 'acme', mode: 'live', properties: [HOTEL], scopes: ['properties:read'],
      status: 'active', name: null, expiresAt: null, rateLimit: 10, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt: view.createdAt,
    })
    expect(view.id).toMatch(/^cli_/)
    expect(await service.show(view.id)).toEqual(view)
    expect((await audit.query({ id: view.id, offset: 0, limit: 10 })).entries.map((e) => [e.action, e.changes])).toEqual([['grant-client', {
      issuer: { old: null, new: ISSUER }, clientId: { old: null, new: 'booking-engine' }, brand: { old: null, new: 'acme' }, mode: { old: null, new: 'live' },
      scopes: { old: null, new: ['properties:read'] }, properties: { old: null, new: [HOTEL] }, rateLimit: { old: null, new: 10 }, status: { old: null, new: 'active' },
    }]])
    expect(await fieldErrors(() => service.createGrant({ type: 'oauth_client', issuer: ISSUER, clientId: 'booking-engine', brand: 'acme', mode: 'live', properties: '*' }, 'ops'))).toEqual([
      { field: 'clientId', code: 'NOT_ALLOWED', detail: `client 'booking-engine' of ${ISSUER} already has grant ${view.id}` },
    ])
  })

  it('names a bad issuer, client id or brand', async () => {
    const { service } = world()
    expect(await fieldErrors(() => service.createGrant({ type: 'oauth_client', issuer: 'https://other', clientId: 'has space', brand: 'x', mode: 'live', properties: '*' }, 'ops'))).toEqual([
      { field: 'clientId', code: 'INVALID_FORMAT', detail: 'clientId takes 1 to 255 printable characters without spaces' },
      { field: 'issuer', code: 'INVALID_ENUM_VALUE', detail: `unknown issuer 'https://other' (configured: ${ISSUER})` },
      { field: 'brand', code: 'INVALID_ENUM_VALUE', detail: 'unknown brand \'x\' (known: acme, globex)' },
    ])
    const none = world({ issuers: [] })
    expect(await fieldErrors(() => none.service.createGrant({ type: 'oauth_client', issuer: ISSUER, clientId: 'c', brand: 'acme', mode: 'live', properties: '*' }, 'ops'))).toEqual([
      { field: 'issuer', code: 'INVALID_ENUM_VALUE', detail: 'no token issuer is configured (oauth.issuers or OAUTH_ISSUER)' },
    ])
  })
})

describe('changes', () => {
  it('changes the fields given, audits what changed, and nothing when nothing did', async () => {
    const { service, audit } = world()
    const { view } = await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*', name: 'a' }, 'ops')
    const changed = await service.update(view.id, { name: 'b', scopes: ['guests:read'], properties: [HOTEL], rateLimit: 7, allowedIps: ['192.0.2.1'], expiresAt: '2099-01-01T00:00:00Z' }, 'admin-api')
    expect(changed).toEqual({ ...view, name: 'b', scopes: ['guests:read'], properties: [HOTEL], rateLimit: 7, allowedIps: ['192.0.2.1'], expiresAt: '2099-01-01T00:00:00.000Z' })
    const cleared = await service.update(view.id, { rateLimit: null, allowedIps: null, expiresAt: null, name: null }, 'ops')
    expect(cleared).toEqual({ ...changed, rateLimit: null, allowedIps: null, expiresAt: null, name: null })
    await service.update(view.id, { rateLimit: null }, 'ops')
    const { entries } = await audit.query({ id: view.id, offset: 0, limit: 10 })
    expect(entries.map((e) => [e.actor, e.action, e.changes])).toEqual([
      ['ops', 'update', { name: { old: 'b', new: null }, rateLimit: { old: 7, new: null }, expiresAt: { old: '2099-01-01T00:00:00.000Z', new: null }, allowedIps: { old: ['192.0.2.1'], new: null } }],
      ['admin-api', 'update', {
        name: { old: 'a', new: 'b' }, scopes: { old: '*', new: ['guests:read'] }, properties: { old: '*', new: [HOTEL] }, rateLimit: { old: null, new: 7 },
        expiresAt: { old: null, new: '2099-01-01T00:00:00.000Z' }, allowedIps: { old: null, new: ['192.0.2.1'] },
      }],
      ['ops', 'create', expect.any(Object)],
    ])
  })

  it('refuses an empty change, an expiry for a grant, a bad value, and a credential that is not there', async () => {
    const { service } = world()
    const grant = await service.createGrant({ type: 'oauth_client', issuer: ISSUER, clientId: 'c1', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    expect(await fieldErrors(() => service.update(grant.id, {}, 'ops'))).toEqual([{ field: 'body', code: 'REQUIRED', detail: 'update needs at least one field to change' }])
    expect(await fieldErrors(() => service.update(grant.id, { expiresAt: null }, 'ops'))).toEqual([
      { field: 'expiresAt', code: 'NOT_ALLOWED', detail: 'a client\'s grant has no expiry (its access tokens expire): expiresAt is for API keys' },
    ])
    expect(await fieldErrors(() => service.update(grant.id, { scopes: ['nope'], type: 'api_key' }, 'ops'))).toEqual([
      { field: 'scopes', code: 'INVALID_ENUM_VALUE', detail: 'unknown scope \'nope\' (known: properties:read, guests:read)' },
    ])
    expect(await service.update(grant.id, { name: 'Grant' }, 'ops')).toEqual({ ...grant, name: 'Grant' })
    await expect(service.update('key_missing', { name: 'x' }, 'ops')).rejects.toThrow(new CredentialNotFound('key_missing'))
    await expect(service.show('cli_missing')).rejects.toThrow(new CredentialNotFound('cli_missing'))
  })

  it('rolls a key: the previous secret works for the overlap, an earlier overlap ends, and its last use starts afresh', async () => {
    const { service, audit, usage } = world()
    const { view } = await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    await usage.write({ counts: new Map(), lastUsed: new Map([[view.id, { any: NOW - 120_000, previous: NOW - 60_000 }]]) }, DAY)
    const first = await service.roll(view.id, 3_600_000, 'ops')
    expect(first).toEqual({ id: view.id, secret: first.secret, previousSecretExpiresAt: iso(NOW + 3_600_000) })
    expect(first.secret).toMatch(/^svc_live_/)
    expect(await service.show(view.id)).toEqual({ ...view, previousSecretExpiresAt: iso(NOW + 3_600_000), previousSecretLastUsedAt: null, lastUsedAt: iso(minute(NOW - 120_000)) })
    const second = await service.roll(view.id, 0, 'ops2')
    expect(second.previousSecretExpiresAt).toBe(iso(NOW))
    const { entries } = await audit.query({ id: view.id, offset: 0, limit: 10 })
    const rolledAt = (await service.show(view.id)).previousSecretExpiresAt
    expect(rolledAt).toBe(iso(NOW))
    expect(entries.map((e) => [e.actor, e.action, e.changes]).slice(0, 3)).toEqual([
      ['ops2', 'roll', { previousSecretExpiresAt: { old: iso(NOW + 3_600_000), new: iso(NOW) } }],
      ['ops2', 'end-overlap', { previousSecretExpiresAt: { old: iso(NOW + 3_600_000), new: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown } }],
      ['ops', 'roll', { previousSecretExpiresAt: { old: null, new: iso(NOW + 3_600_000) } }],
    ])
    expect(JSON.stringify(entries)).not.toContain(first.secret)
    expect(await fieldErrors(() => service.roll('cli_x', 0, 'ops'))).toEqual([
      { field: 'id', code: 'NOT_ALLOWED', detail: 'cli_x is a client\'s grant: the identity provider rotates a client\'s secret, the gateway holds none' },
    ])
    await expect(service.roll('key_missing', 0, 'ops')).rejects.toThrow(new CredentialNotFound('key_missing'))
  })

  it('ends an overlap early, once', async () => {
    const { service, audit } = world()
    const { view } = await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    expect(await service.endOverlap(view.id, 'ops')).toEqual({ view, ended: false })
    await service.roll(view.id, DAY, 'ops')
    const ended = await service.endOverlap(view.id, 'ops')
    expect(ended.ended).toBe(true)
    expect(await service.endOverlap(view.id, 'ops')).toEqual({ view: ended.view, ended: false })
    const { entries } = await audit.query({ id: view.id, offset: 0, limit: 10 })
    expect(entries.map((e) => [e.action, e.changes])[0]).toEqual(['end-overlap', { previousSecretExpiresAt: { old: iso(NOW + DAY), new: ended.view.previousSecretExpiresAt } }])
    expect(entries).toHaveLength(3)
    expect(await fieldErrors(() => service.endOverlap('cli_x', 'ops'))).toEqual([{ field: 'id', code: 'NOT_ALLOWED', detail: 'cli_x is a client\'s grant, which is never rolled' }])
    await expect(service.endOverlap('key_missing', 'ops')).rejects.toThrow(new CredentialNotFound('key_missing'))
  })

  it('suspends and resumes, auditing a change of status only, and ends the portal sessions of a suspended credential', async () => {
    const { service, audit, ended } = world()
    const grant = await service.createGrant({ type: 'oauth_client', issuer: ISSUER, clientId: 'c2', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    expect(await service.setStatus(grant.id, 'suspended', 'ops')).toEqual({ ...grant, status: 'suspended' })
    expect(await service.setStatus(grant.id, 'suspended', 'ops')).toEqual({ ...grant, status: 'suspended' })
    expect(await service.setStatus(grant.id, 'active', 'ops')).toEqual(grant)
    expect(ended).toEqual([[grant.id, 'ops', 'credential suspended'], [grant.id, 'ops', 'credential suspended']])
    expect((await audit.query({ id: grant.id, offset: 0, limit: 10 })).entries.map((e) => [e.action, e.changes])).toEqual([
      ['resume', { status: { old: 'suspended', new: 'active' } }],
      ['suspend', { status: { old: 'active', new: 'suspended' } }],
      ['grant-client', expect.any(Object)],
    ])
    await expect(service.setStatus('key_missing', 'active', 'ops')).rejects.toThrow(new CredentialNotFound('key_missing'))
  })

  it('revokes: its endpoints and portal sessions go, its last use is forgotten, and it is audited', async () => {
    const { service, audit, usage, revoked, ended } = world()
    const { view } = await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    await usage.write({ counts: new Map(), lastUsed: new Map([[view.id, { any: NOW }]]) }, DAY)
    await service.revoke(view.id, 'ops')
    expect(revoked).toEqual([view.id])
    expect(ended).toEqual([[view.id, 'ops', 'credential revoked']])
    expect((await usage.lastUse([view.id])).get(view.id)).toEqual({ any: null, previous: null })
    expect((await audit.query({ id: view.id, offset: 0, limit: 1 })).entries.map((e) => [e.action, e.changes])).toEqual([['revoke', { status: { old: 'active', new: 'revoked' } }]])
    await expect(service.show(view.id)).rejects.toThrow(CredentialNotFound)
    // An id with no record: its endpoints still go.
    await expect(service.revoke('key_missing', 'ops')).rejects.toThrow(new CredentialNotFound('key_missing'))
    expect(revoked).toEqual([view.id, 'key_missing'])
  })

  it('lists keys then grants, of a brand and a status when asked, with when each was last used', async () => {
    const { service, usage } = world()
    const a = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')).view
    const b = (await service.createKey({ type: 'api_key', brand: 'globex', mode: 'live', properties: '*' }, 'ops')).view
    const g = await service.createGrant({ type: 'oauth_client', issuer: ISSUER, clientId: 'c3', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    await service.setStatus(b.id, 'suspended', 'ops')
    await usage.write({ counts: new Map(), lastUsed: new Map([[a.id, { any: NOW - 59_999 }]]) }, DAY)
    const seen = { ...a, lastUsedAt: iso(minute(NOW - 59_999)) }
    expect(await service.list({ brand: 'acme' })).toEqual([seen, g])
    expect(await service.list({ status: 'suspended' })).toEqual([{ ...b, status: 'suspended' }])
    expect((await service.list()).map((v) => v.id).sort()).toEqual([a.id, b.id, g.id].sort())
  })
})

describe('usage and the audit trail', () => {
  it('counts requests per UTC day and route by status class, over the last days', async () => {
    const { service, usage } = world()
    const { view } = await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')
    const today = utcDay(NOW)
    const yesterday = utcDay(NOW - DAY)
    await usage.write({
      counts: new Map([
        [today, new Map([[view.id, new Map([[usageField('GET /v1/properties', '2xx'), 3], [usageField('GET /v1/properties', '429'), 1], [usageField('GET /v1/events', '5xx'), 2], ['junk', 9]])]])],
        [yesterday, new Map([[view.id, new Map([[usageField('GET /v1/properties', '4xx'), 4], [usageField('GET /v1/properties', '3xx'), 1]])]])],
      ]),
      lastUsed: new Map(),
    }, DAY)
    const zero = { '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0 }
    expect(await service.usageOf(view.id, 2)).toEqual({
      id: view.id, days: 2, from: yesterday, to: today,
      rows: [
        { date: yesterday, route: 'GET /v1/properties', ...zero, '3xx': 1, '4xx': 4, total: 5 },
        { date: today, route: 'GET /v1/events', ...zero, '5xx': 2, total: 2 },
        { date: today, route: 'GET /v1/properties', ...zero, '2xx': 3, '429': 1, total: 4 },
      ],
      totals: { '2xx': 3, '3xx': 1, '4xx': 4, '429': 1, '5xx': 2, total: 11 },
    })
    expect((await service.usageOf(view.id, 1)).totals.total).toBe(6)
    await expect(service.usageOf('key_missing', 1)).rejects.toThrow(new CredentialNotFound('key_missing'))
  })

  it('names days, fields and their parts', () => {
    expect(utcDay(Date.parse('2026-11-28T23:59:59.999Z'))).toBe('2026-11-28')
    expect(lastDays(Date.parse('2026-03-01T05:00:00Z'), 3)).toEqual(['2026-02-27', '2026-02-28', '2026-03-01'])
    expect(lastDays(0, 1)).toEqual(['1970-01-01'])
    expect(usageField('GET /v1/x', '429')).toBe('GET /v1/x|429')
    expect(parseUsageField('GET /v1/a|b|2xx')).toEqual({ route: 'GET /v1/a|b', statusClass: '2xx' })
    expect(parseUsageField('GET /v1/a|6xx')).toBeUndefined()
    expect(parseUsageField('2xx')).toBeUndefined()
  })

  it('reads the trail newest first, of one credential or all, since a time, a page at a time', async () => {
    const { service, ns } = world()
    const a = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')).view
    await service.update(a.id, { name: 'x' }, 'ops')
    const b = (await service.createKey({ type: 'api_key', brand: 'acme', mode: 'live', properties: '*' }, 'ops')).view
    const all = await service.auditTrail({})
    expect(all.total).toBe(3)
    expect(all.entries.map((e) => [e.credentialId, e.action])).toEqual([[b.id, 'create'], [a.id, 'update'], [a.id, 'create']])
    expect(await service.auditTrail({ id: a.id, offset: 1, limit: 1 })).toEqual({ total: 2, entries: [all.entries[2]] })
    expect(await service.auditTrail({ since: NOW + 1 })).toEqual({ total: 0, entries: [] })
    // Kept in Redis under the namespace: every entry, and each credential's own.
    expect(await redis.zcard(`${ns}audit`)).toBe(3)
    expect(await redis.zcard(`${ns}audit:{${a.id}}`)).toBe(2)
    const ttl = await redis.pttl(`${ns}audit:{${a.id}}`)
    expect(ttl).toBeGreaterThan(399 * DAY)
    expect(ttl).toBeLessThanOrEqual(400 * DAY)
  })

  it('keeps the demo\'s trail in memory the same way', async () => {
    const trail = new AuditTrail(new MemoryAuditStore(), DAY, pino({ level: 'silent' }))
    const first = await trail.add('ops', 'create', 'key_a', {}, NOW - 2 * DAY)
    const second = await trail.add('ops', 'update', 'key_a', { name: { old: null, new: 'n' } }, NOW)
    const third = await trail.add('ops', 'create', 'key_b', {}, NOW)
    expect(first.id < second.id).toBe(true)
    expect(await trail.query({ offset: 0, limit: 10 })).toEqual({ total: 2, entries: [third, second] })
    expect(await trail.query({ id: 'key_a', offset: 0, limit: 10 })).toEqual({ total: 1, entries: [second] })
    expect(await trail.query({ offset: 1, limit: 5, since: NOW })).toEqual({ total: 2, entries: [second] })
  })
})
