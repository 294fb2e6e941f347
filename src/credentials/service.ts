import type { z } from 'zod'
import type { Config } from '../config.js'
import type { FieldError, FieldErrorCode } from '../contract/errors.js'
import { rfc3339Millis } from '../contract/timestamp.js'
import { knownScopes } from '../routes/policy.js'
import { canonicalEntry, MAX_ALLOWED_ADDRESSES } from '../keys/addresses.js'
import { GRANT_ID_PREFIX, GrantExistsError, type GrantRecord, type GrantStatus } from '../keys/grants.js'
import type { CredentialChanges, KeyRecord, KeyStore } from '../keys/store.js'
import type { AuditTrail, AuditPage } from './audit.js'
import {
  createGrantBody, createKeyBody, RULES, updateBody,
  type AuditAction, type AuditEntry, type CredentialView, type FieldName, type UsageView,
} from './schemas.js'
import { lastDays, parseUsageField, type LastUse, type UsageStore } from './usage.js'

// The one module behind the key tool and the credentials API of the admin port
// (docs/operations.md, "The credentials API"): every rule of a credential's fields, every
// change and its audit entry, and every view of a credential are here, so the two cannot
// disagree. A front end turns its input (flags, a JSON body) into the inputs below and its
// output into lines or JSON; the field errors name the fields as the front end does
// (`--rate-limit`, `rateLimit`).

/** What the config knows: the names a credential's fields must be among, and the policies. */
export interface Known {
  brands: readonly string[]
  /** The scopes the routes need. */
  scopes: readonly string[]
  issuers: readonly string[]
  /** `keys.maxLifetimeDays`: an API key must expire, at most this many days ahead. */
  maxLifetimeDays: number | undefined
  /** The default quota and window (`rateLimit`), for GET /v1/credential. */
  rateLimit: { limit: number; windowSeconds: number }
  usageRetentionDays: number
}

/** What the config knows, for the credentials service. */
export function knownOf(config: Config): Known {
  return {
    brands: config.brands.map((b) => b.id),
    scopes: knownScopes(config.routes),
    issuers: config.oauth.issuers.map((i) => i.issuer),
    maxLifetimeDays: config.keys.maxLifetimeDays,
    rateLimit: { limit: config.rateLimit.limit, windowSeconds: config.rateLimit.windowSeconds },
    usageRetentionDays: config.usage.retentionDays,
  }
}

/** How a front end names a field in its messages: `--expires-at`, or `expiresAt`. */
export type Label = (field: FieldName) => string

export const FIELD_LABEL: Label = (field) => field

/** Field errors: the tool prints the first one, the credentials API answers 422 with all. */
export class CredentialInputError extends Error {
  constructor(readonly errors: FieldError[]) {
    super(errors.map((e) => e.detail).join('; '))
    this.name = 'CredentialInputError'
  }
}

export class CredentialNotFound extends Error {
  constructor(readonly id: string) {
    super(`no ${isGrantId(id) ? 'grant' : 'key'} with id '${id}'`)
    this.name = 'CredentialNotFound'
  }
}

export const isGrantId = (id: string): boolean => id.startsWith(GRANT_ID_PREFIX)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
// No control character (C0, DEL, C1) and no bidirectional control (marks, embeddings,
// overrides, isolates): either would make a name read, in a list, a log or the portal, as
// something it is not.
const NAME_CHARACTERS = /^[^\p{Cc}\p{Bidi_Control}]*$/u
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/

/**
 * A time a credential's fields and queries take (`expiresAt`, the audit's `since`): a date-time
 * with an offset, or a date (its midnight UTC), that exists, as epoch milliseconds; undefined
 * otherwise. `2026-02-30` is refused, never read as 2 March; a time without an offset names no
 * one instant.
 */
export function instantMillis(text: string): number | undefined {
  const millis = rfc3339Millis(DATE_ONLY.test(text) ? `${text}T00:00:00Z` : text)
  return millis === undefined ? undefined : Math.floor(millis)
}
const DAY_MS = 86_400_000
export const DEFAULT_OVERLAP_MS = DAY_MS
export const MAX_OVERLAP_MS = 7 * DAY_MS
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: DAY_MS }

function fieldError(field: FieldName | string, code: FieldErrorCode, detail: string): FieldError {
  return { field, code, detail }
}

