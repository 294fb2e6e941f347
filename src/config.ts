import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { z } from 'zod'
import {
  BODY_METHODS, builtInRoutes, DEFAULT_BODY_BYTES, defaultScope, IDEMPOTENCY_METHODS, METHODS, pathParameterNames, pathProblem, policyProblems, SCOPE_PATTERN,
  type Method, type QueryRule, type RoutePolicy,
} from './routes/policy.js'

// The one source of truth for every setting: the configuration reference of docs/operations.md
// is generated from these schemas (scripts/generate-docs.ts), and a test keeps it current.

const positiveInt = z.number().int().positive()

const brandSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'lower-case letters, digits and dashes').describe('Brand id, as given to the key tool'),
  chainCode: z.string().min(1).describe('The PMS chain code of this brand'),
  hosts: z.array(z.string().min(1)).min(1).describe('Host names that select this brand (matched lower-cased, port removed)'),
  docsUrl: z.url().optional().describe("This brand's documentation base URL for problem `type` links"),
})

// An address or a CIDR block (`10.0.0.0/8`, `fd00::/8`), as Fastify's trustProxy takes them.
function isAddressOrCidr(value: string): boolean {
  const [address = '', bits, ...rest] = value.split('/')
  const family = isIP(address)
  if (family === 0 || rest.length > 0) return false
  if (bits === undefined) return true
  return /^[0-9]{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128)
}

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' })

const breakerFields = {
  errorThresholdPercentage: z.number().min(1).max(100),
  volumeThreshold: z.number().int().min(0),
  resetTimeoutMs: positiveInt,
  rollingCountTimeoutMs: positiveInt,
}

const breakerSchema = z.strictObject({
  errorThresholdPercentage: breakerFields.errorThresholdPercentage.default(50).describe('Failure percentage that opens the circuit'),
  volumeThreshold: breakerFields.volumeThreshold.default(10).describe('Calls in the rolling window before the circuit may open'),
  resetTimeoutMs: breakerFields.resetTimeoutMs.default(10000).describe('Open time before a trial call (half-open)'),
  rollingCountTimeoutMs: breakerFields.rollingCountTimeoutMs.default(10000).describe('Length of the rolling statistics window'),
})

// A declared upstream's breaker: each field it leaves out is the PMS's (`breaker`), not a default of its own.
const partialBreakerSchema = z.strictObject(Object.fromEntries(Object.entries(breakerFields)
  .map(([name, field]) => [name, field.describe(`As \`breaker.${name}\``)])) as typeof breakerFields).partial()

// A service behind declared routes. Unset settings take the PMS's (`upstream`, `breaker`).
const declaredUpstreamSchema = z.strictObject({
  url: httpUrl.describe('Base URL of the service (`UPSTREAM_<NAME>_URL` overrides it)'),
  sandboxUrl: httpUrl.optional().describe('Its sandbox, for `svc_test_` keys (`UPSTREAM_<NAME>_SANDBOX_URL` overrides it); without one, test keys get 403 TEST_MODE_UNAVAILABLE'),
  tokenHeader: z.string().regex(/^[A-Za-z0-9-]+$/, 'must be a header name').optional()
    .describe('Header that carries `UPSTREAM_<NAME>_TOKEN` (and `UPSTREAM_<NAME>_SANDBOX_TOKEN` to the sandbox); no token is sent without it'),
  timeoutMs: positiveInt.optional().describe('Time to the answer\'s headers; default `upstream.timeoutMs`'),
  connections: positiveInt.optional().describe('Keep-alive connections; default `upstream.connections`'),
  retries: z.number().int().min(0).max(3).optional().describe('Retries of an idempotent call after a connection error; default `upstream.retries`'),
  maxInFlight: positiveInt.optional().describe('Calls in flight; over it, 503 at once; default `upstream.maxInFlight`'),
  maxInFlightPerCredential: positiveInt.default(32)
    .describe('Calls in flight of one credential (an API key, or an access token\'s client); over it, 429 RATE_LIMITED with Retry-After: 1. Below `maxInFlight`, one partner cannot fill it alone'),
  responseTimeoutMs: positiveInt.default(30000)
    .describe('Bound of a whole call, its body included, however slowly the service sends or the partner reads; past it the call is cut and its connection and slots freed'),
  breaker: partialBreakerSchema.optional().describe('Circuit breaker (`errorThresholdPercentage`, `volumeThreshold`, `resetTimeoutMs`, `rollingCountTimeoutMs`); each unset field as in `breaker`'),
})

const queryRuleSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('integer'), min: z.number().int().min(0).default(0), max: z.number().int().max(Number.MAX_SAFE_INTEGER).default(Number.MAX_SAFE_INTEGER) }),
  z.strictObject({ type: z.literal('string'), maxLength: positiveInt.max(2048).default(256) }),
  z.strictObject({ type: z.literal('enum'), values: z.array(z.string().min(1)).min(1) }),
  z.strictObject({ type: z.literal('list'), values: z.array(z.string().regex(/^[^,]+$/, 'must not hold a comma')).min(1) }),
  z.strictObject({ type: z.literal('boolean') }),
], { error: 'type must be integer, string, enum, list or boolean' })

const CAMEL_CASE = /^[a-z][A-Za-z0-9]*$/

