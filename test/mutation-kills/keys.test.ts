import { createHash } from 'node:crypto'
import { crc32 } from 'node:zlib'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { ApiError } from '../../src/contract/errors.js'
import { KeyAuthenticator } from '../../src/keys/authenticator.js'
import { generateKey, keyMode } from '../../src/keys/format.js'
import { GrantExistsError, type GrantRecord } from '../../src/keys/grants.js'
import type { Principal } from '../../src/keys/principal.js'
import { MemoryKeyStore, RedisKeyStore, type KeyRecord, type KeyStore } from '../../src/keys/store.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { keyTool } from '../helpers/oauth.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { eventually, keysUnder, PrivateRedis, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// Rules of the key store and of the per-instance record cache that mutation testing found
// undefended: the records the key tool writes (digests only, never a key in clear), list order
// and brand filter, suspend, resume and revoke as an operator and a partner see them, a
// change reaching a second gateway through the pub/sub channel, the in-memory store's same
// contract (the demo's), the record cache's counts in /status, a record read again once its
// lifetime ends, the grace period and its end while Redis is down, the records held read again
// when the subscription comes back (the copy kept while that read fails). The key tool runs in
// this process (as `npm run keys` runs it), against real Redis under a prefix of each test's
// own; gateways over real sockets.

const ISSUER = 'http://127.0.0.1:4030/realms/partners'
const PROPERTY_A = 'c0ffee00-0000-4000-8000-00000000000a'
const PROPERTY_B = 'c0ffee00-0000-4000-8000-00000000000b'
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const KEY_ID = /^key_[0-9A-Za-z]{17}$/
const GRANT_ID = /^cli_[0-9A-Za-z]{17}$/

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex')

const admin = new Redis(REDIS_URL)
const prefixes: string[] = []
afterAll(async () => {
  for (const prefix of prefixes) await removePrefix(admin, prefix)
  admin.disconnect()
})

/** A Redis namespace of the calling test's own, removed after the file. */
function ownPrefix(): string {
  const prefix = testPrefix()
  prefixes.push(prefix)
  return prefix
}

/** The key tool in this process, in `prefix`; `--json` answers parsed. */
async function tool(prefix: string, ...argv: string[]) {
  return keyTool({ REDIS_URL, REDIS_PREFIX: prefix }, ...argv)
}

async function json<T>(prefix: string, ...argv: string[]): Promise<T> {
  const run = await tool(prefix, ...argv, '--json')
  expect({ code: run.code, err: run.err }).toEqual({ code: 0, err: [] })
  return JSON.parse(run.out[0] as string) as T
}

/** A live key of acme for every property, created with the key tool: its id and the key. */
async function liveKey(prefix: string): Promise<{ id: string; key: string }> {
  return json<{ id: string; key: string }>(prefix, 'create', '--brand', 'acme', '--mode', 'live', '--all-properties')
}

/** The audit trail's keys of one credential's changes (docs/architecture.md, "The audit trail"). */
function auditKeys(prefix: string, id: string): string[] {
  return [`${prefix}audit`, `${prefix}audit:{${id}}`]
}

/** Every string Redis holds under `prefix`: names, hash fields and values, set members. */
async function everythingUnder(prefix: string): Promise<string[]> {
  const found: string[] = []
  for (const name of await keysUnder(admin, prefix)) {
    found.push(name)
    const type = await admin.type(name)
    if (type === 'string') found.push(await admin.get(name) ?? '')
    if (type === 'set') found.push(...await admin.smembers(name))
    if (type === 'hash') found.push(...Object.entries(await admin.hgetall(name)).flat())
  }
  return found
}

/** Messages on the key channel of `prefix`, as a second instance receives them. */
async function listenToChanges(prefix: string): Promise<{ messages: string[]; close: () => void }> {
  const subscriber = new Redis(REDIS_URL)
  const messages: string[] = []
  subscriber.on('message', (_channel: string, message: string) => messages.push(message))
  await subscriber.subscribe(`${prefix}keys:changed`)
  return { messages, close: () => subscriber.disconnect() }
}

/** Runs `test` with Date (only Date) at the times it sets. */
async function atFixedTimes(test: (at: (iso: string) => void) => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: ['Date'] })
  try {
    await test((iso) => vi.setSystemTime(new Date(iso)))
  } finally {
    vi.useRealTimers()
  }
}

