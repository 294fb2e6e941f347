// Every public route, built-in or declared in the config file, is described by one policy.
// The pipeline's stages are composed from it when the route is registered (app.ts), so no
// stage looks its route up per request, and an impossible policy stops the start instead of
// answering 500 later.

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const
export type Method = (typeof METHODS)[number]

/** Methods that carry a request body; the others (and HEAD) take none. */
export const BODY_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH'])

/** Methods whose retries an `Idempotency-Key` makes safe on declared routes (docs/architecture.md, "Idempotency records"). */
export const IDEMPOTENCY_METHODS: ReadonlySet<string> = new Set(['POST', 'PATCH'])

/** `optional`: a POST or PATCH may carry an Idempotency-Key; `required`: it must. */
export type IdempotencyRule = 'optional' | 'required'

/** Methods that may be retried after a connection error (RFC 9110 9.2.2). */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'PUT', 'DELETE'])

export type QueryRule =
  | { type: 'integer'; min: number; max: number; default?: number }
  | { type: 'string'; maxLength: number }
  | { type: 'enum'; values: readonly string[] }
  /** Comma-separated, each one of `values`, no empty item, no repeats (the contract's `with`). */
  | { type: 'list'; values: readonly string[] }
  | { type: 'boolean' }
  /** A UUID in any case, used lower-cased (the events filter `propertyId`). */
  | { type: 'uuid' }
  /** An RFC 3339 date-time with an offset, used as epoch milliseconds (a time between two milliseconds as their midpoint). */
  | { type: 'timestamp' }

export type QuerySpec = Readonly<Record<string, QueryRule>>

export type PathParamRule =
  /** Matched case-insensitively, used lower-cased. */
  | { type: 'uuid' }
  /** 1 to 128 characters of [A-Za-z0-9._~-]. */
  | { type: 'string' }
  /** `prefix` and a ULID (26 Crockford base32 characters, any case), e.g. an event id `evt_…` (docs/architecture.md §D29). */
  | { type: 'ulid'; prefix: string }

export type ParamsSpec = Readonly<Record<string, PathParamRule>>

/** A plain identifier: what a `string` path parameter (and an event's object id) may be. */
export const PLAIN_STRING = /^[A-Za-z0-9._~-]{1,128}$/

/**
 * `none`: any host, no key (health). `brand`: the host's brand and a key of it; no
 * `Service-Property-Id`. `property`: as `brand`, and `Service-Property-Id` names a property of
 * the brand that the key may use.
 */
export type Scope = 'none' | 'brand' | 'property'

export interface RoutePolicy {
  /** `facade`: answered by the gateway (properties, health); `proxy`: forwarded to a declared upstream. */
  readonly kind: 'facade' | 'proxy'
  /** The public path; a parameter is a whole segment `{name}`. */
  readonly path: string
  /** HEAD comes with GET. */
  readonly methods: readonly Method[]
  readonly scope: Scope
  /** Takes the authenticated steps: headers, API key, rate limit. */
  readonly auth: boolean
  readonly query: QuerySpec
  readonly pathParams: ParamsSpec
  /** What the body methods of the route may send; GET, HEAD and DELETE never take a body. */
  readonly body: 'none' | { readonly maxBytes: number }
  /** Upstreams the route reads from: a test key needs a sandbox of each (docs/architecture.md, "Test mode"). */
  readonly upstreams: readonly string[]
  /** For proxy routes: the declared upstream and the path it is called on. */
  readonly forward?: { readonly upstream: string; readonly path: string }
  /** The scope each method needs (HEAD: GET's); empty on routes that take no credential. */
  readonly scopes: Readonly<Partial<Record<Method, string>>>
  /** Declared routes with POST or PATCH: whether those methods need an Idempotency-Key. */
  readonly idempotency?: IdempotencyRule
  /** Any valid credential may call it: it needs no scope (`GET /v1/credential`). */
  readonly noScope?: true
  /** Set when the config deprecates the route (docs/architecture.md, "Deprecated and moved routes"). */
  readonly deprecation?: Deprecation
}

/** A route's deprecation, as the config file writes it: RFC 3339 times, a page on migrating, the route to use instead. */
export interface Deprecation {
  readonly since: string
  readonly sunset?: string
  readonly link?: string
  readonly replacement?: string
}

/** The Idempotency-Key rule of `method` on the route of `policy`; undefined where the header is ignored. */
export function idempotencyOf(policy: RoutePolicy, method: string): IdempotencyRule | undefined {
  return IDEMPOTENCY_METHODS.has(method) ? policy.idempotency : undefined
}

