import { z } from 'zod'
import { optionalUrl, positiveInt, readEnv } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The upstream calls' section of the configuration (docs/architecture.md, "Configuration"):
// the PMS's pool and breaker settings, which every declared upstream takes where it sets none
// of its own, where the PMS is (the environment alone names it), and the rules every upstream's
// URL keeps.

export const breakerFields = {
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

export const upstreamFileFields = {
  upstream: z.strictObject({
    timeoutMs: positiveInt.default(2000).describe('Deadline of one PMS call, headers and body'),
    connections: positiveInt.default(64).describe('Keep-alive connections to each PMS'),
    retries: z.number().int().min(0).max(3).default(1).describe('Retries of a read after a connection error'),
    maxInFlight: positiveInt.default(256).describe('PMS calls in flight per upstream; over it, 503 at once'),
  }).prefault({}),
  breaker: breakerSchema.prefault({}),
}

export type BreakerConfig = z.infer<typeof breakerSchema>

export const pmsEnvFields = {
  PMS_URL: optionalUrl.describe('PMS base URL (required by `npm start`)'),
  PMS_TOKEN: z.string().min(1).optional().describe('Sent as `X-PMS-Service-Token` (required with `PMS_URL`)'),
  PMS_SANDBOX_URL: optionalUrl.describe('Sandbox PMS for `svc_test_` keys; without it they get 403 TEST_MODE_UNAVAILABLE on every route that reads the PMS'),
  PMS_SANDBOX_TOKEN: z.string().min(1).optional().describe('Token for the sandbox PMS (required with `PMS_SANDBOX_URL`)'),
}

// Checked on the raw values, so that they are reported even when another variable is bad.
export function pmsEnvProblems(env: Record<string, string>): string[] {
  const problems: string[] = []
  if (env.PMS_URL !== undefined && env.PMS_TOKEN === undefined) problems.push('environment PMS_TOKEN: required when PMS_URL is set')
  if (env.PMS_SANDBOX_URL !== undefined && env.PMS_SANDBOX_TOKEN === undefined) {
    problems.push('environment PMS_SANDBOX_TOKEN: required when PMS_SANDBOX_URL is set')
  }
  return problems
}

export interface UpstreamTarget { url: string; token: string }

/** The PMS and its sandbox, as the environment names them. */
export function pmsTargets(e: z.infer<z.ZodObject<typeof pmsEnvFields>>): { pms: UpstreamTarget | undefined; pmsSandbox: UpstreamTarget | undefined } {
  return {
    pms: e.PMS_URL !== undefined && e.PMS_TOKEN !== undefined ? { url: e.PMS_URL, token: e.PMS_TOKEN } : undefined,
    pmsSandbox: e.PMS_SANDBOX_URL !== undefined && e.PMS_SANDBOX_TOKEN !== undefined
      ? { url: e.PMS_SANDBOX_URL, token: e.PMS_SANDBOX_TOKEN }
      : undefined,
  }
}

export interface UpstreamSettings {
  timeoutMs: number
  connections: number
  retries: number
  maxInFlight: number
  breaker: BreakerConfig
}

/** Whether a URL is https:, or http: to this machine (where no network sees the traffic). */
export function isLoopbackOrTls(url: string): boolean {
  const { protocol, hostname } = new URL(url)
  if (protocol !== 'http:') return true
  const host = hostname.replace(/^\[|\]$/g, '')
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/** Where an upstream URL was set, as a problem names it, and whether it is a sandbox's. */
export interface UpstreamUrl {
  /** `environment UPSTREAM_BOOKINGS_URL`, `config/default.json upstreams.bookings.sandboxUrl`, `environment PMS_URL`. */
  source: string
  url: string
  sandbox: boolean
}

/** The PMS's URLs in force (the environment alone sets them). */
export function pmsUrls(env: NodeJS.ProcessEnv): UpstreamUrl[] {
  const urls: UpstreamUrl[] = []
  for (const [variable, sandbox] of [['PMS_URL', false], ['PMS_SANDBOX_URL', true]] as const) {
    const value = readEnv(env, variable)
    if (value !== undefined) urls.push({ source: `environment ${variable}`, url: value, sandbox })
  }
  return urls
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
export function upstreamUrlProblems(urls: readonly UpstreamUrl[]): string[] {
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

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const upstreamReload: ReloadRules = {
  reloadable: {},
  restartOnly: {
    upstream: 'the PMS pools are made once at start (PMS_URL comes from the environment)',
    breaker: 'the circuit breakers of the PMS pools are made with them at start',
  },
}
