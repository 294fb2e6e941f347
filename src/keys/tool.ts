import { parseArgs } from 'node:util'
import pino from 'pino'
import { ConfigError, loadConfig, type Config } from '../config.js'
import { createRedis, redisMode, redisTarget, type RedisTarget } from '../redis.js'
import { knownScopes } from '../routes/policy.js'
import { GRANT_ID_PREFIX, GrantExistsError, type GrantRecord } from './grants.js'
import { RedisKeyStore, type KeyRecord, type KeyStore } from './store.js'

// The API-key tool (`npm run keys -- …`): create, list, show, suspend, resume, revoke keys;
// grant-client registers the client of OAuth 2.0 access tokens (a grant, `cli_…`), which
// list, show, suspend, resume and revoke take as they take keys.
// Exit codes: 0 done, 1 Redis unreachable, 2 the request itself is wrong. Every message
// is one line; the plain key is printed once, by `create`, and stored nowhere.

export interface ToolOutput {
  out: (line: string) => void
  err: (line: string) => void
}

class UsageError extends Error {}

const USAGE = 'usage: keys create --brand <id> --mode live|test (--properties <uuid,...> | --all-properties) [--name <text>] [--expires-at <ISO 8601>] [--rate-limit <n>] [--scopes <scope,...>] [--json]'
  + ' | grant-client --issuer <iss> --client-id <id> --brand <id> --mode live|test (--properties <uuid,...> | --all-properties) [--scopes <scope,...>] [--name <text>] [--rate-limit <n>] [--json]'
  + ' | list [--brand <id>] [--json] | show <keyId|grantId> [--json] | suspend <keyId|grantId> | resume <keyId|grantId> | revoke <keyId|grantId>'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

function publicView(record: KeyRecord) {
  return {
    id: record.id,
    brand: record.brand,
    mode: record.mode,
    properties: record.properties,
    scopes: record.scopes,
    status: record.status,
    name: record.name,
    expiresAt: record.expiresAt,
    rateLimit: record.rateLimit,
    createdAt: record.createdAt,
  }
}

function grantView(record: GrantRecord) {
  return {
    id: record.id,
    issuer: record.issuer,
    clientId: record.clientId,
    brand: record.brand,
    mode: record.mode,
    properties: record.properties,
    scopes: record.scopes,
    status: record.status,
    name: record.name,
    rateLimit: record.rateLimit,
    createdAt: record.createdAt,
  }
}

function propertiesText(properties: string[] | '*'): string {
  return properties === '*' ? 'all properties' : `${properties.length} propert${properties.length === 1 ? 'y' : 'ies'}`
}

function describe(record: KeyRecord): string {
  return [
    record.id, record.brand, record.mode, record.status, propertiesText(record.properties),
    `expires ${record.expiresAt ?? 'never'}`,
    `rate limit ${record.rateLimit ?? 'default'}`,
    `scopes ${record.scopes === '*' ? '*' : record.scopes.join(',')}`,
    `created ${record.createdAt}`,
    record.name === null ? '' : JSON.stringify(record.name),
  ].filter((part) => part !== '').join('  ')
}

function describeGrant(record: GrantRecord): string {
  return [
    record.id, record.brand, record.mode, record.status, propertiesText(record.properties),
    `client ${JSON.stringify(record.clientId)} of ${record.issuer}`,
    `rate limit ${record.rateLimit ?? 'default'}`,
    `scopes ${record.scopes === '*' ? '*' : record.scopes.join(',')}`,
    `created ${record.createdAt}`,
    record.name === null ? '' : JSON.stringify(record.name),
  ].filter((part) => part !== '').join('  ')
}

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
        'rate-limit': { type: 'string' },
        scopes: { type: 'string' },
        issuer: { type: 'string' },
        'client-id': { type: 'string' },
        json: { type: 'boolean' },
      },
    })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

type Parsed = ReturnType<typeof parse>

interface Known {
  brands: string[]
  /** The scopes the routes of the config file need. */
  scopes: string[]
  issuers: string[]
}

