import { z } from 'zod'
import { readEnv, type SectionCheck } from '../config/fields.js'
import { pathParameterNames, pathProblem, SCOPE_PATTERN } from '../routes/policy.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The events' part of the `events` section of the configuration (docs/architecture.md,
// "Configuration"; docs/operations.md, "Events"): who publishes to the ingest endpoint, and how
// the internal types they send become the public types partners read. The settings of the
// deliveries (src/webhooks/config.ts) join these in one section.

/** A public event type: dotted lower-case words, e.g. `property.updated`. */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/
/** Public types the gateway makes itself, which no mapping may claim. */
export const RESERVED_EVENT_TYPES: readonly string[] = ['webhook.test']
/** A field of a CloudEvent's `data`, nested fields joined by dots: `hotel_uuid`, `hotel.chain_code`. */
export const DATA_PATH = /^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$/
const PUBLISHER_NAME = /^[a-z][a-z0-9-]*$/

const dataPath = z.string().regex(DATA_PATH, 'must be a field of `data`, nested fields joined by dots (e.g. `hotel.chain_code`)')

const publisherSchema = z.strictObject({
  tokenEnv: z.string().regex(/^[A-Z][A-Z0-9_]*$/, 'must be an environment variable name (A-Z, 0-9 and _)')
    .describe('The environment variable that holds its token (16 characters or more), sent as `Authorization: Bearer <token>` to `POST /events`; unset: everything it sends is refused 401'),
  mode: z.enum(['live', 'test']).describe('`live`: its events are read by live credentials; `test`: by test credentials (a sandbox\'s publisher)'),
})

const eventTypeSchema = z.strictObject({
  type: z.string().regex(EVENT_TYPE_PATTERN, 'must be dotted lower-case words, e.g. `property.updated`')
    .refine((type) => !RESERVED_EVENT_TYPES.includes(type), 'is reserved for the gateway\'s own events')
    .describe('The public type partners see, e.g. `property.updated`'),
  publisher: z.string().describe('A name in `events.publishers`'),
  internalType: z.string().min(1).max(255).describe('The CloudEvents `type` that publisher sends'),
  scope: z.string().regex(SCOPE_PATTERN, 'must be <resource>:<action> (lower-case letters, digits and dashes)')
    .describe('The scope a credential needs to see events of this type, e.g. `properties:read`'),
  brand: dataPath.describe('The field of `data` that holds the chain code, matched to `brands[].chainCode`'),
  property: dataPath.optional().describe('The field of `data` that holds the UUID of the property the event concerns; without it, events of this type concern no property'),
  object: z.strictObject({
    type: z.string().regex(/^[a-z][a-z0-9_]*$/, 'must be a lower-case word, e.g. `property`').describe('What changed, e.g. `property`'),
    id: dataPath.describe('The field of `data` that holds its id (1 to 128 of A-Z a-z 0-9 . _ ~ -; a UUID is lower-cased)'),
    path: z.string().describe('Where a partner reads it: a public path with `{id}`, e.g. `/v1/properties/{id}`'),
  }).describe('The changed resource, as `object` of the event'),
})

export type EventTypeConfig = z.infer<typeof eventTypeSchema>

/** The fields of `events` this folder owns. */
export const eventFields = {
  publishers: z.record(z.string().regex(PUBLISHER_NAME, 'must be lower-case letters, digits and dashes'), publisherSchema).default({})
    .describe('The internal services that publish events, by name: the CloudEvents `source` each must send'),
  types: z.array(eventTypeSchema).default([])
    .describe('How an internal type becomes a public one; an internal type no entry maps is accepted and dropped. A public type may come from a live and a sandbox publisher (two entries)'),
  retentionDays: z.number().int().min(1).max(90).default(30).describe('How long events are kept, and readable at `/v1/events`'),
  cachedEvents: z.number().int().min(0).default(20000)
    .describe('Events whose JSON each instance keeps in memory once read (an event never changes), so an event many credentials read, or delivered to many endpoints, is read from Redis once per instance; sizes two caches, of pages and of events read by id; 0 keeps none'),
}

/** What is wrong with an event object's path template, or undefined. */
function objectPathProblem(path: string): string | undefined {
  const problem = pathProblem(path.replaceAll('{id}', '{x}'))
  if (problem !== undefined) return problem.replaceAll('{x}', '{id}')
  const names = pathParameterNames(path)
  if (names.length !== 1 || names[0] !== 'id') return 'must hold {id} once, and no other parameter'
  return undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The checks across the mappings of `events` (paths relative to `events`). They run even when
 * other fields of the section are bad, so that the one message of a bad start names every bad
 * field (docs/operations.md, "Configuration"): they read what did parse and skip what did not.
 */
export const checkEvents: SectionCheck<typeof eventFields> = (events, ctx) => {
  const publishers: unknown = events.publishers
  const types: unknown = events.types
  if (!Array.isArray(types)) return
  const mapped = new Set<string>()
  const firstOf = new Map<string, { scope: string; object: string; index: number }>()
  types.forEach((entry: unknown, i) => {
    if (!isRecord(entry)) return
    const { type, publisher, internalType, scope, object } = entry
    if (typeof publisher === 'string') {
      if (isRecord(publishers) && !Object.hasOwn(publishers, publisher)) ctx.addIssue({ code: 'custom', path: ['types', i, 'publisher'], message: `no publisher named '${publisher}'` })
      if (typeof internalType === 'string') {
        const key = `${publisher} ${internalType}`
        if (mapped.has(key)) ctx.addIssue({ code: 'custom', path: ['types', i, 'internalType'], message: `'${internalType}' of '${publisher}' is mapped twice` })
        mapped.add(key)
      }
    }
    // One public type means one thing: who may see it, and what it names.
    if (typeof type === 'string' && typeof scope === 'string' && SCOPE_PATTERN.test(scope) && isRecord(object) && typeof object.type === 'string') {
      const first = firstOf.get(type)
      if (first === undefined) firstOf.set(type, { scope, object: object.type, index: i })
      else {
        if (first.scope !== scope) ctx.addIssue({ code: 'custom', path: ['types', i, 'scope'], message: `'${type}' needs '${first.scope}' in types[${first.index}]` })
        if (first.object !== object.type) ctx.addIssue({ code: 'custom', path: ['types', i, 'object', 'type'], message: `'${type}' names '${first.object}' objects in types[${first.index}]` })
      }
    }
    if (isRecord(object) && typeof object.path === 'string') {
      const problem = objectPathProblem(object.path)
      if (problem !== undefined) ctx.addIssue({ code: 'custom', path: ['types', i, 'object', 'path'], message: problem })
    }
  })
}

/** A publisher with its token from the environment (undefined while its variable is unset). */
export interface EventPublisher {
  name: string
  mode: 'live' | 'test'
  tokenEnv: string
  token: string | undefined
}

/** The publishers of `events` with their tokens; a token that is short, shared or the admin token is a problem. */
export function resolvePublishers(publishers: z.infer<typeof eventFields.publishers>, env: NodeJS.ProcessEnv, adminToken: string | undefined, problems: string[]): EventPublisher[] {
  const owners = new Map<string, string>()
  return Object.entries(publishers).map(([name, publisher]) => {
    const token = readEnv(env, publisher.tokenEnv)
    if (token !== undefined) {
      if (token.length < 16) problems.push(`environment ${publisher.tokenEnv}: must be at least 16 characters (the token of events.publishers.${name})`)
      // The admin token publishes nothing (docs/operations.md, "Events"), and a token names one publisher.
      else if (token === adminToken) problems.push(`environment ${publisher.tokenEnv}: must not be ADMIN_TOKEN (the token of events.publishers.${name})`)
      else if (owners.has(token)) problems.push(`environment ${publisher.tokenEnv}: the same token as events.publishers.${owners.get(token) as string}`)
      owners.set(token, name)
    }
    return { name, mode: publisher.mode, tokenEnv: publisher.tokenEnv, token }
  })
}

/** What a reload may change of the events' part of `events` (src/config/reload-rules.ts). */
export const eventsReload: ReloadRules = {
  reloadable: {
    'events.types': 'the next event published, the next read of /v1/events, and the next delivery: types added are accepted and delivered, with their scopes',
  },
  restartOnly: {
    'events.publishers': 'their tokens come from the environment, read at start, and the ingest route on the admin port is made with them',
    'events.retentionDays': 'events and delivery records are kept this long from when they are written; the log is made with it at start',
    'events.cachedEvents': 'the cache of events is sized at start',
  },
}