/** `<resource>:<action>`, e.g. `guests:read`. */
export const SCOPE_PATTERN = /^[a-z][a-z0-9-]*:[a-z][a-z0-9-]*$/

/**
 * The scope a route needs for `method` when nobody named one: `<resource>:read` for reads,
 * `<resource>:write` for writes, the resource being the first segment after `/v1/`
 * (`/v1/guests/{guestId}` -> `guests`).
 */
export function defaultScope(path: string, method: Method): string {
  const resource = path.split('/')[2] ?? ''
  return `${resource}:${method === 'GET' ? 'read' : 'write'}`
}

/** The scope `method` needs on the route of `policy` (HEAD needs GET's); undefined when it takes no credential. */
export function scopeOf(policy: RoutePolicy, method: string): string | undefined {
  return policy.scopes[(method === 'HEAD' ? 'GET' : method) as Method]
}

/** Every scope the routes need, sorted: the scopes a credential can be given. */
export function knownScopes(declared: readonly RoutePolicy[]): string[] {
  const all = new Set<string>()
  for (const policy of [...Object.values(builtInRoutes), ...Object.values(webhookRoutes), ...declared]) for (const scope of Object.values(policy.scopes)) all.add(scope)
  return [...all].sort()
}

export const DEFAULT_BODY_BYTES = 1024 * 1024

const KEBAB_SEGMENT = /^[a-z0-9]+(-[a-z0-9]+)*$/
const PARAM_SEGMENT = /^\{([a-z][A-Za-z0-9]*)\}$/

/** The names of the `{name}` segments of a path, in order. */
export function pathParameterNames(path: string): string[] {
  const names: string[] = []
  for (const segment of path.split('/')) {
    const match = PARAM_SEGMENT.exec(segment)
    if (match !== null) names.push(match[1] as string)
  }
  return names
}

/** `/v1/guests/{guestId}` as Fastify writes it: `/v1/guests/:guestId`. */
export function routerPath(path: string): string {
  return path.split('/').map((s) => {
    const match = PARAM_SEGMENT.exec(s)
    return match === null ? s : `:${match[1] as string}`
  }).join('/')
}

/** What is wrong with a path, or undefined. */
export function pathProblem(path: string): string | undefined {
  if (!path.startsWith('/v1/')) return 'must start with /v1/'
  const segments = path.slice(1).split('/')
  for (const segment of segments) {
    if (segment === '') return 'has an empty segment'
    if (!KEBAB_SEGMENT.test(segment) && !PARAM_SEGMENT.test(segment)) {
      return `segment '${segment}' is neither kebab-case nor a whole {camelCase} parameter`
    }
  }
  const names = pathParameterNames(path)
  if (new Set(names).size !== names.length) return 'names a parameter twice'
  return undefined
}

/** Every inconsistency of a policy; empty when it can be served. */
export function policyProblems(policy: RoutePolicy): string[] {
  const problems: string[] = []
  const path = pathProblem(policy.path)
  if (path !== undefined) problems.push(`path ${path}`)
  if (policy.methods.length === 0) problems.push('has no method')
  if (new Set(policy.methods).size !== policy.methods.length) problems.push('names a method twice')
  if (policy.scope === 'none' && policy.auth) problems.push('takes a key but no brand scope')
  if (policy.scope !== 'none' && !policy.auth) problems.push(`is ${policy.scope}-scoped but takes no key`)
  const takesBody = policy.methods.some((m) => BODY_METHODS.has(m))
  if (takesBody && policy.body === 'none') problems.push('has a body method but no body limit')
  if (!takesBody && policy.body !== 'none') problems.push('has a body limit but no POST, PUT or PATCH')
  if (policy.body !== 'none' && !(Number.isInteger(policy.body.maxBytes) && policy.body.maxBytes > 0)) problems.push('body.maxBytes must be a positive integer')
  const declared = Object.keys(policy.pathParams)
  const inPath = pathParameterNames(policy.path)
  for (const name of inPath) if (!declared.includes(name)) problems.push(`path parameter {${name}} has no rule`)
  for (const name of declared) if (!inPath.includes(name)) problems.push(`pathParams.${name} is not a segment of the path`)
  for (const [name, rule] of Object.entries(policy.query)) {
    if (rule.type === 'integer' && rule.min > rule.max) problems.push(`query.${name}: min is above max`)
    if ((rule.type === 'enum' || rule.type === 'list') && rule.values.length === 0) problems.push(`query.${name}: no values`)
  }
  if (policy.noScope === true && (!policy.auth || Object.keys(policy.scopes).length > 0)) problems.push('needs no scope, so takes a credential and names no scope')
  for (const method of policy.auth && policy.noScope !== true ? policy.methods : []) {
    const scope = policy.scopes[method]
    if (scope === undefined) problems.push(`names no scope for ${method}`)
    else if (!SCOPE_PATTERN.test(scope)) problems.push(`scope '${scope}' of ${method} is not <resource>:<action> (lower-case letters, digits and dashes)`)
  }
  for (const method of Object.keys(policy.scopes)) {
    if (!policy.auth) problems.push('takes no credential but names a scope')
    else if (!policy.methods.includes(method as Method)) problems.push(`names a scope for ${method}, which it does not take`)
  }
  // The gateway's own POSTs (webhook endpoints) honour the header as declared routes do.
  if (policy.idempotency !== undefined && !policy.methods.some((m) => IDEMPOTENCY_METHODS.has(m))) {
    problems.push('idempotency applies only to declared routes with POST or PATCH')
  }
  if (policy.kind === 'proxy') {
    // The property comes from Service-Property-Id alone, once checked; a path parameter of that
    // name would fill {propertyId} of the upstream path unchecked.
    if (inPath.includes('propertyId')) problems.push('path parameter {propertyId} is not allowed: the property comes from the Service-Property-Id header')
    if (policy.forward === undefined) problems.push('is a proxy route without an upstream')
    else {
      if (policy.forward.path.split('/').some((segment) => segment === '.' || segment === '..')) problems.push('upstreamPath has a dot segment')
      const allowed = new Set([...inPath, ...(policy.scope === 'property' ? ['propertyId'] : [])])
      for (const name of placeholders(policy.forward.path)) {
        if (!allowed.has(name)) problems.push(`upstreamPath placeholder {${name}} is neither a path parameter${policy.scope === 'property' ? ' nor {propertyId}' : ''}`)
      }
    }
  } else if (policy.forward !== undefined) {
    problems.push('is a facade route with an upstream path')
  }
  return problems
}

