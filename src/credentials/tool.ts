import { userInfo } from 'node:os'
import { Writable } from 'node:stream'
import { parseArgs } from 'node:util'
import pino from 'pino'
import { ConfigError, loadConfig, type Config } from '../config.js'
import { createRedis, redisMode, redisTarget, type RedisTarget } from '../redis.js'
import { RedisKeyStore } from '../keys/store.js'
import { EndpointStore } from '../webhooks/endpoints.js'
import { AuditTrail, RedisAuditStore } from './audit.js'
import type { CredentialView, FieldName, UsageView, AuditEntry } from './schemas.js'
import { CredentialInputError, CredentialNotFound, CredentialService, instantMillis, knownOf, parseOverlap, type Label } from './service.js'
import { RedisUsageStore } from './usage.js'
import { portalOrigins } from '../portal/config.js'
import type { PortalField } from '../portal/schemas.js'
import { PortalSessionLimitReached, PortalSessions, type EndReason, type PortalLabel } from '../portal/sessions.js'
import { PortalSessionStore } from '../portal/store.js'

// The API-key tool (`npm run keys -- …`): create, list, show, update, roll, suspend, resume,
// revoke keys; grant-client registers the client of OAuth 2.0 access tokens (a grant,
// `cli_…`), which list, show, update, suspend, resume and revoke take as they take keys;
// usage and audit read what happened. Every rule is the credentials service's
// (credentials/service.ts), the same as the credentials API's.
// Exit codes: 0 done, 1 Redis unreachable, 2 the request itself is wrong. Every message
// is one line; a plain key is printed once, by `create` or `roll`, and stored nowhere. Each
// change is written to the audit trail and, as a log line, to stderr (LOG_LEVEL=warn or
// silent leaves it out).

export interface ToolOutput {
  out: (line: string) => void
  err: (line: string) => void
}

class UsageError extends Error {}

const USAGE = 'usage: keys create --brand <id> --mode live|test (--properties <uuid,...> | --all-properties) [--name <text>] [--expires-at <ISO 8601>] [--rate-limit <n>] [--scopes <scope,...>] [--allow-ips <cidr,...>] [--actor <name>] [--json]'
  + ' | grant-client --issuer <iss> --client-id <id> --brand <id> --mode live|test (--properties <uuid,...> | --all-properties) [--scopes <scope,...>] [--name <text>] [--rate-limit <n>] [--allow-ips <cidr,...>] [--actor <name>] [--json]'
  + ' | list [--brand <id>] [--json] | show <keyId|grantId> [--json]'
  + ' | update <keyId|grantId> [--name <text>] [--scopes <scope,...>] [--properties <uuid,...> | --all-properties] [--rate-limit <n> | --default-rate-limit] [--expires-at <ISO 8601> | --no-expiry] [--allow-ips <cidr,...> | --any-ip] [--actor <name>] [--json]'
  + ' | roll <keyId> [--overlap <duration>] [--actor <name>] [--json] | end-overlap <keyId> [--actor <name>]'
  + ' | suspend <keyId|grantId> | resume <keyId|grantId> | revoke <keyId|grantId> [--actor <name>]'
  + ' | usage <keyId|grantId> [--days <n>] [--json] | audit [--id <keyId|grantId>] [--since <ISO 8601>] [--json]'
  + ' | portal-link <keyId|grantId> [--expires <duration>] [--capabilities <c,...>] [--label <text>] [--actor <name>] [--json]'

