import { z } from 'zod'
import { positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The request log's section of the configuration (docs/architecture.md, "Configuration";
// docs/operations.md, "The request log").

export const requestLogFileFields = {
  requestLog: z.strictObject({
    enabled: z.boolean().default(true)
      .describe('Keep an entry per request of each credential, which the partner reads at `GET /v1/request-logs`; false: nothing is kept and that route answers 404 (what was kept stays until its retention ends)'),
    flushMs: positiveInt.min(50).max(60_000).default(1000)
      .describe('How often each instance writes the entries it holds to Redis (also every 500 entries, and at graceful shutdown); an entry appears within this plus a second'),
    bufferMax: positiveInt.max(1_000_000).default(10_000)
      .describe('Entries an instance holds before writing them; beyond it, and while Redis is away, new entries are dropped and counted'),
    retentionDays: positiveInt.max(30).default(7).describe('How long an entry is kept'),
    maxPerCredential: positiveInt.max(1_000_000).default(50_000).describe('Entries kept per credential and mode: the oldest go first'),
  }).prefault({}).describe('The request log: what each credential\'s requests were, for the partner and operators'),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const requestLogReload: ReloadRules = {
  reloadable: {
    'requestLog.enabled': 'the next request: kept from then on, or not; while off, `/v1/request-logs` answers 404 and the admin routes read what was kept',
  },
  restartOnly: {
    'requestLog.flushMs': 'the writer\'s timer is set at start',
    'requestLog.bufferMax': 'the writer\'s buffer is bounded at start',
    'requestLog.retentionDays': 'the store\'s retention is set at start',
    'requestLog.maxPerCredential': 'the store\'s bound is set at start',
  },
}