/** The `{name}` placeholders of an upstream path. */
export function placeholders(path: string): string[] {
  return [...path.matchAll(/\{([A-Za-z][A-Za-z0-9]*)\}/g)].map((m) => m[1] as string)
}

/** Stops the start on a policy that cannot be served (onRoute calls it for every route). */
export function assertPolicy(policy: RoutePolicy): void {
  const problems = policyProblems(policy)
  if (problems.length > 0) throw new Error(`route ${policy.methods.join(',')} ${policy.path}: ${problems.join('; ')}`)
}

// The built-in routes. Declared routes (config `routes`) join them in app.ts.

export const PER_PAGE_DEFAULT = 20
/** Keeps the PMS offset bounded: every distinct page is a PMS call (docs/security.md, "Big inputs"). */
export const PAGE_MAX = 10_000

const pageRules: QuerySpec = {
  page: { type: 'integer', min: 1, max: PAGE_MAX, default: 1 },
  perPage: { type: 'integer', min: 1, max: 100, default: PER_PAGE_DEFAULT },
}

// The event log (docs/architecture.md, "Events"): read from Redis, in the caller's brand and
// mode, so it needs no upstream and no sandbox.
const eventFilters: QuerySpec = {
  propertyId: { type: 'uuid' },
  createdAfter: { type: 'timestamp' },
  createdBefore: { type: 'timestamp' },
}

/** The prefix of an event id. */
export const EVENT_ID_PREFIX = 'evt_'

export const builtInRoutes = {
  health: {
    kind: 'facade', path: '/v1/health', methods: ['GET'], scope: 'none', auth: false,
    query: {}, pathParams: {}, body: 'none', upstreams: [], scopes: {},
  },
  listProperties: {
    kind: 'facade', path: '/v1/properties', methods: ['GET'], scope: 'brand', auth: true,
    query: pageRules, pathParams: {}, body: 'none', upstreams: ['pms'], scopes: { GET: 'properties:read' },
  },
  getProperty: {
    kind: 'facade', path: '/v1/properties/{propertyId}', methods: ['GET'], scope: 'brand', auth: true,
    query: {}, pathParams: { propertyId: { type: 'uuid' } }, body: 'none', upstreams: ['pms'], scopes: { GET: 'properties:read' },
  },
  // The partner's own credential (docs/partners.md, "Who am I: GET /v1/credential"): any valid one, no scope.
  getCredential: {
    kind: 'facade', path: '/v1/credential', methods: ['GET'], scope: 'brand', auth: true,
    query: {}, pathParams: {}, body: 'none', upstreams: [], scopes: {}, noScope: true,
  },
  listEvents: {
    kind: 'facade', path: '/v1/events', methods: ['GET'], scope: 'brand', auth: true,
    query: { ...pageRules, ...eventFilters }, pathParams: {}, body: 'none', upstreams: [], scopes: { GET: 'events:read' },
  },
  getEvent: {
    kind: 'facade', path: '/v1/events/{eventId}', methods: ['GET'], scope: 'brand', auth: true,
    query: {}, pathParams: { eventId: { type: 'ulid', prefix: EVENT_ID_PREFIX } }, body: 'none', upstreams: [], scopes: { GET: 'events:read' },
  },
} as const satisfies Record<string, RoutePolicy>

