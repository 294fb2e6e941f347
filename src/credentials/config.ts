import { z } from 'zod'
import { positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// Credentials over their life: their section of the configuration (docs/architecture.md,
// "Configuration"; docs/operations.md, "Credentials over their life").

export const credentialsFileFields = {
  keys: z.strictObject({
    maxLifetimeDays: positiveInt.max(36500).optional()
      .describe('When set, `create` and `update` refuse an API key without an expiry, or one more than this many days ahead; none: any expiry, or none'),
    expiryWarningDays: z.number().int().min(0).max(365).default(14)
      .describe('Answers to a credential that expires within this many days carry `Service-Credential-Expires`; 0: never'),
  }).prefault({}).describe('The policy on API keys\' lifetimes'),
  usage: z.strictObject({
    flushSeconds: positiveInt.max(3600).default(10)
      .describe('How often each instance writes the requests it counted per credential to Redis (one pipeline), and at graceful shutdown; a crash loses at most this much of one instance\'s counts'),
    retentionDays: positiveInt.max(3660).default(90).describe('How long the counts per credential and UTC day are kept in Redis'),
  }).prefault({}).describe('Requests counted per credential, UTC day, route and status class; and when each credential was last used'),
  audit: z.strictObject({
    retentionDays: positiveInt.max(36500).default(400).describe('How long each change to a credential is kept in the audit trail in Redis'),
  }).prefault({}).describe('The audit trail of changes to credentials'),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const credentialsReload: ReloadRules = {
  reloadable: {},
  restartOnly: {
    keys: 'the credentials service behind the admin API is made with it at start',
    usage: 'the usage recorder and its flush timer are made at start',
    audit: 'the audit trail\'s retention is set when it is made at start',
  },
}