/**
 * The fields of `input` that `schema` takes, each checked by its own schema so that every bad
 * field has its error (its rule in words): one field error per field, all at once.
 */
function shaped<T extends z.ZodRawShape>(schema: z.ZodObject<T>, input: Record<string, unknown>, label: Label): { value: Partial<z.infer<z.ZodObject<T>>>; errors: FieldError[] } {
  const value: Record<string, unknown> = {}
  const errors: FieldError[] = []
  for (const [field, fieldSchema] of Object.entries(schema.shape) as [string, z.ZodType][]) {
    const given = input[field]
    const name = label(field as FieldName)
    const rule = RULES[field as FieldName] as string | undefined
    const result = fieldSchema.safeParse(given)
    if (result.success) {
      if (result.data !== undefined) value[field] = result.data
      continue
    }
    const issue = result.error.issues[0]
    if (given === undefined) errors.push(fieldError(field, 'REQUIRED', `${name} is required`))
    else if (issue?.code === 'too_big' || issue?.code === 'too_small') errors.push(fieldError(field, 'OUT_OF_RANGE', `${name} ${rule ?? 'is out of range'}`))
    else if (field === 'mode' || field === 'type') errors.push(fieldError(field, 'INVALID_ENUM_VALUE', `${name} ${rule ?? 'is not one of its values'}`))
    else errors.push(fieldError(field, 'INVALID_FORMAT', `${name} ${rule ?? 'is malformed'}`))
  }
  return { value: value as Partial<z.infer<z.ZodObject<T>>>, errors }
}

/** `30m`, `24h`, `7d` (or `90s`), `0`: milliseconds; undefined when malformed or over 7 days. */
export function overlapMs(text: string): number | undefined {
  const match = /^(0|([1-9][0-9]{0,6})([smhd]))$/.exec(text)
  if (match === null) return undefined
  const ms = match[1] === '0' ? 0 : Number(match[2]) * (UNIT_MS[match[3] as string] as number)
  return ms > MAX_OVERLAP_MS ? undefined : ms
}

/** `--overlap` / `overlap` in milliseconds, or the field error. */
export function parseOverlap(text: string | undefined, label: Label): number {
  if (text === undefined) return DEFAULT_OVERLAP_MS
  const ms = overlapMs(text)
  if (ms === undefined) throw new CredentialInputError([fieldError('overlap', 'INVALID_FORMAT', `${label('overlap')} ${RULES.overlap}`)])
  return ms
}

/** The minute `ms` falls in, as an ISO time; null for none. */
function minuteOf(ms: number | null): string | null {
  return ms === null ? null : new Date(ms - (ms % 60_000)).toISOString()
}

interface Checked<T> { value: T; errors: FieldError[] }

type Fields = Pick<CredentialView, 'name' | 'scopes' | 'properties' | 'rateLimit' | 'expiresAt' | 'allowedIps' | 'status'>

/** The fields an audit entry compares. */
const AUDITED = ['name', 'scopes', 'properties', 'rateLimit', 'expiresAt', 'allowedIps', 'status'] as const

function diff(before: Partial<Fields> | null, after: Partial<Fields> | null): AuditEntry['changes'] {
  const changes: AuditEntry['changes'] = {}
  for (const field of AUDITED) {
    const old = before === null ? null : before[field] ?? null
    const now = after === null ? null : after[field] ?? null
    if (before !== null && after !== null && JSON.stringify(old) === JSON.stringify(now)) continue
    if (before === null && now === null) continue
    changes[field] = { old, new: now }
  }
  return changes
}

export interface ServiceOptions {
  store: KeyStore
  usage: UsageStore
  audit: AuditTrail
  known: Known
  now?: () => number
  /** What else goes with a revoked credential (its webhook endpoints: docs/architecture.md, "Webhooks"). */
  onRevoke?: (id: string) => Promise<void>
  /**
   * Ends the credential's partner portal sessions (portal/sessions.ts) when it is suspended or
   * revoked; each ending is audited with `actor`.
   */
  endPortalSessions?: (credentialId: string, actor: string, reason: 'credential suspended' | 'credential revoked') => Promise<void>
}

export type StatusFilter = 'active' | 'suspended'

export class CredentialService {
  private readonly store: KeyStore
  private readonly usage: UsageStore
  private readonly trail: AuditTrail
  readonly known: Known
  private readonly now: () => number
  private readonly onRevoke: ((id: string) => Promise<void>) | undefined
  private readonly endPortalSessions: ServiceOptions['endPortalSessions']

