import { parseArgs } from 'node:util'
import pino from 'pino'
import { ConfigError, loadConfig } from '../config.js'
import { createRedis, redisMode, redisTarget, type RedisTarget } from '../redis.js'
import { RedisKeyStore, type KeyRecord, type KeyStore } from './store.js'

// The API-key tool (`npm run keys -- …`): create, list, show, suspend, resume, revoke.
// Exit codes: 0 done, 1 Redis unreachable, 2 the request itself is wrong. Every message
// is one line; the plain key is printed once, by `create`, and stored nowhere.

export interface ToolOutput {
  out: (line: string) => void
  err: (line: string) => void
}

class UsageError extends Error {}

const USAGE = 'usage: keys create --brand <id> --mode live|test (--properties <uuid,...> | --all-properties) [--name <text>] [--expires-at <ISO 8601>] [--rate-limit <n>] [--json] | list [--brand <id>] [--json] | show <keyId> [--json] | suspend <keyId> | resume <keyId> | revoke <keyId>'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

function publicView(record: KeyRecord) {
  return {
    id: record.id,
    brand: record.brand,
    mode: record.mode,
    properties: record.properties,
    status: record.status,
    name: record.name,
    expiresAt: record.expiresAt,
    rateLimit: record.rateLimit,
    createdAt: record.createdAt,
  }
}

function describe(record: KeyRecord): string {
  const scope = record.properties === '*' ? 'all properties' : `${record.properties.length} propert${record.properties.length === 1 ? 'y' : 'ies'}`
  return [
    record.id, record.brand, record.mode, record.status, scope,
    `expires ${record.expiresAt ?? 'never'}`,
    `rate limit ${record.rateLimit ?? 'default'}`,
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
        json: { type: 'boolean' },
      },
    })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

type Parsed = ReturnType<typeof parse>

function parseCreate(values: Parsed['values'], brands: string[]) {
  const { brand, mode } = values
  if (brand === undefined) throw new UsageError('create needs --brand')
  if (!brands.includes(brand)) throw new UsageError(`unknown brand '${brand}' (known: ${brands.join(', ')})`)
  if (mode !== 'live' && mode !== 'test') throw new UsageError('create needs --mode live or --mode test')
  if ((values.properties === undefined) === (values['all-properties'] !== true)) {
    throw new UsageError('create needs exactly one of --properties <uuid,...> and --all-properties')
  }
  let properties: string[] | '*' = '*'
  if (values.properties !== undefined) {
    properties = values.properties.split(',').map((p) => p.trim().toLowerCase())
    const bad = properties.find((p) => !UUID.test(p))
    if (bad !== undefined) throw new UsageError(`malformed property UUID '${bad}'`)
    properties = [...new Set(properties)]
  }
  let expiresAt: string | null = null
  if (values['expires-at'] !== undefined) {
    const time = Date.parse(values['expires-at'])
    if (!/^\d{4}-\d{2}-\d{2}/.test(values['expires-at']) || Number.isNaN(time)) {
      throw new UsageError(`--expires-at '${values['expires-at']}' is not an ISO 8601 date-time`)
    }
    expiresAt = new Date(time).toISOString()
  }
  let rateLimit: number | null = null
  if (values['rate-limit'] !== undefined) {
    if (!/^[1-9][0-9]*$/.test(values['rate-limit'])) throw new UsageError('--rate-limit takes a whole number of requests above 0')
    rateLimit = Number(values['rate-limit'])
  }
  return { brand, mode, properties, name: values.name ?? null, expiresAt, rateLimit } as const
}

async function execute(store: KeyStore, parsed: Parsed, brands: string[], io: ToolOutput): Promise<void> {
  const [command, keyId] = parsed.positionals
  const json = parsed.values.json === true
  const needId = (): string => {
    if (keyId === undefined) throw new UsageError(`${command} needs a key id`)
    return keyId
  }
  switch (command) {
    case 'create': {
      const { key, record } = await store.create(parseCreate(parsed.values, brands))
      if (json) {
        io.out(JSON.stringify({
          id: record.id, key, brand: record.brand, mode: record.mode, properties: record.properties,
          status: record.status, name: record.name, expiresAt: record.expiresAt, createdAt: record.createdAt,
        }))
      } else {
        io.out(`created ${record.id} for ${record.brand} (${record.mode}); the key, shown only now: ${key}`)
      }
      return
    }
    case 'list': {
      const brand = parsed.values.brand
      if (brand !== undefined && !brands.includes(brand)) throw new UsageError(`unknown brand '${brand}'`)
      const records = await store.list(brand)
      if (json) io.out(JSON.stringify(records.map(publicView)))
      else if (records.length === 0) io.out('no keys')
      else for (const record of records) io.out(describe(record))
      return
    }
    case 'show': {
      const record = await store.findById(needId())
      if (record === null) throw new UsageError(`no key with id '${keyId}'`)
      io.out(json ? JSON.stringify(publicView(record)) : describe(record))
      return
    }
    case 'suspend':
    case 'resume': {
      const record = await store.setStatus(needId(), command === 'suspend' ? 'suspended' : 'active')
      if (record === null) throw new UsageError(`no key with id '${keyId}'`)
      io.out(`${command === 'suspend' ? 'suspended' : 'resumed'} ${record.id}`)
      return
    }
    case 'revoke': {
      if (!await store.revoke(needId())) throw new UsageError(`no key with id '${keyId}'`)
      io.out(`revoked ${keyId}`)
      return
    }
    default:
      throw new UsageError(command === undefined ? USAGE : `unknown command '${command}'; ${USAGE}`)
  }
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
    await execute(new RedisKeyStore(redis, config.redisPrefix), parsed, config.brands.map((b) => b.id), io)
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
