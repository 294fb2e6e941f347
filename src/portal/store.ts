import type { RedisClient } from '../redis.js'
import { CAPABILITIES, type Capability } from './schemas.js'

// The partner portal's sessions in Redis (docs/architecture.md, "The partner portal"). A
// session is made with its link; the link's token and, once entered, the session's cookie are
// secrets the partner holds: Redis keeps their SHA-256 digests only, never them.
//
// Redis layout (every name starts with the namespace, `gw:` by default):
//   {ns}portal:{<credentialId>}:sessions       ZSET  the credential's sessions, scored by when
//                                                     each ends (epoch ms): its live ones are the bound's count
//   {ns}portal:{<credentialId>}:session:<id>   HASH  id, credentialId, capabilities (comma list),
//                                                     label, createdAt, expiresAt, expiresAtMs,
//                                                     enteredAt, link (the token's digest),
//                                                     cookie (the cookie's digest, once entered)
//   {ns}portal:link:<digest>                   STRING "<credentialId> <sessionId>" until entered
//   {ns}portal:cookie:<digest>                 STRING "<credentialId> <sessionId>" once entered
// Each expires when its session does. The two of a credential share a hash slot (its id in
// braces), so the bound and the entering are single scripts; the two indexes are looked up by
// a digest alone, so they live anywhere and are written after (and deleted after) the session
// whose they are: an index left without its session reads as no session.

export interface PortalSession {
  id: string
  credentialId: string
  capabilities: Capability[]
  label: string | null
  createdAt: string
  expiresAt: string
  expiresAtMs: number
  /** Null until the link is entered. */
  enteredAt: string | null
}

/** A session as its hash holds it, with the digests of its secrets. */
interface StoredSession extends PortalSession {
  linkDigest: string
  cookieDigest: string | null
}

