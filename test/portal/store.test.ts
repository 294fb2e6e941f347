import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, describe, expect, it } from 'vitest'
import { AuditTrail, MemoryAuditStore } from '../../src/credentials/audit.js'
import { CredentialInputError, CredentialNotFound } from '../../src/credentials/service.js'
import { keyPrincipal, scopesOf } from '../../src/keys/authenticator.js'
import { MemoryKeyStore } from '../../src/keys/store.js'
import { csrfTokenOf, digestSecret, MAX_LIVE_SESSIONS, PortalSessionInvalid, PortalSessionLimitReached, PortalSessions } from '../../src/portal/sessions.js'
import { PortalSessionStore } from '../../src/portal/store.js'
import { keysUnder, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The portal's sessions without a gateway (docs/architecture.md, "The partner portal"): the
// sessions' rules over their store in the shared Redis, with the key store and the audit trail
// of this process (real objects, in memory): a link made, entered once, a session resolved,
// ended by logout, by an operator or with its credential, and the bound on live sessions. The
// module's mutation run uses this file (scripts/mutation.ts).

const redis = new Redis(REDIS_URL)
const prefix = testPrefix()
afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
})

const HOUR = 3_600_000
const DAY = 24 * HOUR
// Near the real clock: Redis expires the session's keys at their ends, and the audit trail keeps entries by time.
const NOW = Date.now() - (Date.now() % 1000)
const ORIGIN = 'https://portal.acme.example'
const iso = (ms: number): string => new Date(ms).toISOString()
const SESSION_ID = /^ps_[0-9A-HJKMNP-TV-Z]{26}$/
const SECRET = /^[A-Za-z0-9_-]{43}$/
const SPENT = 'This link cannot be used: it was used already, has expired or is not a portal link. Ask your operator for a new link.'
const NO_SESSION = 'There is no portal session, or it has ended. Open a new portal link from your operator.'

let namespaces = 0

function world() {
  namespaces += 1
  const ns = `${prefix}${namespaces}:`
  const keys = new MemoryKeyStore()
  const audit = new AuditTrail(new MemoryAuditStore(), 400 * DAY, pino({ level: 'silent' }))
  const clock = { now: NOW }
  const store = new PortalSessionStore(redis, ns)
  const sessions = new PortalSessions({ store, keys, audit, origins: new Map([['acme', ORIGIN], ['globex', 'https://portal.globex.example']]), now: () => clock.now })
  /** The audit entries, oldest first, as the trail shows them. */
  const trail = async (): Promise<unknown[]> => (await audit.query({ offset: 0, limit: 100 })).entries.reverse()
    .map(({ actor, action, credentialId, changes, time }) => ({ actor, action, credentialId, changes, time }))
  const key = async (over: Record<string, unknown> = {}) => (await keys.create({ brand: 'acme', mode: 'live', properties: '*', scopes: ['properties:read'], ...over })).record
  return { ns, keys, audit, clock, store, sessions, trail, key }
}

type World = ReturnType<typeof world>

/** A link of `credentialId` made by an operator, and its token. */
async function link(w: World, credentialId: string, input: Record<string, unknown> = {}): Promise<{ sessionId: string; token: string; expiresAt: string }> {
  const made = await w.sessions.createLink(credentialId, input, 'operator')
  const [origin, token] = made.url.split('/portal/enter#')
  expect(origin).toBe(ORIGIN)
  return { sessionId: made.sessionId, token: token as string, expiresAt: made.expiresAt }
}

