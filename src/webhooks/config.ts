import { z } from 'zod'
import type { ReloadRules } from '../config/reload-rules.js'

// The webhooks' part of the `events` section of the configuration (docs/architecture.md,
// "Configuration"; docs/operations.md, "Webhooks"): partners' endpoints and the deliveries to
// them. The top (src/config.ts) joins these fields to the events' own in one `events` object.

export const webhookFields = {
  maxEndpointsPerCredential: z.number().int().min(1).max(1000).default(10)
    .describe('How many webhook endpoints one credential may have; one more is refused 409 `WEBHOOK_ENDPOINT_LIMIT_REACHED`'),
  maxManualDeliveriesPerEndpoint: z.number().int().min(1).max(100_000).default(100)
    .describe('Deliveries a partner asked for (`test`, `redeliver`, recoveries) not yet finished, per endpoint; one more `test` or `redeliver` is refused 429 `RATE_LIMITED`, a recovery waits for room'),
  maxRecoveryEvents: z.number().int().min(1).max(100_000).default(10_000)
    .describe('The most events one recovery may send; a time range holding more is refused 422 `VALIDATION_FAILED` naming `since`'),
  deliveryTimeoutMs: z.number().int().min(100).max(60_000).default(15_000)
    .describe('How long a delivery attempt waits for the endpoint\'s 2xx; past it the attempt failed (`timeout`)'),
  retrySchedule: z.array(z.number().positive().max(7 * 86_400)).min(1).max(20).default([5, 300, 1800, 7200, 18000, 36000, 36000])
    .describe('Seconds from a failed attempt to the next, each ±10 %; after the last the delivery is `failed` (one attempt more than entries)'),
  disableAfterHours: z.number().positive().max(24 * 90).default(120)
    .describe('An endpoint whose attempts failed throughout this long, with no success, is disabled (`failing`)'),
  endpointConcurrency: z.number().int().min(1).max(100).default(4)
    .describe('At most this many attempts in flight to one endpoint, across every instance: a slow endpoint delays no other'),
  deliveryWorkers: z.number().int().min(1).max(1000).default(64)
    .describe('Attempts one instance makes at once, to all endpoints together'),
  deliveryLockSeconds: z.number().positive().max(600).default(20)
    .describe('An attempt holds its delivery this long, renewed while it runs; the attempt of an instance that dies mid-attempt is made again by another within 1.5 times this'),
  allowPrivateTargets: z.boolean().default(false)
    .describe('Deliver to loopback, private and other internal addresses too; for tests and the demo only (the start warns)'),
  allowHttp: z.boolean().default(false)
    .describe('Accept `http:` endpoint URLs; for tests and the demo only (the start warns)'),
  workers: z.boolean().default(true)
    .describe('Whether this instance delivers webhooks; `EVENTS_WORKER` overrides it'),
}

export const webhookEnvFields = {
  EVENTS_WORKER: z.enum(['on', 'off', 'only']).optional()
    .describe('`on`: serve and deliver webhooks; `off`: serve only; `only`: deliver only (no public port). Unset: `events.workers` decides'),
  WEBHOOKS_SECRET_KEY: z.string().min(32, 'must be at least 32 characters').optional()
    .describe('Seals webhook endpoints\' signing secrets in Redis; every instance needs the same one. Required by `npm start` when `events.types` is not empty'),
  WEBHOOKS_SECRET_KEY_PREVIOUS: z.string().refine((text) => text.split(',').every((key) => key.trim().length >= 32), 'must be a comma-separated list of keys of at least 32 characters each').optional()
    .describe('Earlier values of `WEBHOOKS_SECRET_KEY`, comma-separated: secrets sealed under them still open (and are sealed again under the current key)'),
}

/** The keys that seal webhook signing secrets (docs/operations.md, "Changing WEBHOOKS_SECRET_KEY"). */
export interface WebhookKeys {
  /** Seals webhook secrets at rest; undefined (tests and the demo only): the development key. */
  webhooksSecretKey: string | undefined
  /** Earlier keys, which still open what they sealed. */
  webhooksPreviousKeys: string[]
}

export function webhookKeys(env: { WEBHOOKS_SECRET_KEY?: string | undefined; WEBHOOKS_SECRET_KEY_PREVIOUS?: string | undefined }): WebhookKeys {
  return {
    webhooksSecretKey: env.WEBHOOKS_SECRET_KEY,
    webhooksPreviousKeys: env.WEBHOOKS_SECRET_KEY_PREVIOUS?.split(',').map((key) => key.trim()) ?? [],
  }
}

/**
 * What `npm start` needs beside the file's fields: a key of its own when the config declares
 * events (else every signing secret would be sealed under the development key, which anyone
 * can read in the source).
 */
export function webhookKeyProblems(eventTypes: number, env: Record<string, string>): string[] {
  if (eventTypes === 0 || env.WEBHOOKS_SECRET_KEY !== undefined) return []
  return ['environment WEBHOOKS_SECRET_KEY: required when events.types declares events (webhook signing secrets are sealed with it); at least 32 characters']
}

/** What a reload may change of the webhooks' part of `events` (src/config/reload-rules.ts). */
export const webhooksReload: ReloadRules = {
  reloadable: {
    'events.maxEndpointsPerCredential': 'the next endpoint created',
    'events.maxManualDeliveriesPerEndpoint': 'the next test, redelivery or recovery asked for',
    'events.maxRecoveryEvents': 'the next recovery asked for',
    'events.disableAfterHours': 'the next failed attempt',
    'events.endpointConcurrency': 'the next attempt',
    'events.allowHttp': 'the next endpoint created or changed',
  },
  restartOnly: {
    'events.deliveryTimeoutMs': 'the delivery connection pool\'s deadlines, and how long a delivery\'s records live, are set at start',
    'events.retrySchedule': 'each queued delivery carries its number of attempts, and the queue\'s backoff is set when its worker starts',
    'events.deliveryWorkers': 'the delivery worker\'s concurrency is set when it starts',
    'events.deliveryLockSeconds': 'the delivery worker\'s locks are set when it starts',
    'events.allowPrivateTargets': 'the delivery connection pool\'s address guard is made at start',
    'events.workers': 'whether an instance delivers is decided at start (EVENTS_WORKER overrides it)',
  },
}