describe('the key tool: the records it writes', () => {
  it('stores a key under the SHA-256 of the key, never the key, with every field, and shows it back', async () => {
    const prefix = ownPrefix()
    const created = await json<{ id: string; key: string; createdAt: string }>(prefix, 'create', '--brand', 'acme', '--mode', 'test',
      '--properties', `${PROPERTY_B},${PROPERTY_A}`, '--scopes', 'rooms:read,properties:read', '--name', 'Front desk',
      '--expires-at', '2031-05-06T07:08:09Z', '--rate-limit', '250')
    const { id, key, createdAt } = created
    expect(created).toEqual({
      id: expect.stringMatching(KEY_ID), key: expect.stringMatching(/^svc_test_[0-9A-Za-z]{28}$/), type: 'api_key', brand: 'acme', mode: 'test',
      properties: [PROPERTY_B, PROPERTY_A], scopes: ['rooms:read', 'properties:read'], status: 'active', name: 'Front desk',
      expiresAt: '2031-05-06T07:08:09.000Z', rateLimit: 250, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt: expect.stringMatching(ISO),
    })
    const digest = sha256(key)
    expect((await keysUnder(admin, prefix)).sort()).toEqual([`${prefix}key:${digest}`, `${prefix}keyid:${id}`, `${prefix}keys`, ...auditKeys(prefix, id)].sort())
    expect(await admin.hgetall(`${prefix}key:${digest}`)).toEqual({
      id, brand: 'acme', mode: 'test', properties: `["${PROPERTY_B}","${PROPERTY_A}"]`, scopes: '["rooms:read","properties:read"]',
      status: 'active', name: 'Front desk', expiresAt: '2031-05-06T07:08:09.000Z', rateLimit: '250', createdAt,
    })
    expect(await admin.get(`${prefix}keyid:${id}`)).toBe(digest)
    expect(await admin.smembers(`${prefix}keys`)).toEqual([id])
    expect((await everythingUnder(prefix)).filter((text) => text.includes(key))).toEqual([])

    expect(await json(prefix, 'show', id)).toEqual({
      id, type: 'api_key', brand: 'acme', mode: 'test', properties: [PROPERTY_B, PROPERTY_A], scopes: ['rooms:read', 'properties:read'], status: 'active',
      name: 'Front desk', expiresAt: '2031-05-06T07:08:09.000Z', rateLimit: 250, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt,
    })
  })

  it('writes a key with every property and scope and no name, expiry or quota as such, and shows them as such', async () => {
    const prefix = ownPrefix()
    const { id, key, createdAt } = await json<{ id: string; key: string; createdAt: string }>(prefix, 'create', '--brand', 'globex', '--mode', 'live', '--all-properties')
    expect(await admin.hgetall(`${prefix}key:${sha256(key)}`)).toEqual({
      id, brand: 'globex', mode: 'live', properties: '*', scopes: '*', status: 'active', name: '', expiresAt: '', rateLimit: '', createdAt,
    })
    expect(await json(prefix, 'show', id)).toEqual({
      id, type: 'api_key', brand: 'globex', mode: 'live', properties: '*', scopes: '*', status: 'active', name: null, expiresAt: null, rateLimit: null,
      allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt,
    })
  })

  it('stores a grant under the SHA-256 of its issuer and client id, with every field, and refuses a second one for the client', async () => {
    const prefix = ownPrefix()
    const changes = await listenToChanges(prefix)
    try {
      const grant = await json<{ id: string; createdAt: string }>(prefix, 'grant-client', '--issuer', ISSUER, '--client-id', 'channel-sync',
        '--brand', 'globex', '--mode', 'test', '--properties', PROPERTY_A, '--scopes', 'guests:read', '--name', 'Channel sync', '--rate-limit', '40')
      const { id, createdAt } = grant
      expect(grant).toEqual({
        id: expect.stringMatching(GRANT_ID), type: 'oauth_client', issuer: ISSUER, clientId: 'channel-sync', brand: 'globex', mode: 'test', properties: [PROPERTY_A],
        scopes: ['guests:read'], status: 'active', name: 'Channel sync', expiresAt: null, rateLimit: 40, allowedIps: null, previousSecretExpiresAt: null,
        lastUsedAt: null, createdAt: expect.stringMatching(ISO),
      })
      const digest = sha256(`${ISSUER}\nchannel-sync`)
      // An instance that answered this client "not registered" must hear of the grant.
      expect(await eventually(async () => changes.messages.length === 1, 5000)).toBe(true)
      expect(changes.messages).toEqual([digest])
      const stored = [`${prefix}grant:${digest}`, `${prefix}grantid:${id}`, `${prefix}grants`, ...auditKeys(prefix, id)].sort()
      expect((await keysUnder(admin, prefix)).sort()).toEqual(stored)
      expect(await admin.hgetall(`${prefix}grant:${digest}`)).toEqual({
        id, issuer: ISSUER, clientId: 'channel-sync', brand: 'globex', mode: 'test', properties: `["${PROPERTY_A}"]`, scopes: '["guests:read"]',
        status: 'active', name: 'Channel sync', rateLimit: '40', createdAt,
      })
      expect(await admin.get(`${prefix}grantid:${id}`)).toBe(digest)
      expect(await json(prefix, 'show', id)).toEqual({
        id, type: 'oauth_client', issuer: ISSUER, clientId: 'channel-sync', brand: 'globex', mode: 'test', properties: [PROPERTY_A], scopes: ['guests:read'],
        status: 'active', name: 'Channel sync', expiresAt: null, rateLimit: 40, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt,
      })

      const again = await tool(prefix, 'grant-client', '--issuer', ISSUER, '--client-id', 'channel-sync', '--brand', 'acme', '--mode', 'live', '--all-properties')
      expect(again).toEqual({ code: 2, out: [], err: [`client 'channel-sync' of ${ISSUER} already has grant ${id}`] })
      // Nothing of the refused grant is left behind.
      expect((await keysUnder(admin, prefix)).sort()).toEqual(stored)
      expect(await admin.smembers(`${prefix}grants`)).toEqual([id])
      expect(await json(prefix, 'show', id)).toMatchObject({ brand: 'globex', mode: 'test' })
    } finally {
      changes.close()
    }
  })

  it('writes a grant with every property and scope and no name or quota as such, and shows them as such', async () => {
    const prefix = ownPrefix()
    const { id, createdAt } = await json<{ id: string; createdAt: string }>(prefix, 'grant-client', '--issuer', ISSUER, '--client-id', 'reporting',
      '--brand', 'acme', '--mode', 'live', '--all-properties')
    expect(await admin.hgetall(`${prefix}grant:${sha256(`${ISSUER}\nreporting`)}`)).toEqual({
      id, issuer: ISSUER, clientId: 'reporting', brand: 'acme', mode: 'live', properties: '*', scopes: '*', status: 'active', name: '', rateLimit: '', createdAt,
    })
    expect(await json(prefix, 'show', id)).toEqual({
      id, type: 'oauth_client', issuer: ISSUER, clientId: 'reporting', brand: 'acme', mode: 'live', properties: '*', scopes: '*', status: 'active', name: null,
      expiresAt: null, rateLimit: null, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt,
    })
  })
})

