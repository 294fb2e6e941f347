import { z } from 'zod'
import { positiveInt } from '../config/fields.js'

// The quotas' section of the configuration (docs/architecture.md, "Configuration").

export const rateLimitFileFields = {
  rateLimit: z.strictObject({
    enabled: z.boolean().default(true).describe('Enforce per-key quotas'),
    limit: positiveInt.default(1000).describe('Requests per window for a key without its own quota'),
    windowSeconds: positiveInt.default(60).describe('Window length'),
  }).prefault({}),
}
