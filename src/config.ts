import { readFileSync } from 'node:fs'
import { z } from 'zod'

// The one source of truth for every setting: the README's configuration reference is
// generated from these schemas (scripts/generate-docs.ts), and a test keeps it current.

const positiveInt = z.number().int().positive()

const brandSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'lower-case letters, digits and dashes').describe('Brand id, as given to the key tool'),
  chainCode: z.string().min(1).describe('The PMS chain code of this brand'),
  hosts: z.array(z.string().min(1)).min(1).describe('Host names that select this brand (matched lower-cased, port removed)'),
  docsUrl: z.url().optional().describe("This brand's documentation base URL for problem `type` links"),
})

export const fileSchema = z.strictObject({
  docsUrl: z.url().describe('Documentation base URL; problem `type` links are `{docsUrl}/errors/<code>`'),
  brands: z.array(brandSchema).min(1).describe('Brands, each selected by host name'),
  accessDeniedStatus: z.union([z.literal(403), z.literal(404)], { error: 'must be 403 or 404' }).default(403)
    .describe('Status for a property of the brand that the key may not use: 403 PROPERTY_ACCESS_DENIED or 404 PROPERTY_NOT_FOUND'),
  trustProxy: z.boolean().default(false).describe('Believe `X-Forwarded-Host` and `X-Forwarded-For`'),
  upstream: z.strictObject({
    timeoutMs: positiveInt.default(2000).describe('Deadline of one PMS call, headers and body'),
    connections: positiveInt.default(64).describe('Keep-alive connections to each PMS'),
    retries: z.number().int().min(0).max(3).default(1).describe('Retries of a read after a connection error'),
    maxInFlight: positiveInt.default(256).describe('PMS calls in flight per upstream; over it, 503 at once'),
  }).prefault({}),
  breaker: z.strictObject({
    errorThresholdPercentage: z.number().min(1).max(100).default(50).describe('Failure percentage that opens the circuit'),
    volumeThreshold: z.number().int().min(0).default(10).describe('Calls in the rolling window before the circuit may open'),
    resetTimeoutMs: positiveInt.default(10000).describe('Open time before a trial call (half-open)'),
    rollingCountTimeoutMs: positiveInt.default(10000).describe('Length of the rolling statistics window'),
  }).prefault({}),
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
    maxEventLoopDelayMs: z.number().int().min(0).default(1000).describe('Event-loop delay above which the API sheds load with 503 and health is unhealthy; 0 turns it off'),
    maxEventLoopUtilization: z.number().min(0).max(1).default(0).describe('Event-loop utilisation (0-1) above which load is shed; 0 turns it off'),
    sampleIntervalMs: positiveInt.default(1000).describe('How often the event loop is sampled'),
  }).prefault({}),
  shutdown: z.strictObject({
    drainMs: z.number().int().min(0).default(5000).describe('After SIGTERM, keep serving (health unhealthy) this long so load balancers move away'),
    timeoutMs: positiveInt.default(10000).describe('Exit before this, whatever is still open'),
  }).prefault({}),
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
  file.brands.forEach((brand, i) => {
    if (ids.has(brand.id)) ctx.addIssue({ code: 'custom', path: ['brands', i, 'id'], message: `duplicate brand id '${brand.id}'` })
    ids.add(brand.id)
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
  PMS_SANDBOX_URL: optionalUrl.describe('Sandbox PMS for `svc_test_` keys; without it they read from `PMS_URL`'),
  PMS_SANDBOX_TOKEN: z.string().min(1).optional().describe('Token for the sandbox PMS (required with `PMS_SANDBOX_URL`)'),
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

export interface Config extends FileConfig {
  port: number
  host: string
  adminPort: number
  adminHost: string
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
  if (problems.length > 0 || file === undefined || !envResult.success) throw new ConfigError(problems)

  const e = envResult.data
  return {
    ...file,
    port: e.PORT,
    host: e.HOST,
    adminPort: e.ADMIN_PORT,
    adminHost: e.ADMIN_HOST,
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

// An empty variable counts as unset, as shells and compose files often leave them.
function pickEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const picked: Record<string, string> = {}
  for (const name of Object.keys(envSchema.shape)) {
    const value = env[name]
    if (value !== undefined && value !== '') picked[name] = value
  }
  return picked
}