describe('the key tool: list', () => {
  it('lists keys, then grants, each by creation time then id, of one brand when asked, leaving out ids whose record is gone', async () => {
    const prefix = ownPrefix()
    const made: { id: string; brand: string; at: string }[] = []
    await atFixedTimes(async (at) => {
      const key = async (brand: string, time: string) => {
        at(time)
        made.push({ id: (await json<{ id: string }>(prefix, 'create', '--brand', brand, '--mode', 'live', '--all-properties')).id, brand, at: time })
      }
      const grant = async (brand: string, time: string, client: string) => {
        at(time)
        made.push({ id: (await json<{ id: string }>(prefix, 'grant-client', '--issuer', ISSUER, '--client-id', client, '--brand', brand, '--mode', 'live', '--all-properties')).id, brand, at: time })
      }
      // Created out of order, and several in one millisecond, so that only the sort orders them.
      await key('acme', '2030-01-01T00:00:03.000Z')
      await key('globex', '2030-01-01T00:00:01.000Z')
      await key('acme', '2030-01-01T00:00:02.000Z')
      await key('acme', '2030-01-01T00:00:01.000Z')
      await key('acme', '2030-01-01T00:00:01.000Z')
      await key('acme', '2030-01-01T00:00:01.000Z')
      await grant('acme', '2030-01-01T00:00:03.000Z', 'c1')
      await grant('acme', '2030-01-01T00:00:01.000Z', 'c2')
      await grant('globex', '2030-01-01T00:00:01.000Z', 'c3')
      await grant('acme', '2030-01-01T00:00:01.000Z', 'c4')
      await grant('acme', '2030-01-01T00:00:02.000Z', 'c5')
      await grant('acme', '2030-01-01T00:00:01.000Z', 'c6')
    })
    // An id whose record was never written (a create cut short) or is gone.
    await admin.sadd(`${prefix}keys`, 'key_00000000000000000')
    await admin.set(`${prefix}keyid:key_00000000000000000`, sha256('no such key'))
    await admin.sadd(`${prefix}grants`, 'cli_00000000000000000')
    await admin.set(`${prefix}grantid:cli_00000000000000000`, sha256('no such client'))

    const ordered = (kind: string, brand?: string) => made
      .filter((m) => m.id.startsWith(kind) && (brand === undefined || m.brand === brand))
      .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.id.localeCompare(b.id)))
      .map((m) => m.id)
    const listed = async (...flags: string[]) => (await json<{ id: string }[]>(prefix, 'list', ...flags)).map((r) => r.id)
    expect(await listed()).toEqual([...ordered('key_'), ...ordered('cli_')])
    expect(await listed('--brand', 'acme')).toEqual([...ordered('key_', 'acme'), ...ordered('cli_', 'acme')])
    expect(await listed('--brand', 'globex')).toEqual([...ordered('key_', 'globex'), ...ordered('cli_', 'globex')])
    expect((await listed('--brand', 'globex')).length).toBe(2)
  })

  it('revokes an id whose record is gone as no key (or grant), and forgets the id', async () => {
    const prefix = ownPrefix()
    await admin.sadd(`${prefix}keys`, 'key_00000000000000000')
    await admin.set(`${prefix}keyid:key_00000000000000000`, sha256('no such key'))
    await admin.sadd(`${prefix}grants`, 'cli_00000000000000000')
    await admin.set(`${prefix}grantid:cli_00000000000000000`, sha256('no such client'))
    expect(await tool(prefix, 'revoke', 'key_00000000000000000')).toEqual({ code: 2, out: [], err: ["no key with id 'key_00000000000000000'"] })
    expect(await tool(prefix, 'revoke', 'cli_00000000000000000')).toEqual({ code: 2, out: [], err: ["no grant with id 'cli_00000000000000000'"] })
    expect(await keysUnder(admin, prefix)).toEqual([])
  })
})

