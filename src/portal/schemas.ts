import { z } from 'zod'
import { UTC_MILLIS } from '../contract/property.js'

// The shapes of the partner portal's links and sessions: the credentials API validates its
// body with them, the key tool passes its flags' values through the same rules
// (portal/sessions.ts), and the admin port's OpenAPI document is generated from them.

/**
 * What a session may do besides reading (docs/operations.md, "The partner portal"): `view`
 * always; `manage_webhooks` creates, changes, deletes and tests webhook endpoints and rotates
 * their secrets; `replay` redelivers events; `roll_credential` rolls the key.
 */
export const CAPABILITIES = ['view', 'manage_webhooks', 'replay', 'roll_credential'] as const
export type Capability = (typeof CAPABILITIES)[number]

export const PORTAL_RULES = {
  expiresIn: 'is a duration such as 30m, 24h or 7d, from 1h to 7d; the session\'s life, counted from now (default 24h)',
  capabilities: `is a list of ${CAPABILITIES.join(', ')} (view is always given)`,
  label: 'is a text of at most 200 characters, or null for none',
} as const

export type PortalField = keyof typeof PORTAL_RULES

/** `POST /admin/v1/credentials/{id}/portal-sessions`: the fields of `keys portal-link`. */
export const portalLinkBody = z.strictObject({
  expiresIn: z.string().optional().describe(PORTAL_RULES.expiresIn),
  capabilities: z.array(z.enum(CAPABILITIES)).optional().describe(PORTAL_RULES.capabilities),
  label: z.string().max(200).nullable().optional().describe(PORTAL_RULES.label),
})

export const portalLinkView = z.strictObject({
  sessionId: z.string().describe('`ps_…`: the session the link opens, as audit entries name it'),
  url: z.string().describe('`<portal origin>/portal/enter#<token>`: for the partner, single use; the token is shown only here'),
  expiresAt: z.string().regex(UTC_MILLIS).describe('When the session ends; the link can be entered until then'),
})

export type PortalLinkView = z.infer<typeof portalLinkView>
