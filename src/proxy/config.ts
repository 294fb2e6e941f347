import { z } from 'zod'
import { httpUrl, positiveInt, readEnv, type SectionCheck } from '../config/fields.js'
import {
  BODY_METHODS, builtInRoutes, DEFAULT_BODY_BYTES, defaultScope, IDEMPOTENCY_METHODS, METHODS, policyProblems, SCOPE_PATTERN,
  type Method, type QueryRule, type RoutePolicy,
} from '../routes/policy.js'
import { deprecationOf, routeLifecycleFields } from '../lifecycle/config.js'
import { breakerFields, type BreakerConfig, type UpstreamSettings, type UpstreamUrl } from '../upstream/config.js'
import type { ReloadRules } from '../config/reload-rules.js'

// Declared routes' section of the configuration (docs/architecture.md, "Configuration";
// docs/operations.md, "Declaring a route"): the services behind them and the routes
// themselves, each of which becomes a route policy. Tokens come from the environment, never
// the file.

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
  ...routeLifecycleFields,
})

export type DeclaredRouteConfig = z.infer<typeof declaredRouteSchema>
export type DeclaredUpstreamConfig = z.infer<typeof declaredUpstreamSchema>

/** A declared route as the pipeline sees it. */
export function policyOf(route: DeclaredRouteConfig): RoutePolicy {
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
    ...(route.deprecated === undefined ? {} : { deprecation: deprecationOf(route.deprecated, route.replacement) }),
  }
}

export const proxyFileFields = {
  upstreams: z.record(z.string().regex(/^[a-z][a-z0-9-]*$/, 'must be lower-case letters, digits and dashes'), declaredUpstreamSchema).default({})
    .describe('Internal services behind declared routes, by name'),
  routes: z.array(declaredRouteSchema).default([]).describe('Declared routes, forwarded to an upstream under the partner contract'),
}

/** The router's view of a path: `/v1/a/{x}` and `/v1/a/{y}` are the same route. */
function routeShape(path: string): string {
  return path.replace(/\{[^}]*\}/g, '{}')
}

const BUILT_IN_SHAPES = Object.values(builtInRoutes).map((r) => routeShape(r.path))

export const checkProxy: SectionCheck<typeof proxyFileFields> = (file, ctx) => {
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
}

/** `bookings` -> `UPSTREAM_BOOKINGS_`, `guest-service` -> `UPSTREAM_GUEST_SERVICE_`. */
export function upstreamEnvPrefix(name: string): string {
  return `UPSTREAM_${name.toUpperCase().replaceAll('-', '_')}_`
}

/**
 * The declared upstreams' URLs in force, the environment's overrides included, read from the
 * file as given: their rules are reported with every other bad field, even when the file has
 * others. An override that is no http(s) URL is a problem of its own.
 */
export function declaredUpstreamUrls(raw: unknown, configFile: string, env: NodeJS.ProcessEnv, problems: string[]): UpstreamUrl[] {
  const urls: UpstreamUrl[] = []
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

/** The PMS's settings, which a declared upstream takes where it sets none of its own. */
interface Defaults {
  upstream: Omit<UpstreamSettings, 'breaker'>
  breaker: BreakerConfig
}

// Declared upstreams: the file's settings, the PMS's where unset, URLs and tokens from the
// environment (tokens never come from the file).
export function resolveUpstreams(upstreams: Record<string, DeclaredUpstreamConfig>, defaults: Defaults, env: NodeJS.ProcessEnv, problems: string[], requireTokens: boolean): Record<string, ServiceUpstream> {
  const resolved: Record<string, ServiceUpstream> = {}
  for (const [name, declared] of Object.entries(upstreams)) {
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
      timeoutMs: declared.timeoutMs ?? defaults.upstream.timeoutMs,
      connections: declared.connections ?? defaults.upstream.connections,
      retries: declared.retries ?? defaults.upstream.retries,
      maxInFlight: declared.maxInFlight ?? defaults.upstream.maxInFlight,
      maxInFlightPerCredential: declared.maxInFlightPerCredential,
      responseTimeoutMs: declared.responseTimeoutMs,
      breaker: { ...defaults.breaker, ...declared.breaker },
    }
  }
  return resolved
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const proxyReload: ReloadRules = {
  reloadable: {
    upstreams: 'the next call: a changed upstream gets a new pool, and the old one closes once its calls are done',
    routes: 'the next request: routes added answer, routes removed answer 404, and each route\'s scopes are the new ones',
  },
  restartOnly: {},
}