const declaredRouteSchema = z.strictObject({
  path: z.string().describe('Public path under /v1/: kebab-case segments, `{name}` for a parameter'),
  methods: z.array(z.enum(METHODS)).min(1).default(['GET']).describe('From GET, POST, PUT, PATCH, DELETE; HEAD comes with GET'),
  scope: z.enum(['brand', 'property']).describe('`brand`: brand-wide; `property`: needs `Service-Property-Id`'),
  upstream: z.string().describe('A name in `upstreams`'),
  upstreamPath: z.string().regex(/^\/[^?#]*$/, 'must be a path starting with /').describe('Path the service is called on; `{name}` placeholders are filled from path parameters and `{propertyId}`'),
  pathParams: z.record(z.string().regex(CAMEL_CASE, 'must be camelCase'), z.strictObject({
    type: z.enum(['uuid', 'string']).default('string').describe('`uuid` (any case, forwarded lower-cased) or `string` (1-128 of A-Z a-z 0-9 . _ ~ -)'),
  })).default({}).describe('The rule of each `{name}` segment of `path`'),
  query: z.record(z.string().regex(CAMEL_CASE, 'must be camelCase'), queryRuleSchema).default({}).describe('The query parameters the route takes; none without it'),
  body: z.strictObject({
    maxBytes: positiveInt.default(DEFAULT_BODY_BYTES).describe('Largest request body of POST, PUT and PATCH (413 beyond); only for routes with such methods'),
  }).optional(),
  scopes: z.partialRecord(z.enum(METHODS), z.string().regex(SCOPE_PATTERN, 'must be <resource>:<action> (lower-case letters, digits and dashes)')).optional()
    .describe('The scope each method needs, e.g. `{"GET": "guests:read"}`; a method left out needs `<first path segment>:read` (GET, HEAD) or `:write`'),
  idempotency: z.enum(['optional', 'required']).optional()
    .describe('Whether POST and PATCH need an `Idempotency-Key` (`required`: 400 without one) or may carry one (`optional`, the default); only for routes with POST or PATCH'),
})

export type DeclaredRoute = z.infer<typeof declaredRouteSchema>

/** A declared route as the pipeline sees it. */
export function policyOf(route: DeclaredRoute): RoutePolicy {
  const takesBody = route.methods.some((m) => BODY_METHODS.has(m))
  return {
    kind: 'proxy',
    path: route.path,
    methods: route.methods,
    scope: route.scope,
    auth: true,
    query: route.query as Record<string, QueryRule>,
    pathParams: Object.fromEntries(Object.entries(route.pathParams).map(([name, rule]) => [name, { type: rule.type }])),
    body: takesBody ? { maxBytes: route.body?.maxBytes ?? DEFAULT_BODY_BYTES } : 'none',
    // A property-scoped route checks the property against the PMS too.
    upstreams: route.scope === 'property' ? ['pms', route.upstream] : [route.upstream],
    forward: { upstream: route.upstream, path: route.upstreamPath },
    scopes: Object.fromEntries(route.methods.map((method: Method) => [method, route.scopes?.[method] ?? defaultScope(route.path, method)])),
    ...(route.idempotency !== undefined || route.methods.some((m) => IDEMPOTENCY_METHODS.has(m)) ? { idempotency: route.idempotency ?? 'optional' } : {}),
  }
}

// The JWS algorithms a published key can verify (RFC 7518, RFC 8037). `none` and the HS*
// family are refused by name: an HMAC secret cannot be published in a JWKS, and accepting
// HS256 is how a token "signed" with the public key gets in (RFC 8725 2.1, 3.1).
export const TOKEN_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
const tokenAlgorithm = z.string().refine((alg) => alg !== 'none' && !/^HS\d+$/.test(alg), 'none and HS* cannot be verified with published keys (RFC 8725)')
  .pipe(z.enum(TOKEN_ALGORITHMS, { error: `must be one of ${TOKEN_ALGORITHMS.join(', ')}` }))

const issuerSchema = z.strictObject({
  issuer: z.string().min(1).describe('The `iss` of its tokens, exactly as the identity provider writes it'),
  jwksUri: httpUrl.describe('Where its signing keys (JWKS) are published; fetched by the gateway, never per request'),
  audience: z.string().min(1).describe('The `aud` its tokens must name for this API'),
  algorithms: z.array(tokenAlgorithm).min(1).default(['RS256', 'PS256', 'ES256', 'EdDSA']).describe('Signature algorithms accepted; `none` and HS* are refused'),
  types: z.array(z.string().min(1)).min(1).default(['at+jwt', 'JWT'])
    .describe('Accepted JWT header `typ` (case-insensitive, `application/` prefix ignored); `["at+jwt"]` to accept RFC 9068 tokens only'),
  scopes: z.enum(['token', 'grant']).default('token')
    .describe('`token`: the token\'s `scope`/`scp` within the grant\'s scopes; `grant`: the grant\'s scopes alone (for providers that cannot put scopes in tokens)'),
  tokenUrl: httpUrl.optional().describe('Its token endpoint; documentation only (the OpenAPI client-credentials flow, the demo)'),
})

const oauthSchema = z.strictObject({
  issuers: z.array(issuerSchema).default([]).describe('Identity providers whose access tokens are accepted beside API keys; none: tokens are refused'),
  clockToleranceSeconds: z.number().int().min(0).max(300).default(60).describe('Leeway for `exp`, `iat` and `nbf`'),
  jwksRefreshSeconds: positiveInt.default(300).describe('How often each issuer\'s JWKS is fetched again; a failed fetch keeps the last good keys'),
  jwksCooldownSeconds: positiveInt.default(30).describe('At most one extra JWKS fetch per issuer in this time, for a token whose `kid` is unknown'),
  jwksTimeoutMs: positiveInt.default(2000).describe('Deadline of one JWKS fetch'),
  verifiedTokens: positiveInt.default(100000).describe('Verified tokens remembered (by digest, until their `exp`, while their signing key is published), so a reused token costs one signature check per instance'),
  maxTokenLifetimeSeconds: positiveInt.default(86400)
    .describe('Longest lifetime a token may claim (`exp` − `iat`); a longer one is refused 401 INVALID_ACCESS_TOKEN, since it would outlive any revocation by its issuer'),
}).superRefine((oauth, ctx) => {
  const seen = new Set<string>()
  oauth.issuers.forEach((issuer, i) => {
    if (seen.has(issuer.issuer)) ctx.addIssue({ code: 'custom', path: ['issuers', i, 'issuer'], message: `issuer '${issuer.issuer}' is listed twice` })
    seen.add(issuer.issuer)
  })
})

export type OAuthConfig = z.infer<typeof oauthSchema>
export type IssuerConfig = OAuthConfig['issuers'][number]

// Events (docs/operations.md, "Events"): who publishes to the ingest endpoint, and how the
// internal types they send become the public types partners read. Later settings of the
// deliveries join this section.

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

const eventsSchema = z.strictObject({
  publishers: z.record(z.string().regex(PUBLISHER_NAME, 'must be lower-case letters, digits and dashes'), publisherSchema).default({})
    .describe('The internal services that publish events, by name: the CloudEvents `source` each must send'),
  types: z.array(eventTypeSchema).default([])
    .describe('How an internal type becomes a public one; an internal type no entry maps is accepted and dropped. A public type may come from a live and a sandbox publisher (two entries)'),
  retentionDays: z.number().int().min(1).max(90).default(30).describe('How long events are kept, and readable at `/v1/events`'),
  cachedEvents: z.number().int().min(0).default(20000)
    .describe('Events whose JSON each instance keeps in memory once read (an event never changes), so an event many credentials read is read from Redis once per instance; 0 keeps none'),
  // Webhooks (docs/operations.md, "Webhooks"): partners' endpoints and the deliveries to them.
  maxEndpointsPerCredential: z.number().int().min(1).max(1000).default(10)
    .describe('How many webhook endpoints one credential may have; one more is refused 409 `WEBHOOK_ENDPOINT_LIMIT_REACHED`'),
  maxManualDeliveriesPerEndpoint: z.number().int().min(1).max(100_000).default(100)
    .describe('Deliveries a partner asked for (`test`, `redeliver`) not yet finished, per endpoint; one more is refused 429 `RATE_LIMITED`'),
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
}).superRefine((events, ctx) => {
  const mapped = new Set<string>()
  const firstOf = new Map<string, { scope: string; object: string; index: number }>()
  events.types.forEach((entry, i) => {
    if (!Object.hasOwn(events.publishers, entry.publisher)) ctx.addIssue({ code: 'custom', path: ['types', i, 'publisher'], message: `no publisher named '${entry.publisher}'` })
    const key = `${entry.publisher} ${entry.internalType}`
    if (mapped.has(key)) ctx.addIssue({ code: 'custom', path: ['types', i, 'internalType'], message: `'${entry.internalType}' of '${entry.publisher}' is mapped twice` })
    mapped.add(key)
    // One public type means one thing: who may see it, and what it names.
    const first = firstOf.get(entry.type)
    if (first === undefined) firstOf.set(entry.type, { scope: entry.scope, object: entry.object.type, index: i })
    else if (SCOPE_PATTERN.test(entry.scope)) {
      if (first.scope !== entry.scope) ctx.addIssue({ code: 'custom', path: ['types', i, 'scope'], message: `'${entry.type}' needs '${first.scope}' in types[${first.index}]` })
      if (first.object !== entry.object.type) ctx.addIssue({ code: 'custom', path: ['types', i, 'object', 'type'], message: `'${entry.type}' names '${first.object}' objects in types[${first.index}]` })
    }
    const problem = objectPathProblem(entry.object.path)
    if (problem !== undefined) ctx.addIssue({ code: 'custom', path: ['types', i, 'object', 'path'], message: problem })
  })
})

/** What is wrong with an event object's path template, or undefined. */
function objectPathProblem(path: string): string | undefined {
  const problem = pathProblem(path.replaceAll('{id}', '{x}'))
  if (problem !== undefined) return problem.replaceAll('{x}', '{id}')
  const names = pathParameterNames(path)
  if (names.length !== 1 || names[0] !== 'id') return 'must hold {id} once, and no other parameter'
  return undefined
}

export type EventsConfig = z.infer<typeof eventsSchema>
export type EventTypeConfig = EventsConfig['types'][number]

/** A publisher with its token from the environment (undefined while its variable is unset). */
export interface EventPublisher {
  name: string
  mode: 'live' | 'test'
  tokenEnv: string
  token: string | undefined
}

/** The publishers of `events` with their tokens; a token that is short, shared or the admin token is a problem. */
function resolvePublishers(events: EventsConfig, env: NodeJS.ProcessEnv, adminToken: string | undefined, problems: string[]): EventPublisher[] {
  const owners = new Map<string, string>()
  return Object.entries(events.publishers).map(([name, publisher]) => {
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

/** The router's view of a path: `/v1/a/{x}` and `/v1/a/{y}` are the same route. */
function routeShape(path: string): string {
  return path.replace(/\{[^}]*\}/g, '{}')
}

const BUILT_IN_SHAPES = Object.values(builtInRoutes).map((r) => routeShape(r.path))

export const fileSchema = z.strictObject({
  docsUrl: z.url().describe('Documentation base URL; problem `type` links are `{docsUrl}/errors/<code>`'),
  brands: z.array(brandSchema).min(1).describe('Brands, each selected by host name'),
  accessDeniedStatus: z.union([z.literal(403), z.literal(404)], { error: 'must be 403 or 404' }).default(403)
    .describe('Status for a property of the brand that the key may not use: 403 PROPERTY_ACCESS_DENIED or 404 PROPERTY_NOT_FOUND'),
  trustProxy: z.union([
    z.boolean(),
    z.number().int().min(1).max(32),
    z.array(z.string().refine(isAddressOrCidr, 'must be an IP address or a CIDR block')).min(1),
  ], { error: 'must be true, false, a hop count (1-32) or a list of proxy addresses and CIDR blocks' }).default(false)
    .describe('Which proxies to believe for `X-Forwarded-Host` and `X-Forwarded-For`: `false` none, `true` any, a hop count, or a list of addresses and CIDR blocks (e.g. `["10.0.0.0/8"]`)'),
  upstream: z.strictObject({
    timeoutMs: positiveInt.default(2000).describe('Deadline of one PMS call, headers and body'),
    connections: positiveInt.default(64).describe('Keep-alive connections to each PMS'),
    retries: z.number().int().min(0).max(3).default(1).describe('Retries of a read after a connection error'),
    maxInFlight: positiveInt.default(256).describe('PMS calls in flight per upstream; over it, 503 at once'),
  }).prefault({}),
  breaker: breakerSchema.prefault({}),
  cache: z.strictObject({
    ttlMs: z.number().int().min(0).default(30000).describe('How long a PMS answer is fresh; 0 turns the read cache off'),
    staleIfErrorMs: z.number().int().min(0).default(300000).describe('How long past freshness a copy may be served while the PMS fails'),
    maxEntries: positiveInt.default(10000).describe('Entries kept per upstream'),
  }).prefault({}),
  keyCache: z.strictObject({
    ttlMs: positiveInt.default(10000).describe('How long a key record (or a miss) is trusted without asking Redis'),
    graceMs: z.number().int().min(0).default(60000).describe('While Redis is down, how long past `ttlMs` a cached key keeps working'),
    maxEntries: positiveInt.default(100000).describe('Key records kept per instance'),
  }).prefault({}),
  rateLimit: z.strictObject({
    enabled: z.boolean().default(true).describe('Enforce per-key quotas'),
    limit: positiveInt.default(1000).describe('Requests per window for a key without its own quota'),
    windowSeconds: positiveInt.default(60).describe('Window length'),
  }).prefault({}),
  loadShedding: z.strictObject({
    maxEventLoopDelayMs: z.number().int().min(0).default(1000).describe('Median event-loop delay of a sample above which the sample counts as overloaded; 0 turns this measure off'),
    maxEventLoopUtilization: z.number().min(0).max(1).default(0).describe('Event-loop utilisation (0-1) of a sample above which it counts as overloaded; 0 turns this measure off'),
    sampleIntervalMs: positiveInt.default(1000).describe('How often the event loop is sampled'),
    sustainedSamples: z.number().int().min(2).max(60).default(3)
      .describe('Consecutive overloaded samples before the API sheds load with 503 (and health is unhealthy); one stall makes one such sample, so it never sheds'),
  }).prefault({}),
  server: z.strictObject({
    headersTimeoutMs: positiveInt.default(10000).describe('A request whose headers are not complete within this is answered 408 REQUEST_TIMEOUT and closed'),
    requestTimeoutMs: positiveInt.default(30000).describe('A request not wholly received (headers and body) within this is answered 408 REQUEST_TIMEOUT and closed'),
    keepAliveTimeoutMs: positiveInt.default(65000).describe('Idle keep-alive connections close after this (above common load balancer idle timeouts)'),
    writeIdleTimeoutMs: positiveInt.default(15000)
      .describe('A connection whose partner takes none of the answer\'s bytes for this long is closed (checked every half of it), and the call it was answering ended (its upstream connection and slots freed)'),
    coalesceAnswers: z.boolean().default(true)
      .describe('The answers ready in one turn of the event loop end together at its end, one wake-up of the partner\'s side for many answers; false ends each the moment it is ready'),
  }).prefault({}),
  abuse: z.strictObject({
    authFailuresPerMinute: positiveInt.default(600)
      .describe('401 answers one client address may get in a minute; past it, until its minute ends, a credential this instance would have to look up (Redis, a JWKS fetch) is answered 429 RATE_LIMITED at once, while one it knows to be valid is served'),
    trackedAddresses: positiveInt.default(100000).describe('Client addresses whose 401s are counted at once (least recently seen forgotten first)'),
    unknownKeys: positiveInt.default(10000)
      .describe('Unknown (checksum-valid) keys remembered for `keyCache.ttlMs`, apart from known keys, so a flood of invented keys never evicts a partner\'s'),
  }).prefault({}),
  shutdown: z.strictObject({
    drainMs: z.number().int().min(0).default(5000).describe('After SIGTERM, keep serving (health unhealthy) this long so load balancers move away'),
    timeoutMs: positiveInt.default(10000).describe('Exit before this, whatever is still open'),
  }).prefault({}),
  upstreams: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/, 'must be lower-case letters, digits and dashes'), declaredUpstreamSchema).default({})
    .describe('Internal services behind declared routes, by name'),
  routes: z.array(declaredRouteSchema).default([]).describe('Declared routes, forwarded to an upstream under the partner contract'),
  oauth: oauthSchema.prefault({}).describe('OAuth 2.0 access tokens (RFC 9068) beside API keys: the issuers trusted and how their keys are fetched'),
  idempotency: z.strictObject({
    retentionHours: positiveInt.max(24 * 30).default(24)
      .describe('How long the answer to a POST or PATCH with an `Idempotency-Key` is kept in Redis and replayed to a retry with the same key'),
    maxBodyBytes: positiveInt.default(1048576)
      .describe('Largest answer body kept for replay; a larger answer is passed on and its record released (a retry is forwarded again)'),
  }).prefault({}).describe('Safe retries of writes on declared routes (`Idempotency-Key`)'),
  // Credentials over their life (docs/operations.md, "Credentials over their life").
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
  events: eventsSchema.prefault({})
    .describe('Events: the internal services that publish to `POST /events` on the admin port, how their types map to public ones, and how long the log keeps them'),
}).superRefine((file, ctx) => {
  const owner = new Map<string, string>()
  file.brands.forEach((brand, i) => {
    brand.hosts.forEach((host, j) => {
      const normalised = normaliseHost(host)
      const previous = owner.get(normalised)
      if (previous !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['brands', i, 'hosts', j], message: `host '${normalised}' already belongs to brand '${previous}'` })
      }
      owner.set(normalised, brand.id)
    })
  })
  const ids = new Set<string>()
  const chains = new Map<string, string>()
  file.brands.forEach((brand, i) => {
    if (ids.has(brand.id)) ctx.addIssue({ code: 'custom', path: ['brands', i, 'id'], message: `duplicate brand id '${brand.id}'` })
    ids.add(brand.id)
    // Two brands on one chain would each see the other's properties.
    const chainOwner = chains.get(brand.chainCode)
    if (chainOwner !== undefined) ctx.addIssue({ code: 'custom', path: ['brands', i, 'chainCode'], message: `chainCode '${brand.chainCode}' already belongs to brand '${chainOwner}'` })
    else chains.set(brand.chainCode, brand.id)
  })
  if (file.server.headersTimeoutMs > file.server.requestTimeoutMs) {
    ctx.addIssue({ code: 'custom', path: ['server', 'headersTimeoutMs'], message: 'must not exceed server.requestTimeoutMs' })
  }
  if (Object.hasOwn(file.upstreams, 'pms')) ctx.addIssue({ code: 'custom', path: ['upstreams', 'pms'], message: "'pms' is the PMS's own name" })
  const shapes = new Map<string, number>()
  file.routes.forEach((route, i) => {
    const at = (...path: (string | number)[]): (string | number)[] => ['routes', i, ...path]
    if (!Object.hasOwn(file.upstreams, route.upstream)) ctx.addIssue({ code: 'custom', path: at('upstream'), message: `no upstream named '${route.upstream}'` })
    const shape = routeShape(route.path)
    const previous = shapes.get(shape)
    if (previous !== undefined) ctx.addIssue({ code: 'custom', path: at('path'), message: `shares its path with routes[${previous}]` })
    shapes.set(shape, i)
    if (BUILT_IN_SHAPES.includes(shape) || shape.startsWith('/v1/properties/') || shape.startsWith('/v1/events/')) {
      ctx.addIssue({ code: 'custom', path: at('path'), message: 'would shadow a built-in route (/v1/properties…, /v1/events…, /v1/health)' })
    }
    for (const method of Object.keys(route.scopes ?? {})) {
      if (!route.methods.includes(method as Method)) ctx.addIssue({ code: 'custom', path: at('scopes', method), message: `${method} is not one of the route's methods` })
    }
    if (route.body !== undefined && !route.methods.some((m) => BODY_METHODS.has(m))) {
      ctx.addIssue({ code: 'custom', path: at('body'), message: 'only routes with POST, PUT or PATCH take a body' })
    }
    // A named scope that is malformed is reported at its field already.
    const named = Object.values(route.scopes ?? {}).map((scope) => `scope '${scope}' `)
    for (const problem of policyProblems(policyOf(route))) {
      if (problem.startsWith('has a body') || problem.startsWith('body.maxBytes') || problem.startsWith('names a scope for')) continue
      if (named.some((prefix) => problem.startsWith(prefix))) continue
      ctx.addIssue({ code: 'custom', path: at(), message: problem })
    }
  })
})