/** The flags of each field, as messages name them. */
const FLAGS: Record<FieldName, string> = {
  type: 'the command', brand: '--brand', mode: '--mode', properties: '--properties', scopes: '--scopes', name: '--name',
  expiresAt: '--expires-at', rateLimit: '--rate-limit', allowedIps: '--allow-ips', issuer: '--issuer', clientId: '--client-id', overlap: '--overlap',
}
const FLAG_LABEL: Label = (field) => FLAGS[field]

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        brand: { type: 'string' },
        mode: { type: 'string' },
        properties: { type: 'string' },
        'all-properties': { type: 'boolean' },
        name: { type: 'string' },
        'expires-at': { type: 'string' },
        'no-expiry': { type: 'boolean' },
        'rate-limit': { type: 'string' },
        'default-rate-limit': { type: 'boolean' },
        scopes: { type: 'string' },
        issuer: { type: 'string' },
        'client-id': { type: 'string' },
        'allow-ips': { type: 'string' },
        'any-ip': { type: 'boolean' },
        overlap: { type: 'string' },
        actor: { type: 'string' },
        days: { type: 'string' },
        id: { type: 'string' },
        since: { type: 'string' },
        expires: { type: 'string' },
        capabilities: { type: 'string' },
        label: { type: 'string' },
        json: { type: 'boolean' },
      },
    })
  } catch (error) {
    // One line, whatever node:util wrote.
    throw new UsageError((error as Error).message.replace(/\s*\n\s*/g, ' '))
  }
}

type Parsed = ReturnType<typeof parse>
type Values = Parsed['values']

const list = (text: string): string[] => text.split(',').map((part) => part.trim())

function refuseFlags(values: Values, command: string, flags: (keyof Values)[]): void {
  const given = flags.find((flag) => values[flag] !== undefined)
  if (given !== undefined) throw new UsageError(`${command} takes no --${given}`)
}

/** At most one of two flags that set one field. */
function oneOf(values: Values, a: keyof Values, b: keyof Values): void {
  if (values[a] !== undefined && values[b] !== undefined) throw new UsageError(`--${a} and --${b} cannot be combined`)
}

function propertiesOf(values: Values, command: string): string[] | '*' {
  if ((values.properties === undefined) === (values['all-properties'] !== true)) {
    throw new UsageError(`${command} needs exactly one of --properties <uuid,...> and --all-properties`)
  }
  return values.properties === undefined ? '*' : list(values.properties)
}

function rateLimitOf(value: string): number {
  if (!/^[1-9][0-9]*$/.test(value)) throw new UsageError('--rate-limit takes a whole number of requests above 0')
  return Number(value)
}

/** The fields of `create` and `grant-client` as the credentials service takes them. */
function createInput(values: Values, command: string): Record<string, unknown> {
  if (values.brand === undefined) throw new UsageError(`${command} needs --brand`)
  if (values.mode !== 'live' && values.mode !== 'test') throw new UsageError(`${command} needs --mode live or --mode test`)
  const input: Record<string, unknown> = { brand: values.brand, mode: values.mode, properties: propertiesOf(values, command) }
  if (values.name !== undefined) input.name = values.name
  if (values['rate-limit'] !== undefined) input.rateLimit = rateLimitOf(values['rate-limit'])
  if (values.scopes !== undefined) input.scopes = list(values.scopes)
  if (values['allow-ips'] !== undefined) input.allowedIps = list(values['allow-ips'])
  return input
}

function updateInput(values: Values): Record<string, unknown> {
  oneOf(values, 'properties', 'all-properties')
  oneOf(values, 'rate-limit', 'default-rate-limit')
  oneOf(values, 'expires-at', 'no-expiry')
  oneOf(values, 'allow-ips', 'any-ip')
  const input: Record<string, unknown> = {}
  if (values.name !== undefined) input.name = values.name
  if (values.scopes !== undefined) input.scopes = values.scopes === '*' ? '*' : list(values.scopes)
  if (values.properties !== undefined) input.properties = list(values.properties)
  if (values['all-properties'] === true) input.properties = '*'
  if (values['rate-limit'] !== undefined) input.rateLimit = rateLimitOf(values['rate-limit'])
  if (values['default-rate-limit'] === true) input.rateLimit = null
  if (values['expires-at'] !== undefined) input.expiresAt = values['expires-at']
  if (values['no-expiry'] === true) input.expiresAt = null
  if (values['allow-ips'] !== undefined) input.allowedIps = list(values['allow-ips'])
  if (values['any-ip'] === true) input.allowedIps = null
  if (Object.keys(input).length === 0) {
    throw new UsageError('update needs a change: --name, --scopes, --properties or --all-properties, --rate-limit or --default-rate-limit, --expires-at or --no-expiry, --allow-ips or --any-ip')
  }
  return input
}

