import { z } from 'zod'
import { UTC_MILLIS } from '../contract/property.js'
import { credentialTypes } from '../contract/credential.js'
import { MAX_ALLOWED_ADDRESSES } from '../keys/addresses.js'

// The shapes of a credential's fields, one schema per field: the credentials API validates
// its bodies with them, the key tool passes its flags' values through the same schemas, and
// the admin port's OpenAPI document is generated from them (docs/operations.md, "The
// credentials API"). Each field's rule is written once, in words, and serves as the field
// error's detail and the document's description. What depends on the config (brands,
// scopes, issuers, the lifetime policy) is checked in service.ts.

/** Each field's rule in words; a field error reads "<the field> <its rule>". */
export const RULES = {
  type: 'is "api_key" or "oauth_client"',
  brand: 'names a brand of the config file',
  mode: 'is "live" or "test"',
  properties: 'is "*" (every property of the brand) or a list of 1 to 1000 property UUIDs',
  scopes: 'is "*" (every scope, also of routes added later) or a list of scopes the routes need',
  name: 'is a text of at most 100 characters, with no control or bidirectional-control character, or null for none',
  expiresAt: 'is a date-time with an offset (RFC 3339, e.g. 2027-06-30T00:00:00Z) or a date (its midnight UTC) that exists, or null for no expiry',
  rateLimit: 'takes a whole number of requests above 0',
  allowedIps: `takes 1 to ${MAX_ALLOWED_ADDRESSES} IPv4 or IPv6 addresses and CIDR blocks, or null for any address`,
  issuer: 'names a token issuer of the config file',
  clientId: 'takes 1 to 255 printable characters without spaces',
  overlap: 'is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once',
} as const

export type FieldName = keyof typeof RULES

// A client id as identity providers issue them: printable, no spaces, of a sane length.
export const CLIENT_ID = /^[\x21-\x7E]{1,255}$/
export const OVERLAP = /^(0|[1-9][0-9]{0,6}[smhd])$/

const described = <T extends z.ZodType>(field: FieldName, schema: T): T => schema.describe(RULES[field]) as T

export const fieldSchemas = {
  brand: described('brand', z.string().min(1)),
  mode: described('mode', z.enum(['live', 'test'])),
  properties: described('properties', z.union([z.literal('*'), z.array(z.string()).min(1).max(1000)])),
  scopes: described('scopes', z.union([z.literal('*'), z.array(z.string()).min(1).max(1000)])),
  name: described('name', z.string().max(100).nullable()),
  expiresAt: described('expiresAt', z.string().max(64).nullable()),
  rateLimit: described('rateLimit', z.number().int().min(1).max(1_000_000_000).nullable()),
  allowedIps: described('allowedIps', z.array(z.string().max(64)).min(1).max(MAX_ALLOWED_ADDRESSES).nullable()),
  issuer: described('issuer', z.string().min(1)),
  clientId: described('clientId', z.string().regex(CLIENT_ID)),
  overlap: described('overlap', z.string().regex(OVERLAP)),
}

/** `POST /admin/v1/credentials` with `"type": "api_key"`: the fields of `keys create`. */
export const createKeyBody = z.strictObject({
  type: z.literal('api_key').describe(RULES.type),
  brand: fieldSchemas.brand,
  mode: fieldSchemas.mode,
  properties: fieldSchemas.properties,
  scopes: fieldSchemas.scopes.optional(),
  name: fieldSchemas.name.optional(),
  expiresAt: fieldSchemas.expiresAt.optional(),
  rateLimit: fieldSchemas.rateLimit.optional(),
  allowedIps: fieldSchemas.allowedIps.optional(),
})

/** `POST /admin/v1/credentials` with `"type": "oauth_client"`: the fields of `keys grant-client`. */
export const createGrantBody = z.strictObject({
  type: z.literal('oauth_client').describe(RULES.type),
  issuer: fieldSchemas.issuer,
  clientId: fieldSchemas.clientId,
  brand: fieldSchemas.brand,
  mode: fieldSchemas.mode,
  properties: fieldSchemas.properties,
  scopes: fieldSchemas.scopes.optional(),
  name: fieldSchemas.name.optional(),
  rateLimit: fieldSchemas.rateLimit.optional(),
  allowedIps: fieldSchemas.allowedIps.optional(),
})

/** `PATCH /admin/v1/credentials/{id}`: the fields of `keys update`; `null` lifts a limit. */
export const updateBody = z.strictObject({
  name: fieldSchemas.name.optional(),
  scopes: fieldSchemas.scopes.optional(),
  properties: fieldSchemas.properties.optional(),
  rateLimit: fieldSchemas.rateLimit.optional(),
  expiresAt: fieldSchemas.expiresAt.optional().describe(`${RULES.expiresAt}; API keys only`),
  allowedIps: fieldSchemas.allowedIps.optional(),
})