const port = z.coerce.number().int().min(0).max(65535)
const hostPortList = z.string().regex(/^\s*(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}\s*(,\s*(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}\s*)*$/,
  'a comma-separated list of host:port')
const optionalUrl = z.url({ protocol: /^https?$/ }).optional()
const milliseconds = z.coerce.number().int().min(1)
const positiveIntText = z.coerce.number().int().positive()
const otlpProtocol = z.enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json (grpc is not supported)' })

/** The OpenTelemetry samplers the gateway builds (the OpenTelemetry SDK environment specification). */
export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const
export type SamplerName = (typeof SAMPLERS)[number]

// `key=value,key=value` with percent-encoded values (W3C Baggage syntax, which the
// OpenTelemetry variables use). The message never quotes the value: it may be a credential.
const KEY_VALUE_MEMBER = /^\s*[A-Za-z0-9!#$%&'*+\-.^_`|~]+\s*=[^,]*$/
const keyValueList = z.string().refine((text) => text.split(',').every((member) => member.trim() === '' || KEY_VALUE_MEMBER.test(member)),
  'must be a list of key=value separated by commas')

/** A `key=value,key=value` list as a record, values percent-decoded (a bad escape is kept as written). */
export function parseKeyValueList(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  if (text === undefined) return out
  for (const member of text.split(',')) {
    const equals = member.indexOf('=')
    if (equals === -1) continue
    const key = member.slice(0, equals).trim()
    const raw = member.slice(equals + 1).trim()
    let value = raw
    try {
      value = decodeURIComponent(raw)
    } catch {
      // Kept as written.
    }
    if (key !== '') out[key] = value
  }
  return out
}

export const envSchema = z.object({
  PORT: port.default(3000).describe('Public listener port'),
  HOST: z.string().min(1).default('127.0.0.1').describe('Public bind address (containers set 0.0.0.0)'),
  ADMIN_PORT: port.default(9464).describe('Admin listener port: metrics and status'),
  ADMIN_HOST: z.string().min(1).default('127.0.0.1').describe('Admin bind address'),
  REDIS_URL: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379').describe('Key store and rate-limit counters; a `/N` database suffix is honoured'),
  REDIS_SENTINELS: hostPortList.optional()
    .describe('Redis through Sentinel: comma-separated `host:port` of the sentinels; `REDIS_URL` then gives only credentials and database'),
  REDIS_SENTINEL_MASTER: z.string().min(1).optional().describe('The master name the sentinels monitor (required with `REDIS_SENTINELS`)'),
  REDIS_CLUSTER_NODES: hostPortList.optional()
    .describe('Redis Cluster: comma-separated `host:port` of seed nodes; `REDIS_URL` then gives only credentials'),
  REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9:_-]*$/).default('gw:').describe('Namespace of every Redis key and channel the gateway uses'),
  PMS_URL: optionalUrl.describe('PMS base URL (required by `npm start`)'),
  PMS_TOKEN: z.string().min(1).optional().describe('Sent as `X-PMS-Service-Token` (required with `PMS_URL`)'),
  PMS_SANDBOX_URL: optionalUrl.describe('Sandbox PMS for `svc_test_` keys; without it they get 403 TEST_MODE_UNAVAILABLE on every route that reads the PMS'),
  PMS_SANDBOX_TOKEN: z.string().min(1).optional().describe('Token for the sandbox PMS (required with `PMS_SANDBOX_URL`)'),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional().describe('When set, the admin routes need `Authorization: Bearer <ADMIN_TOKEN>`'),
  EVENTS_WORKER: z.enum(['on', 'off', 'only']).optional()
    .describe('`on`: serve and deliver webhooks; `off`: serve only; `only`: deliver only (no public port). Unset: `events.workers` decides'),
  WEBHOOKS_SECRET_KEY: z.string().min(32, 'must be at least 32 characters').optional()
    .describe('Seals webhook endpoints\' signing secrets in Redis; every instance needs the same one. Required by `npm start` when `events.types` is not empty'),
  WEBHOOKS_SECRET_KEY_PREVIOUS: z.string().refine((text) => text.split(',').every((key) => key.trim().length >= 32), 'must be a comma-separated list of keys of at least 32 characters each').optional()
    .describe('Earlier values of `WEBHOOKS_SECRET_KEY`, comma-separated: secrets sealed under them still open (and are sealed again under the current key)'),
  CONFIG_FILE: z.string().min(1).default('config/default.json').describe('Path of the JSON config file'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('pino log level'),
  OAUTH_ISSUER: z.string().min(1).optional().describe('One token issuer (`iss`), replacing the file\'s `oauth.issuers`; needs `OAUTH_JWKS_URI` and `OAUTH_AUDIENCE`'),
  OAUTH_JWKS_URI: optionalUrl.describe('Its JWKS (with `OAUTH_ISSUER`)'),
  OAUTH_AUDIENCE: z.string().min(1).optional().describe('The `aud` its tokens must name (with `OAUTH_ISSUER`)'),
  OAUTH_TOKEN_URL: optionalUrl.describe('Its token endpoint, for the documentation (with `OAUTH_ISSUER`)'),
  // Tracing: the OpenTelemetry SDK's own variables, validated here and handed to the SDK
  // (docs/operations.md, "Tracing"). Without an endpoint nothing is exported and no span is made.
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl.describe('Base URL of an OTLP/HTTP collector; spans go to `<url>/v1/traces`. Without it (or the next) no span is made or exported'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalUrl.describe('Full URL spans are posted to (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`)'),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.default('http/protobuf').describe('Encoding of the export'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional().describe('Encoding of the span export (wins over `OTEL_EXPORTER_OTLP_PROTOCOL`)'),
  OTEL_EXPORTER_OTLP_HEADERS: keyValueList.optional()
    .describe('Headers of every export, `name=value,name=value` (values percent-encoded), e.g. a collector\'s credentials; never logged'),
  OTEL_EXPORTER_OTLP_TIMEOUT: milliseconds.default(10000).describe('Time one export may take, retries included (ms); past it its spans are dropped'),
  OTEL_SERVICE_NAME: z.string().min(1).default('partner-gateway').describe('`service.name` of the spans'),
  OTEL_RESOURCE_ATTRIBUTES: keyValueList.optional().describe('More resource attributes of the spans, `key=value,key=value` (e.g. `deployment.environment.name=prod`)'),
  OTEL_TRACES_SAMPLER: z.enum(SAMPLERS, { error: `must be one of ${SAMPLERS.join(', ')}` }).default('parentbased_traceidratio')
    .describe('Which requests are traced: `parentbased_*` follow the caller\'s sampled flag when it sent a `traceparent`'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(0.01).describe('The ratio (0-1) of new traces the `*traceidratio` samplers keep'),
  OTEL_BSP_SCHEDULE_DELAY: milliseconds.default(5000).describe('Longest wait before the finished spans are exported (ms)'),
  OTEL_BSP_MAX_QUEUE_SIZE: positiveIntText.default(2048).describe('Finished spans held for export; beyond it spans are dropped (and counted)'),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: positiveIntText.default(512).describe('Most spans in one export (at most `OTEL_BSP_MAX_QUEUE_SIZE`)'),
  OTEL_BSP_EXPORT_TIMEOUT: milliseconds.default(30000).describe('Time the batch processor waits for one export (ms)'),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).default('false').describe('`true` turns tracing off whatever else is set'),
})

// Checked on the raw values, so that they are reported even when another variable is bad
// (zod skips refinements of an object whose fields failed).
function pairedVariables(env: Record<string, string>): string[] {
  const problems: string[] = []
  if (env.PMS_URL !== undefined && env.PMS_TOKEN === undefined) problems.push('environment PMS_TOKEN: required when PMS_URL is set')
  if (env.PMS_SANDBOX_URL !== undefined && env.PMS_SANDBOX_TOKEN === undefined) {
    problems.push('environment PMS_SANDBOX_TOKEN: required when PMS_SANDBOX_URL is set')
  }
  if (env.REDIS_SENTINELS !== undefined && env.REDIS_SENTINEL_MASTER === undefined) {
    problems.push('environment REDIS_SENTINEL_MASTER: required when REDIS_SENTINELS is set')
  }
  if (env.REDIS_SENTINELS !== undefined && env.REDIS_CLUSTER_NODES !== undefined) {
    problems.push('environment REDIS_CLUSTER_NODES: cannot be combined with REDIS_SENTINELS')
  }
  // One issuer from the environment is all three or nothing (OAUTH_TOKEN_URL is optional).
  const issuer = ['OAUTH_ISSUER', 'OAUTH_JWKS_URI', 'OAUTH_AUDIENCE', 'OAUTH_TOKEN_URL']
  const given = issuer.filter((name) => env[name] !== undefined)
  if (given.length > 0) {
    for (const name of issuer.slice(0, 3)) if (env[name] === undefined) problems.push(`environment ${name}: required with ${given.join(', ')}`)
  }
  // A Cluster has database 0 only.
  if (env.REDIS_CLUSTER_NODES !== undefined && /^rediss?:\/\/[^/]*\/[1-9]/.test(env.REDIS_URL ?? '')) {
    problems.push('environment REDIS_URL: a Redis Cluster has no database but 0')
  }
  if (env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE !== undefined && Number(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE) > Number(env.OTEL_BSP_MAX_QUEUE_SIZE ?? 2048)) {
    problems.push('environment OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE')
  }
  return problems
}

export interface HostPort { host: string; port: number }

/** `host:port,host:port` (IPv6 hosts in brackets) as a list. */
export function parseHostPorts(list: string): HostPort[] {
  return list.split(',').map((entry) => {
    const trimmed = entry.trim()
    const colon = trimmed.lastIndexOf(':')
    return { host: trimmed.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(trimmed.slice(colon + 1)) }
  })
}

export type FileConfig = z.infer<typeof fileSchema>
/** The file as written, before defaults: what tests and tools give as overrides. */
export type FileConfigInput = z.input<typeof fileSchema>
export type EnvConfig = z.infer<typeof envSchema>
export type BrandConfig = FileConfig['brands'][number]

export interface UpstreamTarget { url: string; token: string }

export interface UpstreamSettings {
  timeoutMs: number
  connections: number
  retries: number
  maxInFlight: number
  breaker: FileConfig['breaker']
}


/** A declared upstream with its settings filled in and its tokens from the environment. */
export interface ServiceUpstream extends UpstreamSettings {
  name: string
  url: string
  tokenHeader: string | undefined
  token: string | undefined
  sandbox: { url: string; token: string | undefined } | undefined
  /** Bound of a whole call, body included. */
  responseTimeoutMs: number
  maxInFlightPerCredential: number
}

/** Where and how spans are exported; absent when tracing is off (no endpoint, or OTEL_SDK_DISABLED). */
export interface TracingSettings {
  /** The URL spans are posted to. */
  url: string
  protocol: 'http/protobuf' | 'http/json'
  /** Sent with every export; may hold a credential. */
  headers: Record<string, string>
  timeoutMs: number
  serviceName: string
  resourceAttributes: Record<string, string>
  sampler: SamplerName
  /** The ratio of the `*traceidratio` samplers. */
  ratio: number
  batch: { scheduledDelayMs: number; maxQueueSize: number; maxExportBatchSize: number; exportTimeoutMs: number }
}

export interface Config extends Omit<FileConfig, 'upstreams' | 'routes'> {
  /** The declared upstreams, resolved. */
  upstreams: Record<string, ServiceUpstream>
  /** The declared routes as policies. */
  routes: RoutePolicy[]
  port: number
  host: string
  adminPort: number
  adminHost: string
  /** When set, /metrics and /status need it as a bearer token. */
  adminToken: string | undefined
  redisUrl: string
  /** Set with REDIS_SENTINELS: Redis is the master these sentinels name. */
  redisSentinel: { sentinels: HostPort[]; master: string } | undefined
  /** Set with REDIS_CLUSTER_NODES: the Cluster's seed nodes. */
  redisClusterNodes: HostPort[] | undefined
  redisPrefix: string
  logLevel: EnvConfig['LOG_LEVEL']
  configFile: string
  pms: UpstreamTarget | undefined
  pmsSandbox: UpstreamTarget | undefined
  tracing: TracingSettings | undefined
  /** The publishers of `events`, with their tokens. */
  eventPublishers: EventPublisher[]
  /** Whether this instance serves the public port and delivers webhooks (EVENTS_WORKER, else `events.workers`). */
  eventsWorker: 'on' | 'off' | 'only'
  /** Seals webhook secrets at rest; undefined (tests and the demo only): the development key. */
  webhooksSecretKey: string | undefined
  /** Earlier keys, which still open what they sealed. */
  webhooksPreviousKeys: string[]
}

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`)
    this.name = 'ConfigError'
  }
}

/** Whether a URL is https:, or http: to this machine (where no network sees the traffic). */
export function isLoopbackOrTls(url: string): boolean {
  const { protocol, hostname } = new URL(url)
  if (protocol !== 'http:') return true
  const host = hostname.replace(/^\[|\]$/g, '')
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

export function normaliseHost(host: string): string {
  const lower = host.trim().toLowerCase()
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1)
  const colon = lower.indexOf(':')
  return colon === -1 ? lower : lower.slice(0, colon)
}

function describeIssues(source: string, error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const path = issue.path.reduce<string>((acc, part) =>
      typeof part === 'number' ? `${acc}[${part}]` : acc === '' ? String(part) : `${acc}.${String(part)}`, '')
    return `${source}${path === '' ? '' : ` ${path}`}: ${issue.message}`
  })
}

interface LoadOptions {
  /** `npm start` needs a PMS; tests and tools do not. */
  requirePms?: boolean
  /** `npm start` needs the token of every upstream with a `tokenHeader`, and WEBHOOKS_SECRET_KEY when there are webhooks; the key tool does not. */
  requireTokens?: boolean
  /** Settings given in code win over the file (tests). */
  overrides?: Partial<FileConfigInput>
}

/** Reads the environment and the config file; throws one ConfigError naming every bad field. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: LoadOptions = {}): Config {
  const problems: string[] = []
  const picked = pickEnv(env)
  const envResult = envSchema.safeParse(picked)
  if (!envResult.success) problems.push(...describeIssues('environment', envResult.error))
  problems.push(...pairedVariables(picked))
  const configFile = envResult.success ? envResult.data.CONFIG_FILE : (env.CONFIG_FILE ?? 'config/default.json')

  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(configFile, 'utf8'))
  } catch (error) {
    problems.push(`${configFile}: ${error instanceof SyntaxError ? `not valid JSON (${error.message})` : 'cannot be read'}`)
  }
  let file: FileConfig | undefined
  const merged: unknown = options.overrides !== undefined && typeof raw === 'object' && raw !== null ? { ...raw, ...options.overrides } : raw
  if (merged !== undefined) {
    const fileResult = fileSchema.safeParse(merged)
    if (fileResult.success) file = fileResult.data
    else problems.push(...describeIssues(configFile, fileResult.error))
  }
  if (options.requirePms === true && envResult.success && envResult.data.PMS_URL === undefined) {
    problems.push('environment PMS_URL: required to start the gateway')
  }
  problems.push(...upstreamUrlProblems(upstreamUrlsOf(merged, configFile, env, problems)))
  const upstreams = file === undefined ? {} : resolveUpstreams(file, env, problems, options.requireTokens === true)
  const eventPublishers = file === undefined ? [] : resolvePublishers(file.events, env, envResult.success ? envResult.data.ADMIN_TOKEN : undefined, problems)
  // Without it every signing secret would be sealed under a key anyone can read in the source.
  if (options.requireTokens === true && file !== undefined && file.events.types.length > 0 && picked.WEBHOOKS_SECRET_KEY === undefined) {
    problems.push('environment WEBHOOKS_SECRET_KEY: required when events.types declares events (webhook signing secrets are sealed with it); at least 32 characters')
  }
  if (problems.length > 0 || file === undefined || !envResult.success) throw new ConfigError(problems)

  const e = envResult.data
  // One issuer from the environment replaces the file's list (a deployment's own provider).
  const oauth = e.OAUTH_ISSUER !== undefined && e.OAUTH_JWKS_URI !== undefined && e.OAUTH_AUDIENCE !== undefined
    ? { ...file.oauth, issuers: [issuerSchema.parse({ issuer: e.OAUTH_ISSUER, jwksUri: e.OAUTH_JWKS_URI, audience: e.OAUTH_AUDIENCE, tokenUrl: e.OAUTH_TOKEN_URL })] }
    : file.oauth
  return {
    ...file,
    oauth,
    upstreams,
    routes: file.routes.map(policyOf),
    port: e.PORT,
    host: e.HOST,
    adminPort: e.ADMIN_PORT,
    adminHost: e.ADMIN_HOST,
    adminToken: e.ADMIN_TOKEN,
    redisUrl: e.REDIS_URL,
    redisSentinel: e.REDIS_SENTINELS !== undefined && e.REDIS_SENTINEL_MASTER !== undefined
      ? { sentinels: parseHostPorts(e.REDIS_SENTINELS), master: e.REDIS_SENTINEL_MASTER }
      : undefined,
    redisClusterNodes: e.REDIS_CLUSTER_NODES !== undefined ? parseHostPorts(e.REDIS_CLUSTER_NODES) : undefined,
    redisPrefix: e.REDIS_PREFIX,
    logLevel: e.LOG_LEVEL,
    configFile,
    pms: e.PMS_URL !== undefined && e.PMS_TOKEN !== undefined ? { url: e.PMS_URL, token: e.PMS_TOKEN } : undefined,
    pmsSandbox: e.PMS_SANDBOX_URL !== undefined && e.PMS_SANDBOX_TOKEN !== undefined
      ? { url: e.PMS_SANDBOX_URL, token: e.PMS_SANDBOX_TOKEN }
      : undefined,
    tracing: tracingSettings(e),
    eventPublishers,
    eventsWorker: e.EVENTS_WORKER ?? (file.events.workers ? 'on' : 'off'),
    webhooksSecretKey: e.WEBHOOKS_SECRET_KEY,
    webhooksPreviousKeys: e.WEBHOOKS_SECRET_KEY_PREVIOUS?.split(',').map((key) => key.trim()) ?? [],
  }
}

/** The span export the environment asks for; undefined without an endpoint or with OTEL_SDK_DISABLED=true. */
function tracingSettings(e: EnvConfig): TracingSettings | undefined {
  // OTLP/HTTP: a signal's own endpoint is used as given; the base endpoint gets the signal's path.
  const url = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    ?? (e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined ? undefined : `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`)
  if (url === undefined || e.OTEL_SDK_DISABLED === 'true') return undefined
  return {
    url,
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL,
    headers: parseKeyValueList(e.OTEL_EXPORTER_OTLP_HEADERS),
    timeoutMs: e.OTEL_EXPORTER_OTLP_TIMEOUT,
    serviceName: e.OTEL_SERVICE_NAME,
    resourceAttributes: parseKeyValueList(e.OTEL_RESOURCE_ATTRIBUTES),
    sampler: e.OTEL_TRACES_SAMPLER,
    ratio: e.OTEL_TRACES_SAMPLER_ARG,
    batch: {
      scheduledDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
      maxQueueSize: e.OTEL_BSP_MAX_QUEUE_SIZE,
      // A smaller queue set alone shrinks the default batch with it.
      maxExportBatchSize: Math.min(e.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, e.OTEL_BSP_MAX_QUEUE_SIZE),
      exportTimeoutMs: e.OTEL_BSP_EXPORT_TIMEOUT,
    },
  }
}

/** Where an upstream URL was set, as a problem names it, and whether it is a sandbox's. */
interface UpstreamUrl {
  /** `environment UPSTREAM_BOOKINGS_URL`, `config/default.json upstreams.bookings.sandboxUrl`, `environment PMS_URL`. */
  source: string
  url: string
  sandbox: boolean
}

const LOOPBACK_NAMES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]'])

/**
 * `scheme://host:port` of a URL, so that two spellings of one server compare equal: the URL
 * parser lower-cases the scheme and host and drops a default port; `localhost`, `127.0.0.1`
 * and `::1` are one host. Undefined for what does not parse.
 */
export function serverOf(url: string): string | undefined {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return undefined
  }
  const host = LOOPBACK_NAMES.has(parsed.hostname) ? 'loopback' : parsed.hostname
  const port = parsed.port !== '' ? parsed.port : parsed.protocol === 'https:' ? '443' : '80'
  return `${parsed.protocol}//${host}:${port}`
}

/**
 * Start errors of the upstreams' URLs. Each is a server alone: a path would be silently
 * dropped (the routes' upstreamPath, the PMS client's own paths, say where to call), and
 * credentials belong in the token variables. No sandbox may be any upstream's live URL
 * under another name: a test key would reach live data, and the proxy could not tell a
 * sandbox call from a live one.
 */
function upstreamUrlProblems(urls: readonly UpstreamUrl[]): string[] {
  const problems: string[] = []
  for (const { source, url } of urls) {
    let parsed: URL
    try {
      parsed = new URL(url)
    } catch {
      continue
    }
    if (parsed.pathname !== '/' || parsed.search !== '' || parsed.hash !== '' || parsed.username !== '' || parsed.password !== '') {
      problems.push(`${source}: must be a server alone (scheme, host, port), with no path, query, fragment or credentials`)
    }
  }
  for (const sandbox of urls.filter((u) => u.sandbox)) {
    const server = serverOf(sandbox.url)
    const live = urls.find((u) => !u.sandbox && server !== undefined && serverOf(u.url) === server)
    if (live !== undefined) problems.push(`${sandbox.source}: is ${live.source} under another name; a test key would reach live data`)
  }
  return problems
}

// An empty variable counts as unset, as shells and compose files often leave them.
function readEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  return env[name] === '' ? undefined : env[name]
}