async function rejection(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run()
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

describe('a link', () => {
  it('opens a session of the credential for its lifetime, kept in Redis by the token\'s digest, audited', async () => {
    const w = world()
    const record = await w.key()
    const made = await w.sessions.createLink(record.id, { expiresIn: '2h', capabilities: ['replay'], label: 'Ops' }, 'operator')
    expect(made).toEqual({ sessionId: expect.stringMatching(SESSION_ID), url: expect.stringMatching(/^https:\/\/portal\.acme\.example\/portal\/enter#[A-Za-z0-9_-]{43}$/), expiresAt: iso(NOW + 2 * HOUR) })
    const token = made.url.slice(made.url.indexOf('#') + 1)
    const sessionKey = `${w.ns}portal:{${record.id}}:session:${made.sessionId}`
    expect(await redis.hgetall(sessionKey)).toEqual({
      id: made.sessionId, credentialId: record.id, capabilities: 'view,replay', label: 'Ops', createdAt: iso(NOW), expiresAt: iso(NOW + 2 * HOUR),
      expiresAtMs: String(NOW + 2 * HOUR), enteredAt: '', link: digestSecret(token), cookie: '',
    })
    expect(await redis.pexpiretime(sessionKey)).toBe(NOW + 2 * HOUR)
    expect(await redis.get(`${w.ns}portal:link:${digestSecret(token)}`)).toBe(`${record.id} ${made.sessionId}`)
    expect(await redis.pexpiretime(`${w.ns}portal:link:${digestSecret(token)}`)).toBe(NOW + 2 * HOUR)
    expect(await redis.zrange(`${w.ns}portal:{${record.id}}:sessions`, '0', '-1', 'WITHSCORES')).toEqual([made.sessionId, String(NOW + 2 * HOUR)])
    expect((await keysUnder(redis, w.ns)).sort()).toEqual([`${w.ns}portal:link:${digestSecret(token)}`, sessionKey, `${w.ns}portal:{${record.id}}:sessions`].sort())
    expect(await w.trail()).toEqual([{
      actor: 'operator', action: 'portal_session.created', credentialId: record.id, time: iso(NOW),
      changes: { sessionId: { old: null, new: made.sessionId }, capabilities: { old: null, new: ['view', 'replay'] }, expiresAt: { old: null, new: iso(NOW + 2 * HOUR) }, label: { old: null, new: 'Ops' } },
    }])
  })

  it('leads to the origin of the credential\'s brand, as a reload leaves it', async () => {
    const w = world()
    const globex = await w.key({ brand: 'globex' })
    expect((await w.sessions.createLink(globex.id, {}, 'operator')).url).toMatch(/^https:\/\/portal\.globex\.example\/portal\/enter#/)
    w.sessions.useOrigins(new Map([['globex', 'https://elsewhere.example']]))
    const made = await w.sessions.createLink(globex.id, {}, 'operator')
    expect({ url: made.url.split('#')[0], expiresAt: made.expiresAt }).toEqual({ url: 'https://elsewhere.example/portal/enter', expiresAt: iso(NOW + DAY) })
  })

  it('is refused for a credential unknown, suspended or expired, and for bad fields, before anything is kept', async () => {
    const w = world()
    expect(await rejection(() => w.sessions.createLink('key_nothere', {}, 'operator'))).toBeInstanceOf(CredentialNotFound)
    const suspended = await w.key()
    await w.keys.setStatus(suspended.id, 'suspended')
    const expired = await w.key({ expiresAt: iso(NOW) })
    for (const [record, state] of [[suspended, 'suspended'], [expired, 'expired']] as const) {
      const error = await rejection(() => w.sessions.createLink(record.id, {}, 'operator'))
      expect(error).toBeInstanceOf(CredentialInputError)
      expect((error as CredentialInputError).errors).toEqual([{ field: 'id', code: 'NOT_ALLOWED', detail: `${record.id} is ${state}: its portal could not be used` }])
    }
    const active = await w.key({ expiresAt: iso(NOW + 1) })
    const bad = await rejection(() => w.sessions.createLink(active.id, { expiresIn: '8d' }, 'operator', (field) => `--${field}`))
    expect((bad as CredentialInputError).errors).toEqual([{ field: 'expiresIn', code: 'OUT_OF_RANGE', detail: expect.stringMatching(/^--expiresIn is a duration/) }])
    // The credentials API names a field as its body does.
    const named = await rejection(() => w.sessions.createLink(active.id, { label: 7 }, 'operator'))
    expect((named as CredentialInputError).errors).toEqual([{ field: 'label', code: 'INVALID_FORMAT', detail: 'label is a text of at most 200 characters, or null for none' }])
    expect(await keysUnder(redis, w.ns)).toEqual([])
    expect(await w.trail()).toEqual([])
  })

  it('is refused past the live sessions a credential may have; a session that ended frees its place', async () => {
    const w = world()
    const record = await w.key()
    const first = await link(w, record.id, { expiresIn: '1h' })
    for (let i = 1; i < MAX_LIVE_SESSIONS; i += 1) await link(w, record.id)
    const error = await rejection(() => w.sessions.createLink(record.id, {}, 'operator'))
    expect(error).toBeInstanceOf(PortalSessionLimitReached)
    expect({ name: (error as Error).name, message: (error as Error).message })
      .toEqual({ name: 'PortalSessionLimitReached', message: `${record.id} has 10 live portal sessions, as many as it may; end them, or wait until one expires` })
    expect(MAX_LIVE_SESSIONS).toBe(10)
    expect(await w.store.live(record.id, NOW)).toHaveLength(10)
    // The first one's hour is over: it no longer counts.
    w.clock.now = NOW + HOUR
    expect(await w.store.live(record.id, w.clock.now)).not.toContain(first.sessionId)
    const made = await link(w, record.id)
    expect(await redis.zscore(`${w.ns}portal:{${record.id}}:sessions`, first.sessionId)).toBeNull()
    // The list lives as long as its last session.
    expect(await redis.pexpiretime(`${w.ns}portal:{${record.id}}:sessions`)).toBe(Date.parse(made.expiresAt))
  })
})

describe('entering a link', () => {
  it('spends it once: the session\'s cookie and its CSRF token, the session entered, audited', async () => {
    const w = world()
    const record = await w.key()
    const { sessionId, token } = await link(w, record.id, { capabilities: ['manage_webhooks'] })
    w.clock.now = NOW + 5000
    const entered = await w.sessions.enter(token)
    expect(entered).toEqual({
      session: { id: sessionId, credentialId: record.id, capabilities: ['view', 'manage_webhooks'], label: null, createdAt: iso(NOW), expiresAt: iso(NOW + DAY), expiresAtMs: NOW + DAY, enteredAt: iso(NOW + 5000) },
      principal: keyPrincipal(record), cookie: expect.stringMatching(SECRET), csrfToken: csrfTokenOf(entered.cookie),
    })
    expect(entered.cookie).not.toBe(token)
    const sessionKey = `${w.ns}portal:{${record.id}}:session:${sessionId}`
    expect(await redis.hmget(sessionKey, 'enteredAt', 'cookie')).toEqual([iso(NOW + 5000), digestSecret(entered.cookie)])
    expect(await redis.get(`${w.ns}portal:cookie:${digestSecret(entered.cookie)}`)).toBe(`${record.id} ${sessionId}`)
    expect(await redis.pexpiretime(`${w.ns}portal:cookie:${digestSecret(entered.cookie)}`)).toBe(NOW + DAY)
    expect(await redis.exists(`${w.ns}portal:link:${digestSecret(token)}`)).toBe(0)
    expect((await w.trail()).at(-1)).toEqual({
      actor: `portal:${sessionId}`, action: 'portal_session.entered', credentialId: record.id, time: iso(NOW + 5000),
      changes: { sessionId: { old: sessionId, new: sessionId }, enteredAt: { old: null, new: iso(NOW + 5000) } },
    })
    const again = await rejection(() => w.sessions.enter(token))
    expect(again).toBeInstanceOf(PortalSessionInvalid)
    expect({ name: (again as Error).name, detail: (again as PortalSessionInvalid).detail }).toEqual({ name: 'PortalSessionInvalid', detail: SPENT })
  })

  it('refuses what is no token, a token never made, and the link of a session already ended', async () => {
    const w = world()
    const record = await w.key()
    // A JSON body may hold anything: an array whose text has a token's form is no token either.
    for (const token of [undefined, 42, '', 'x'.repeat(42), `${'x'.repeat(43)}=`, 'x'.repeat(44), 'x'.repeat(43), ['x'.repeat(43)]]) {
      const error = await rejection(() => w.sessions.enter(token))
      expect({ token, error: error instanceof PortalSessionInvalid ? error.detail : error }).toEqual({ token, error: SPENT })
    }
    const { token } = await link(w, record.id)
    expect(await w.sessions.endAll(record.id, 'operator', 'ended by an operator')).toBe(1)
    // The session and its link's index are gone.
    expect(await keysUnder(redis, w.ns)).toEqual([])
    expect(((await rejection(() => w.sessions.enter(token))) as PortalSessionInvalid).detail).toBe(SPENT)
  })

  it('refuses a session that expired, even with its link still kept', async () => {
    const w = world()
    const record = await w.key()
    const { token } = await link(w, record.id, { expiresIn: '1h' })
    w.clock.now = NOW + HOUR
    expect(((await rejection(() => w.sessions.enter(token))) as PortalSessionInvalid).detail).toBe(SPENT)
  })

  it('ends the session of a credential suspended since the link was made', async () => {
    const w = world()
    const record = await w.key()
    const { sessionId, token } = await link(w, record.id)
    await w.keys.setStatus(record.id, 'suspended')
    expect(((await rejection(() => w.sessions.enter(token))) as PortalSessionInvalid).detail).toBe(SPENT)
    expect((await w.trail()).at(-1)).toEqual({
      actor: `portal:${sessionId}`, action: 'portal_session.ended', credentialId: record.id, time: iso(NOW),
      changes: { sessionId: { old: sessionId, new: null }, reason: { old: null, new: 'credential suspended' } },
    })
    expect(await keysUnder(redis, w.ns)).toEqual([])
  })

  it('opens a session of a client\'s grant, its principal that of an access token', async () => {
    const w = world()
    const grant = await w.keys.createGrant({ issuer: 'https://id.example.com', clientId: 'c1', brand: 'acme', mode: 'test', properties: ['H1', 'h2'], scopes: ['events:read'], rateLimit: 5 })
    const { token } = await link(w, grant.id)
    const entered = await w.sessions.enter(token)
    expect(entered.principal).toStrictEqual({ keyId: grant.id, kind: 'accessToken', brand: 'acme', mode: 'test', properties: new Set(['h1', 'h2']), rateLimit: 5, scopes: scopesOf(['events:read']) })
    expect(await w.sessions.exists(grant.id)).toBe(true)
    const all = await w.keys.createGrant({ issuer: 'https://id.example.com', clientId: 'c2', brand: 'acme', mode: 'live', properties: '*', scopes: '*' })
    const second = await w.sessions.enter((await link(w, all.id)).token)
    expect({ properties: second.principal.properties, scopes: second.principal.scopes, rateLimit: second.principal.rateLimit }).toEqual({ properties: 'all', scopes: 'all', rateLimit: null })
    await w.keys.setGrantStatus(grant.id, 'suspended')
    expect(await rejection(() => w.sessions.createLink(grant.id, {}, 'operator'))).toBeInstanceOf(CredentialInputError)
  })
})

describe('a session', () => {
  async function entered(w: World, input: Record<string, unknown> = {}) {
    const record = await w.key()
    const { token } = await link(w, record.id, input)
    return { record, ...(await w.sessions.enter(token)) }
  }

  it('is found by its cookie while it lasts, with its credential as it is now', async () => {
    const w = world()
    const { record, session, cookie } = await entered(w, { expiresIn: '1h' })
    expect(await w.sessions.resolve(cookie)).toEqual({ session, principal: keyPrincipal(record) })
    w.clock.now = NOW + HOUR - 1
    expect((await w.sessions.resolve(cookie)).session).toEqual(session)
    w.clock.now = NOW + HOUR
    expect(((await rejection(() => w.sessions.resolve(cookie))) as PortalSessionInvalid).detail).toBe(NO_SESSION)
  })

  it('is none for no cookie, a malformed one or one never given', async () => {
    const w = world()
    await entered(w)
    for (const cookie of [undefined, '', 'x'.repeat(42), 'x'.repeat(43)]) {
      const error = await rejection(() => w.sessions.resolve(cookie))
      expect({ cookie, error: error instanceof PortalSessionInvalid ? error.detail : error }).toEqual({ cookie, error: NO_SESSION })
    }
  })

  it('ends when its credential is revoked, suspended or expired, naming why, audited once', async () => {
    for (const [change, reason] of [['revoke', 'credential revoked'], ['suspend', 'credential suspended'], ['expire', 'credential expired']] as const) {
      const w = world()
      const { record, session, cookie } = await entered(w)
      if (change === 'revoke') await w.keys.revoke(record.id)
      else if (change === 'suspend') await w.keys.setStatus(record.id, 'suspended')
      else await w.keys.update(record.id, { expiresAt: iso(NOW + 1000) })
      w.clock.now = NOW + 1000
      const error = await rejection(() => w.sessions.resolve(cookie))
      expect((error as PortalSessionInvalid).detail, change).toBe(`The portal session has ended: its ${reason}. Ask your operator for a new link.`)
      expect(((await rejection(() => w.sessions.resolve(cookie))) as PortalSessionInvalid).detail).toBe(NO_SESSION)
      expect((await w.trail()).filter((e) => (e as { action: string }).action === 'portal_session.ended')).toEqual([{
        actor: `portal:${session.id}`, action: 'portal_session.ended', credentialId: record.id, time: iso(NOW + 1000),
        changes: { sessionId: { old: session.id, new: null }, reason: { old: null, new: reason } },
      }])
      expect(await keysUnder(redis, w.ns)).toEqual([])
    }
  })

  it('ends at logout, once, its cookie no longer taken', async () => {
    const w = world()
    const { record, session, cookie } = await entered(w)
    await w.sessions.logout(session)
    await w.sessions.logout(session)
    expect(((await rejection(() => w.sessions.resolve(cookie))) as PortalSessionInvalid).detail).toBe(NO_SESSION)
    expect((await w.trail()).filter((e) => (e as { action: string }).action === 'portal_session.ended')).toEqual([{
      actor: `portal:${session.id}`, action: 'portal_session.ended', credentialId: record.id, time: iso(NOW),
      changes: { sessionId: { old: session.id, new: null }, reason: { old: null, new: 'logout' } },
    }])
    expect(await keysUnder(redis, w.ns)).toEqual([])
  })

  it('ends with every live one of its credential when an operator ends them, each audited', async () => {
    const w = world()
    const { record, session } = await entered(w)
    const waiting = await link(w, record.id, { expiresIn: '2h' })
    const other = await w.key()
    await link(w, other.id)
    const gone = await link(w, record.id, { expiresIn: '1h' })
    w.clock.now = NOW + HOUR
    expect(await w.sessions.endAll(record.id, 'admin:ops', 'ended by an operator')).toBe(2)
    const ended = (await w.trail()).filter((e) => (e as { action: string }).action === 'portal_session.ended')
    expect(ended).toEqual(expect.arrayContaining([session.id, waiting.sessionId].map((id) => ({
      actor: 'admin:ops', action: 'portal_session.ended', credentialId: record.id, time: iso(NOW + HOUR),
      changes: { sessionId: { old: id, new: null }, reason: { old: null, new: 'ended by an operator' } },
    }))))
    expect(ended).toHaveLength(2)
    expect(await w.store.live(record.id, w.clock.now)).toEqual([])
    expect(await w.store.live(other.id, w.clock.now)).toHaveLength(1)
    expect(await w.sessions.endAll(record.id, 'admin:ops', 'ended by an operator')).toBe(0)
    expect(gone.sessionId).toMatch(SESSION_ID)
  })

  it('of an id no store holds is not ended twice', async () => {
    const w = world()
    expect(await w.store.end('key_nothere', 'ps_nothere')).toBeNull()
    expect(await w.store.byCookie(digestSecret('x'), NOW)).toBeNull()
    expect(await w.store.enter('key_nothere', 'ps_nothere', digestSecret('x'), NOW)).toBeNull()
  })
})

describe('a session as its store keeps it', () => {
  it('is ended whole, as it was: entered or not, with or without its label', async () => {
    const w = world()
    const record = await w.key()
    const waiting = await link(w, record.id, { label: 'Front desk' })
    const ended = await w.store.end(record.id, waiting.sessionId)
    expect(ended).toStrictEqual({
      id: waiting.sessionId, credentialId: record.id, capabilities: ['view'], label: 'Front desk', createdAt: iso(NOW), expiresAt: iso(NOW + DAY), expiresAtMs: NOW + DAY, enteredAt: null,
    })
    const { token } = await link(w, record.id)
    const entered = await w.sessions.enter(token)
    expect(entered.session.label).toBeNull()
    expect(await w.store.end(record.id, entered.session.id)).toStrictEqual({ ...entered.session, enteredAt: iso(NOW) })
    expect(await keysUnder(redis, w.ns)).toEqual([])
  })

  it('keeps a label through entering', async () => {
    const w = world()
    const record = await w.key()
    const { token } = await link(w, record.id, { label: 'Ops' })
    expect((await w.sessions.enter(token)).session.label).toBe('Ops')
  })

  it('is none by its cookie once its hash is gone, its index left a moment behind', async () => {
    const w = world()
    const record = await w.key()
    const { sessionId, token } = await link(w, record.id)
    const { cookie } = await w.sessions.enter(token)
    await redis.del(`${w.ns}portal:{${record.id}}:session:${sessionId}`)
    expect(await w.store.byCookie(digestSecret(cookie), NOW)).toBeNull()
    expect(((await rejection(() => w.sessions.resolve(cookie))) as PortalSessionInvalid).detail).toBe(NO_SESSION)
  })

  it('ended by another instance between the listing and the ending is not counted or audited', async () => {
    const w = world()
    const record = await w.key()
    const { sessionId } = await link(w, record.id)
    await redis.del(`${w.ns}portal:{${record.id}}:session:${sessionId}`)
    expect(await w.sessions.endAll(record.id, 'admin:ops', 'ended by an operator')).toBe(0)
    expect((await w.trail()).filter((e) => (e as { action: string }).action === 'portal_session.ended')).toEqual([])
  })

  it('is not made when Redis refuses its link', async () => {
    const w = world()
    const session = { id: 'ps_refused', credentialId: 'key_x', capabilities: ['view' as const], label: null, createdAt: iso(0), expiresAt: iso(-1), expiresAtMs: -1, enteredAt: null }
    // A link whose end Redis cannot take (before the epoch): its SET fails after the session's script ran.
    await expect(w.store.create(session, digestSecret('t'), MAX_LIVE_SESSIONS, NOW)).rejects.toThrow(/invalid expire time/)
    expect(await keysUnder(redis, w.ns)).toEqual([])
  })
})

describe('a credential with an expiry', () => {
  it('opens sessions until it expires', async () => {
    const w = world()
    const record = await w.key({ expiresAt: iso(NOW + HOUR) })
    const { token } = await link(w, record.id)
    const { cookie, principal } = await w.sessions.enter(token)
    expect(principal).toEqual(keyPrincipal(record))
    w.clock.now = NOW + HOUR - 1
    expect((await w.sessions.resolve(cookie)).principal).toEqual(keyPrincipal(record))
    w.clock.now = NOW + HOUR
    expect(((await rejection(() => w.sessions.resolve(cookie))) as PortalSessionInvalid).detail).toBe('The portal session has ended: its credential expired. Ask your operator for a new link.')
  })
})

describe('whether a credential exists', () => {
  it('is asked of the key store, a grant\'s id of its grants', async () => {
    const w = world()
    const record = await w.key()
    expect(await w.sessions.exists(record.id)).toBe(true)
    expect(await w.sessions.exists('key_nothere')).toBe(false)
    expect(await w.sessions.exists('cli_nothere')).toBe(false)
  })
})