describe('the key tool: suspend, resume, revoke', () => {
  it('changes a key\'s status, announces each change on the channel, and leaves nothing of a revoked key', async () => {
    const prefix = ownPrefix()
    const changes = await listenToChanges(prefix)
    try {
      const { id, key } = await liveKey(prefix)
      const digest = sha256(key)
      expect(await tool(prefix, 'suspend', id)).toEqual({ code: 0, out: [`suspended ${id}`], err: [] })
      expect(await admin.hget(`${prefix}key:${digest}`, 'status')).toBe('suspended')
      expect(await json(prefix, 'show', id)).toMatchObject({ id, status: 'suspended' })
      expect(await tool(prefix, 'resume', id)).toEqual({ code: 0, out: [`resumed ${id}`], err: [] })
      expect(await admin.hget(`${prefix}key:${digest}`, 'status')).toBe('active')
      expect(await tool(prefix, 'revoke', id)).toEqual({ code: 0, out: [`revoked ${id}`], err: [] })
      // Only the audit trail of its changes is left (docs/architecture.md, "The audit trail").
      expect((await keysUnder(admin, prefix)).sort()).toEqual(auditKeys(prefix, id).sort())
      expect(await eventually(async () => changes.messages.length === 3, 5000)).toBe(true)
      expect(changes.messages).toEqual([digest, digest, digest])

      for (const command of ['show', 'suspend', 'resume', 'revoke']) {
        expect(await tool(prefix, command, id)).toEqual({ code: 2, out: [], err: [`no key with id '${id}'`] })
      }
      expect(await tool(prefix, 'suspend', 'key_00000000000000000')).toEqual({ code: 2, out: [], err: ["no key with id 'key_00000000000000000'"] })
    } finally {
      changes.close()
    }
  })

  it('changes a grant\'s status, announces each change on the channel, and leaves nothing of a revoked grant', async () => {
    const prefix = ownPrefix()
    const changes = await listenToChanges(prefix)
    try {
      const { id } = await json<{ id: string }>(prefix, 'grant-client', '--issuer', ISSUER, '--client-id', 'ops', '--brand', 'acme', '--mode', 'live', '--all-properties')
      const digest = sha256(`${ISSUER}\nops`)
      expect(await tool(prefix, 'suspend', id)).toEqual({ code: 0, out: [`suspended ${id}`], err: [] })
      expect(await admin.hget(`${prefix}grant:${digest}`, 'status')).toBe('suspended')
      expect(await json(prefix, 'show', id)).toMatchObject({ id, status: 'suspended' })
      expect(await tool(prefix, 'resume', id)).toEqual({ code: 0, out: [`resumed ${id}`], err: [] })
      expect(await admin.hget(`${prefix}grant:${digest}`, 'status')).toBe('active')
      expect(await tool(prefix, 'revoke', id)).toEqual({ code: 0, out: [`revoked ${id}`], err: [] })
      expect((await keysUnder(admin, prefix)).sort()).toEqual(auditKeys(prefix, id).sort())
      expect(await eventually(async () => changes.messages.length === 4, 5000)).toBe(true)
      expect(changes.messages).toEqual([digest, digest, digest, digest])

      for (const command of ['show', 'suspend', 'resume', 'revoke']) {
        expect(await tool(prefix, command, id)).toEqual({ code: 2, out: [], err: [`no grant with id '${id}'`] })
      }
    } finally {
      changes.close()
    }
  })
})

// The demo runs on the in-memory store when no Redis answers: it keeps the same contract.
const subscribers = async (prefix: string): Promise<unknown> => (await admin.pubsub('NUMSUB', `${prefix}keys:changed`))[1]

