import { readFileSync } from 'node:fs'
import { z } from 'zod'
import { adminEnvFields } from './admin/config.js'
import { composeRules, type ReloadRules } from './config/reload-rules.js'
import { describeIssues } from './config/fields.js'
import { processEnvFields, redisEnvFields, redisEnvProblems, redisSettings, type RedisSettings } from './config/process.js'
import { credentialsFileFields, credentialsReload } from './credentials/config.js'
import { checkEvents, eventFields, eventsReload, resolvePublishers, type EventPublisher } from './events/config.js'
import { checkHttp, httpEnvFields, httpFileFields, httpReload } from './http/config.js'
import { idempotencyFileFields, idempotencyReload } from './idempotency/config.js'
import { keysFileFields, keysReload } from './keys/config.js'
import { checkLifecycle, lifecycleFileFields, lifecycleReload } from './lifecycle/config.js'
import { oauthEnvFields, oauthEnvProblems, oauthFileFields, oauthReload, oauthWithEnv } from './oauth/config.js'
import { portalFileFields, portalReload } from './portal/config.js'
import { propertiesFileFields, propertiesReload } from './properties/config.js'
import { checkProxy, declaredUpstreamUrls, policyOf, proxyFileFields, proxyReload, resolveUpstreams, type ServiceUpstream } from './proxy/config.js'
import { rateLimitFileFields, rateLimitReload } from './ratelimit/config.js'
import { requestLogFileFields, requestLogReload } from './request-log/config.js'
import type { RoutePolicy } from './routes/policy.js'
import { tracingEnvFields, tracingEnvProblems, tracingSettings, type TracingSettings } from './tracing/config.js'
import { pmsEnvFields, pmsEnvProblems, pmsTargets, pmsUrls, upstreamFileFields, upstreamReload, upstreamUrlProblems, type UpstreamTarget } from './upstream/config.js'
import { webhookEnvFields, webhookFields, webhookKeyProblems, webhookKeys, webhooksReload, type WebhookKeys } from './webhooks/config.js'

// The configuration's top (docs/architecture.md, "Configuration"). Each capability's folder
// owns its section: the schema of its fields with their defaults and meanings, the checks
// across them, and the environment variables it reads. This file composes the sections into
// the one schema of the file and the one of the environment, reads both, and fails once,
// naming every bad field. The configuration reference of docs/operations.md is generated from
// these two schemas (scripts/generate-docs.ts), and a test keeps it current.

export const fileSchema = z.strictObject({
  ...httpFileFields,
  ...propertiesFileFields,
  ...upstreamFileFields,
  ...keysFileFields,
  ...rateLimitFileFields,
  ...proxyFileFields,
  ...oauthFileFields,
  ...idempotencyFileFields,
  ...credentialsFileFields,
  // Its checks across fields run whatever else is bad in it (src/events/config.ts).
  events: z.strictObject({ ...eventFields, ...webhookFields }).check(z.superRefine(checkEvents, { when: () => true })).prefault({})
    .describe('Events: the internal services that publish to `POST /events` on the admin port, how their types map to public ones, and how long the log keeps them'),
  ...portalFileFields,
  ...requestLogFileFields,
  ...lifecycleFileFields,
}).superRefine((file, ctx) => {
  checkHttp(file, ctx)
  checkProxy(file, ctx)
  // Replacements and moves name the declared routes too: a rule across sections.
  checkLifecycle(file, ctx)
})

/**
 * What a reload may change, composed as the schema is from each section's own rules
 * (src/config/reload-rules.ts); everything from the environment needs a restart.
 */
export const reloadRules: ReloadRules = composeRules(
  httpReload, propertiesReload, upstreamReload, keysReload, rateLimitReload, proxyReload, oauthReload, idempotencyReload,
  credentialsReload, eventsReload, webhooksReload, portalReload, requestLogReload, lifecycleReload,
)

export const envSchema = z.object({
  ...httpEnvFields,
  ...adminEnvFields,
  ...redisEnvFields,
  ...pmsEnvFields,
  ...webhookEnvFields,
  ...processEnvFields,
  ...oauthEnvFields,
  ...tracingEnvFields,
})

// Checked on the raw values, so that they are reported even when another variable is bad
// (zod skips refinements of an object whose fields failed).
function pairedVariables(env: Record<string, string>): string[] {
  return [...redisEnvProblems(env), ...pmsEnvProblems(env), ...oauthEnvProblems(env), ...tracingEnvProblems(env)]
}

export type FileConfig = z.infer<typeof fileSchema>
/** The file as written, before defaults: what tests and tools give as overrides. */
export type FileConfigInput = z.input<typeof fileSchema>
export type EnvConfig = z.infer<typeof envSchema>

export interface Config extends Omit<FileConfig, 'upstreams' | 'routes'>, RedisSettings, WebhookKeys {
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
  logLevel: EnvConfig['LOG_LEVEL']
  configFile: string
  pms: UpstreamTarget | undefined
  pmsSandbox: UpstreamTarget | undefined
  tracing: TracingSettings | undefined
  /** The publishers of `events`, with their tokens. */
  eventPublishers: EventPublisher[]
  /** Whether this instance serves the public port and delivers webhooks (EVENTS_WORKER, else `events.workers`). */
  eventsWorker: 'on' | 'off' | 'only'
}

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`invalid configuration: ${problems.join('; ')}`)
    this.name = 'ConfigError'
  }
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
  problems.push(...upstreamUrlProblems([...pmsUrls(env), ...declaredUpstreamUrls(merged, configFile, env, problems)]))
  const upstreams = file === undefined ? {} : resolveUpstreams(file.upstreams, file, env, problems, options.requireTokens === true)
  const eventPublishers = file === undefined ? [] : resolvePublishers(file.events.publishers, env, envResult.success ? envResult.data.ADMIN_TOKEN : undefined, problems)
  if (options.requireTokens === true && file !== undefined) problems.push(...webhookKeyProblems(file.events.types.length, picked))
  if (problems.length > 0 || file === undefined || !envResult.success) throw new ConfigError(problems)

  const e = envResult.data
  return {
    ...file,
    oauth: oauthWithEnv(file.oauth, e),
    upstreams,
    routes: file.routes.map(policyOf),
    port: e.PORT,
    host: e.HOST,
    adminPort: e.ADMIN_PORT,
    adminHost: e.ADMIN_HOST,
    adminToken: e.ADMIN_TOKEN,
    ...redisSettings(e),
    logLevel: e.LOG_LEVEL,
    configFile,
    ...pmsTargets(e),
    tracing: tracingSettings(e),
    eventPublishers,
    eventsWorker: e.EVENTS_WORKER ?? (file.events.workers ? 'on' : 'off'),
    ...webhookKeys(e),
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

// What other modules name by the top's path; each lives with its section.
export type { HostPort } from './config/process.js'
export { normaliseHost, type BrandConfig } from './http/config.js'
export { TOKEN_ALGORITHMS, type IssuerConfig, type OAuthConfig } from './oauth/config.js'
export { DATA_PATH, EVENT_TYPE_PATTERN, RESERVED_EVENT_TYPES, type EventPublisher, type EventTypeConfig } from './events/config.js'
export { policyOf, upstreamEnvPrefix, type ServiceUpstream } from './proxy/config.js'
export { SAMPLERS, parseKeyValueList, type SamplerName, type TracingSettings } from './tracing/config.js'
export { isLoopbackOrTls, serverOf, type UpstreamSettings, type UpstreamTarget } from './upstream/config.js'
