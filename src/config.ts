import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { z } from 'zod'
import { BODY_METHODS, builtInRoutes, DEFAULT_BODY_BYTES, METHODS, policyProblems, type QueryRule, type RoutePolicy } from './routes/policy.js'

// The one source of truth for every setting: the README's configuration reference is
// generated from these schemas (scripts/generate-docs.ts), and a test keeps it current.

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
  }
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
  }).prefault({}),
  abuse: z.strictObject({
    authFailuresPerMinute: positiveInt.default(600)
      .describe('401 answers one client address may get in a minute; past it, 429 RATE_LIMITED at once, before any key look-up, until its minute ends'),
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
    if (BUILT_IN_SHAPES.includes(shape) || shape.startsWith('/v1/properties/')) {
      ctx.addIssue({ code: 'custom', path: at('path'), message: 'would shadow a built-in route (/v1/properties…, /v1/health)' })
    }
    if (route.body !== undefined && !route.methods.some((m) => BODY_METHODS.has(m))) {
      ctx.addIssue({ code: 'custom', path: at('body'), message: 'only routes with POST, PUT or PATCH take a body' })
    }
    for (const problem of policyProblems(policyOf(route))) {
      if (problem.startsWith('has a body') || problem.startsWith('body.maxBytes')) continue
      ctx.addIssue({ code: 'custom', path: at(), message: problem })
    }
  })
})

const port = z.coerce.number().int().min(0).max(65535)
const hostPortList = z.string().regex(/^\s*(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}\s*(,\s*(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}\s*)*$/,
  'a comma-separated list of host:port')
const optionalUrl = z.url({ protocol: /^https?$/ }).optional()

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
  CONFIG_FILE: z.string().min(1).default('config/default.json').describe('Path of the JSON config file'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('pino log level'),
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
  // A Cluster has database 0 only.
  if (env.REDIS_CLUSTER_NODES !== undefined && /^rediss?:\/\/[^/]*\/[1-9]/.test(env.REDIS_URL ?? '')) {
    problems.push('environment REDIS_URL: a Redis Cluster has no database but 0')
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
  /** `npm start` needs the token of every upstream with a `tokenHeader`; the key tool does not. */
  requireTokens?: boolean
  /** Settings given in code win over the file (tests). */
  overrides?: Partial<FileConfig>
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
  if (raw !== undefined) {
    const merged = options.overrides !== undefined && typeof raw === 'object' && raw !== null ? { ...raw, ...options.overrides } : raw
    const fileResult = fileSchema.safeParse(merged)
    if (fileResult.success) file = fileResult.data
    else problems.push(...describeIssues(configFile, fileResult.error))
  }
  if (options.requirePms === true && envResult.success && envResult.data.PMS_URL === undefined) {
    problems.push('environment PMS_URL: required to start the gateway')
  }
  const upstreams = file === undefined ? {} : resolveUpstreams(file, env, problems, options.requireTokens === true)
  if (problems.length > 0 || file === undefined || !envResult.success) throw new ConfigError(problems)

  const e = envResult.data
  return {
    ...file,
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
  }
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

/** `bookings` -> `UPSTREAM_BOOKINGS_`, `guest-service` -> `UPSTREAM_GUEST_SERVICE_`. */
export function upstreamEnvPrefix(name: string): string {
  return `UPSTREAM_${name.toUpperCase().replaceAll('-', '_')}_`
}

// Declared upstreams: the file's settings, the PMS's where unset, URLs and tokens from the
// environment (tokens never come from the file).
function resolveUpstreams(file: FileConfig, env: NodeJS.ProcessEnv, problems: string[], requireTokens: boolean): Record<string, ServiceUpstream> {
  const resolved: Record<string, ServiceUpstream> = {}
  const read = (name: string): string | undefined => (env[name] === '' ? undefined : env[name])
  for (const [name, declared] of Object.entries(file.upstreams)) {
    const prefix = upstreamEnvPrefix(name)
    const url = read(`${prefix}URL`) ?? declared.url
    const sandboxUrl = read(`${prefix}SANDBOX_URL`) ?? declared.sandboxUrl
    for (const [variable, value] of [[`${prefix}URL`, url], [`${prefix}SANDBOX_URL`, sandboxUrl]] as const) {
      if (value !== undefined && !httpUrl.safeParse(value).success) problems.push(`environment ${variable}: must be an http(s) URL`)
    }
    // The proxy tells live from sandbox calls by origin; one origin for both would send test keys to live data.
    if (sandboxUrl !== undefined && originOf(sandboxUrl) === originOf(url)) {
      problems.push(`upstreams.${name}: sandboxUrl must be another origin than url`)
    }
    const token = read(`${prefix}TOKEN`)
    const sandboxToken = read(`${prefix}SANDBOX_TOKEN`)
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
