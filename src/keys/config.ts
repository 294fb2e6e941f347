import { z } from 'zod'
import { positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The credential lookups' section of the configuration (docs/architecture.md,
// "Configuration"): how long a key record is trusted without Redis, and what a flood of bad
// credentials may cost (docs/security.md).

export const keysFileFields = {
  keyCache: z.strictObject({
    ttlMs: positiveInt.default(10000).describe('How long a key record (or a miss) is trusted without asking Redis; also how long a delivering instance keeps an endpoint owner\'s record when no change to it is heard'),
    graceMs: z.number().int().min(0).default(60000).describe('While Redis is down, how long past `ttlMs` a cached key keeps working'),
    maxEntries: positiveInt.default(100000).describe('Key records kept per instance (and, apart, endpoint owners\' records kept by a delivering instance)'),
  }).prefault({}),
  abuse: z.strictObject({
    authFailuresPerMinute: positiveInt.default(600)
      .describe('401 answers one client address may get in a minute; past it, until its minute ends, a credential this instance would have to look up (Redis, a JWKS fetch) is answered 429 RATE_LIMITED at once, while one it knows to be valid is served'),
    trackedAddresses: positiveInt.default(100000).describe('Client addresses whose 401s are counted at once (least recently seen forgotten first)'),
    unknownKeys: positiveInt.default(10000)
      .describe('Unknown (checksum-valid) keys remembered for `keyCache.ttlMs`, apart from known keys, so a flood of invented keys never evicts a partner\'s'),
  }).prefault({}),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const keysReload: ReloadRules = {
  reloadable: {},
  restartOnly: {
    keyCache: 'the cache of key records is made once at start and lives with the process',
    abuse: 'the bounds on unknown keys and failed attempts count from the start of the process',
  },
}