  constructor(options: ServiceOptions) {
    this.store = options.store
    this.usage = options.usage
    this.trail = options.audit
    this.known = options.known
    this.now = options.now ?? Date.now
    this.onRevoke = options.onRevoke
    this.endPortalSessions = options.endPortalSessions
  }

  // --- The rules of each field ---

  private brand(value: string, errors: FieldError[]): string {
    if (!this.known.brands.includes(value)) errors.push(fieldError('brand', 'INVALID_ENUM_VALUE', `unknown brand '${value}' (known: ${this.known.brands.join(', ')})`))
    return value
  }

  private properties(value: string[] | '*', errors: FieldError[]): string[] | '*' {
    if (value === '*') return '*'
    const properties = value.map((p) => p.trim().toLowerCase())
    const bad = properties.find((p) => !UUID.test(p))
    if (bad !== undefined) errors.push(fieldError('properties', 'INVALID_FORMAT', `malformed property UUID '${bad}'`))
    return [...new Set(properties)]
  }

  private scopes(value: string[] | '*', errors: FieldError[]): string[] | '*' {
    if (value === '*') return '*'
    const scopes = [...new Set(value.map((s) => s.trim()))]
    const unknown = scopes.find((s) => !this.known.scopes.includes(s))
    if (unknown !== undefined) errors.push(fieldError('scopes', 'INVALID_ENUM_VALUE', `unknown scope '${unknown}' (known: ${this.known.scopes.join(', ')})`))
    return scopes
  }

  private allowedIps(value: string[] | null, errors: FieldError[], label: Label): string[] | null {
    if (value === null) return null
    const entries: string[] = []
    for (const text of value) {
      const result = canonicalEntry(text)
      if ('problem' in result) {
        errors.push(fieldError('allowedIps', 'INVALID_FORMAT', `${label('allowedIps')}: ${result.problem}`))
        return null
      }
      if (!entries.includes(result.entry)) entries.push(result.entry)
    }
    if (entries.length > MAX_ALLOWED_ADDRESSES) errors.push(fieldError('allowedIps', 'OUT_OF_RANGE', `${label('allowedIps')} ${RULES.allowedIps}`))
    return entries
  }

  private name(value: string | null, errors: FieldError[], label: Label): string | null {
    if (value === null || value === '') return null
    if (!NAME_CHARACTERS.test(value)) errors.push(fieldError('name', 'INVALID_FORMAT', `${label('name')} ${RULES.name}`))
    return value
  }

  /** An expiry: an instant (`instantMillis`; past ones too), within `keys.maxLifetimeDays` when set. */
  private expiresAt(value: string | null, errors: FieldError[], label: Label): string | null {
    const max = this.known.maxLifetimeDays
    const latest = max === undefined ? undefined : new Date(this.now() + max * DAY_MS).toISOString()
    if (value === null) {
      if (latest !== undefined) errors.push(fieldError('expiresAt', 'NOT_ALLOWED', `keys.maxLifetimeDays is ${max}: an API key must expire, ${label('expiresAt')} at most ${latest}`))
      return null
    }
    const time = instantMillis(value)
    if (time === undefined) {
      errors.push(fieldError('expiresAt', 'INVALID_FORMAT', `${label('expiresAt')} '${value}' is not a date-time that exists, with an offset (e.g. 2027-06-30T00:00:00Z)`))
      return null
    }
    const iso = new Date(time).toISOString()
    if (latest !== undefined && iso > latest) {
      errors.push(fieldError('expiresAt', 'OUT_OF_RANGE', `keys.maxLifetimeDays is ${max}: ${label('expiresAt')} may be at most ${latest}`))
    }
    return iso
  }

  private issuer(value: string, errors: FieldError[]): string {
    const { issuers } = this.known
    if (!issuers.includes(value)) {
      errors.push(fieldError('issuer', 'INVALID_ENUM_VALUE', issuers.length === 0
        ? 'no token issuer is configured (oauth.issuers or OAUTH_ISSUER)'
        : `unknown issuer '${value}' (configured: ${issuers.join(', ')})`))
    }
    return value
  }

  private checked<T>(result: Checked<T>): T {
    if (result.errors.length > 0) throw new CredentialInputError(result.errors)
    return result.value
  }