describe.each([
  ['Redis', (prefix: string): KeyStore => new RedisKeyStore(admin, prefix, () => new Redis(REDIS_URL)),
    async (prefix: string) => eventually(async () => await subscribers(prefix) === 1, 5000)],
  ['memory', (): KeyStore => new MemoryKeyStore(), async () => true],
])('the %s key store', (_name, makeStore, subscribed) => {
  it('finds, lists, suspends and revokes keys, and tells its listeners of each change', async () => {
    const prefix = ownPrefix()
    const store = makeStore(prefix)
    const changed: string[] = []
    store.onChange((digest) => changed.push(digest))
    expect(await subscribed(prefix)).toBe(true)
    try {
      const acme = await store.create({ brand: 'acme', mode: 'test', properties: [PROPERTY_A] })
      const globex = await store.create({ brand: 'globex', mode: 'live', properties: '*', scopes: ['rooms:read'], name: 'Night audit', expiresAt: '2031-01-01T00:00:00.000Z', rateLimit: 7 })
      expect(acme).toEqual({
        key: expect.stringMatching(/^svc_test_[0-9A-Za-z]{28}$/),
        record: {
          id: expect.stringMatching(KEY_ID), digest: sha256(acme.key), brand: 'acme', mode: 'test', properties: [PROPERTY_A], scopes: '*', status: 'active',
          name: null, expiresAt: null, rateLimit: null, allowedIps: null, previousDigest: null, previousSecretExpiresAt: null, rolledAt: null, createdAt: expect.stringMatching(ISO),
        },
      })
      expect(globex.record).toEqual({
        id: expect.stringMatching(KEY_ID), digest: sha256(globex.key), brand: 'globex', mode: 'live', properties: '*', scopes: ['rooms:read'], status: 'active',
        name: 'Night audit', expiresAt: '2031-01-01T00:00:00.000Z', rateLimit: 7, allowedIps: null, previousDigest: null, previousSecretExpiresAt: null, rolledAt: null,
        createdAt: expect.stringMatching(ISO),
      })
      expect(await store.findByDigest(acme.record.digest)).toEqual(acme.record)
      expect(await store.findById(globex.record.id)).toEqual(globex.record)
      expect(await store.findById('key_00000000000000000')).toBeNull()
      expect(await store.findByDigest(sha256('no such key'))).toBeNull()
      const byId = (records: KeyRecord[]) => records.map((r) => r.id).sort()
      expect(byId(await store.list())).toEqual([acme.record.id, globex.record.id].sort())
      expect(await store.list('globex')).toEqual([globex.record])

      expect(await store.setStatus(acme.record.id, 'suspended')).toEqual({ ...acme.record, status: 'suspended' })
      expect(await store.findById(acme.record.id)).toEqual({ ...acme.record, status: 'suspended' })
      expect(await store.setStatus('key_00000000000000000', 'suspended')).toBeNull()
      expect(await store.revoke(acme.record.id)).toBe(true)
      expect(await store.findById(acme.record.id)).toBeNull()
      expect(await store.findByDigest(acme.record.digest)).toBeNull()
      expect(await store.revoke(acme.record.id)).toBe(false)
      expect(await store.revoke('key_00000000000000000')).toBe(false)
      expect(await store.list()).toEqual([globex.record])
      expect(await eventually(async () => changed.length === 2, 5000)).toBe(true)
      expect(changed).toEqual([acme.record.digest, acme.record.digest])
    } finally {
      await store.close()
    }
  })

  it('registers, finds, lists, suspends and revokes grants, one per client, and tells its listeners of each change', async () => {
    const prefix = ownPrefix()
    const store = makeStore(prefix)
    const changed: string[] = []
    store.onChange((digest) => changed.push(digest))
    expect(await subscribed(prefix)).toBe(true)
    try {
      const first = await store.createGrant({ issuer: ISSUER, clientId: 'channel-sync', brand: 'acme', mode: 'test', properties: [PROPERTY_B] })
      const digest = sha256(`${ISSUER}\nchannel-sync`)
      expect(first).toEqual({
        id: expect.stringMatching(GRANT_ID), digest, issuer: ISSUER, clientId: 'channel-sync', brand: 'acme', mode: 'test', properties: [PROPERTY_B],
        scopes: '*', status: 'active', name: null, rateLimit: null, allowedIps: null, createdAt: expect.stringMatching(ISO),
      })
      const other = await store.createGrant({ issuer: ISSUER, clientId: 'reporting', brand: 'globex', mode: 'live', properties: '*', scopes: ['guests:read'], name: 'Reports', rateLimit: 9 })
      expect(other).toEqual({
        id: expect.stringMatching(GRANT_ID), digest: sha256(`${ISSUER}\nreporting`), issuer: ISSUER, clientId: 'reporting', brand: 'globex', mode: 'live',
        properties: '*', scopes: ['guests:read'], status: 'active', name: 'Reports', rateLimit: 9, allowedIps: null, createdAt: expect.stringMatching(ISO),
      })
      const refused = await store.createGrant({ issuer: ISSUER, clientId: 'channel-sync', brand: 'globex', mode: 'live', properties: '*' }).catch((error: unknown) => error)
      expect(refused).toBeInstanceOf(GrantExistsError)
      expect(refused).toMatchObject({ name: 'GrantExistsError', existingId: first.id, message: `a grant for this client already exists (${first.id})` })

      expect(await store.findGrant(digest)).toEqual(first)
      expect(await store.findGrantById(other.id)).toEqual(other)
      expect(await store.findGrantById('cli_00000000000000000')).toBeNull()
      expect(await store.findGrant(sha256(`${ISSUER}\nnobody`))).toBeNull()
      const byId = (records: GrantRecord[]) => records.map((r) => r.id).sort()
      expect(byId(await store.listGrants())).toEqual([first.id, other.id].sort())
      expect(await store.listGrants('globex')).toEqual([other])

      expect(await store.setGrantStatus(first.id, 'suspended')).toEqual({ ...first, status: 'suspended' })
      expect(await store.findGrant(digest)).toEqual({ ...first, status: 'suspended' })
      expect(await store.setGrantStatus('cli_00000000000000000', 'suspended')).toBeNull()
      expect(await store.revokeGrant(first.id)).toBe(true)
      expect(await store.findGrant(digest)).toBeNull()
      expect(await store.findGrantById(first.id)).toBeNull()
      expect(await store.revokeGrant(first.id)).toBe(false)
      expect(await store.revokeGrant('cli_00000000000000000')).toBe(false)
      expect(await store.listGrants()).toEqual([other])
      expect(await eventually(async () => changed.length === 4, 5000)).toBe(true)
      expect(changed).toEqual([digest, other.digest, digest, digest])
    } finally {
      await store.close()
    }
  })

  it('closes, listened to or not', async () => {
    await expect(makeStore(ownPrefix()).close()).resolves.toBeUndefined()
  })
})

describe('the Redis key store\'s subscription', () => {
  it('is one connection however many listen, and is gone once the store is closed', async () => {
    const prefix = ownPrefix()
    const store = new RedisKeyStore(admin, prefix, () => new Redis(REDIS_URL))
    try {
      store.onChange(() => undefined)
      store.onChange(() => undefined)
      expect(await eventually(async () => await subscribers(prefix) === 1, 5000)).toBe(true)
      // A second look, after the subscriptions under way have had their time.
      await admin.ping()
      expect(await subscribers(prefix)).toBe(1)
    } finally {
      await store.close()
    }
    expect(await eventually(async () => await subscribers(prefix) === 0, 5000)).toBe(true)
  })
})

describe('a grant error without the id of the grant in place', () => {
  it('says only that the client has one', () => {
    expect(new GrantExistsError(null)).toMatchObject({ name: 'GrantExistsError', existingId: null, message: 'a grant for this client already exists' })
  })
})