function propertiesText(properties: string[] | '*'): string {
  return properties === '*' ? 'all properties' : `${properties.length} propert${properties.length === 1 ? 'y' : 'ies'}`
}

/** One line of `list` and `show`. */
function describe(view: CredentialView): string {
  return [
    view.id, view.brand, view.mode, view.status, propertiesText(view.properties),
    view.type === 'oauth_client' ? `client ${JSON.stringify(view.clientId)} of ${String(view.issuer)}` : `expires ${view.expiresAt ?? 'never'}`,
    `rate limit ${view.rateLimit ?? 'default'}`,
    `scopes ${view.scopes === '*' ? '*' : view.scopes.join(',')}`,
    `created ${view.createdAt}`,
    `from ${view.allowedIps === null ? 'any address' : view.allowedIps.join(',')}`,
    `last used ${view.lastUsedAt ?? 'never'}`,
    view.previousSecretExpiresAt === null ? '' : `previous secret until ${view.previousSecretExpiresAt} (last used ${view.previousSecretLastUsedAt ?? 'never'})`,
    view.name === null ? '' : JSON.stringify(view.name),
  ].filter((part) => part !== '').join('  ')
}

function changeText(changes: AuditEntry['changes']): string {
  const value = (v: unknown): string => (v === null ? 'none' : typeof v === 'string' ? v : JSON.stringify(v))
  return Object.entries(changes).map(([field, { old, new: now }]) => `${field} ${value(old)} → ${value(now)}`).join('; ')
}

function usageLines(usage: UsageView): string[] {
  if (usage.rows.length === 0) return [`no requests counted for ${usage.id} from ${usage.from} to ${usage.to}`]
  const header = ['date', 'route', '2xx', '3xx', '4xx', '429', '5xx', 'total']
  const rows = usage.rows.map((r) => [r.date, r.route, ...(['2xx', '3xx', '4xx', '429', '5xx', 'total'] as const).map((c) => String(r[c]))])
  const total = ['total', '', ...(['2xx', '3xx', '4xx', '429', '5xx', 'total'] as const).map((c) => String(usage.totals[c]))]
  const table = [header, ...rows, total]
  const widths = header.map((_, i) => Math.max(...table.map((row) => (row[i] as string).length)))
  return table.map((row) => row.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd())
}

function positiveInt(value: string | undefined, flag: string, fallback: number, max: number): number {
  if (value === undefined) return fallback
  if (!/^[1-9][0-9]*$/.test(value) || Number(value) > max) throw new UsageError(`${flag} takes a whole number from 1 to ${max}`)
  return Number(value)
}

/** `--actor`, else the operating-system user, else `unknown`. */
function actorOf(values: Values): string {
  if (values.actor !== undefined) {
    if (!/^[\x20-\x7E]{1,100}$/.test(values.actor)) throw new UsageError('--actor takes 1 to 100 printable characters')
    return values.actor
  }
  try {
    const { username } = userInfo()
    return username === '' ? 'unknown' : username
  } catch {
    return 'unknown'
  }
}

/** The flags of a portal link's fields, as messages name them. */
const PORTAL_FLAGS: Record<PortalField, string> = { expiresIn: '--expires', capabilities: '--capabilities', label: '--label' }
const PORTAL_FLAG_LABEL: PortalLabel = (field) => PORTAL_FLAGS[field]