  // --- Views ---

  private keyView(record: KeyRecord, last: LastUse): CredentialView {
    return {
      id: record.id,
      type: 'api_key',
      brand: record.brand,
      mode: record.mode,
      properties: record.properties,
      scopes: record.scopes,
      status: record.status,
      name: record.name,
      expiresAt: record.expiresAt,
      rateLimit: record.rateLimit,
      allowedIps: record.allowedIps,
      previousSecretExpiresAt: record.previousSecretExpiresAt,
      ...(record.previousSecretExpiresAt === null ? {} : { previousSecretLastUsedAt: minuteOf(last.previous) }),
      lastUsedAt: minuteOf(last.any),
      createdAt: record.createdAt,
    }
  }

  private grantView(record: GrantRecord, last: LastUse): CredentialView {
    return {
      id: record.id,
      type: 'oauth_client',
      issuer: record.issuer,
      clientId: record.clientId,
      brand: record.brand,
      mode: record.mode,
      properties: record.properties,
      scopes: record.scopes,
      status: record.status,
      name: record.name,
      expiresAt: null,
      rateLimit: record.rateLimit,
      allowedIps: record.allowedIps,
      previousSecretExpiresAt: null,
      lastUsedAt: minuteOf(last.any),
      createdAt: record.createdAt,
    }
  }

  private async lastUseOf(id: string): Promise<LastUse> {
    return (await this.usage.lastUse([id])).get(id) ?? { any: null, previous: null }
  }

  private async find(id: string): Promise<KeyRecord | GrantRecord> {
    const record = isGrantId(id) ? await this.store.findGrantById(id) : await this.store.findById(id)
    if (record === null) throw new CredentialNotFound(id)
    return record
  }

  private view(record: KeyRecord | GrantRecord, last: LastUse): CredentialView {
    return 'issuer' in record ? this.grantView(record, last) : this.keyView(record, last)
  }

  /** Keys, then grants, each oldest first; of one brand and status when asked. */
  async list(filter: { brand?: string; status?: StatusFilter } = {}): Promise<CredentialView[]> {
    const [keys, grants] = await Promise.all([this.store.list(filter.brand), this.store.listGrants(filter.brand)])
    const records = [...keys, ...grants].filter((r) => filter.status === undefined || r.status === filter.status)
    const last = await this.usage.lastUse(records.map((r) => r.id))
    return records.map((r) => this.view(r, last.get(r.id) ?? { any: null, previous: null }))
  }

  async show(id: string): Promise<CredentialView> {
    const record = await this.find(id)
    return this.view(record, await this.lastUseOf(id))
  }

  // --- Changes, each with its audit entry ---

  private async audit(actor: string, action: AuditAction, credentialId: string, changes: AuditEntry['changes']): Promise<AuditEntry> {
    return this.trail.add(actor, action, credentialId, changes, this.now())
  }

  /** `keys create`, `POST /admin/v1/credentials` with `"type": "api_key"`: the view and, once, the key. */
  async createKey(input: Record<string, unknown>, actor: string, label: Label = FIELD_LABEL): Promise<{ key: string; view: CredentialView }> {
    const { value: body, errors } = shaped(createKeyBody, input, label)
    const value = {
      brand: body.brand === undefined ? '' : this.brand(body.brand, errors),
      mode: body.mode ?? 'live',
      properties: body.properties === undefined ? '*' : this.properties(body.properties, errors),
      scopes: body.scopes === undefined ? '*' : this.scopes(body.scopes, errors),
      name: this.name(body.name ?? null, errors, label),
      // A malformed expiry has its error already; the policy judges a well-formed or absent one.
      expiresAt: 'expiresAt' in input && body.expiresAt === undefined ? null : this.expiresAt(body.expiresAt ?? null, errors, label),
      rateLimit: body.rateLimit ?? null,
      allowedIps: this.allowedIps(body.allowedIps ?? null, errors, label),
    }
    const { key, record } = await this.store.create(this.checked({ value, errors }))
    const view = this.keyView(record, { any: null, previous: null })
    await this.audit(actor, 'create', record.id, { brand: { old: null, new: record.brand }, mode: { old: null, new: record.mode }, ...diff(null, view) })
    return { key, view }
  }