describe('the key authenticator', () => {
  it('looks a key up without hooks, answers a key it holds at once without calling them, and refuses it from the instant it expires', async () => {
    const store = new MemoryKeyStore()
    const { key, record } = await store.create({ brand: 'acme', mode: 'live', properties: [PROPERTY_A.toUpperCase()], expiresAt: '2030-01-01T00:00:00.000Z', rateLimit: 5 })
    await atFixedTimes(async (at) => {
      at('2029-12-31T23:59:59.999Z')
      const authenticator = new KeyAuthenticator(store, { ttlMs: 600_000, graceMs: 0, maxEntries: 10 })
      const principal: Principal = {
        keyId: record.id, kind: 'apiKey', brand: 'acme', mode: 'live', properties: new Set([PROPERTY_A]), rateLimit: 5, scopes: 'all',
        expiresAtMs: Date.parse('2030-01-01T00:00:00.000Z'), expiresAt: '2030-01-01T00:00:00.000Z',
      }
      expect(await authenticator.verify(key)).toEqual(principal)
      const lookups: string[] = []
      const held = authenticator.verify(key, { beforeLookup: () => lookups.push(key) })
      expect(held).not.toBeInstanceOf(Promise)
      expect(held).toEqual(principal)
      expect(lookups).toEqual([])

      at('2030-01-01T00:00:00.000Z')
      let refused: unknown
      try {
        authenticator.verify(key)
      } catch (error) {
        refused = error
      }
      expect(refused).toMatchObject({ code: 'API_KEY_EXPIRED', message: 'The API key expired at 2030-01-01T00:00:00.000Z.' } satisfies Partial<ApiError>)
    })
  })

  it('answers a test key it holds in test mode, and a live one in live mode, at once', async () => {
    const store = new MemoryKeyStore()
    const authenticator = new KeyAuthenticator(store, { ttlMs: 600_000, graceMs: 0, maxEntries: 10 })
    for (const mode of ['test', 'live'] as const) {
      const { key, record } = await store.create({ brand: 'acme', mode, properties: '*' })
      const principal: Principal = { keyId: record.id, kind: 'apiKey', brand: 'acme', mode, properties: 'all', rateLimit: null, scopes: 'all' }
      expect(await authenticator.verify(key)).toEqual(principal)
      expect(authenticator.verify(key)).toEqual(principal)
    }
  })

  it('refuses a key of no known form, and one it found unknown, by returning the 401 at once; the first unknown key costs one look-up', async () => {
    const store = new MemoryKeyStore()
    // Well formed (its checksum holds), but no key of the store.
    const key = generateKey('live')
    const authenticator = new KeyAuthenticator(store, { ttlMs: 600_000, graceMs: 0, maxEntries: 10 })
    const lookups: string[] = []
    const hooks = { beforeLookup: () => lookups.push('lookup') }
    // Short; a key's length with a checksum that does not hold; a key's length of no key's characters.
    const lastChanged = `${key.slice(0, -1)}${key.endsWith('0') ? '1' : '0'}`
    for (const unformedKey of ['svc_live_not-a-key', lastChanged, `svc_live_${'-'.repeat(28)}`]) {
      const unformed = authenticator.verify(unformedKey, hooks)
      expect(unformed).toBeInstanceOf(ApiError)
      expect(unformed).toMatchObject({ code: 'INVALID_API_KEY', status: 401, message: 'The API key is not valid.' })
    }
    expect(lookups).toEqual([])
    // Not held yet: looked up once, refused by the promise.
    await expect(authenticator.verify(key, hooks)).rejects.toMatchObject({ code: 'INVALID_API_KEY', status: 401 })
    expect(lookups).toEqual(['lookup'])
    // Remembered as unknown: refused at once, with no look-up.
    const remembered = authenticator.verify(key, hooks)
    expect(remembered).toBeInstanceOf(ApiError)
    expect(remembered).toMatchObject({ code: 'INVALID_API_KEY', status: 401, message: 'The API key is not valid.' })
    expect(lookups).toEqual(['lookup'])
  })
})

