import { z } from 'zod'
import { UTC_MILLIS } from './property.js'

// What a partner's credential is, as `GET /v1/credential` shows it to the partner
// (docs/partners.md, "Who am I: GET /v1/credential"). Field order here is the order on the
// wire; the OpenAPI document is derived from this schema. No secret, digest, audit entry or
// usage figure belongs here.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const time = z.string().regex(UTC_MILLIS)

export const credentialTypes = ['api_key', 'oauth_client'] as const
export type CredentialType = (typeof credentialTypes)[number]

export const partnerCredentialSchema = z.strictObject({
  id: z.string().regex(/^(key|cli)_[0-9A-Za-z]{17}$/).describe('The credential\'s id: `key_…` for an API key, `cli_…` for the grant of an OAuth client'),
  type: z.enum(credentialTypes).describe('`api_key` or `oauth_client`'),
  name: z.string().nullable().describe('The name it was given, if any'),
  brand: z.string().describe('The brand it belongs to'),
  mode: z.enum(['live', 'test']).describe('`live` data, or the `test` sandboxes'),
  scopes: z.union([z.literal('*'), z.array(z.string())]).describe('`"*"` (every scope, also those of routes added later) or the scopes it has'),
  properties: z.union([z.literal('*'), z.array(z.string().regex(UUID))]).describe('`"*"` (every property of the brand) or the property ids it may use'),
  rateLimit: z.strictObject({
    limit: z.number().int().positive().describe('Requests per window'),
    windowSeconds: z.number().int().positive().describe('The window\'s length'),
  }).describe('Its quota'),
  expiresAt: time.nullable().describe('When it stops working; null: never'),
  allowedIps: z.array(z.string()).nullable().describe('The addresses and CIDR blocks it may be used from; null: any'),
  previousSecretExpiresAt: time.nullable().describe('After the key was rolled: when its previous secret stops (or stopped) working; null: never rolled'),
  lastUsedAt: time.nullable().describe('When it was last used, to the minute (counted by each instance and written at most once a minute)'),
})

export type PartnerCredential = z.infer<typeof partnerCredentialSchema>
