import { z } from 'zod'
import { positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The quotas' section of the configuration (docs/architecture.md, "Configuration").

export const rateLimitFileFields = {
  rateLimit: z.strictObject({
    enabled: z.boolean().default(true).describe('Enforce per-key quotas'),
    limit: positiveInt.default(1000).describe('Requests per window for a key without its own quota'),
    windowSeconds: positiveInt.default(60).describe('Window length'),
  }).prefault({}),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const rateLimitReload: ReloadRules = {
  reloadable: {
    'rateLimit.enabled': 'the next request',
    'rateLimit.limit': 'the next request of a key without its own quota',
  },
  restartOnly: {
    'rateLimit.windowSeconds': 'the quota windows in Redis are of this length; a change would count one window under two lengths',
  },
}