/** A gateway over a real socket, in `prefix` of the Redis at `redisUrl`; closed by the caller. */
async function gatewayIn(prefix: string, overrides: Parameters<typeof testConfig>[0], redisUrl = REDIS_URL) {
  const gateway: Gateway = await createGateway({
    config: testConfig(overrides, { REDIS_URL: redisUrl, REDIS_PREFIX: prefix }), logger: captureLogs().logger, properties: new MemorySource([]),
  })
  await gateway.app.listen({ port: 0, host: '127.0.0.1' })
  await gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  expect(await eventually(async () => gateway.redis?.status === 'ready', 5000)).toBe(true)
  const url = (app: Gateway['app']) => `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const call = async (key: string) => {
    const res = await request(`${url(gateway.app)}/v1/properties`, { headers: { host: ACME_HOST, 'user-agent': 'mutation-kills/1.0', authorization: `Bearer ${key}` } })
    return { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
  }
  const cache = async () => {
    const res = await request(`${url(gateway.admin)}/status`)
    return (JSON.parse(await res.body.text()) as { cache: unknown }).cache
  }
  return { gateway, call, cache, close: () => gateway.app.close() }
}

type Call = Awaited<ReturnType<typeof gatewayIn>>['call']

const admitted = async (call: Call, key: string) => expectEnvelope(await call(key), { page: 1, perPage: 20, total: 0 })
const suspended = async (call: Call, key: string) => expectProblem(await call(key), { code: 'API_KEY_SUSPENDED', instance: '/v1/properties', detail: 'The API key is suspended.' })
const invalid = async (call: Call, key: string) => expectProblem(await call(key), { code: 'INVALID_API_KEY', instance: '/v1/properties', detail: 'The API key is not valid.' })
const statusOf = async (call: Call, key: string) => (await call(key)).statusCode

describe('a change made with the key tool', () => {
  it('reaches every gateway at once, through the channel, whatever they hold', async () => {
    const prefix = ownPrefix()
    // Held for ten minutes: only the channel can tell these instances of a change.
    const a = await gatewayIn(prefix, { keyCache: { ttlMs: 600_000, graceMs: 0, maxEntries: 10 } })
    const b = await gatewayIn(prefix, { keyCache: { ttlMs: 600_000, graceMs: 0, maxEntries: 10 } })
    try {
      expect(await eventually(async () => await subscribers(prefix) === 2, 5000)).toBe(true)
      const { id, key } = await liveKey(prefix)
      await admitted(a.call, key)
      await admitted(b.call, key)
      await tool(prefix, 'suspend', id)
      expect(await eventually(async () => await statusOf(a.call, key) === 403 && await statusOf(b.call, key) === 403, 5000)).toBe(true)
      await suspended(a.call, key)
      await suspended(b.call, key)
      await tool(prefix, 'resume', id)
      expect(await eventually(async () => await statusOf(a.call, key) === 200 && await statusOf(b.call, key) === 200, 5000)).toBe(true)
      await tool(prefix, 'revoke', id)
      expect(await eventually(async () => await statusOf(a.call, key) === 401 && await statusOf(b.call, key) === 401, 5000)).toBe(true)
      await invalid(a.call, key)
      await invalid(b.call, key)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
    expect(await eventually(async () => await subscribers(prefix) === 0, 5000)).toBe(true)
  })
})

describe('the key cache in /status', () => {
  it('counts the keys held, the unknown ones remembered (at most abuse.unknownKeys) and the share answered from memory', async () => {
    const prefix = ownPrefix()
    const g = await gatewayIn(prefix, { keyCache: { ttlMs: 600_000, graceMs: 0, maxEntries: 10 }, abuse: { authFailuresPerMinute: 600, trackedAddresses: 100, unknownKeys: 2 } })
    try {
      expect(await g.cache()).toEqual({ apiKeys: { entries: 0, hitRatio: 0, unknownEntries: 0 } })
      const { key } = await liveKey(prefix)
      for (let i = 0; i < 3; i += 1) await admitted(g.call, key)
      const invented = await Promise.all(Array.from({ length: 3 }, async () => liveKey(prefix)))
      for (const { id } of invented) await tool(prefix, 'revoke', id)
      for (const { key: gone } of invented) await invalid(g.call, gone)
      await invalid(g.call, (invented[2] as { key: string }).key)
      // Seven look-ups: the known key's last two and the last unknown one's second from memory.
      expect(await g.cache()).toEqual({ apiKeys: { entries: 1, hitRatio: 0.429, unknownEntries: 2 } })
    } finally {
      await g.close()
    }
  })
})

describe('an invented key', () => {
  it('never pushes a partner\'s key out of a full cache', async () => {
    const prefix = ownPrefix()
    const g = await gatewayIn(prefix, { keyCache: { ttlMs: 600_000, graceMs: 0, maxEntries: 1 } })
    try {
      const { key } = await liveKey(prefix)
      const gone = await liveKey(prefix)
      await tool(prefix, 'revoke', gone.id)
      await admitted(g.call, key)
      await invalid(g.call, gone.key)
      expect(await g.cache()).toEqual({ apiKeys: { entries: 1, hitRatio: 0, unknownEntries: 1 } })
      await admitted(g.call, key)
      expect(await g.cache()).toEqual({ apiKeys: { entries: 1, hitRatio: 0.333, unknownEntries: 1 } })
    } finally {
      await g.close()
    }
  })
})

describe('a key revoked while an operator suspends it', () => {
  it('is answered as no key, and leaves no stray record', async () => {
    const prefix = ownPrefix()
    let revokeFirst = ''
    // Another operator's revoke deletes the record between the look-up of the id and the change.
    const racing = new Proxy(admin, {
      get(target, name) {
        if (name === 'eval') {
          return async (...args: Parameters<Redis['eval']>) => {
            if (revokeFirst !== '') await target.del(revokeFirst)
            return target.eval(...args)
          }
        }
        const value: unknown = Reflect.get(target, name, target)
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    })
    const store = new RedisKeyStore(racing, prefix)
    const { record } = await store.create({ brand: 'acme', mode: 'live', properties: '*' })
    const grant = await store.createGrant({ issuer: ISSUER, clientId: 'raced', brand: 'acme', mode: 'live', properties: '*' })
    revokeFirst = `${prefix}key:${record.digest}`
    expect(await store.setStatus(record.id, 'suspended')).toBeNull()
    expect(await admin.exists(revokeFirst)).toBe(0)
    revokeFirst = `${prefix}grant:${grant.digest}`
    expect(await store.setGrantStatus(grant.id, 'suspended')).toBeNull()
    expect(await admin.exists(revokeFirst)).toBe(0)
  })
})

describe('a record changed where no message said so', () => {
  it('is read again once its lifetime in the cache ends: its new status, or its absence', async () => {
    const prefix = ownPrefix()
    const g = await gatewayIn(prefix, { keyCache: { ttlMs: 200, graceMs: 60_000, maxEntries: 10 } })
    try {
      const changed = await liveKey(prefix)
      const removed = await liveKey(prefix)
      await admitted(g.call, changed.key)
      await admitted(g.call, removed.key)
      await admin.hset(`${prefix}key:${sha256(changed.key)}`, 'status', 'suspended')
      await admin.del(`${prefix}key:${sha256(removed.key)}`)
      expect(await eventually(async () => await statusOf(g.call, changed.key) !== 200, 5000)).toBe(true)
      await suspended(g.call, changed.key)
      expect(await eventually(async () => await statusOf(g.call, removed.key) !== 200, 5000)).toBe(true)
      // The record found gone is remembered as unknown at once, and no longer held.
      expect(await g.cache()).toMatchObject({ apiKeys: { entries: 1, unknownEntries: 1 } })
      await invalid(g.call, removed.key)
    } finally {
      await g.close()
    }
  })
})

describe('Redis down', () => {
  it('leaves a key held by this instance working for keyCache.graceMs past its lifetime, then refuses it with 503', async () => {
    const server = await PrivateRedis.start()
    const ttlMs = 300
    const graceMs = 3000
    const g = await gatewayIn('gw:', { keyCache: { ttlMs, graceMs, maxEntries: 10 } }, server.url)
    try {
      const store = new Redis(server.url)
      const { key } = await new RedisKeyStore(store, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })
      store.disconnect()
      const before = Date.now()
      await admitted(g.call, key)
      const after = Date.now()
      await server.stop()
      // Past its lifetime (the copy is stale), within the grace period.
      expect(await eventually(async () => Date.now() > after + ttlMs + 50, 5000)).toBe(true)
      await admitted(g.call, key)
      expect(Date.now()).toBeLessThan(before + ttlMs + graceMs)
      // Past the grace period.
      expect(await eventually(async () => Date.now() > after + ttlMs + graceMs + 50, 10_000)).toBe(true)
      expectProblem(await g.call(key), {
        code: 'SERVICE_UNAVAILABLE', instance: '/v1/properties', detail: 'API keys cannot be checked right now; retry shortly.', headers: { 'retry-after': '1' },
      })
    } finally {
      await g.close()
      await server.stop()
    }
  })
})

describe('the subscription to changes, lost and back', () => {
  it('reads every held key again once it is back, as messages may have been missed meanwhile', async () => {
    const server = await PrivateRedis.start()
    const g = await gatewayIn('gw:', { keyCache: { ttlMs: 600_000, graceMs: 0, maxEntries: 10 } }, server.url)
    const redis = new Redis(server.url)
    try {
      const { key } = await new RedisKeyStore(redis, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })
      expect(await eventually(async () => await subscribersAt(redis) === 1, 5000)).toBe(true)
      await admitted(g.call, key)
      // A suspension whose message this instance missed.
      await redis.hset(`gw:key:${sha256(key)}`, 'status', 'suspended')
      await admitted(g.call, key)
      await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
      expect(await eventually(async () => await statusOf(g.call, key) !== 200, 5000)).toBe(true)
      await suspended(g.call, key)
    } finally {
      redis.disconnect()
      await g.close()
      await server.stop()
    }
  })

  it('reads a held key again once it is back, and keeps it working while Redis cannot answer that read', async () => {
    const server = await PrivateRedis.start()
    const g = await gatewayIn('gw:', { keyCache: { ttlMs: 600_000, graceMs: 0, maxEntries: 10 } }, server.url)
    const redis = new Redis(server.url)
    // Denied HGETALLs of the gateway's user, as Redis's ACL log counts them.
    const deniedReads = async () => ((await redis.call('ACL', 'LOG')) as unknown[][])
      .filter((entry) => entry.includes('hgetall'))
      .reduce((sum, entry) => sum + Number(entry[entry.indexOf('count') + 1]), 0)
    try {
      const { key } = await new RedisKeyStore(redis, 'gw:').create({ brand: 'acme', mode: 'live', properties: '*' })
      expect(await eventually(async () => await subscribersAt(redis) === 1, 5000)).toBe(true)
      await admitted(g.call, key)
      // A suspension whose message this instance misses, while its reads of key records fail
      // (as a Cluster's do for a slot whose master is still being replaced).
      await redis.hset(`gw:key:${sha256(key)}`, 'status', 'suspended')
      await redis.call('ACL', 'SETUSER', 'default', '-hgetall')
      await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
      // Each call admitted: before the subscription is back from the copy held, after it from
      // the same copy, once the read again was refused.
      const answers: number[] = []
      expect(await eventually(async () => {
        answers.push(await statusOf(g.call, key))
        return await deniedReads() > 0
      }, 10_000)).toBe(true)
      expect(answers.every((status) => status === 200)).toBe(true)
      await admitted(g.call, key)
      await admitted(g.call, key)
      // Reads work again: the next call reads the record, and the suspension holds.
      await redis.call('ACL', 'SETUSER', 'default', '+hgetall')
      await suspended(g.call, key)
    } finally {
      redis.disconnect()
      await g.close()
      await server.stop()
    }
  })
})

async function subscribersAt(redis: Redis): Promise<unknown> {
  return (await redis.pubsub('NUMSUB', 'gw:keys:changed'))[1]
}

/** The checksum of the published format (docs/architecture.md §D7): the CRC32 of the rest, in six base62 digits. */
function formatChecksum(body: string): string {
  const digits = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
  let value = crc32(body)
  let text = ''
  for (let i = 0; i < 6; i += 1) {
    text = `${digits.charAt(value % 62)}${text}`
    value = Math.floor(value / 62)
  }
  return text
}

describe('the key format', () => {
  it('ends a key in the checksum partners\' keys and secret scanners rely on, and takes no other shape', () => {
    for (const mode of ['live', 'test'] as const) {
      const key = generateKey(mode)
      expect(key.slice(-6)).toBe(formatChecksum(key.slice(0, -6)))
    }
    const body = 'svc_live_0123456789ABCDEFGHIJKL'
    expect(keyMode(`${body}${formatChecksum(body)}`)).toBe('live')
    // One character short, or of another prefix, with the checksum of what comes before it.
    for (const other of ['svc_live_0123456789ABCDEFGHIJK', 'svc_beta_0123456789ABCDEFGHIJKL']) {
      expect(keyMode(`${other}${formatChecksum(other)}`)).toBeUndefined()
    }
  })
})
