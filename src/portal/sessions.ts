import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { FieldError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import { CredentialInputError, CredentialNotFound, isGrantId } from '../credentials/service.js'
import type { AuditTrail } from '../credentials/audit.js'
import type { AuditAction, AuditEntry } from '../credentials/schemas.js'
import { UlidFactory } from '../events/ulid.js'
import { keyPrincipal, scopesOf } from '../keys/authenticator.js'
import type { GrantRecord } from '../keys/grants.js'
import type { Principal } from '../keys/principal.js'
import type { KeyRecord, KeyStore } from '../keys/store.js'
import { CAPABILITIES, PORTAL_RULES, type Capability, type PortalField, type PortalLinkView } from './schemas.js'
import type { PortalSession, PortalSessionStore } from './store.js'

// The partner portal's sessions (docs/architecture.md, "The partner portal"): the one module
// behind the key tool's `portal-link` and the credentials API's portal-sessions routes, and
// behind the portal's entering, its every request and its logout. A link is single use and
// opens one session of one credential; the session's cookie stands in for the credential's
// secret. Every request reads the session and the credential from Redis (a portal is used at
// a person's pace), so a session ended, or a credential suspended, revoked or expired, is
// refused by every instance from that moment on: no copy to invalidate.

export const SESSION_ID_PREFIX = 'ps_'
/** Live sessions of one credential, links not yet entered included. */
export const MAX_LIVE_SESSIONS = 10
const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS
export const MIN_LIFETIME_MS = HOUR_MS
export const MAX_LIFETIME_MS = 7 * DAY_MS
export const DEFAULT_LIFETIME = '24h'
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: HOUR_MS, d: DAY_MS }

/** A link's token and a session's cookie: 32 random bytes, base64url (43 characters). */
const SECRET = /^[A-Za-z0-9_-]{43}$/

export function newSecret(): string {
  return randomBytes(32).toString('base64url')
}

/** What Redis keeps of a token or a cookie. */
export function digestSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/**
 * The session's CSRF token: an HMAC of its cookie. Only a page that read it from the portal's
 * own answers can send it (the cookie is HttpOnly and the answers are same-origin), and it
 * needs no storage of its own.
 */
export function csrfTokenOf(cookie: string): string {
  return createHmac('sha256', cookie).update('portal csrf token').digest('base64url')
}