/** The prefix of a webhook endpoint's id. */
export const ENDPOINT_ID_PREFIX = 'we_'
/** The prefix of a webhook recovery's id. */
export const RECOVERY_ID_PREFIX = 'wr_'

const WEBHOOK_BODY: RoutePolicy['body'] = { maxBytes: 64 * 1024 }
const endpointParam: ParamsSpec = { endpointId: { type: 'ulid', prefix: ENDPOINT_ID_PREFIX } }

// Webhook endpoints (docs/partners.md, "Webhooks"): the gateway's own JSON bodies, validated
// by the gateway; POSTs honour Idempotency-Key. They read no upstream.
export const webhookRoutes = {
  webhookEndpoints: {
    kind: 'facade', path: '/v1/webhook-endpoints', methods: ['GET', 'POST'], scope: 'brand', auth: true,
    query: pageRules, pathParams: {}, body: WEBHOOK_BODY, upstreams: [], scopes: { GET: 'webhooks:read', POST: 'webhooks:write' }, idempotency: 'optional',
  },
  webhookEndpoint: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}', methods: ['GET', 'PATCH', 'DELETE'], scope: 'brand', auth: true,
    query: {}, pathParams: endpointParam, body: WEBHOOK_BODY, upstreams: [], scopes: { GET: 'webhooks:read', PATCH: 'webhooks:write', DELETE: 'webhooks:write' },
  },
  rotateWebhookSecret: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}/rotate-secret', methods: ['POST'], scope: 'brand', auth: true,
    query: {}, pathParams: endpointParam, body: WEBHOOK_BODY, upstreams: [], scopes: { POST: 'webhooks:write' }, idempotency: 'optional',
  },
  testWebhookEndpoint: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}/test', methods: ['POST'], scope: 'brand', auth: true,
    query: {}, pathParams: endpointParam, body: WEBHOOK_BODY, upstreams: [], scopes: { POST: 'webhooks:write' }, idempotency: 'optional',
  },
  listWebhookDeliveries: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}/deliveries', methods: ['GET'], scope: 'brand', auth: true,
    query: pageRules, pathParams: endpointParam, body: 'none', upstreams: [], scopes: { GET: 'webhooks:read' },
  },
  redeliverEvent: {
    kind: 'facade', path: '/v1/events/{eventId}/redeliver', methods: ['POST'], scope: 'brand', auth: true,
    query: {}, pathParams: { eventId: { type: 'ulid', prefix: EVENT_ID_PREFIX } }, body: WEBHOOK_BODY, upstreams: [], scopes: { POST: 'webhooks:write' }, idempotency: 'optional',
  },
  // Recovering a time range after an outage (docs/partners.md, "After an outage: recover").
  recoverWebhookEndpoint: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}/recover', methods: ['POST'], scope: 'brand', auth: true,
    query: {}, pathParams: endpointParam, body: WEBHOOK_BODY, upstreams: [], scopes: { POST: 'webhooks:write' }, idempotency: 'optional',
  },
  listWebhookRecoveries: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}/recoveries', methods: ['GET'], scope: 'brand', auth: true,
    query: pageRules, pathParams: endpointParam, body: 'none', upstreams: [], scopes: { GET: 'webhooks:read' },
  },
  webhookRecovery: {
    kind: 'facade', path: '/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}', methods: ['GET', 'DELETE'], scope: 'brand', auth: true,
    query: {}, pathParams: { ...endpointParam, recoveryId: { type: 'ulid', prefix: RECOVERY_ID_PREFIX } }, body: 'none', upstreams: [], scopes: { GET: 'webhooks:read', DELETE: 'webhooks:write' },
  },
} as const satisfies Record<string, RoutePolicy>

/**
 * `GET /v1/events` of a gateway whose config names these public event types: `type` filters by
 * one of them (any other value is refused). With none configured the log is empty and the
 * route takes no `type`.
 */
export function eventListPolicy(publicTypes: readonly string[]): RoutePolicy {
  if (publicTypes.length === 0) return builtInRoutes.listEvents
  return { ...builtInRoutes.listEvents, query: { ...pageRules, type: { type: 'enum', values: [...publicTypes] }, ...eventFilters } }
}