async function execute(service: CredentialService, portal: PortalSessions | undefined, parsed: Parsed, io: ToolOutput): Promise<void> {
  const [command, keyId] = parsed.positionals
  const { values } = parsed
  const json = values.json === true
  const needId = (): string => {
    if (keyId === undefined) throw new UsageError(`${command} needs a key id`)
    return keyId
  }
  switch (command) {
    case 'create': {
      refuseFlags(values, 'create', ['issuer', 'client-id', 'no-expiry', 'default-rate-limit', 'any-ip', 'overlap', 'days', 'id', 'since', 'expires', 'capabilities', 'label'])
      const input = createInput(values, 'create')
      if (values['expires-at'] !== undefined) input.expiresAt = values['expires-at']
      const { key, view } = await service.createKey({ type: 'api_key', ...input }, actorOf(values), FLAG_LABEL)
      if (json) {
        const { id, ...rest } = view
        io.out(JSON.stringify({ id, key, ...rest }))
      } else {
        io.out(`created ${view.id} for ${view.brand} (${view.mode}); the key, shown only now: ${key}`)
      }
      return
    }
    case 'grant-client': {
      refuseFlags(values, 'grant-client', ['expires-at', 'no-expiry', 'default-rate-limit', 'any-ip', 'overlap', 'days', 'id', 'since', 'expires', 'capabilities', 'label'])
      if (values.issuer === undefined) throw new UsageError('grant-client needs --issuer')
      if (values['client-id'] === undefined) throw new UsageError('grant-client needs --client-id')
      const input = { type: 'oauth_client', issuer: values.issuer, clientId: values['client-id'], ...createInput(values, 'grant-client') }
      const view = await service.createGrant(input, actorOf(values), FLAG_LABEL)
      if (json) io.out(JSON.stringify(view))
      else io.out(`registered ${view.id}: client ${JSON.stringify(view.clientId)} of ${String(view.issuer)} for ${view.brand} (${view.mode})`)
      return
    }
    case 'list': {
      const brand = values.brand
      if (brand !== undefined && !service.known.brands.includes(brand)) throw new UsageError(`unknown brand '${brand}'`)
      const views = await service.list(brand === undefined ? {} : { brand })
      if (json) io.out(JSON.stringify(views))
      else if (views.length === 0) io.out('no keys')
      else for (const view of views) io.out(describe(view))
      return
    }
    case 'show': {
      const view = await service.show(needId())
      io.out(json ? JSON.stringify(view) : describe(view))
      return
    }
    case 'update': {
      const id = needId()
      const view = await service.update(id, updateInput(values), actorOf(values), FLAG_LABEL)
      io.out(json ? JSON.stringify(view) : `updated ${id}: ${describe(view)}`)
      return
    }
    case 'roll': {
      const id = needId()
      const overlap = parseOverlap(values.overlap, FLAG_LABEL)
      const rolled = await service.roll(id, overlap, actorOf(values))
      if (json) io.out(JSON.stringify(rolled))
      else io.out(`rolled ${id}; the new secret, shown only now: ${rolled.secret}; the previous secret works until ${rolled.previousSecretExpiresAt}`)
      return
    }
    case 'end-overlap': {
      const id = needId()
      const { view, ended } = await service.endOverlap(id, actorOf(values))
      io.out(ended ? `ended the overlap of ${id}: its previous secret stopped working at ${String(view.previousSecretExpiresAt)}` : `${id} has no previous secret that still works`)
      return
    }
    case 'suspend':
    case 'resume': {
      const view = await service.setStatus(needId(), command === 'suspend' ? 'suspended' : 'active', actorOf(values))
      io.out(`${command === 'suspend' ? 'suspended' : 'resumed'} ${view.id}`)
      return
    }
    case 'revoke': {
      const id = needId()
      await service.revoke(id, actorOf(values))
      io.out(`revoked ${id}`)
      return
    }
    case 'usage': {
      const days = positiveInt(values.days, '--days', 7, service.known.usageRetentionDays)
      const usage = await service.usageOf(needId(), days)
      if (json) io.out(JSON.stringify(usage))
      else for (const line of usageLines(usage)) io.out(line)
      return
    }
    case 'audit': {
      let since: number | undefined
      if (values.since !== undefined) {
        since = instantMillis(values.since)
        if (since === undefined) throw new UsageError(`--since '${values.since}' is not an ISO 8601 date-time`)
      }
      const page = await service.auditTrail({ ...(values.id === undefined ? {} : { id: values.id }), ...(since === undefined ? {} : { since }) })
      if (json) io.out(JSON.stringify(page.entries))
      else if (page.entries.length === 0) io.out('no changes recorded')
      else for (const e of page.entries) io.out(`${e.time}  ${e.actor}  ${e.action}  ${e.credentialId}  ${changeText(e.changes)}`.trimEnd())
      return
    }
    case 'portal-link': {
      const id = needId()
      if (portal === undefined) throw new UsageError('the partner portal is off (portal.enabled is false): no link can be made')
      const input: Record<string, unknown> = {}
      if (values.expires !== undefined) input.expiresIn = values.expires
      if (values.capabilities !== undefined) input.capabilities = list(values.capabilities)
      if (values.label !== undefined) input.label = values.label
      const link = await portal.createLink(id, input, actorOf(values), PORTAL_FLAG_LABEL)
      io.out(json ? JSON.stringify(link) : link.url)
      return
    }
    default:
      throw new UsageError(command === undefined ? USAGE : `unknown command '${command}'; ${USAGE}`)
  }
}