export function csrfMatches(cookie: string, sent: string | undefined): boolean {
  if (sent === undefined) return false
  const expected = Buffer.from(csrfTokenOf(cookie))
  const given = Buffer.from(sent)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/** Why a session ends: each is written in its audit entry. */
export type EndReason = 'logout' | 'ended by an operator' | 'credential suspended' | 'credential revoked' | 'credential expired'

/** 401 PORTAL_SESSION_INVALID: a link spent, expired or unknown; a session ended or expired. */
export class PortalSessionInvalid extends Error {
  constructor(readonly detail: string) {
    super(detail)
    this.name = 'PortalSessionInvalid'
  }
}

/** 409 PORTAL_SESSION_LIMIT_REACHED. */
export class PortalSessionLimitReached extends Error {
  constructor(readonly credentialId: string) {
    super(`${credentialId} has ${MAX_LIVE_SESSIONS} live portal sessions, as many as it may; end them, or wait until one expires`)
    this.name = 'PortalSessionLimitReached'
  }
}

/** How a front end names a field in its messages: `--expires`, or `expiresIn`. */
export type PortalLabel = (field: PortalField) => string

/** `30m`, `24h`, `7d` (or `90s`) in milliseconds; undefined when malformed. */
function durationMs(text: string): number | undefined {
  const match = /^([1-9][0-9]{0,6})([smhd])$/.exec(text)
  return match === null ? undefined : Number(match[1]) * (UNIT_MS[match[2] as string] as number)
}

/** A link's input, checked: one field error per bad field. */
export function linkInput(input: Record<string, unknown>, label: PortalLabel): { lifetimeMs: number; capabilities: Capability[]; label: string | null } {
  const errors: FieldError[] = []
  const error = (field: PortalField, code: FieldError['code']): void => void errors.push({ field, code, detail: `${label(field)} ${PORTAL_RULES[field]}` })
  let lifetimeMs = DAY_MS
  const expiresIn = input.expiresIn === undefined ? DEFAULT_LIFETIME : input.expiresIn
  const ms = typeof expiresIn === 'string' ? durationMs(expiresIn) : undefined
  if (ms === undefined) error('expiresIn', 'INVALID_FORMAT')
  else if (ms < MIN_LIFETIME_MS || ms > MAX_LIFETIME_MS) error('expiresIn', 'OUT_OF_RANGE')
  else lifetimeMs = ms
  const given = input.capabilities === undefined ? [] : input.capabilities
  let capabilities: Capability[] = ['view']
  if (!Array.isArray(given) || given.some((c) => typeof c !== 'string')) error('capabilities', 'INVALID_FORMAT')
  else if (given.some((c) => !(CAPABILITIES as readonly string[]).includes(c as string))) {
    const unknown = given.find((c) => !(CAPABILITIES as readonly string[]).includes(c as string)) as string
    errors.push({ field: 'capabilities', code: 'INVALID_ENUM_VALUE', detail: `${label('capabilities')} names '${quoteInput(unknown)}', which is no capability: it ${PORTAL_RULES.capabilities}` })
  } else capabilities = CAPABILITIES.filter((c) => c === 'view' || given.includes(c))
  const labelValue = input.label ?? null
  let text: string | null = null
  if (labelValue !== null && typeof labelValue !== 'string') error('label', 'INVALID_FORMAT')
  else if (labelValue !== null && labelValue.length > 200) error('label', 'OUT_OF_RANGE')
  else if (labelValue !== '') text = labelValue
  if (errors.length > 0) throw new CredentialInputError(errors)
  return { lifetimeMs, capabilities, label: text }
}

function grantPrincipal(record: GrantRecord): Principal {
  return {
    keyId: record.id,
    kind: 'accessToken',
    brand: record.brand,
    mode: record.mode,
    properties: record.properties === '*' ? 'all' : new Set(record.properties.map((p) => p.toLowerCase())),
    rateLimit: record.rateLimit,
    scopes: scopesOf(record.scopes),
  }
}

/** A credential the portal may open, or why it may not. */
type CredentialState = { record: KeyRecord | GrantRecord; principal: Principal } | { ended: EndReason }

export interface PortalSessionsOptions {
  store: PortalSessionStore
  keys: KeyStore
  audit: AuditTrail
  /** Each brand's portal origin (`portalOrigin`, else `https://` and its first host). */
  origins: ReadonlyMap<string, string>
  now?: () => number
}

/** A session entered: the cookie, shown once, and its CSRF token. */
export interface Entered {
  session: PortalSession
  principal: Principal
  cookie: string
  csrfToken: string
}

export class PortalSessions {
  private readonly store: PortalSessionStore
  private readonly keys: KeyStore
  private readonly trail: AuditTrail
  private origins: ReadonlyMap<string, string>
  private readonly now: () => number
  private readonly ids = new UlidFactory()

  constructor(options: PortalSessionsOptions) {
    this.store = options.store
    this.keys = options.keys
    this.trail = options.audit
    this.origins = options.origins
    this.now = options.now ?? Date.now
  }

  /** Each brand's portal origin after a reload changed the brands: the links made from now on lead there. */
  useOrigins(origins: ReadonlyMap<string, string>): void {
    this.origins = origins
  }

  private async credential(id: string): Promise<CredentialState> {
    const record = isGrantId(id) ? await this.keys.findGrantById(id) : await this.keys.findById(id)
    if (record === null) return { ended: 'credential revoked' }
    if (record.status === 'suspended') return { ended: 'credential suspended' }
    if ('issuer' in record) return { record, principal: grantPrincipal(record) }
    if (record.expiresAt !== null && Date.parse(record.expiresAt) <= this.now()) return { ended: 'credential expired' }
    return { record, principal: keyPrincipal(record) }
  }

  private async audit(actor: string, action: AuditAction, session: PortalSession, changes: AuditEntry['changes']): Promise<void> {
    await this.trail.add(actor, action, session.credentialId, changes, this.now())
  }

  /**
   * `keys portal-link`, `POST /admin/v1/credentials/{id}/portal-sessions`: a session of the
   * credential and the single-use link that opens it.
   */
  async createLink(credentialId: string, input: Record<string, unknown>, actor: string, label: PortalLabel = (field) => field): Promise<PortalLinkView> {
    const { lifetimeMs, capabilities, label: text } = linkInput(input, label)
    const state = await this.credential(credentialId)
    if ('ended' in state) {
      if (state.ended === 'credential revoked') throw new CredentialNotFound(credentialId)
      throw new CredentialInputError([{ field: 'id', code: 'NOT_ALLOWED', detail: `${credentialId} is ${state.ended === 'credential suspended' ? 'suspended' : 'expired'}: its portal could not be used` }])
    }
    const now = this.now()
    const expiresAtMs = now + lifetimeMs
    const session: PortalSession = {
      id: `${SESSION_ID_PREFIX}${this.ids.next(now).text}`, credentialId, capabilities, label: text,
      createdAt: new Date(now).toISOString(), expiresAt: new Date(expiresAtMs).toISOString(), expiresAtMs, enteredAt: null,
    }
    const token = newSecret()
    if (!await this.store.create(session, digestSecret(token), MAX_LIVE_SESSIONS, now)) throw new PortalSessionLimitReached(credentialId)
    await this.audit(actor, 'portal_session.created', session, {
      sessionId: { old: null, new: session.id }, capabilities: { old: null, new: capabilities }, expiresAt: { old: null, new: session.expiresAt }, label: { old: null, new: text },
    })
    const origin = this.origins.get(state.record.brand) as string
    return { sessionId: session.id, url: `${origin}/portal/enter#${token}`, expiresAt: session.expiresAt }
  }

  /** `POST /portal/session`: spends the link's token; the session's cookie, once. */
  async enter(token: unknown): Promise<Entered> {
    const invalid = new PortalSessionInvalid('This link cannot be used: it was used already, has expired or is not a portal link. Ask your operator for a new link.')
    if (typeof token !== 'string' || !SECRET.test(token)) throw invalid
    const owner = await this.store.spendLink(digestSecret(token))
    if (owner === null) throw invalid
    const cookie = newSecret()
    const session = await this.store.enter(owner.credentialId, owner.sessionId, digestSecret(cookie), this.now())
    if (session === null) throw invalid
    const state = await this.credential(session.credentialId)
    if ('ended' in state) {
      await this.end(session, `portal:${session.id}`, state.ended)
      throw invalid
    }
    await this.audit(`portal:${session.id}`, 'portal_session.entered', session, { sessionId: { old: session.id, new: session.id }, enteredAt: { old: null, new: session.enteredAt } })
    return { session, principal: state.principal, cookie, csrfToken: csrfTokenOf(cookie) }
  }

  /**
   * The session of a request's cookie and its credential's principal, as they are now; throws
   * PortalSessionInvalid when there is none (ending one whose credential is no longer valid).
   */
  async resolve(cookie: string | undefined): Promise<{ session: PortalSession; principal: Principal }> {
    const ended = new PortalSessionInvalid('There is no portal session, or it has ended. Open a new portal link from your operator.')
    if (cookie === undefined || !SECRET.test(cookie)) throw ended
    const session = await this.store.byCookie(digestSecret(cookie), this.now())
    if (session === null) throw ended
    const state = await this.credential(session.credentialId)
    if ('ended' in state) {
      await this.end(session, `portal:${session.id}`, state.ended)
      throw new PortalSessionInvalid(`The portal session has ended: its ${state.ended}. Ask your operator for a new link.`)
    }
    return { session, principal: state.principal }
  }

  /** `POST /portal/logout`. */
  async logout(session: PortalSession): Promise<void> {
    await this.end(session, `portal:${session.id}`, 'logout')
  }

  /** `DELETE /admin/v1/credentials/{id}/portal-sessions`, and a credential suspended or revoked: every session of it ends. */
  async endAll(credentialId: string, actor: string, reason: EndReason): Promise<number> {
    let ended = 0
    for (const id of await this.store.live(credentialId, this.now())) {
      const session = await this.store.end(credentialId, id)
      if (session === null) continue
      ended += 1
      await this.audit(actor, 'portal_session.ended', session, { sessionId: { old: session.id, new: null }, reason: { old: null, new: reason } })
    }
    return ended
  }

  /** Whether the credential exists, for `DELETE …/portal-sessions` on an unknown id. */
  async exists(credentialId: string): Promise<boolean> {
    return (isGrantId(credentialId) ? await this.keys.findGrantById(credentialId) : await this.keys.findById(credentialId)) !== null
  }

  private async end(session: PortalSession, actor: string, reason: EndReason): Promise<void> {
    // Audited by whoever ends it first, once.
    if (await this.store.end(session.credentialId, session.id) === null) return
    await this.audit(actor, 'portal_session.ended', session, { sessionId: { old: session.id, new: null }, reason: { old: null, new: reason } })
  }
}