// KEYS: the credential's sessions, the new session. ARGV: now, the bound, the session id,
// when it ends (ms), then the hash's fields and values.
const CREATE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('PEXPIREAT', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
`

// KEYS: the session. ARGV: now, the cookie's digest, when it was entered (ISO). The session,
// once, while it lasts: a session entered already is not entered again.
const ENTER = `
local ends = redis.call('HGET', KEYS[1], 'expiresAtMs')
if not ends or tonumber(ends) <= tonumber(ARGV[1]) then return nil end
if redis.call('HGET', KEYS[1], 'enteredAt') ~= '' then return nil end
redis.call('HSET', KEYS[1], 'enteredAt', ARGV[3], 'cookie', ARGV[2])
return redis.call('HGETALL', KEYS[1])
`

// KEYS: the credential's sessions, the session. ARGV: its id. What it was, and it is gone.
const END = `
local session = redis.call('HGETALL', KEYS[2])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return session
`

function pairs(flat: unknown): Record<string, string> {
  const list = flat as string[] | null
  const out: Record<string, string> = {}
  if (list === null) return out
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i] as string] = list[i + 1] as string
  return out
}

function fromHash(hash: Record<string, string>): StoredSession | null {
  if (hash.id === undefined || hash.credentialId === undefined || hash.expiresAtMs === undefined) return null
  return {
    id: hash.id,
    credentialId: hash.credentialId,
    capabilities: (hash.capabilities ?? '').split(',').filter((c): c is Capability => (CAPABILITIES as readonly string[]).includes(c)),
    label: hash.label === undefined || hash.label === '' ? null : hash.label,
    createdAt: hash.createdAt ?? '',
    expiresAt: hash.expiresAt ?? '',
    expiresAtMs: Number(hash.expiresAtMs),
    enteredAt: hash.enteredAt === undefined || hash.enteredAt === '' ? null : hash.enteredAt,
    linkDigest: hash.link ?? '',
    cookieDigest: hash.cookie === undefined || hash.cookie === '' ? null : hash.cookie,
  }
}

function publicOf(stored: StoredSession): PortalSession {
  const { linkDigest: _link, cookieDigest: _cookie, ...session } = stored
  return session
}

/** "<credentialId> <sessionId>", what an index holds. */
function parseOwner(value: string | null): { credentialId: string; sessionId: string } | null {
  if (value === null) return null
  const [credentialId, sessionId] = value.split(' ')
  return credentialId === undefined || sessionId === undefined ? null : { credentialId, sessionId }
}

export class PortalSessionStore {
  constructor(private readonly redis: RedisClient, private readonly namespace: string) {}

  private listKey(credentialId: string): string {
    return `${this.namespace}portal:{${credentialId}}:sessions`
  }

  private sessionKey(credentialId: string, sessionId: string): string {
    return `${this.namespace}portal:{${credentialId}}:session:${sessionId}`
  }

  private linkKey(digest: string): string {
    return `${this.namespace}portal:link:${digest}`
  }

  private cookieKey(digest: string): string {
    return `${this.namespace}portal:cookie:${digest}`
  }

  /** Keeps a new session and its link; false when the credential has `max` live sessions already. */
  async create(session: PortalSession, linkDigest: string, max: number, now: number): Promise<boolean> {
    const fields = {
      id: session.id, credentialId: session.credentialId, capabilities: session.capabilities.join(','), label: session.label ?? '',
      createdAt: session.createdAt, expiresAt: session.expiresAt, expiresAtMs: String(session.expiresAtMs), enteredAt: '', link: linkDigest, cookie: '',
    }
    const made = await this.redis.eval(CREATE, 2, this.listKey(session.credentialId), this.sessionKey(session.credentialId, session.id),
      String(now), String(max), session.id, String(session.expiresAtMs), ...Object.entries(fields).flat())
    if (made !== 1) return false
    try {
      await this.redis.set(this.linkKey(linkDigest), `${session.credentialId} ${session.id}`, 'PXAT', session.expiresAtMs)
    } catch (error) {
      // A session whose link was not kept could never be entered: it does not count.
      await this.end(session.credentialId, session.id).catch(() => undefined)
      throw error
    }
    return true
  }

  /** Spends a link: whose session it opened, once; null for a link spent, expired or unknown. */
  async spendLink(linkDigest: string): Promise<{ credentialId: string; sessionId: string } | null> {
    return parseOwner(await this.redis.getdel(this.linkKey(linkDigest)))
  }

  /** Enters a session whose link was spent: its cookie's digest is kept. Null when it ended, expired or was entered. */
  async enter(credentialId: string, sessionId: string, cookieDigest: string, now: number): Promise<PortalSession | null> {
    const hash = pairs(await this.redis.eval(ENTER, 1, this.sessionKey(credentialId, sessionId), String(now), cookieDigest, new Date(now).toISOString()))
    const stored = fromHash(hash)
    if (stored === null) return null
    await this.redis.set(this.cookieKey(cookieDigest), `${credentialId} ${sessionId}`, 'PXAT', stored.expiresAtMs)
    return publicOf(stored)
  }

  /** The session whose cookie has this digest, while it lasts. */
  async byCookie(cookieDigest: string, now: number): Promise<PortalSession | null> {
    const owner = parseOwner(await this.redis.get(this.cookieKey(cookieDigest)))
    if (owner === null) return null
    const stored = fromHash(await this.redis.hgetall(this.sessionKey(owner.credentialId, owner.sessionId)))
    // The index outlives an ended session only for the moment between their deletions.
    if (stored === null || stored.cookieDigest !== cookieDigest || stored.expiresAtMs <= now) return null
    return publicOf(stored)
  }

  /** Ends a session (entered or not): it and its indexes are gone. Null when there was none. */
  async end(credentialId: string, sessionId: string): Promise<PortalSession | null> {
    const stored = fromHash(pairs(await this.redis.eval(END, 2, this.listKey(credentialId), this.sessionKey(credentialId, sessionId), sessionId)))
    if (stored === null) return null
    const indexes = [this.linkKey(stored.linkDigest), ...(stored.cookieDigest === null ? [] : [this.cookieKey(stored.cookieDigest)])]
    for (const key of indexes) await this.redis.del(key)
    return publicOf(stored)
  }

  /** The ids of the credential's sessions that have not ended by `now`. */
  async live(credentialId: string, now: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.listKey(credentialId), `(${now}`, '+inf')
  }
}