/** The tool's log: the audit lines of its changes, on stderr. */
function toolLogger(config: Config, io: ToolOutput) {
  const lines = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') io.err(line)
      callback()
    },
  })
  return pino({ level: config.logLevel, base: { pid: process.pid, tool: 'keys' } }, lines)
}

export async function runKeyTool(argv: string[], env: NodeJS.ProcessEnv, io: ToolOutput): Promise<number> {
  let parsed: Parsed
  let config
  try {
    parsed = parse(argv)
    config = loadConfig(env)
  } catch (error) {
    io.err(error instanceof ConfigError || error instanceof UsageError ? error.message : String(error))
    return 2
  }
  const target = redisTarget(config)
  const redis = createRedis({ ...target, name: 'keys-tool', logger: pino({ level: 'silent' }), role: 'tool' })
  try {
    try {
      await redis.connect()
    } catch {
      io.err(`cannot reach Redis ${describeTarget(target)}`)
      return 1
    }
    const store = new RedisKeyStore(redis, config.redisPrefix)
    const audit = new AuditTrail(new RedisAuditStore(redis, config.redisPrefix), config.audit.retentionDays * 86_400_000, toolLogger(config, io))
    const portal = config.portal.enabled
      ? new PortalSessions({ store: new PortalSessionStore(redis, config.redisPrefix), keys: store, audit, origins: portalOrigins(config.brands) })
      : undefined
    const service = new CredentialService({
      store,
      usage: new RedisUsageStore(redis, config.redisPrefix),
      audit,
      known: knownOf(config),
      // A revoked credential's webhook endpoints go with it (its queued deliveries then end without an attempt).
      onRevoke: async (id) => { await new EndpointStore(redis, config.redisPrefix).removeAllOf(id) },
      ...(portal === undefined ? {} : { endPortalSessions: async (id: string, actor: string, reason: EndReason) => void await portal.endAll(id, actor, reason) }),
    })
    await execute(service, portal, parsed, io)
    return 0
  } catch (error) {
    if (error instanceof UsageError || error instanceof CredentialNotFound || error instanceof PortalSessionLimitReached) {
      io.err(error.message)
      return 2
    }
    if (error instanceof CredentialInputError) {
      io.err((error.errors[0]?.detail ?? error.message))
      return 2
    }
    io.err(`Redis failed: ${(error as Error).message}`)
    return 1
  } finally {
    redis.disconnect()
  }
}

function describeTarget(target: RedisTarget): string {
  const list = (nodes: { host: string; port: number }[]) => nodes.map((n) => `${n.host}:${n.port}`).join(',')
  switch (redisMode(target)) {
    case 'sentinel': return `master '${target.sentinel?.master}' through the sentinels ${list(target.sentinel?.sentinels ?? [])}`
    case 'cluster': return `Cluster at ${list(target.clusterNodes ?? [])}`
    default: return `at ${redactUrl(target.url)}`
  }
}

/** A Redis URL without its password, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return 'the configured URL'
  }
}