/** `POST /admin/v1/credentials/{id}/roll`. */
export const rollBody = z.strictObject({
  overlap: fieldSchemas.overlap.optional().describe(`${RULES.overlap}; default 24h`),
})

export type CreateKeyInput = z.infer<typeof createKeyBody>
export type CreateGrantInput = z.infer<typeof createGrantBody>
export type UpdateInput = z.infer<typeof updateBody>

const time = z.string().regex(UTC_MILLIS)
const viewFields = {
  id: z.string().describe('`key_…` or `cli_…`'),
  type: z.enum(credentialTypes),
  brand: z.string(),
  mode: z.enum(['live', 'test']),
  properties: z.union([z.literal('*'), z.array(z.string())]),
  scopes: z.union([z.literal('*'), z.array(z.string())]),
  status: z.enum(['active', 'suspended']),
  name: z.string().nullable(),
  expiresAt: time.nullable().describe('When an API key stops working; null: never (always null for a grant)'),
  rateLimit: z.number().int().positive().nullable().describe('Its own quota per window; null: the default'),
  allowedIps: z.array(z.string()).nullable().describe('Where it may be used from; null: anywhere'),
  previousSecretExpiresAt: time.nullable().describe('After a roll: when the previous secret stops (or stopped) working; null: never rolled'),
  previousSecretLastUsedAt: time.nullable().optional().describe('After a roll: when the previous secret was last used, to the minute'),
  lastUsedAt: time.nullable().describe('When any secret of it was last used, to the minute'),
  createdAt: time,
}

/** A credential as `show --json`, `list --json` and the credentials API write it. */
export const credentialView = z.strictObject({
  id: viewFields.id,
  type: viewFields.type,
  issuer: z.string().optional().describe('A grant\'s token issuer'),
  clientId: z.string().optional().describe('A grant\'s client id'),
  brand: viewFields.brand,
  mode: viewFields.mode,
  properties: viewFields.properties,
  scopes: viewFields.scopes,
  status: viewFields.status,
  name: viewFields.name,
  expiresAt: viewFields.expiresAt,
  rateLimit: viewFields.rateLimit,
  allowedIps: viewFields.allowedIps,
  previousSecretExpiresAt: viewFields.previousSecretExpiresAt,
  previousSecretLastUsedAt: viewFields.previousSecretLastUsedAt,
  lastUsedAt: viewFields.lastUsedAt,
  createdAt: viewFields.createdAt,
})

export type CredentialView = z.infer<typeof credentialView>

/** A credential just made: its view and, once, its secret (an API key's; none for a grant). */
export const createdView = credentialView.extend({ secret: z.string().optional().describe('The API key, shown only in this answer') })

export const rolledView = z.strictObject({
  id: z.string(),
  secret: z.string().describe('The new secret, shown only in this answer'),
  previousSecretExpiresAt: time.describe('When the previous secret stops working'),
})

export const revokedView = z.strictObject({ id: z.string(), status: z.literal('revoked') })

const statusClasses = {
  '2xx': z.number().int().min(0), '3xx': z.number().int().min(0), '4xx': z.number().int().min(0).describe('4xx but 429'),
  '429': z.number().int().min(0), '5xx': z.number().int().min(0), total: z.number().int().min(0),
}

export const usageView = z.strictObject({
  id: z.string(),
  days: z.number().int().positive(),
  from: z.string().describe('The first UTC day counted (YYYY-MM-DD)'),
  to: z.string().describe('The last UTC day counted, today'),
  rows: z.array(z.strictObject({ date: z.string(), route: z.string().describe('Method and route template, e.g. `GET /v1/properties/{propertyId}`'), ...statusClasses })),
  totals: z.strictObject(statusClasses),
})

export type UsageView = z.infer<typeof usageView>

const change = z.strictObject({ old: z.unknown(), new: z.unknown() })

/**
 * What an audit entry records: the changes to a credential (from the key tool or the
 * credentials API), the partner portal's sessions, and the changes made in the portal.
 */
export const AUDIT_ACTIONS = [
  'create', 'grant-client', 'update', 'roll', 'end-overlap', 'suspend', 'resume', 'revoke',
  'portal_session.created', 'portal_session.entered', 'portal_session.ended',
  'webhook_endpoint.created', 'webhook_endpoint.updated', 'webhook_endpoint.deleted', 'webhook_endpoint.secret_rotated', 'webhook_endpoint.test_sent',
  'event.redelivered',
] as const

export const auditEntry = z.strictObject({
  id: z.string().describe('`aud_…`'),
  time,
  actor: z.string().describe('`--actor`, else the operating-system user of the key tool, else `unknown`; `admin-api` for the credentials API; `portal:<sessionId>` for a change made in the partner portal'),
  action: z.enum(AUDIT_ACTIONS),
  credentialId: z.string(),
  changes: z.record(z.string(), change).describe('Each field changed, old and new; never a secret or its digest'),
})

export type AuditEntry = z.infer<typeof auditEntry>
export type AuditAction = AuditEntry['action']
