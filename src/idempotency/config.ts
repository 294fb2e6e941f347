import { z } from 'zod'
import { positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The idempotency records' section of the configuration (docs/architecture.md, "Configuration").

export const idempotencyFileFields = {
  idempotency: z.strictObject({
    retentionHours: positiveInt.max(24 * 30).default(24)
      .describe('How long the answer to a POST or PATCH with an `Idempotency-Key` is kept in Redis and replayed to a retry with the same key'),
    maxBodyBytes: positiveInt.default(1048576)
      .describe('Largest answer body kept for replay; a larger answer is passed on and its record released (a retry is forwarded again)'),
  }).prefault({}).describe('Safe retries of writes on declared routes (`Idempotency-Key`)'),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const idempotencyReload: ReloadRules = {
  reloadable: {},
  restartOnly: { idempotency: 'the records\' retention is set when their store is made at start; records kept under two retentions would expire apart' },
}