  /** `keys grant-client`, `POST /admin/v1/credentials` with `"type": "oauth_client"`. */
  async createGrant(input: Record<string, unknown>, actor: string, label: Label = FIELD_LABEL): Promise<CredentialView> {
    const { value: body, errors } = shaped(createGrantBody, input, label)
    const value = {
      issuer: body.issuer === undefined ? '' : this.issuer(body.issuer, errors),
      clientId: body.clientId ?? '',
      brand: body.brand === undefined ? '' : this.brand(body.brand, errors),
      mode: body.mode ?? 'live',
      properties: body.properties === undefined ? '*' : this.properties(body.properties, errors),
      scopes: body.scopes === undefined ? '*' : this.scopes(body.scopes, errors),
      name: this.name(body.name ?? null, errors, label),
      rateLimit: body.rateLimit ?? null,
      allowedIps: this.allowedIps(body.allowedIps ?? null, errors, label),
    }
    let record: GrantRecord
    try {
      record = await this.store.createGrant(this.checked({ value, errors }))
    } catch (error) {
      if (!(error instanceof GrantExistsError)) throw error
      throw new CredentialInputError([fieldError('clientId', 'NOT_ALLOWED',
        `client '${body.clientId}' of ${body.issuer} already has ${error.existingId === null ? 'a grant' : `grant ${error.existingId}`}`)])
    }
    const view = this.grantView(record, { any: null, previous: null })
    await this.audit(actor, 'grant-client', record.id, {
      issuer: { old: null, new: record.issuer }, clientId: { old: null, new: record.clientId },
      brand: { old: null, new: record.brand }, mode: { old: null, new: record.mode }, ...diff(null, view),
    })
    return view
  }

  /** `keys update`, `PATCH /admin/v1/credentials/{id}`: the fields given change, the others stay. */
  async update(id: string, input: Record<string, unknown>, actor: string, label: Label = FIELD_LABEL): Promise<CredentialView> {
    const { value: body, errors } = shaped(updateBody, input, label)
    const changes: CredentialChanges = {}
    if (body.name !== undefined) changes.name = this.name(body.name, errors, label)
    if (body.scopes !== undefined) changes.scopes = this.scopes(body.scopes, errors)
    if (body.properties !== undefined) changes.properties = this.properties(body.properties, errors)
    if (body.rateLimit !== undefined) changes.rateLimit = body.rateLimit
    if (body.allowedIps !== undefined) changes.allowedIps = this.allowedIps(body.allowedIps, errors, label)
    if (body.expiresAt !== undefined || (input.expiresAt === null)) {
      if (isGrantId(id)) errors.push(fieldError('expiresAt', 'NOT_ALLOWED', `a client's grant has no expiry (its access tokens expire): ${label('expiresAt')} is for API keys`))
      else changes.expiresAt = this.expiresAt(body.expiresAt ?? null, errors, label)
    }
    if (Object.keys(input).length === 0) errors.push(fieldError('body', 'REQUIRED', 'update needs at least one field to change'))
    this.checked({ value: changes, errors })
    const before = await this.show(id)
    const record = isGrantId(id) ? await this.store.updateGrant(id, changes) : await this.store.update(id, changes)
    if (record === null) throw new CredentialNotFound(id)
    const last = await this.lastUseOf(id)
    const view = this.view(record, last)
    const changed = diff(before, view)
    if (Object.keys(changed).length > 0) await this.audit(actor, 'update', id, changed)
    return view
  }

  /**
   * `keys roll`, `POST /admin/v1/credentials/{id}/roll`: a new secret for the same key; the
   * previous one works `overlap` ms more (one previous secret at most: an earlier one ends now).
   */
  async roll(id: string, overlap: number, actor: string): Promise<{ id: string; secret: string; previousSecretExpiresAt: string }> {
    if (isGrantId(id)) {
      throw new CredentialInputError([fieldError('id', 'NOT_ALLOWED', `${id} is a client's grant: the identity provider rotates a client's secret, the gateway holds none`)])
    }
    const before = await this.store.findById(id)
    if (before === null) throw new CredentialNotFound(id)
    const rolled = await this.store.roll(id, new Date(this.now() + overlap))
    if (rolled === null) throw new CredentialNotFound(id)
    await this.usage.resetPrevious(id)
    const previousSecretExpiresAt = rolled.record.previousSecretExpiresAt as string
    if (rolled.endedOverlap !== null) {
      await this.audit(actor, 'end-overlap', id, { previousSecretExpiresAt: { old: rolled.endedOverlap, new: rolled.record.rolledAt } })
    }
    await this.audit(actor, 'roll', id, { previousSecretExpiresAt: { old: before.previousSecretExpiresAt, new: previousSecretExpiresAt } })
    return { id, secret: rolled.key, previousSecretExpiresAt }
  }