/**
 * Every upstream URL in force, the environment's overrides included, read from the file as
 * given: their rules are reported with every other bad field, even when the file has others.
 * An override that is no http(s) URL is a problem of its own.
 */
function upstreamUrlsOf(raw: unknown, configFile: string, env: NodeJS.ProcessEnv, problems: string[]): UpstreamUrl[] {
  const urls: UpstreamUrl[] = []
  for (const [variable, sandbox] of [['PMS_URL', false], ['PMS_SANDBOX_URL', true]] as const) {
    const value = readEnv(env, variable)
    if (value !== undefined) urls.push({ source: `environment ${variable}`, url: value, sandbox })
  }
  const declared = (raw as { upstreams?: unknown } | undefined)?.upstreams
  if (typeof declared !== 'object' || declared === null) return urls
  for (const [name, upstream] of Object.entries(declared)) {
    const prefix = upstreamEnvPrefix(name)
    for (const [variable, field] of [[`${prefix}URL`, 'url'], [`${prefix}SANDBOX_URL`, 'sandboxUrl']] as const) {
      const fromEnv = readEnv(env, variable)
      if (fromEnv !== undefined && !httpUrl.safeParse(fromEnv).success) problems.push(`environment ${variable}: must be an http(s) URL`)
      const value = fromEnv ?? (upstream as Record<string, unknown> | null)?.[field]
      if (typeof value === 'string') urls.push({ source: fromEnv !== undefined ? `environment ${variable}` : `${configFile} upstreams.${name}.${field}`, url: value, sandbox: field === 'sandboxUrl' })
    }
  }
  return urls
}