function parseProperties(values: Parsed['values'], command: string): string[] | '*' {
  if ((values.properties === undefined) === (values['all-properties'] !== true)) {
    throw new UsageError(`${command} needs exactly one of --properties <uuid,...> and --all-properties`)
  }
  if (values.properties === undefined) return '*'
  const properties = values.properties.split(',').map((p) => p.trim().toLowerCase())
  const bad = properties.find((p) => !UUID.test(p))
  if (bad !== undefined) throw new UsageError(`malformed property UUID '${bad}'`)
  return [...new Set(properties)]
}

/** `--scopes a,b`: each one a scope some route needs; without the flag, every scope (`*`). */
function parseScopes(value: string | undefined, known: string[]): string[] | '*' {
  if (value === undefined) return '*'
  const scopes = [...new Set(value.split(',').map((s) => s.trim()))]
  const unknown = scopes.find((s) => !known.includes(s))
  if (unknown !== undefined) throw new UsageError(`unknown scope '${unknown}' (known: ${known.join(', ')})`)
  return scopes
}

function parseRateLimit(value: string | undefined): number | null {
  if (value === undefined) return null
  if (!/^[1-9][0-9]*$/.test(value)) throw new UsageError('--rate-limit takes a whole number of requests above 0')
  return Number(value)
}

function parseBrandAndMode(values: Parsed['values'], command: string, brands: string[]) {
  const { brand, mode } = values
  if (brand === undefined) throw new UsageError(`${command} needs --brand`)
  if (!brands.includes(brand)) throw new UsageError(`unknown brand '${brand}' (known: ${brands.join(', ')})`)
  if (mode !== 'live' && mode !== 'test') throw new UsageError(`${command} needs --mode live or --mode test`)
  return { brand, mode } as const
}

function refuseFlags(values: Parsed['values'], command: string, flags: (keyof Parsed['values'])[]): void {
  const given = flags.find((flag) => values[flag] !== undefined)
  if (given !== undefined) throw new UsageError(`${command} takes no --${given}`)
}

function parseCreate(values: Parsed['values'], known: Known) {
  refuseFlags(values, 'create', ['issuer', 'client-id'])
  const { brand, mode } = parseBrandAndMode(values, 'create', known.brands)
  const properties = parseProperties(values, 'create')
  let expiresAt: string | null = null
  if (values['expires-at'] !== undefined) {
    const time = Date.parse(values['expires-at'])
    if (!/^\d{4}-\d{2}-\d{2}/.test(values['expires-at']) || Number.isNaN(time)) {
      throw new UsageError(`--expires-at '${values['expires-at']}' is not an ISO 8601 date-time`)
    }
    expiresAt = new Date(time).toISOString()
  }
  const rateLimit = parseRateLimit(values['rate-limit'])
  const scopes = parseScopes(values.scopes, known.scopes)
  return { brand, mode, properties, scopes, name: values.name ?? null, expiresAt, rateLimit } as const
}

// A client id as identity providers issue them: printable, no spaces, of a sane length.
const CLIENT_ID = /^[\x21-\x7E]{1,255}$/

function parseGrant(values: Parsed['values'], known: Known) {
  refuseFlags(values, 'grant-client', ['expires-at'])
  const { issuer } = values
  if (issuer === undefined) throw new UsageError('grant-client needs --issuer')
  if (!known.issuers.includes(issuer)) {
    throw new UsageError(known.issuers.length === 0
      ? 'no token issuer is configured (oauth.issuers or OAUTH_ISSUER)'
      : `unknown issuer '${issuer}' (configured: ${known.issuers.join(', ')})`)
  }
  const clientId = values['client-id']
  if (clientId === undefined) throw new UsageError('grant-client needs --client-id')
  if (!CLIENT_ID.test(clientId)) throw new UsageError('--client-id takes 1 to 255 printable characters without spaces')
  const { brand, mode } = parseBrandAndMode(values, 'grant-client', known.brands)
  const properties = parseProperties(values, 'grant-client')
  const scopes = parseScopes(values.scopes, known.scopes)
  return { issuer, clientId, brand, mode, properties, scopes, name: values.name ?? null, rateLimit: parseRateLimit(values['rate-limit']) } as const
}