  /** `keys end-overlap`: the previous secret stops working now. Null when no overlap lasted. */
  async endOverlap(id: string, actor: string): Promise<{ view: CredentialView; ended: boolean }> {
    if (isGrantId(id)) throw new CredentialInputError([fieldError('id', 'NOT_ALLOWED', `${id} is a client's grant, which is never rolled`)])
    const result = await this.store.endOverlap(id)
    if (result === null) throw new CredentialNotFound(id)
    if (result.ended !== null) {
      await this.audit(actor, 'end-overlap', id, { previousSecretExpiresAt: { old: result.ended, new: result.record.previousSecretExpiresAt } })
    }
    return { view: this.keyView(result.record, await this.lastUseOf(id)), ended: result.ended !== null }
  }

  /** `keys suspend`, `keys resume`. */
  async setStatus(id: string, status: GrantStatus, actor: string): Promise<CredentialView> {
    const before = await this.find(id)
    const record = isGrantId(id) ? await this.store.setGrantStatus(id, status) : await this.store.setStatus(id, status)
    if (record === null) throw new CredentialNotFound(id)
    if (before.status !== status) await this.audit(actor, status === 'suspended' ? 'suspend' : 'resume', id, { status: { old: before.status, new: status } })
    // A suspended credential's portal sessions end, and stay ended when it is resumed.
    if (status === 'suspended') await this.endPortalSessions?.(id, actor, 'credential suspended')
    return this.view(record, await this.lastUseOf(id))
  }

  /** `keys revoke`: the credential is gone; its audit trail and its counts stay until they expire. */
  async revoke(id: string, actor: string): Promise<void> {
    const before = isGrantId(id) ? await this.store.findGrantById(id) : await this.store.findById(id)
    // Revoked even without a record: an id left behind by an interrupted create is forgotten.
    const revoked = isGrantId(id) ? await this.store.revokeGrant(id) : await this.store.revoke(id)
    // Its webhook endpoints go with it, even when only an id was left behind.
    await this.onRevoke?.(id)
    if (!revoked || before === null) throw new CredentialNotFound(id)
    await this.usage.forget(id)
    await this.audit(actor, 'revoke', id, { status: { old: before.status, new: 'revoked' } })
    await this.endPortalSessions?.(id, actor, 'credential revoked')
  }

  // --- Reading what happened ---

  /** `keys usage`: per UTC day and route, the requests by status class, of the last `days` days. */
  async usageOf(id: string, days: number): Promise<UsageView> {
    await this.find(id)
    const dayList = lastDays(this.now(), days)
    const counts = await this.usage.counts(id, dayList)
    const rows: UsageView['rows'] = []
    const zero = () => ({ '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0, total: 0 })
    const totals = zero()
    for (const day of dayList) {
      const byRoute = new Map<string, ReturnType<typeof zero>>()
      for (const [field, count] of Object.entries(counts.get(day) ?? {})) {
        const parsedField = parseUsageField(field)
        if (parsedField === undefined) continue
        let row = byRoute.get(parsedField.route)
        if (row === undefined) byRoute.set(parsedField.route, row = zero())
        row[parsedField.statusClass] += count
        row.total += count
        totals[parsedField.statusClass] += count
        totals.total += count
      }
      for (const route of [...byRoute.keys()].sort()) rows.push({ date: day, route, ...(byRoute.get(route) as ReturnType<typeof zero>) })
    }
    return { id, days, from: dayList[0] as string, to: dayList[dayList.length - 1] as string, rows, totals }
  }

  /** `keys audit`: newest first. */
  async auditTrail(query: { id?: string; since?: number; offset?: number; limit?: number }): Promise<AuditPage> {
    return this.trail.query({ offset: query.offset ?? 0, limit: query.limit ?? 1000, ...(query.id === undefined ? {} : { id: query.id }), ...(query.since === undefined ? {} : { since: query.since }) })
  }
}

