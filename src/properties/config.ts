import { z } from 'zod'
import { positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The properties API's section of the configuration (docs/architecture.md, "Configuration"):
// what a key is told of a property it may not use, and the read cache of PMS answers.

export const propertiesFileFields = {
  accessDeniedStatus: z.union([z.literal(403), z.literal(404)], { error: 'must be 403 or 404' }).default(403)
    .describe('Status for a property of the brand that the key may not use: 403 PROPERTY_ACCESS_DENIED or 404 PROPERTY_NOT_FOUND'),
  cache: z.strictObject({
    ttlMs: z.number().int().min(0).default(30000).describe('How long a PMS answer is fresh; 0 turns the read cache off'),
    staleIfErrorMs: z.number().int().min(0).default(300000).describe('How long past freshness a copy may be served while the PMS fails'),
    maxEntries: positiveInt.default(10000).describe('Entries kept per upstream'),
  }).prefault({}),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const propertiesReload: ReloadRules = {
  reloadable: {},
  restartOnly: {
    accessDeniedStatus: 'it changes what partners are answered for the same condition, a breaking change that needs a notice and a restart',
    cache: 'the PMS client and its cache are made once at start',
  },
}