/** `bookings` -> `UPSTREAM_BOOKINGS_`, `guest-service` -> `UPSTREAM_GUEST_SERVICE_`. */
export function upstreamEnvPrefix(name: string): string {
  return `UPSTREAM_${name.toUpperCase().replaceAll('-', '_')}_`
}

// Declared upstreams: the file's settings, the PMS's where unset, URLs and tokens from the
// environment (tokens never come from the file).
function resolveUpstreams(file: FileConfig, env: NodeJS.ProcessEnv, problems: string[], requireTokens: boolean): Record<string, ServiceUpstream> {
  const resolved: Record<string, ServiceUpstream> = {}
  for (const [name, declared] of Object.entries(file.upstreams)) {
    const prefix = upstreamEnvPrefix(name)
    const url = readEnv(env, `${prefix}URL`) ?? declared.url
    const sandboxUrl = readEnv(env, `${prefix}SANDBOX_URL`) ?? declared.sandboxUrl
    const token = readEnv(env, `${prefix}TOKEN`)
    const sandboxToken = readEnv(env, `${prefix}SANDBOX_TOKEN`)
    // Only a gateway that serves needs them; the key tool and the docs generator call no service.
    if (declared.tokenHeader !== undefined && requireTokens) {
      if (token === undefined) problems.push(`environment ${prefix}TOKEN: required by upstreams.${name}.tokenHeader`)
      if (sandboxUrl !== undefined && sandboxToken === undefined) problems.push(`environment ${prefix}SANDBOX_TOKEN: required by upstreams.${name}.tokenHeader with a sandbox`)
    } else if (declared.tokenHeader === undefined && (token !== undefined || sandboxToken !== undefined)) {
      problems.push(`environment ${prefix}TOKEN: upstreams.${name} has no tokenHeader to send it in`)
    }
    resolved[name] = {
      name,
      url,
      tokenHeader: declared.tokenHeader?.toLowerCase(),
      token,
      sandbox: sandboxUrl === undefined ? undefined : { url: sandboxUrl, token: sandboxToken },
      timeoutMs: declared.timeoutMs ?? file.upstream.timeoutMs,
      connections: declared.connections ?? file.upstream.connections,
      retries: declared.retries ?? file.upstream.retries,
      maxInFlight: declared.maxInFlight ?? file.upstream.maxInFlight,
      maxInFlightPerCredential: declared.maxInFlightPerCredential,
      responseTimeoutMs: declared.responseTimeoutMs,
      breaker: { ...file.breaker, ...declared.breaker },
    }
  }
  return resolved
}

// An empty variable counts as unset, as shells and compose files often leave them.
function pickEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const picked: Record<string, string> = {}
  for (const name of Object.keys(envSchema.shape)) {
    const value = env[name]
    if (value !== undefined && value !== '') picked[name] = value
  }
  return picked
}