const isGrantId = (id: string): boolean => id.startsWith(GRANT_ID_PREFIX)

async function execute(store: KeyStore, parsed: Parsed, known: Known, io: ToolOutput): Promise<void> {
  const [command, keyId] = parsed.positionals
  const json = parsed.values.json === true
  const needId = (): string => {
    if (keyId === undefined) throw new UsageError(`${command} needs a key id`)
    return keyId
  }
  const noSuch = (id: string | undefined): UsageError => new UsageError(`no ${id !== undefined && isGrantId(id) ? 'grant' : 'key'} with id '${id}'`)
  switch (command) {
    case 'create': {
      const { key, record } = await store.create(parseCreate(parsed.values, known))
      if (json) {
        io.out(JSON.stringify({
          id: record.id, key, brand: record.brand, mode: record.mode, properties: record.properties, scopes: record.scopes,
          status: record.status, name: record.name, expiresAt: record.expiresAt, createdAt: record.createdAt,
        }))
      } else {
        io.out(`created ${record.id} for ${record.brand} (${record.mode}); the key, shown only now: ${key}`)
      }
      return
    }
    case 'grant-client': {
      let record: GrantRecord
      try {
        record = await store.createGrant(parseGrant(parsed.values, known))
      } catch (error) {
        if (error instanceof GrantExistsError) throw new UsageError(`client '${String(parsed.values['client-id'])}' of ${String(parsed.values.issuer)} already has ${error.existingId === null ? 'a grant' : `grant ${error.existingId}`}`)
        throw error
      }
      if (json) {
        io.out(JSON.stringify({
          id: record.id, issuer: record.issuer, clientId: record.clientId, brand: record.brand, mode: record.mode, properties: record.properties,
          scopes: record.scopes, status: record.status, name: record.name, createdAt: record.createdAt,
        }))
      } else {
        io.out(`registered ${record.id}: client ${JSON.stringify(record.clientId)} of ${record.issuer} for ${record.brand} (${record.mode})`)
      }
      return
    }
    case 'list': {
      const brand = parsed.values.brand
      if (brand !== undefined && !known.brands.includes(brand)) throw new UsageError(`unknown brand '${brand}'`)
      const [records, grants] = await Promise.all([store.list(brand), store.listGrants(brand)])
      if (json) io.out(JSON.stringify([...records.map(publicView), ...grants.map(grantView)]))
      else if (records.length === 0 && grants.length === 0) io.out('no keys')
      else {
        for (const record of records) io.out(describe(record))
        for (const grant of grants) io.out(describeGrant(grant))
      }
      return
    }
    case 'show': {
      const id = needId()
      if (isGrantId(id)) {
        const grant = await store.findGrantById(id)
        if (grant === null) throw noSuch(id)
        io.out(json ? JSON.stringify(grantView(grant)) : describeGrant(grant))
        return
      }
      const record = await store.findById(id)
      if (record === null) throw noSuch(id)
      io.out(json ? JSON.stringify(publicView(record)) : describe(record))
      return
    }
    case 'suspend':
    case 'resume': {
      const id = needId()
      const status = command === 'suspend' ? 'suspended' : 'active'
      const record = isGrantId(id) ? await store.setGrantStatus(id, status) : await store.setStatus(id, status)
      if (record === null) throw noSuch(id)
      io.out(`${command === 'suspend' ? 'suspended' : 'resumed'} ${record.id}`)
      return
    }
    case 'revoke': {
      const id = needId()
      if (!(isGrantId(id) ? await store.revokeGrant(id) : await store.revoke(id))) throw noSuch(id)
      io.out(`revoked ${id}`)
      return
    }
    default:
      throw new UsageError(command === undefined ? USAGE : `unknown command '${command}'; ${USAGE}`)
  }
}

function knownOf(config: Config): Known {
  return { brands: config.brands.map((b) => b.id), scopes: knownScopes(config.routes), issuers: config.oauth.issuers.map((i) => i.issuer) }
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
    await execute(new RedisKeyStore(redis, config.redisPrefix), parsed, knownOf(config), io)
    return 0
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(error.message)
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
