import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomUUID, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, freemem, totalmem, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Writable } from 'node:stream'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { generateHotels } from '../mocks/pms/data.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { redisAnswers } from '../src/redis.js'
import { benchAuth } from './auth.js'
import { benchCredentials } from './credentials.js'
import { eventsPageCost, type EventsPageCost } from './events-page.js'
import { breakdownOf, InspectorSession, profileDuring, type Breakdown } from './breakdown.js'
import { freePort, portForLater } from './ports.js'
import { pairedRatio, UNSTEADY_SPREAD, unsteadyRounds } from './paired.js'
import { median } from './stats.js'
import { fillRequestLog, REQUEST_LOG_ROWS, requestLogLines, requestLogWriteCost, type RequestLogWriteCost } from './request-log.js'
import { benchTracing } from './tracing.js'
import { WEBHOOK_ONLY, webhookAttemptCost, webhookAttemptLines, type WebhookAttemptCost } from './webhook-attempts.js'
import { INSTALL_HINT, runWrk, wrkAvailable, type WrkRequest } from './wrk.js'

// `npm run bench [-- --quick] [-- --skip-soak] [-- --only <text>[|<text>…]] [-- --node-options "<flags>"]
// [-- --baseline <checkout>]`:
// every server in its own process (the gateway in several configurations, the references, the
// stand-in PMS), and the load generator too: wrk sends each row the same fixed number of
// requests against the gateway and against each of its references in alternating rounds. The
// deciding figure is CPU time per answer of each server process (user + system, from /proc),
// which does not swing with the load on this shared machine the way requests per second do.
// Then a CPU profile of the gateway during each row says where its time goes (breakdown.ts).

// `--node-options "--flag"`: parseArgs takes a value that starts with a dash only when
// joined to its option with `=`.
const args = process.argv.slice(2).flatMap((arg, i, all) => {
  if (all[i - 1] === '--node-options') return []
  return arg === '--node-options' && i + 1 < all.length ? [`${arg}=${all[i + 1] as string}`] : [arg]
})
const { values: flags } = parseArgs({
  args,
  options: {
    quick: { type: 'boolean' },
    'skip-soak': { type: 'boolean' },
    only: { type: 'string' },
    'node-options': { type: 'string' },
    amount: { type: 'string' },
    // A checkout of the gateway before a change, built (its dist/ and node_modules/): the
    // rows that compare the gateway with itself before it (the usage-counting row).
    baseline: { type: 'string' },
    // `deployed` (the default): each gateway as it runs in production, NODE_ENV=production,
    // the shipped config/default.json under the row's settings, and its log lines written to a
    // pipe that another process drains into a file, as a container's log is read. `previous`:
    // the measure before that (the bench's own config, the log to /dev/null), kept so that a
    // run of each shows what the change of measure moves.
    measure: { type: 'string' },
  },
})
const QUICK = flags.quick === true
const ROUNDS = QUICK ? 2 : 3
// Requests per side per round: the same work in every round, whatever the machine's load.
const AMOUNT = flags.amount === undefined ? (QUICK ? 20_000 : 50_000) : Number(flags.amount)
if (!Number.isInteger(AMOUNT) || AMOUNT < 1000) throw new Error('--amount must be a whole number of at least 1000')
const CONNECTIONS = 50
const LATENCY_CONNECTIONS = 4
const SOAK_SECONDS = QUICK ? 30 : 120
const SOAK_FIRST_SAMPLE = QUICK ? 5 : 20
// The breakdown: seconds of load per row under the profiler, and its sampling interval.
const BREAKDOWN_SECONDS = QUICK ? 3 : 6
const PROFILE_INTERVAL_US = 200
/** `--only a|b`: the rows whose name holds any of them. */
const ONLY = flags.only?.toLowerCase().split('|').filter((o) => o !== '')
const BASELINE = flags.baseline
const MEASURE = flags.measure ?? 'deployed'
if (MEASURE !== 'deployed' && MEASURE !== 'previous') throw new Error('--measure is deployed or previous')
const DEPLOYED = MEASURE === 'deployed'
const GATEWAY_NODE_OPTIONS = (flags['node-options'] ?? '').split(/\s+/).filter((o) => o !== '')
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PMS_TOKEN = 'bench-pms-token'
/** `npm start` needs one when webhooks are configured: a fresh one each run (a bench's endpoints live as long as it does). */
const WEBHOOKS_SECRET_KEY = randomBytes(24).toString('hex')
const SERVICE_TOKEN = 'bench-service-token'
const PREFIX = `bench:${randomUUID().slice(0, 8)}:`
const CLOCK_TICKS = clockTicks()

const children: ChildProcess[] = []
/** The gateways: stopped first, before the processes they write to and call (log drains, Redis, stand-ins). */
const gatewayProcesses = new Set<ChildProcess>()
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'))

function clockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100
  } catch {
    return 100
  }
}

/** User + system CPU of a process so far, in microseconds (all its threads: GC, libuv pool). */
function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name, which is in parentheses and may hold spaces; utime and
  // stime are fields 14 and 15 of the line, so 12th and 13th after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS
}

function rss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
}

interface StartOptions { stdin?: string; stdout?: 'pipe' | 'ignore' | Writable; nodeOptions?: string[] }

function startProcess(script: string, env: Record<string, string>, options: StartOptions = {}): ChildProcess {
  const { stdin, stdout = 'pipe', nodeOptions = [] } = options
  const child = spawn(process.execPath, [...nodeOptions, script], { env: { ...process.env, ...env }, stdio: [stdin === undefined ? 'ignore' : 'pipe', stdout, 'inherit'] })
  if (stdin !== undefined) child.stdin?.end(stdin)
  children.push(child)
  return child
}

/** What the shipped config needs beside it in production (its Secret's tokens): each a bench value. */
const SHIPPED_ENV: Record<string, string> = {
  NODE_ENV: 'production', PMS_SANDBOX_TOKEN: `${PMS_TOKEN}-sandbox`, ADMIN_TOKEN: 'bench-admin-token-of-at-least-32-characters',
  UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN, UPSTREAM_BOOKINGS_SANDBOX_TOKEN: `${SERVICE_TOKEN}-sandbox`,
  EVENTS_PMS_TOKEN: 'bench-pms-publisher-token', EVENTS_PMS_SANDBOX_TOKEN: 'bench-pms-sandbox-publisher-token',
  EVENTS_BOOKINGS_TOKEN: 'bench-bookings-publisher-token', EVENTS_BOOKINGS_SANDBOX_TOKEN: 'bench-bookings-sandbox-publisher-token',
}

/**
 * Where a server's log lines go: under the deployed measure, a pipe that a process of its own
 * (`cat`) drains into a file of the run's folder, as a container runtime reads a container's
 * stdout; under the previous one, /dev/null. The drain's CPU is not the server's.
 */
function logSink(name: string): Writable | 'ignore' {
  if (!DEPLOYED) return 'ignore'
  const file = openSync(join(dir, `${name}.log`), 'w')
  const drain = spawn('cat', [], { stdio: ['pipe', file, 'inherit'] })
  closeSync(file)
  children.push(drain)
  return drain.stdin as Writable
}

/** A process that prints {"port": n} once listening. */
async function portOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`process exited (${String(code)}) before listening`)))
    child.stdout?.once('data', (line: Buffer) => resolve((JSON.parse(line.toString()) as { port: number }).port))
  })
}

/**
 * Waits for a server to answer: up to a minute, since a process that starts in a second on a
 * quiet machine took more than ten beside a mutation run (the bench then stopped at its first
 * gateway). A server that never comes up still stops the run.
 */
async function waitFor(url: string, headers: Record<string, string> = {}): Promise<void> {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    try {
      const res = await request(url, { headers })
      await res.body.dump()
      if (res.statusCode < 500) return
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${url} did not come up`)
}

interface Server {
  url: string
  pid: number
  /** Where the process opens its inspector on SIGUSR1 (gateways only: the breakdown's profile). */
  inspectPort?: number
  /** The gateway's admin listener (gateways only): where publishers send events. */
  adminUrl?: string
}

async function startGateway(name: string, pmsUrl: string, overrides: Record<string, unknown>, env: Record<string, string> = {}, script = 'dist/src/server.js'): Promise<Server> {
  const configFile = join(dir, `${name}.json`)
  writeFileSync(configFile, JSON.stringify({
    ...(DEPLOYED ? JSON.parse(readFileSync('config/default.json', 'utf8')) as Record<string, unknown> : {}),
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['127.0.0.1', 'localhost'] }],
    rateLimit: { enabled: true, limit: 1000, windowSeconds: 60 },
    // Every request comes from one address here: the 401 row would otherwise turn that
    // address's answers into 429s for a minute (docs/security.md, "Invented keys"), on every
    // row after it.
    abuse: { authFailuresPerMinute: 1_000_000_000 },
    ...overrides,
  }))
  const port = await freePort()
  const adminPort = await freePort()
  // The inspector stays closed until the breakdown, after every measured round, asks for it.
  const inspectPort = await portForLater()
  const child = startProcess(script, {
    PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: PREFIX,
    PMS_URL: pmsUrl, PMS_TOKEN, LOG_LEVEL: 'info', WEBHOOKS_SECRET_KEY, ...(DEPLOYED ? SHIPPED_ENV : {}), ...env,
  // One log line per request, as in production, to a drained pipe (or /dev/null): never read
  // by this process, whose CPU the load generator shares.
  }, { stdout: logSink(name), nodeOptions: [...GATEWAY_NODE_OPTIONS, `--inspect-port=127.0.0.1:${inspectPort}`] })
  gatewayProcesses.add(child)
  const url = `http://127.0.0.1:${port}`
  const adminUrl = `http://127.0.0.1:${adminPort}`
  // A delivery instance (EVENTS_WORKER=only) opens no public port.
  await waitFor(env.EVENTS_WORKER === 'only' ? `${adminUrl}/livez` : `${url}/v1/health`)
  return { url, pid: child.pid as number, inspectPort, adminUrl }
}

interface Target extends WrkRequest {
  pid: number
  /** Run before each load of this target, outside its measure (the request log switched on or off). */
  before?: () => Promise<void>
}
interface Measure {
  answers: number
  rps: number
  p50Us: number
  p99Us: number
  /** CPU of the server process per answer, µs. */
  cpuUs: number
  /** Read and write system calls of the server process per answer (/proc/<pid>/io). */
  readsPerAnswer: number
  writesPerAnswer: number
  /** CPU of the load generator (wrk) per answer, µs. */
  driverCpuUs: number
  statuses: Record<string, number>
  errors: number
}

/** Read and write system calls of a process so far (all its threads). */
function syscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8')
  return { reads: Number(/syscr:\s+(\d+)/.exec(io)?.[1] ?? 0), writes: Number(/syscw:\s+(\d+)/.exec(io)?.[1] ?? 0) }
}

/** CPU of this process's children that have exited and been waited for, µs: wrk's, once it ends. */
function childrenCpuMicros(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8')
  // cutime and cstime are fields 16 and 17 of the line.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[13]) + Number(fields[14])) * 1e6) / CLOCK_TICKS
}

/** Sends `amount` requests (or runs for `seconds`) with wrk and measures the server behind `target`. */
async function load(target: Target, connections: number, size: { amount: number } | { seconds: number }): Promise<Measure> {
  await target.before?.()
  const cpuBefore = cpuMicros(target.pid)
  const callsBefore = syscalls(target.pid)
  const driverBefore = childrenCpuMicros()
  let last: { cpu: number; calls: { reads: number; writes: number } } | undefined
  // With a fixed amount, the server's counters are read when the last answer arrives: its
  // idle time after the round is not part of it. The few requests in flight then (at most one
  // per connection) are its work but not counted: under 0.3 % of a round, 1 % of a load of the
  // request log's rows (a quarter of a quick round), alike on both sides.
  const result = await runWrk(target, connections, size, dir, () => { last = { cpu: cpuMicros(target.pid), calls: syscalls(target.pid) } })
  last ??= { cpu: cpuMicros(target.pid), calls: syscalls(target.pid) }
  const cpu = last.cpu - cpuBefore
  const { calls } = last
  // wrk's own CPU, once it has exited and been waited for.
  const driver = childrenCpuMicros() - driverBefore
  const { answers } = result
  const per = (n: number): number => (answers === 0 ? 0 : n / answers)
  return {
    answers,
    rps: Math.round(answers / (result.durationUs / 1e6)),
    p50Us: result.p50Us,
    p99Us: result.p99Us,
    cpuUs: per(cpu),
    readsPerAnswer: per(calls.reads - callsBefore.reads),
    writesPerAnswer: per(calls.writes - callsBefore.writes),
    driverCpuUs: per(driver),
    statuses: result.statuses,
    errors: result.errors,
  }
}

/** A side's rounds as one: answers, statuses and errors summed, every figure their median. */
function medianOf(list: Measure[]): Measure {
  const statuses: Record<string, number> = {}
  for (const x of list) for (const [code, n] of Object.entries(x.statuses)) statuses[code] = (statuses[code] ?? 0) + n
  return {
    answers: list.reduce((a, x) => a + x.answers, 0), statuses, errors: list.reduce((a, x) => a + x.errors, 0),
    rps: Math.round(median(list.map((x) => x.rps))), p50Us: Math.round(median(list.map((x) => x.p50Us))), p99Us: Math.round(median(list.map((x) => x.p99Us))),
    cpuUs: round1(median(list.map((x) => x.cpuUs))), driverCpuUs: round1(median(list.map((x) => x.driverCpuUs))),
    readsPerAnswer: round2(median(list.map((x) => x.readsPerAnswer))), writesPerAnswer: round2(median(list.map((x) => x.writesPerAnswer))),
  }
}

const round1 = (n: number): number => Math.round(n * 10) / 10
const round2 = (n: number): number => Math.round(n * 100) / 100

interface Call {
  path: string
  headers: Record<string, string>
  method?: 'POST'
  body?: string
  /** A new Idempotency-Key on every request (the header is not in `headers`). */
  newKeys?: boolean
  /** Every `XIDX` of the body made new on every request (the ingest's CloudEvent ids). */
  newIds?: boolean
  /** Sent to the gateway's admin listener (the ingest), not its public one. */
  admin?: boolean
}

/** What a row's call sends besides its URL and headers. */
function sendOf(call: Call): Pick<Target, 'method' | 'body' | 'newKeys' | 'newIds'> {
  return {
    ...(call.method === undefined ? {} : { method: call.method, body: call.body }), ...(call.newKeys === true ? { newKeys: true } : {}), ...(call.newIds === true ? { newIds: true } : {}),
  }
}

/** The base URL a row's call goes to on `server`: its admin listener for the ingest. */
function baseOf(server: Server, call: Call): string {
  return call.admin === true ? server.adminUrl as string : server.url
}

/** What wrk loads to send `call` to the gateway `server` and measure it, `before` run ahead of each load. */
function targetOf(server: Server, call: Call, before?: () => Promise<void>): Target {
  return { url: `${baseOf(server, call)}${call.path}`, headers: call.headers, pid: server.pid, ...sendOf(call), ...(before === undefined ? {} : { before }) }
}

/**
 * A reference: `fastify` (bare Fastify 5 answering with the bytes the gateway sent: the floor
 * for an answer the gateway gives itself), `node:http` (the same with bare node:http), `pms`
 * (the stand-in PMS called directly), `proxy` (bare Fastify with @fastify/http-proxy in front
 * of the stand-in service), `peer` (the same job built the obvious way, peer-stack.ts: the
 * cached GET's second target), or `gateway` (another gateway configuration: the tracing rows
 * against the gateway without tracing).
 */
type Reference = { kind: 'fastify' } | { kind: 'node' } | { kind: 'peer' } | { kind: 'pms'; call: Call } | { kind: 'proxy' }
  | { kind: 'gateway'; gateway: string; call?: Call; name?: string; before?: () => Promise<void> }

/** One row: a gateway configuration and a request to it, the answer it must give, its references (the first is the target's). */
interface Scenario {
  name: string
  gateway: string
  call: Call
  status: number
  references: Reference[]
  connections: number
  amount: number
  /** Also measured for resident size over a long run at full load. */
  soak?: boolean
  /** Something to do once before the bytes are captured (the 429 row spends its quota). */
  prepare?: (gateway: Server) => Promise<void>
  /** Run before each load of the row's gateway, outside its measure (Target's). */
  before?: () => Promise<void>
  /**
   * Loads per side per round, each of `amount` ÷ this many requests, the gateway's and its one
   * reference's alternating: for a row whose two sides are one process and must be read against
   * each other closely (the request log's), its figure the median of each load against the
   * mean of the two loads of the other side around it (Row's `paired`, bench/paired.ts), which
   * the machine's drift moves far less than two sides' medians a round apart. Such a row has
   * one reference, the same process set the other way.
   */
  splits?: number
}

interface Compared {
  reference: string
  measure: Measure
  /** Reference CPU per answer ÷ the gateway's. */
  cpuRatio: number
  /** Gateway req/s ÷ the reference's. */
  rpsRatio: number
  addedP50Us: number
}

interface Row {
  scenario: string
  connections: number
  amount: number
  gateway: Measure
  references: Compared[]
  /**
   * Every load's CPU per answer (one a round, or `splits` a round), gateway and references, in the order they ran (the JSON
   * only): a row that reads differently from one run to the next shows whether one round or
   * one side did it.
   */
  roundsCpuUs: { gateway: number[]; references: number[][] }
  /**
   * A row with `splits`: the reference's CPU per answer ÷ the gateway's, the median over each
   * load of a round but its first and last against the mean of the two loads of the other side
   * around it (bench/paired.ts); and how many such ratios it is of.
   */
  paired?: { cpuRatio: number; ratios: number }
  breakdown?: Breakdown & { cpuUs: number; answers: number }
  /** A row with `splits`: the same of its reference, the same process set the other way. */
  referenceBreakdown?: Breakdown & { cpuUs: number; answers: number }
}

interface Soak { scenario: string; seconds: number; rssFirstMiB: number; rssEndMiB: number; growth: number; cpuUs: number; answers: number }

const REFERENCE_NAMES = { fastify: 'Fastify', node: 'node:http', peer: 'the obvious stack', pms: 'PMS direct', proxy: '@fastify/http-proxy', gateway: 'gateway, tracing off' } as const
const KEY_ROW = 'GET /v1/properties/{id}, cache hit, rate limiter on'
const RELOADED_ROW = 'GET /v1/properties/{id}, cache hit, after six reloads, against a gateway never reloaded'
const IDEMPOTENCY_ROWS = {
  plain: 'POST /v1/guests, declared route, no Idempotency-Key',
  newKey: 'POST /v1/guests, declared route, a new Idempotency-Key each time',
  replay: 'POST /v1/guests, declared route, Idempotency-Key replayed',
} as const
const TOKEN_ROW = 'GET /v1/properties/{id}, cache hit, access token remembered'
// Credentials over their life (docs/performance.md, "Credentials over their life"): each within 5 % of its reference.
const CREDENTIAL_ROWS = {
  usage: 'GET /v1/properties/{id}, cache hit, usage counted, against the gateway before credentials over their life',
  allowList: 'GET /v1/properties/{id}, cache hit, a key with 32 allowed addresses, against a key without',
} as const
const INGEST_ROW = 'POST /events, batches of 100 events, each stored'
const EVENTS_LIST_ROW = 'GET /v1/events?perPage=100, the log\'s first page'
const EVENTS_POLL_ROW = 'GET /v1/events?createdAfter=…, nothing new (a partner polling)'
/** Events per request of the ingest row. */
const INGEST_BATCH = 100
const PUBLISHER_TOKEN = 'bench-pms-publisher-token'
// The shipped event types of the PMS and the bookings service (only the PMS publishes here):
// a key with every scope reads three types' indexes, as it does in production.
const EVENTS_CONFIG = {
  publishers: { pms: { tokenEnv: 'EVENTS_PMS_TOKEN', mode: 'live' }, bookings: { tokenEnv: 'EVENTS_BOOKINGS_TOKEN', mode: 'live' } },
  types: [
    { type: 'property.updated', publisher: 'pms', internalType: 'com.example.pms.hotel.changed', scope: 'properties:read', brand: 'chain_code', property: 'hotel_uuid',
      object: { type: 'property', id: 'hotel_uuid', path: '/v1/properties/{id}' } },
    ...['created', 'updated'].map((kind) => ({ type: `guest.${kind}`, publisher: 'bookings', internalType: `com.example.bookings.guest.${kind}`, scope: 'guests:read',
      brand: 'chain_code', object: { type: 'guest', id: 'guest_id', path: '/v1/guests/{id}' } })),
  ],
}

/** A batch of `size` CloudEvents of the PMS about `hotels` (in turn), each id `<prefix>-<n>`. */
function hotelBatch(hotels: readonly string[], size: number, prefix: string): string {
  return JSON.stringify(Array.from({ length: size }, (_, n) => ({
    specversion: '1.0', id: `${prefix}-${n}`, source: 'pms', type: 'com.example.pms.hotel.changed', time: '2026-11-26T12:00:00Z',
    data: { hotel_uuid: hotels[n % hotels.length], chain_code: 'ACME', changed: ['display_name'], revision: 2 },
  })))
}

async function main(): Promise<void> {
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), freeGiB: Math.round(freemem() / 2 ** 30), node: process.version, date: new Date().toISOString() }
  console.log(`node ${machine.node}, ${machine.cpus} × ${machine.cpu}; ${QUICK ? 'quick run' : 'full run'}: ${ROUNDS} alternating rounds of ${AMOUNT} requests per side; gateway Node options: ${GATEWAY_NODE_OPTIONS.join(' ') || 'none'}`)

  // The stand-in PMS, answering at once: what is measured is the gateway, not the PMS.
  const pmsPort = await freePort()
  const pms = startProcess('dist/mocks/pms/server.js', { MOCK_PMS_PORT: String(pmsPort), MOCK_PMS_TOKEN: PMS_TOKEN }, { stdout: 'ignore' })
  const pmsUrl = `http://127.0.0.1:${pmsPort}`
  const pmsHeaders = { 'x-pms-service-token': PMS_TOKEN }
  await waitFor(`${pmsUrl}/internal/v3/ping`, pmsHeaders)

  const redis = new Redis(REDIS_URL)
  const store = new RedisKeyStore(redis, PREFIX)
  const { key } = await store.create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench' })
  const auth = { authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0' }

  // The stand-in identity provider: the cached gateway trusts it, so the API-key row and the
  // access-token row run on the same gateway. The token lives for a day, the client's grant
  // has the same quota as the bench key.
  const idpPort = await freePort()
  startProcess('dist/mocks/idp/server.js', { MOCK_IDP_PORT: String(idpPort) }, { stdout: 'ignore' })
  const idpRealm = `http://127.0.0.1:${idpPort}/realms/partners`
  await waitFor(`${idpRealm}/.well-known/openid-configuration`)
  const oauth = { issuers: [{ issuer: idpRealm, jwksUri: `${idpRealm}/protocol/openid-connect/certs`, audience: 'partner-api', algorithms: ['RS256'] }] }
  await store.createGrant({ issuer: idpRealm, clientId: 'bench-client', brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench' })
  const minted = await request(`http://127.0.0.1:${idpPort}/__mock/mint`, {
    method: 'POST', body: JSON.stringify({ claims: { client_id: 'bench-client', sub: 'bench-client', scope: 'properties:read', exp: Math.floor(Date.now() / 1000) + 86_400 } }),
  })
  const { token } = await minted.body.json() as { token: string }
  const tokenAuth = { ...auth, authorization: `Bearer ${token}` }

  let otlpUrl: Promise<string> | undefined
  // The stand-in OTLP receiver, in a process of its own, for the tracing rows.
  const startOtlp = (): Promise<string> => {
    otlpUrl ??= (async () => {
      const port = await freePort()
      startProcess('dist/mocks/otlp/server.js', { MOCK_OTLP_PORT: String(port), MOCK_OTLP_QUIET: 'true' }, { stdout: 'ignore' })
      const url = `http://127.0.0.1:${port}`
      await waitFor(`${url}/__mock/failure`)
      return url
    })()
    return otlpUrl
  }
  let eventsRedis: Promise<string> | undefined
  /** A redis-server of the bench's own for the events rows. */
  const privateRedis = (): Promise<string> => {
    eventsRedis ??= startRedisServer()
    return eventsRedis
  }
  const gatewayConfigs: Record<string, () => Promise<Server>> = {
    cached: () => startGateway('cached', pmsUrl, { oauth }),
    // The same configuration again: the A/A row's reference, the noise floor of a comparison.
    'cached-twin': () => startGateway('cached-twin', pmsUrl, { oauth }),
    // The cached gateway after reloads: each builds the public app anew, whose requests are of a
    // shape of their own to the code every app shares.
    reloaded: () => startGateway('reloaded', pmsUrl, { oauth }),
    // Export on, the default sampler: 1 % of new traces (wrk sends no traceparent).
    'traced-1': async () => startGateway('traced-1', pmsUrl, { oauth }, { OTEL_EXPORTER_OTLP_ENDPOINT: await startOtlp() }),
    'traced-100': async () => startGateway('traced-100', pmsUrl, { oauth }, { OTEL_EXPORTER_OTLP_ENDPOINT: await startOtlp(), OTEL_TRACES_SAMPLER_ARG: '1' }),
    'no-limiter': () => startGateway('no-limiter', pmsUrl, { rateLimit: { enabled: false } }),
    // The cached gateway as it was before credentials over their life (--baseline), on the same
    // config, Redis and key: what counting usage (and every other check added) costs the cached GET.
    baseline: () => {
      if (BASELINE === undefined) throw new Error('the usage row needs --baseline <a built checkout of the gateway before the change>')
      return startGateway('baseline', pmsUrl, { oauth }, {}, join(BASELINE, 'dist/src/server.js'))
    },
    // The cached gateway ending each answer the moment it is ready: what ending the answers
    // of one turn together (server.coalesceAnswers, on by default) saves.
    'one-by-one': () => startGateway('one-by-one', pmsUrl, { oauth, server: { coalesceAnswers: false } }),
    uncached: () => startGateway('uncached', pmsUrl, { cache: { ttlMs: 0 } }),
    // Writes through a declared route: POST /v1/guests, with and without Idempotency-Key.
    'declared-writes': async () => {
      const service = await startService()
      return startGateway('declared-writes', pmsUrl, {
        upstreams: { bookings: { url: service, tokenHeader: 'X-Service-Token' } },
        routes: [{ path: '/v1/guests', methods: ['POST'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', body: { maxBytes: 65536 } }],
      }, { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN })
    },
    // The event log, on a Redis server of its own: the ingest row writes tens of thousands of
    // events, which the shared Redis should not have to hold.
    events: async () => {
      const url = await privateRedis()
      return startGateway('events', pmsUrl, { events: EVENTS_CONFIG }, { REDIS_URL: url, EVENTS_PMS_TOKEN: PUBLISHER_TOKEN, EVENTS_BOOKINGS_TOKEN: `${PUBLISHER_TOKEN}-2` })
    },
    // The request log's rows (docs/performance.md, "The request log"): a gateway each whose log
    // is switched on and off by a reload before each load, so that both sides are one process.
    'log-switched': () => startGateway('log-switched', pmsUrl, { oauth }),
    'declared-log-switched': () => declared('declared-log-switched', {}),
    declared: () => declared('declared', {}),
  }
  async function declared(name: string, extra: Record<string, unknown>): Promise<Server> {
    const service = await startService()
    return startGateway(name, pmsUrl, {
      ...extra,
      // One key at 50 connections: the share of one credential (32 calls in flight by
      // default) would answer the rest 429, and the row would measure that bound instead
      // of the forwarding. Once the load generator kept up with the server, it did.
      upstreams: { bookings: { url: service, tokenHeader: 'X-Service-Token', maxInFlightPerCredential: 64 } },
      routes: [{
        path: '/v1/guests', methods: ['GET'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests',
        query: { page: { type: 'integer', min: 1 }, perPage: { type: 'integer', min: 1, max: 100 } },
      }],
    }, { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN })
  }
  const gateways = new Map<string, Promise<Server>>()
  const gateway = (name: string): Promise<Server> => {
    let started = gateways.get(name)
    if (started === undefined) {
      const start = gatewayConfigs[name]
      if (start === undefined) throw new Error(`no gateway configuration ${name}`)
      started = start()
      gateways.set(name, started)
    }
    return started
  }
  let serviceUrl: Promise<string> | undefined
  function startService(): Promise<string> {
    serviceUrl ??= (async () => {
      // The stand-in internal service behind declared routes, when this checkout has it.
      const script = 'dist/mocks/service/server.js'
      if (!existsSync(script)) throw new Error(`the pass-through row needs the stand-in service (${script}): npm run build`)
      const port = await freePort()
      startProcess(script, { MOCK_SERVICE_PORT: String(port), MOCK_SERVICE_TOKEN: SERVICE_TOKEN }, { stdout: 'ignore' })
      const url = `http://127.0.0.1:${port}`
      await waitFor(`${url}/__mock/requests`)
      return url
    })()
    return serviceUrl
  }

  const firstPage = JSON.parse(await (await request(`${(await gateway('cached')).url}/v1/properties?perPage=2`, { headers: auth })).body.text()) as { data: { id: string }[] }
  const id = firstPage.data[0]?.id as string
  const otherId = firstPage.data[1]?.id as string
  // A key over its quota: a limit of one, spent before the bytes are captured.
  const { key: limitedKey } = await store.create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 1, name: 'bench-limited' })
  const limited = { ...auth, authorization: `Bearer ${limitedKey}` }
  // A key whose allow-list leaves out the property asked for.
  const { key: restrictedKey } = await store.create({ brand: 'acme', mode: 'live', properties: [otherId], rateLimit: 2_000_000_000, name: 'bench-restricted' })
  const restricted = { ...auth, authorization: `Bearer ${restrictedKey}` }

  const single = { path: `/v1/properties/${id}`, headers: auth }
  // A key that may be used from 32 addresses and blocks, the one wrk calls from last.
  const fenced = await store.create({
    brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench-fenced',
    allowedIps: [...Array.from({ length: 16 }, (_, i) => `10.${i}.0.0/16`), ...Array.from({ length: 15 }, (_, i) => `2001:db8:${i.toString(16)}::/48`), '127.0.0.1'],
  })
  const fencedSingle = { path: single.path, headers: { ...auth, authorization: `Bearer ${fenced.key}` } }
  // A key of the right form that no store knows: the 401 rows, with answers ended together and one by one.
  const unknownKey = { path: '/v1/properties', headers: { ...auth, authorization: `Bearer svc_live_${'x'.repeat(28)}` } }
  const list = { path: '/v1/properties?perPage=100', headers: auth }
  const replay: Reference[] = [{ kind: 'fastify' }, { kind: 'node' }]
  const pmsSingle: Reference[] = [{ kind: 'pms', call: { path: `/internal/v3/hotels/${id}`, headers: pmsHeaders } }, { kind: 'fastify' }]
  const allScenarios: Scenario[] = [
    { name: 'GET /v1/health', gateway: 'cached', call: { path: '/v1/health', headers: {} }, status: 200, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    // Against the obvious stack too (peer-stack.ts), with the same key: its second target.
    { name: KEY_ROW, gateway: 'cached', call: single, status: 200, references: [...replay, { kind: 'peer' }], connections: CONNECTIONS, amount: AMOUNT, soak: true },
    // The same request with an access token whose verification the gateway remembers: its CPU
    // per answer is to stay within 10 % of the API-key row's, in the same run.
    { name: TOKEN_ROW, gateway: 'cached', call: { path: single.path, headers: tokenAuth }, status: 200, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    { name: 'GET /v1/properties/{id}, cache hit, rate limiter off', gateway: 'no-limiter', call: single, status: 200, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    { name: 'GET /v1/properties?perPage=100, cache hit', gateway: 'cached', call: list, status: 200, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    // Cache off: the figure that matters is the latency added at p50 over calling the PMS
    // directly, at a few connections; fewer requests, as each costs a PMS call.
    { name: 'GET /v1/properties/{id}, cache off', gateway: 'uncached', call: single, status: 200, references: pmsSingle, connections: LATENCY_CONNECTIONS, amount: Math.round(AMOUNT / 5) },
    // One connection: the time the gateway adds to one call, without queueing behind others.
    { name: 'GET /v1/properties/{id}, cache off, one connection', gateway: 'uncached', call: single, status: 200, references: pmsSingle, connections: 1, amount: Math.round(AMOUNT / 10) },
    { name: 'GET /v1/properties?perPage=100, cache off', gateway: 'uncached', call: list, status: 200, references: [{ kind: 'pms', call: { path: '/internal/v3/hotels?chain_code=ACME&lifecycle=LIVE&offset=0&limit=100', headers: pmsHeaders } }, { kind: 'fastify' }], connections: LATENCY_CONNECTIONS, amount: Math.round(AMOUNT / 20) },
    { name: '401, unknown key', gateway: 'cached', call: unknownKey, status: 401, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    { name: '401, unknown key, each answer ended at once (server.coalesceAnswers false)', gateway: 'one-by-one', call: unknownKey, status: 401, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    { name: '400, unknown parameter', gateway: 'cached', call: { path: '/v1/properties?per_page=100', headers: auth }, status: 400, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    { name: '403 PROPERTY_ACCESS_DENIED, property outside the key\'s list', gateway: 'cached', call: { path: `/v1/properties/${id}`, headers: restricted }, status: 403, references: replay, connections: CONNECTIONS, amount: AMOUNT },
    {
      name: '429, key over its quota', gateway: 'cached', call: { path: `/v1/properties/${id}`, headers: limited }, status: 429, references: replay, connections: CONNECTIONS, amount: AMOUNT,
      prepare: async (server) => {
        const res = await request(`${server.url}/v1/properties/${id}`, { headers: limited })
        await res.body.dump()
        if (res.statusCode !== 200) throw new Error(`the limited key's first request answered ${res.statusCode}`)
      },
    },
  ]
  // Credentials over their life: the cached GET against the gateway before it; a key with 32
  // allowed addresses against one without, on the same gateway.
  if (BASELINE !== undefined) {
    allScenarios.push({
      name: CREDENTIAL_ROWS.usage, gateway: 'cached', call: single, status: 200, connections: CONNECTIONS, amount: AMOUNT,
      references: [{ kind: 'gateway', gateway: 'baseline', name: 'gateway before' }],
    })
  }
  allScenarios.push({
    name: CREDENTIAL_ROWS.allowList, gateway: 'cached', call: fencedSingle, status: 200, connections: CONNECTIONS, amount: AMOUNT,
    references: [{ kind: 'gateway', gateway: 'cached', call: single, name: 'key without' }],
  })
  // Tracing: the cached GET with export on against the same gateway without it, and the
  // gateway without tracing against a twin of itself (what a difference of nothing measures).
  const untraced: Reference[] = [{ kind: 'gateway', gateway: 'cached' }]
  allScenarios.push(
    { name: 'GET /v1/properties/{id}, cache hit, tracing off (default), against an identical gateway', gateway: 'cached-twin', call: single, status: 200, references: untraced, connections: CONNECTIONS, amount: AMOUNT },
    { name: 'GET /v1/properties/{id}, cache hit, tracing export at 1 %', gateway: 'traced-1', call: single, status: 200, references: untraced, connections: CONNECTIONS, amount: AMOUNT },
    { name: 'GET /v1/properties/{id}, cache hit, tracing export at 100 %', gateway: 'traced-100', call: single, status: 200, references: untraced, connections: CONNECTIONS, amount: AMOUNT },
  )
  // A declared pass-through route against bare @fastify/http-proxy in front of the same
  // service (which does none of the checks).
  allScenarios.push({ name: 'GET /v1/guests, declared pass-through route', gateway: 'declared', call: { path: '/v1/guests?perPage=10', headers: auth }, status: 200, references: [{ kind: 'proxy' }], connections: CONNECTIONS, amount: AMOUNT, soak: true })
  // Writes: a POST without a key, with a new key each time (the claim and the keeping of the
  // answer), and a replay of one kept answer, each against bare @fastify/http-proxy in front of
  // the same service. Fewer requests: each one the service does creates a guest.
  const guest = { method: 'POST', body: '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}', path: '/v1/guests' } as const
  const writeHeaders = { ...auth, 'content-type': 'application/json' }
  allScenarios.push(
    { name: IDEMPOTENCY_ROWS.plain, gateway: 'declared-writes', call: { ...guest, headers: writeHeaders }, status: 201, references: [{ kind: 'proxy' }], connections: LATENCY_CONNECTIONS, amount: Math.round(AMOUNT / 5) },
    { name: IDEMPOTENCY_ROWS.newKey, gateway: 'declared-writes', call: { ...guest, headers: writeHeaders, newKeys: true }, status: 201, references: [{ kind: 'proxy' }], connections: LATENCY_CONNECTIONS, amount: Math.round(AMOUNT / 5) },
    { name: IDEMPOTENCY_ROWS.replay, gateway: 'declared-writes', call: { ...guest, headers: { ...writeHeaders, 'idempotency-key': `bench-replayed-${PREFIX}` } }, status: 201, references: [{ kind: 'proxy' }], connections: LATENCY_CONNECTIONS, amount: Math.round(AMOUNT / 5) },
  )
  // Events: the ingest's throughput with batches of 100 (each event new, so each is stored),
  // and a page of 100 events read from the log against bare Fastify answering its bytes.
  const acmeHotels = generateHotels().filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid))
  const eventsKey = async (): Promise<Record<string, string>> => {
    const redis = new Redis(await privateRedis())
    try {
      const { key: created } = await new RedisKeyStore(redis, PREFIX).create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench-events' })
      return { ...auth, authorization: `Bearer ${created}` }
    } finally {
      redis.disconnect()
    }
  }
  // The key lives in the events gateway's Redis: made (and that Redis started) only when its row runs.
  const eventsAuth = ONLY === undefined || [EVENTS_LIST_ROW, EVENTS_POLL_ROW].some((row) => ONLY.some((o) => row.toLowerCase().includes(o))) ? await eventsKey() : auth
  allScenarios.push(
    {
      name: INGEST_ROW, gateway: 'events', status: 202, references: [], connections: LATENCY_CONNECTIONS, amount: Math.max(100, Math.round(AMOUNT / 250)),
      call: {
        admin: true, path: '/events', method: 'POST', newIds: true, body: hotelBatch(acmeHotels, INGEST_BATCH, 'XIDX'),
        headers: { authorization: `Bearer ${PUBLISHER_TOKEN}`, 'content-type': 'application/cloudevents-batch+json' },
      },
    },
    {
      name: EVENTS_LIST_ROW, gateway: 'events', call: { path: '/v1/events?perPage=100', headers: eventsAuth }, status: 200,
      references: replay, connections: CONNECTIONS, amount: AMOUNT,
      // The oldest 100 events: the same page whatever the ingest row adds after them.
      prepare: async (server) => {
        for (let i = 0; i < 2; i += 1) {
          const res = await request(`${server.adminUrl as string}/events`, {
            method: 'POST', body: hotelBatch(acmeHotels, INGEST_BATCH, `bench-page-${i}`),
            headers: { authorization: `Bearer ${PUBLISHER_TOKEN}`, 'content-type': 'application/cloudevents-batch+json' },
          })
          await res.body.dump()
          if (res.statusCode !== 202) throw new Error(`the events of the list row were answered ${res.statusCode}`)
        }
      },
    },
    // What a partner catching up sends most: a page after its last event, with nothing new.
    {
      name: EVENTS_POLL_ROW, gateway: 'events', call: { path: '/v1/events?createdAfter=2100-01-01T00:00:00Z', headers: eventsAuth }, status: 200,
      references: replay, connections: CONNECTIONS, amount: AMOUNT,
    },
  )
  // The request log: the cached GET and the pass-through with it on against the same with it
  // off; a filtered page over a credential holding 50,000 entries (written before the row).
  const { key: logKey, record: logRecord } = await store.create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench-request-log' })
  // Two processes, however alike, differ by more than the log costs (the A/A row): each of these
  // rows measures one gateway, its log switched on, then off, by a reload before each load.
  const requestLogSwitch = (name: string, on: boolean) => async (): Promise<void> => {
    const server = await gateway(name)
    const file = join(dir, `${name}.json`)
    const config = JSON.parse(readFileSync(file, 'utf8')) as { requestLog?: Record<string, unknown> }
    if (config.requestLog?.enabled === on) return
    writeFileSync(file, JSON.stringify({ ...config, requestLog: { ...config.requestLog, enabled: on } }))
    const res = await request(`${server.adminUrl as string}/admin/v1/config/reload`, { method: 'POST', headers: DEPLOYED ? { authorization: `Bearer ${SHIPPED_ENV.ADMIN_TOKEN as string}` } : {} })
    const text = await res.body.text()
    if (res.statusCode !== 200 || !text.includes('"changed":true')) throw new Error(`${name}: the reload switching its request log ${on ? 'on' : 'off'} was answered ${res.statusCode}: ${text.slice(0, 300)}`)
  }
  const guests = { path: '/v1/guests?perPage=10', headers: auth }
  // Its log's cost is a few per cent, less than the machine drifts between two loads a round
  // apart: the loads alternate, on then off, several times a round (Scenario's `splits`).
  const REQUEST_LOG_SPLITS = QUICK ? 4 : 5
  const logOff = (name: string): Reference => ({ kind: 'gateway', gateway: name, name: 'same gateway, log off', before: requestLogSwitch(name, false) })
  // Six reloads (the log off and on again, three times), each app then answering a second of the
  // row's requests, before the row's first load: the code every app shares has then read the
  // requests of seven apps, more shapes than V8 tells apart at one property read (four), so the
  // first round does not run on code that has seen fewer than the later ones (each load's reload
  // adds one). The row after these measures what that alone costs.
  const reloadedSixTimes = (name: string, call: Call) => async (): Promise<void> => {
    const server = await gateway(name)
    for (let i = 0; i < 6; i += 1) {
      await requestLogSwitch(name, i % 2 === 1)()
      await load(targetOf(server, call), CONNECTIONS, { seconds: 1 })
    }
  }
  allScenarios.push(
    {
      name: REQUEST_LOG_ROWS.cached, gateway: 'log-switched', call: single, status: 200, before: requestLogSwitch('log-switched', true), splits: REQUEST_LOG_SPLITS,
      references: [logOff('log-switched')], connections: CONNECTIONS, amount: AMOUNT, prepare: reloadedSixTimes('log-switched', single),
    },
    {
      name: REQUEST_LOG_ROWS.passThrough, gateway: 'declared-log-switched', call: guests, status: 200, before: requestLogSwitch('declared-log-switched', true), splits: REQUEST_LOG_SPLITS,
      references: [logOff('declared-log-switched')], connections: CONNECTIONS, amount: AMOUNT, prepare: reloadedSixTimes('declared-log-switched', guests),
    },
    {
      name: RELOADED_ROW, gateway: 'reloaded', call: single, status: 200, prepare: reloadedSixTimes('reloaded', single),
      references: [{ kind: 'gateway', gateway: 'cached', name: 'gateway never reloaded' }], connections: CONNECTIONS, amount: AMOUNT,
    },
    {
      name: REQUEST_LOG_ROWS.page, gateway: 'cached', call: { path: '/v1/request-logs?status=404', headers: { ...auth, authorization: `Bearer ${logKey}` } }, status: 200,
      references: replay, connections: LATENCY_CONNECTIONS, amount: Math.round(AMOUNT / 100),
      prepare: async () => fillRequestLog(REDIS_URL, PREFIX, logRecord.id, 50_000),
    },
  )
  const scenarios = ONLY === undefined ? allScenarios : allScenarios.filter((s) => ONLY.some((o) => s.name.toLowerCase().includes(o)))
  const calibrating = ONLY === undefined || ONLY.some((o) => 'calibration'.includes(o))
  const webhooking = ONLY === undefined || ONLY.some((o) => o.includes(WEBHOOK_ONLY))
  if (scenarios.length === 0 && !calibrating && !webhooking) throw new Error(`--only matches no row; rows:\n${allScenarios.map((s) => `  ${s.name}`).join('\n')}`)

  // What the bare references (Fastify, node:http) answer: the gateway's own bytes for each request.
  const replays = (s: Scenario): boolean => s.references.some((r) => r.kind === 'fastify' || r.kind === 'node' || r.kind === 'peer')
  const routes: Record<string, { status: number; headers: Record<string, string>; body: string }> = {}
  for (const s of scenarios) {
    const server = await gateway(s.gateway)
    await s.prepare?.(server)
    const headers = s.call.newKeys === true ? { ...s.call.headers, 'idempotency-key': `bench-first-${PREFIX}` } : s.call.headers
    const body = s.call.newIds === true ? s.call.body?.replaceAll('XIDX', `bench-first-${PREFIX}`) : s.call.body
    const res = await request(`${baseOf(server, s.call)}${s.call.path}`, { method: s.call.method ?? 'GET', headers, body })
    const answered = await res.body.text()
    if (res.statusCode !== s.status) throw new Error(`${s.name}: the gateway answered ${res.statusCode}, not ${s.status}: ${answered.slice(0, 300)}`)
    if (!replays(s)) continue
    const kept: Record<string, string> = {}
    for (const name of ['content-type', 'x-content-type-options', 'cache-control', 'www-authenticate', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
      const value = res.headers[name]
      if (typeof value === 'string') kept[name] = value
    }
    routes[`${s.call.headers.authorization ?? ''} ${s.call.path}`] = { status: res.statusCode, headers: kept, body: answered }
  }
  const bare = new Map<'fastify' | 'node', Server>()
  if (Object.keys(routes).length > 0) {
    for (const [kind, script] of [['fastify', 'dist/bench/fastify-reference.js'], ['node', 'dist/bench/reference-server.js']] as const) {
      const child = startProcess(script, {}, { stdin: JSON.stringify(routes) })
      bare.set(kind, { url: `http://127.0.0.1:${await portOf(child)}`, pid: child.pid as number })
    }
  }
  let peer: Server | undefined
  if (scenarios.some((s) => s.references.some((r) => r.kind === 'peer'))) {
    // The peer finds the bench key's record where it keeps keys (its own shape, in Redis).
    await redis.set(`${PREFIX}peer:key:${createHash('sha256').update(key).digest('hex')}`, JSON.stringify({ brand: 'acme', rateLimit: 2_000_000_000 }))
    const port = await freePort()
    const child = startProcess('dist/bench/peer-stack.js', { PEER_PORT: String(port), PEER_REDIS_URL: REDIS_URL, PEER_PREFIX: PREFIX, NODE_ENV: 'production' }, { stdin: JSON.stringify(routes), stdout: logSink('peer') })
    peer = { url: `http://127.0.0.1:${port}`, pid: child.pid as number }
    await waitFor(`${peer.url}/v1/health`)
  }
  let proxyServer: Server | undefined
  if (scenarios.some((s) => s.references.some((r) => r.kind === 'proxy'))) {
    const child = startProcess('dist/bench/proxy-reference.js', {
      PROXY_UPSTREAM: await startService(), PROXY_PREFIX: '/v1/guests', PROXY_REWRITE_PREFIX: '/partner/v1/guests',
      PROXY_HEADERS: JSON.stringify({ 'x-service-token': SERVICE_TOKEN, 'x-service-brand': 'acme' }),
    })
    proxyServer = { url: `http://127.0.0.1:${await portOf(child)}`, pid: child.pid as number }
  }

  /**
   * The stand-in service keeps every guest a POST creates, and lists and sorts them all: over a
   * full run the write rows would grow it by tens of thousands, slowing each later answer of
   * the service, so that a side measured later would wait on it more than one measured
   * earlier. Every side of a declared route's row starts from the seeded guests.
   */
  const resetService = async (s: Scenario): Promise<void> => {
    if (!s.gateway.startsWith('declared') || serviceUrl === undefined) return
    const res = await request(`${await serviceUrl}/__mock/guests`, { method: 'DELETE' })
    await res.body.dump()
    if (res.statusCode >= 300) throw new Error(`the stand-in service refused to reset its guests: ${res.statusCode}`)
  }

  interface Targets { gateway: Target; references: Target[] }
  const targets = new Map<string, Targets>()
  for (const s of scenarios) {
    const server = await gateway(s.gateway)
    const references: Target[] = []
    for (const ref of s.references) {
      if (ref.kind === 'pms') {
        references.push({ url: `${pmsUrl}${ref.call.path}`, headers: ref.call.headers, pid: pms.pid as number })
        continue
      }
      const base = (ref.kind === 'proxy' ? proxyServer : ref.kind === 'peer' ? peer : ref.kind === 'gateway' ? await gateway(ref.gateway) : bare.get(ref.kind)) as Server
      // A gateway reference may send its own request (another key: the allowed-addresses row).
      const call = ref.kind === 'gateway' && ref.call !== undefined ? ref.call : s.call
      references.push({ url: `${base.url}${call.path}`, headers: call.headers, pid: base.pid, ...sendOf(call), ...(ref.kind === 'gateway' && ref.before !== undefined ? { before: ref.before } : {}) })
    }
    // Its figure reads the gateway's loads against one reference's, alternating (paired.ts).
    if (s.splits !== undefined && references.length !== 1) throw new Error(`${s.name}: a row with splits has one reference, not ${references.length}`)
    targets.set(s.name, { gateway: targetOf(server, s.call, s.before), references })
  }

  const measured = new Map<string, { gateway: Measure[]; references: Measure[][] }>()
  for (const s of scenarios) {
    const t = targets.get(s.name) as Targets
    // Warm every side (JIT, caches, connections) before anything counts.
    for (const target of [t.gateway, ...t.references]) await load(target, s.connections, { seconds: 1 })
    measured.set(s.name, { gateway: [], references: t.references.map(() => []) })
  }
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const s of scenarios) {
      const t = targets.get(s.name) as Targets
      const m = measured.get(s.name) as { gateway: Measure[]; references: Measure[][] }
      const splits = s.splits ?? 1
      const amount = Math.round(s.amount / splits)
      for (let part = 0; part < splits; part += 1) {
        await resetService(s)
        m.gateway.push(await load(t.gateway, s.connections, { amount }))
        for (const [i, target] of t.references.entries()) {
          await resetService(s)
          m.references[i]?.push(await load(target, s.connections, { amount }))
        }
      }
    }
    console.log(`round ${round}/${ROUNDS} done`)
  }

  const warnings: string[] = []
  const rows: Row[] = scenarios.map((s) => {
    const m = measured.get(s.name) as { gateway: Measure[]; references: Measure[][] }
    const summarise = (side: string, list: Measure[], status: number): Measure => {
      const summary = medianOf(list)
      if (summary.errors > 0) warnings.push(`${s.name}: ${side} had ${summary.errors} connection errors or timeouts`)
      if ((summary.statuses[status] ?? 0) < summary.answers * 0.99) warnings.push(`${s.name}: ${side} answered ${JSON.stringify(summary.statuses)}, expected ${status}`)
      return summary
    }
    const gw = summarise('gateway', m.gateway, s.status)
    const references = s.references.map((ref, i): Compared => {
      const name = ref.kind === 'gateway' && ref.name !== undefined ? ref.name : REFERENCE_NAMES[ref.kind]
      const measure = summarise(name, m.references[i] as Measure[], ref.kind === 'pms' ? 200 : s.status)
      return { reference: name, measure, cpuRatio: round2(measure.cpuUs / gw.cpuUs), rpsRatio: round2(gw.rps / measure.rps), addedP50Us: gw.p50Us - measure.p50Us }
    })
    const roundsCpuUs = { gateway: m.gateway.map((x) => round1(x.cpuUs)), references: m.references.map((list) => list.map((x) => round1(x.cpuUs))) }
    const paired = s.splits === undefined ? undefined : pairedRatio(m.gateway.map((x) => x.cpuUs), (m.references[0] ?? []).map((x) => x.cpuUs), s.splits)
    return { scenario: s.name, connections: s.connections, amount: s.amount, gateway: gw, references, roundsCpuUs, ...(paired === undefined ? {} : { paired }) }
  })

  const calibration = calibrating ? await calibrate() : undefined
  const roundTrips = scenarios.some((x) => (Object.values(IDEMPOTENCY_ROWS) as string[]).includes(x.name))
    ? await idempotencyRoundTrips(pmsUrl, startService) : undefined
  const eventsMemory = scenarios.some((x) => x.gateway === 'events') ? await eventMemory(pmsUrl, acmeHotels) : undefined
  const eventsPage = scenarios.some((x) => x.gateway === 'events') ? await eventsPageCost(await startRedisServer(), EVENTS_CONFIG.types, QUICK ? 20 : 50) : undefined
  const requestLogWrites = scenarios.some((x) => (Object.values(REQUEST_LOG_ROWS) as string[]).includes(x.name)) ? await requestLogWriteCost(await startRedisServer(), QUICK ? 50_000 : 200_000) : undefined
  const webhookAttempts = webhooking ? await measureWebhookAttempts(pmsUrl, acmeHotels) : undefined

  const soaks: Soak[] = []
  if (flags['skip-soak'] !== true) {
    for (const s of scenarios.filter((x) => x.soak === true)) {
      console.log(`memory soak: ${SOAK_SECONDS} s at full load on ${s.name}`)
      const { gateway: target } = targets.get(s.name) as Targets
      await resetService(s)
      let first: number | undefined
      const timer = setTimeout(() => { first = rss(target.pid) }, SOAK_FIRST_SAMPLE * 1000)
      const m = await load(target, s.connections, { seconds: SOAK_SECONDS })
      clearTimeout(timer)
      const end = rss(target.pid)
      const start = first ?? end
      soaks.push({ scenario: s.name, seconds: SOAK_SECONDS, rssFirstMiB: Math.round(start / 2 ** 20), rssEndMiB: Math.round(end / 2 ** 20), growth: round1(((end - start) / start) * 100), cpuUs: round1(m.cpuUs), answers: m.answers })
    }
  }

  // Last, after every measured round: the profiler and the open inspector cost the gateway
  // CPU of their own, so no figure of the table is taken with them.
  console.log(`breakdown: a CPU profile of each row's gateway, ${BREAKDOWN_SECONDS} s per row`)
  const sessions = new Map<number, InspectorSession>()
  try {
    for (const [i, s] of scenarios.entries()) {
      const server = await gateway(s.gateway)
      const target = (targets.get(s.name) as Targets).gateway
      let session = sessions.get(server.pid)
      if (session === undefined) {
        try {
          session = await InspectorSession.open(server.pid, server.inspectPort as number)
        } catch (error) {
          // A profile is an aid to reading the table, not part of it: the run's figures are kept.
          warnings.push(`${s.name}: no breakdown (${(error as Error).message})`)
          continue
        }
        sessions.set(server.pid, session)
      }
      // A reload before the load (the request log's rows) is not part of what is profiled.
      await target.before?.()
      const { profile, result } = await profileDuring(session, PROFILE_INTERVAL_US, () => load({ ...target, before: undefined }, s.connections, { seconds: BREAKDOWN_SECONDS }))
      // Kept for a closer look (Chrome DevTools, Performance, loads .cpuprofile files).
      writeFileSync(join(dir, `row-${i + 1}.cpuprofile`), JSON.stringify(profile))
      const row = rows[i] as Row
      row.breakdown = { ...breakdownOf(profile, result.answers), cpuUs: round1(result.cpuUs), answers: result.answers }
      // A row whose reference is the same process (the request log's): that side too, so the
      // two profiles say which code the difference is in.
      const reference = s.splits === undefined ? undefined : (targets.get(s.name) as Targets).references[0]
      if (reference !== undefined && reference.pid === server.pid) {
        await reference.before?.()
        const other = await profileDuring(session, PROFILE_INTERVAL_US, () => load({ ...reference, before: undefined }, s.connections, { seconds: BREAKDOWN_SECONDS }))
        writeFileSync(join(dir, `row-${i + 1}-reference.cpuprofile`), JSON.stringify(other.profile))
        row.referenceBreakdown = { ...breakdownOf(other.profile, other.result.answers), cpuUs: round1(other.result.cpuUs), answers: other.result.answers }
      }
    }
  } finally {
    for (const session of sessions.values()) session.close()
  }
  if (scenarios.length > 0) console.log(`the profiles: ${dir}/row-<n>.cpuprofile, rows numbered as in the table (row-<n>-reference.cpuprofile: a row's reference when it is the same process)`)

  const authCost = await benchAuth(QUICK ? 200_000 : 500_000)
  const credentialsCost = benchCredentials(QUICK ? 300_000 : 1_000_000)
  const tracingCost = await benchTracing(await startOtlp(), QUICK ? 100_000 : 200_000)
  report({
    machine, rounds: ROUNDS, amount: AMOUNT, gatewayNodeOptions: GATEWAY_NODE_OPTIONS, only: flags.only, baseline: BASELINE, measure: MEASURE, clockTicks: CLOCK_TICKS, rows, calibration, soaks,
    auth: authCost, credentials: credentialsCost, tracing: tracingCost, warnings, roundTrips, eventsMemory, eventsPage, requestLogWrites, webhookAttempts,
  })
  await redis.quit()
}

/** The webhook attempt row (webhook-attempts.ts) on a redis-server of its own: two gateways, as deployed, delivering to a receiver in this process. */
async function measureWebhookAttempts(pmsUrl: string, hotels: readonly string[]): Promise<WebhookAttemptCost> {
  console.log(`webhooks: ${ROUNDS} rounds of ${QUICK ? 200 : 500} events to 16 endpoints, against a bare undici POST`)
  const redisUrl = await startRedisServer()
  const env = { REDIS_URL: redisUrl, EVENTS_PMS_TOKEN: PUBLISHER_TOKEN, EVENTS_BOOKINGS_TOKEN: `${PUBLISHER_TOKEN}-2` }
  return webhookAttemptCost({
    redisUrl, prefix: PREFIX, dir, publisherToken: PUBLISHER_TOKEN, events: EVENTS_CONFIG, cpuMicros,
    startGateway: async (name, events, worker) => {
      const server = await startGateway(name, pmsUrl, { events }, { ...env, EVENTS_WORKER: worker ? 'only' : 'off' })
      return { url: worker ? undefined : server.url, adminUrl: server.adminUrl as string, pid: server.pid }
    },
    startProcess: (script, processEnv) => startProcess(script, processEnv),
    batch: (size, prefix) => hotelBatch(hotels, size, prefix),
  }, ROUNDS, QUICK ? 200 : 500)
}

/** A redis-server of the bench's own on a free port, without persistence; resolves to its URL once it answers. */
async function startRedisServer(): Promise<string> {
  const port = await freePort()
  children.push(spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' }))
  const url = `redis://127.0.0.1:${port}`
  for (let i = 0; i < 100 && !(await redisAnswers(url)); i += 1) await new Promise((r) => setTimeout(r, 50))
  return url
}

interface EventsMemory {
  events: number
  /** used_memory grown per event while its copy record lives (its first 24 hours). */
  bytesPerEvent: number
  /** The same once the copy records are gone. */
  bytesPerEventAfterDay: number
  keys: number
}

/**
 * Redis memory per retained event: a gateway on a Redis server of its own, 10,000 events
 * ingested in batches of 100 about the 60 hotels of a brand (so each index of a property
 * holds a realistic few hundred), `used_memory` before and after; then again once the copy
 * records (kept 24 h) are deleted, as they will have expired.
 */
async function eventMemory(pmsUrl: string, hotels: readonly string[]): Promise<EventsMemory> {
  const url = await startRedisServer()
  const redis = new Redis(url)
  try {
    const server = await startGateway('events-memory', pmsUrl, { events: EVENTS_CONFIG }, { REDIS_URL: url, EVENTS_PMS_TOKEN: PUBLISHER_TOKEN, EVENTS_BOOKINGS_TOKEN: `${PUBLISHER_TOKEN}-2` })
    const used = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1])
    const publish = async (prefix: string): Promise<void> => {
      const res = await request(`${server.adminUrl as string}/events`, {
        method: 'POST', body: hotelBatch(hotels, INGEST_BATCH, prefix), headers: { authorization: `Bearer ${PUBLISHER_TOKEN}`, 'content-type': 'application/cloudevents-batch+json' },
      })
      await res.body.dump()
      if (res.statusCode !== 202) throw new Error(`the memory measurement's events were answered ${res.statusCode}`)
    }
    // Warm: the scripts loaded, the indexes made.
    await publish('memory-warm')
    const before = await used()
    const events = 10_000
    for (let i = 0; i < events / INGEST_BATCH; i += 1) await publish(`memory-${i}`)
    const after = await used()
    const copies = await redis.keys(`${PREFIX}ev:*:d:*`)
    for (let i = 0; i < copies.length; i += 1000) await redis.del(...copies.slice(i, i + 1000))
    const withoutCopies = await used()
    return {
      events, bytesPerEvent: Math.round((after - before) / events), bytesPerEventAfterDay: Math.round((withoutCopies - before) / events), keys: await redis.dbsize(),
    }
  } finally {
    redis.disconnect()
  }
}

function eventsLines(rows: Row[], memory: EventsMemory | undefined, page: EventsPageCost | undefined): string[] {
  const lines: string[] = []
  const ingest = rows.find((r) => r.scenario === INGEST_ROW)
  if (ingest !== undefined) {
    lines.push(`Events, ingest: ${ingest.gateway.rps * INGEST_BATCH} events accepted per second by one instance (${ingest.gateway.rps} requests of ${INGEST_BATCH}, ${ingest.connections} connections), `
      + `${(ingest.gateway.cpuUs / INGEST_BATCH).toFixed(1)} µs of the gateway's CPU per event (${ingest.gateway.cpuUs.toFixed(0)} µs per request), each written to Redis before its 202.`)
  }
  if (memory !== undefined) {
    lines.push(`Events, Redis memory per retained event (a Redis of its own, ${memory.events} events of one brand about 60 properties, \`used_memory\` before and after): `
      + `${memory.bytesPerEvent} bytes in its first 24 hours, with its copy record; ${memory.bytesPerEventAfterDay} bytes after, until the retention ends.`)
  }
  if (page !== undefined) {
    lines.push(`Events, Redis time of a page of 20 (${page.events} events about 10 properties, on a Redis of its own): first page ${page.ten[0]} µs for a credential of 10 properties, `
      + `${page.thousand[0]} µs for one of 1,000 (${(page.thousand[0] / page.ten[0]).toFixed(2)}×); page 50 ${page.ten[1]} µs and ${page.thousand[1]} µs (${(page.thousand[1] / page.ten[1]).toFixed(2)}×).`)
  }
  return lines.length === 0 ? [] : [...lines, '']
}

/** Redis commands that are no request's work: health probes, connection set-up, this count itself. */
const NOT_A_REQUEST = new Set(['ping', 'echo', 'info', 'client', 'hello', 'select', 'subscribe', 'ssubscribe', 'psubscribe', 'command', 'cluster', 'config'])

interface RoundTrips { requests: number; plain: number; newKey: number; replay: number }

/**
 * Redis round trips per write request: a gateway on a Redis server of its own (nobody else's
 * commands in its count), the same POST without a key, with a new key each time and replayed,
 * sent one after another; every command a client sent (MONITOR, script-internal commands
 * left out) that is a request's work counted. The rate limiter's leases are in all three.
 */
async function idempotencyRoundTrips(pmsUrl: string, startService: () => Promise<string>): Promise<RoundTrips> {
  const url = await startRedisServer()
  const redis = new Redis(url)
  try {
    const { key } = await new RedisKeyStore(redis, PREFIX).create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench-round-trips' })
    const gatewayServer = await startGateway('round-trips', pmsUrl, {
      upstreams: { bookings: { url: await startService(), tokenHeader: 'X-Service-Token' } },
      routes: [{ path: '/v1/guests', methods: ['POST'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', body: { maxBytes: 65536 } }],
    }, { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN, REDIS_URL: url })
    // MONITOR shows each command a client sent, and apart (source "lua") those a script ran:
    // a client's commands are its round trips.
    const monitor = await redis.monitor()
    let sentByClients = 0
    const markers = new Map<string, () => void>()
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const name = String(args[0]).toLowerCase()
      if (name === 'echo') markers.get(String(args[1]))?.()
      if (source !== 'lua' && !NOT_A_REQUEST.has(name)) sentByClients += 1
    })
    const commands = async (): Promise<number> => {
      // MONITOR lines come in the order the commands ran: once a marker's line is in, every
      // command before it is counted.
      const marker = randomUUID()
      const seen = new Promise<void>((resolve) => markers.set(marker, resolve))
      await redis.echo(marker)
      await seen
      return sentByClients
    }
    const requests = 500
    let n = 0
    const send = async (idempotencyKey: string | undefined): Promise<void> => {
      const res = await request(`${gatewayServer.url}/v1/guests`, {
        method: 'POST', body: '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}',
        headers: { authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0', 'content-type': 'application/json', ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }) },
      })
      await res.body.dump()
      if (res.statusCode !== 201) throw new Error(`round trips: the gateway answered ${res.statusCode}`)
    }
    const perRequest = async (key: () => string | undefined): Promise<number> => {
      // Warm: the key cached, the scripts loaded, a quota lease taken.
      for (let i = 0; i < 20; i += 1) await send(key())
      const before = await commands()
      for (let i = 0; i < requests; i += 1) await send(key())
      return round2((await commands() - before) / requests)
    }
    const plain = await perRequest(() => undefined)
    const newKey = await perRequest(() => `bench-rt-${(n += 1)}`)
    const replay = await perRequest(() => 'bench-rt-replayed')
    monitor.disconnect()
    return { requests, plain, newKey, replay }
  } finally {
    redis.disconnect()
  }
}

function roundTripsLine(r: RoundTrips): string {
  return `Redis round trips per POST through a declared route (a Redis of its own, the commands its clients sent as MONITOR shows them, over ${r.requests} requests one after another): `
    + `no key ${r.plain.toFixed(2)}; a new Idempotency-Key ${r.newKey.toFixed(2)} (+${(r.newKey - r.plain).toFixed(2)}: the claim, the keeping of the answer; target at most +2: ${r.newKey - r.plain <= 2 ? 'held' : 'missed'}); `
    + `a replay ${r.replay.toFixed(2)} (+${(r.replay - r.plain).toFixed(2)}: the claim, which reads the kept answer; target at most +1: ${r.replay - r.plain <= 1 ? 'held' : 'missed'}). `
    + 'The rate limiter\'s leases are in all three.'
}

/** Microseconds of busy work per answer that the calibration adds to a bare server. */
const CALIBRATION_WORK_US = 50

interface Calibration { workUs: number; plain: Measure; busy: Measure; addedCpuUs: number }

/**
 * What this machine charges a server for work it adds: the bare node:http reference against
 * the same server spinning CALIBRATION_WORK_US before each answer, in alternating rounds like
 * the rows. Were CPU additive, the second would cost that much more per answer.
 */
async function calibrate(): Promise<Calibration> {
  const routes = { ' /calibration': { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{"ok":true}' } }
  const start = async (workUs: number): Promise<Target> => {
    const child = startProcess('dist/bench/reference-server.js', { REFERENCE_WORK_US: String(workUs) }, { stdin: JSON.stringify(routes) })
    return { url: `http://127.0.0.1:${await portOf(child)}/calibration`, headers: {}, pid: child.pid as number }
  }
  const plain = await start(0)
  const busy = await start(CALIBRATION_WORK_US)
  await load(plain, CONNECTIONS, { seconds: 1 })
  await load(busy, CONNECTIONS, { seconds: 1 })
  const rounds: { plain: Measure[]; busy: Measure[] } = { plain: [], busy: [] }
  for (let round = 1; round <= ROUNDS; round += 1) {
    rounds.plain.push(await load(plain, CONNECTIONS, { amount: AMOUNT }))
    rounds.busy.push(await load(busy, CONNECTIONS, { amount: AMOUNT }))
  }
  const result = { plain: medianOf(rounds.plain), busy: medianOf(rounds.busy) }
  return { workUs: CALIBRATION_WORK_US, ...result, addedCpuUs: round1(result.busy.cpuUs - result.plain.cpuUs) }
}

interface Results {
  machine: Record<string, unknown>
  rounds: number
  amount: number
  gatewayNodeOptions: string[]
  only: string | undefined
  /** The checkout the rows against the gateway before ran (--baseline). */
  baseline: string | undefined
  /** `deployed` or `previous` (--measure). */
  measure: string
  clockTicks: number
  rows: Row[]
  calibration: Calibration | undefined
  soaks: Soak[]
  auth: Awaited<ReturnType<typeof benchAuth>>
  credentials: ReturnType<typeof benchCredentials>
  tracing: Awaited<ReturnType<typeof benchTracing>>
  warnings: string[]
  roundTrips: RoundTrips | undefined
  eventsMemory: EventsMemory | undefined
  eventsPage: EventsPageCost | undefined
  requestLogWrites?: RequestLogWriteCost | undefined
  webhookAttempts?: WebhookAttemptCost | undefined
}

function calibrationLine(c: Calibration): string {
  return `Calibration: the bare node:http reference costs ${c.plain.cpuUs.toFixed(1)} µs of CPU per answer (${c.plain.rps} req/s); `
    + `the same server spinning ${c.workUs} µs before each answer, ${c.busy.cpuUs.toFixed(1)} µs (${c.busy.rps} req/s): `
    + `${c.addedCpuUs.toFixed(1)} µs more for ${c.workUs} µs of work (×${(c.addedCpuUs / c.workUs).toFixed(2)}). `
    + `At this machine's rates, a server that adds 1 µs of work is charged that much more per answer.`
}

/** The access-token row against the API-key row of the same run: the 10 % target. */
function tokenAgainstKey(rows: Row[]): string[] {
  const key = rows.find((r) => r.scenario === KEY_ROW)
  const token = rows.find((r) => r.scenario === TOKEN_ROW)
  if (key === undefined || token === undefined) return []
  const more = ((token.gateway.cpuUs - key.gateway.cpuUs) / key.gateway.cpuUs) * 100
  return ['', `Access token remembered against API key, same gateway, same run: ${token.gateway.cpuUs.toFixed(1)} µs against ${key.gateway.cpuUs.toFixed(1)} µs of CPU per answer `
    + `(${more >= 0 ? '+' : ''}${more.toFixed(1)} %; target at most 10 % more: ${more <= 10 ? 'held' : 'missed'}).`]
}

/** The cached GET against the same job built the obvious way (peer-stack.ts): at most 0.65× its CPU. */
function againstPeer(rows: Row[]): string[] {
  const row = rows.find((r) => r.scenario === KEY_ROW)
  const peer = row?.references.find((c) => c.reference === REFERENCE_NAMES.peer)
  if (row === undefined || peer === undefined) return []
  const times = row.gateway.cpuUs / peer.measure.cpuUs
  return ['', `${KEY_ROW} against the obvious stack (Fastify with its logger, @fastify/rate-limit on Redis, a key check with lru-cache in front of Redis, the answer from lru-cache), same run: `
    + `${row.gateway.cpuUs.toFixed(1)} µs against ${peer.measure.cpuUs.toFixed(1)} µs of CPU per answer (${times.toFixed(2)}×; target at most 0.65×: ${times <= 0.65 ? 'held' : 'missed'}).`]
}

/** The two rows of credentials over their life against their references: the 5 % targets. */
/** The rows whose rounds disagree (paired.ts, unsteadyRounds): each round's ratio, so that a reader sees what a verdict stands on. */
function unsteadyLines(rows: Row[]): string[] {
  const unsteady = rows.flatMap((r) => {
    const reference = r.roundsCpuUs.references[0]
    const ratios = r.paired === undefined && reference !== undefined ? unsteadyRounds(r.roundsCpuUs.gateway, reference) : undefined
    return ratios === undefined ? [] : [`${r.scenario} ${ratios.map((x) => x.toFixed(2)).join(', ')} (their median ${median(ratios).toFixed(2)})`]
  })
  if (unsteady.length === 0) return []
  return [`Rounds that disagree: each round's CPU ratio against the row's first reference (its two loads back to back), where one strays more than ${UNSTEADY_SPREAD * 100} % from their median; `
    + `the table's ratio takes each side's median apart. ${unsteady.join('; ')}.`, '']
}

function credentialTargets(rows: Row[]): string[] {
  return Object.values(CREDENTIAL_ROWS).flatMap((name) => {
    const row = rows.find((r) => r.scenario === name)
    const reference = row?.references[0]
    if (row === undefined || reference === undefined) return []
    const more = ((row.gateway.cpuUs - reference.measure.cpuUs) / reference.measure.cpuUs) * 100
    return ['', `${name}: ${row.gateway.cpuUs.toFixed(1)} µs against ${reference.measure.cpuUs.toFixed(1)} µs of CPU per answer `
      + `(${more >= 0 ? '+' : ''}${more.toFixed(1)} %; target at most 5 % more: ${more <= 5 ? 'held' : 'missed'}).`]
  })
}

function tracingLine(t: Results['tracing']): string {
  const us = (ns: number): string => (ns / 1000).toFixed(2)
  return `Tracing, in process, CPU per answer of the two hooks that carry it (request context and log line) on a cached GET: `
    + `without tracing ${us(t.offNs)} µs (${t.untracedHooksMakeNoSpan ? 'hooks that make no span' : 'the untraced hooks made a span'}); `
    + `export at 1 % ${us(t.ratio1Ns)} µs (+${us(t.ratio1Ns - t.offNs)}); export at 100 % ${us(t.ratio100Ns)} µs (+${us(t.ratio100Ns - t.offNs)}).`
}

/** Where each row's gateway spends its CPU, by category (bench/breakdown.ts). */
function breakdownSection(rows: Row[]): string[] {
  const profiled = rows.filter((r) => r.breakdown !== undefined)
  if (profiled.length === 0) return []
  return [
    `Where the gateway's µs go, per answer: a CPU profile of the gateway process (V8's sampler every ${PROFILE_INTERVAL_US} µs, through its inspector) over ${BREAKDOWN_SECONDS} s of the row's load after the measured rounds; `
      + 'each sample charged to the first frame up its stack that is a gateway source file or a library it calls (bench/breakdown.ts maps them to categories), '
      + 'Node\'s own frames passed over but for socket writes; GC and native work outside JavaScript as V8 reports them, idle left out. '
      + '"CPU" is the process\'s CPU per answer under the profiler (/proc, all threads); '
      + '"sampled" is the main thread\'s busy time per answer the samples cover; categories under 0.1 µs are left out.',
    '',
    '| scenario | CPU µs | sampled µs | by category, µs per answer (share of sampled) |',
    '|---|---|---|---|',
    ...profiled.flatMap((r) => {
      const line = (name: string, b: NonNullable<Row['breakdown']>): string => {
        const parts = b.categories.filter((c) => c.us >= 0.1).map((c) => `${c.category} ${c.us.toFixed(1)} (${Math.round(c.share * 100)} %)`)
        return `| ${name} | ${b.cpuUs.toFixed(1)} | ${b.sampledUs.toFixed(1)} | ${parts.join(' · ')} |`
      }
      const lines = [line(r.scenario, r.breakdown as NonNullable<Row['breakdown']>)]
      if (r.referenceBreakdown !== undefined) lines.push(line(`${r.scenario}: its reference, ${r.references[0]?.reference ?? ''}`, r.referenceBreakdown))
      return lines
    }),
    '',
  ]
}

function report(results: Results): void {
  const { machine } = results
  const driver = results.rows.flatMap((r) => [r.gateway.driverCpuUs, ...r.references.map((c) => c.measure.driverCpuUs)])
  const lines = [
    `Measured ${String(machine.date).slice(0, 10)} on ${String(machine.cpus)} × ${String(machine.cpu)} (${String(machine.memoryGiB)} GiB), Node ${String(machine.node)}; `
      + `median of ${results.rounds} alternating rounds of the row's number of requests per side. `
      + `Gateway Node options: ${results.gatewayNodeOptions.length === 0 ? 'none' : `\`${results.gatewayNodeOptions.join(' ')}\``}. `
      + (results.measure === 'deployed'
        ? 'Measured as deployed: NODE_ENV=production, config/default.json under each row\'s settings, logging at info, one line per request, to a pipe that another process drains into a file.'
        : 'The previous measure: the bench\'s own config, logging at info, one line per request, to /dev/null.')
      + (results.only === undefined ? '' : ` Rows matching "${results.only}" only.`)
      + (results.baseline === undefined ? '' : ` "The gateway before" runs the build at ${results.baseline}.`),
    '',
    'Load from wrk (`-t1`, the row\'s connections), in a process of its own. CPU is user + system time of the server process over its round (`/proc/<pid>/stat`), per answer; '
      + 'reads and writes are its system calls per answer (`syscr`, `syscw` of `/proc/<pid>/io`); the CPU ratio is reference ÷ gateway (higher is better, 1.00 costs the same), '
      + 'in bold against the row\'s first reference (bare Fastify answering the same bytes, the PMS called directly, bare @fastify/http-proxy or the gateway without tracing). '
      + 'Latencies in µs, wrk\'s histogram of every answer.',
    '',
    ...(results.rows.length === 0 ? [] : [
      '| scenario | conns | requests | server | CPU µs | reads | writes | req/s | p50 µs | p99 µs | CPU ratio | req/s ratio | added p50 µs |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...results.rows.flatMap((r) => [
        `| ${r.scenario} | ${r.connections} | ${r.amount} | gateway | ${r.gateway.cpuUs.toFixed(1)} | ${r.gateway.readsPerAnswer.toFixed(2)} | ${r.gateway.writesPerAnswer.toFixed(2)} | ${r.gateway.rps} | ${r.gateway.p50Us} | ${r.gateway.p99Us} | | | |`,
        ...r.references.map((c, i) => `| | | | ${c.reference} | ${c.measure.cpuUs.toFixed(1)} | ${c.measure.readsPerAnswer.toFixed(2)} | ${c.measure.writesPerAnswer.toFixed(2)} | ${c.measure.rps} | ${c.measure.p50Us} | ${c.measure.p99Us} | ${i === 0 ? `**${r.paired === undefined ? c.cpuRatio.toFixed(2) : `${r.paired.cpuRatio.toFixed(2)} paired`}**` : c.cpuRatio.toFixed(2)} | ${c.rpsRatio.toFixed(2)} | ${c.addedP50Us} |`),
      ]),
    ]),
    '',
    ...(driver.length === 0 ? [] : [`Load generator (wrk, one thread, a process of its own): ${Math.min(...driver).toFixed(1)}–${Math.max(...driver).toFixed(1)} µs of CPU per answer.`, '']),
    ...unsteadyLines(results.rows),
    ...breakdownSection(results.rows),
    ...(results.calibration === undefined ? [] : [calibrationLine(results.calibration), '']),
    ...(results.roundTrips === undefined ? [] : [roundTripsLine(results.roundTrips), '']),
    ...eventsLines(results.rows, results.eventsMemory, results.eventsPage),
    ...requestLogLines(results.rows, results.requestLogWrites),
    ...webhookAttemptLines(results.webhookAttempts),
    ...(results.soaks.length === 0
      ? ['Memory soak skipped.']
      : results.soaks.map((s) => `Memory, ${s.scenario}: resident size ${s.rssFirstMiB} MiB after ${SOAK_FIRST_SAMPLE} s and ${s.rssEndMiB} MiB after ${s.seconds} s at full load (${s.growth >= 0 ? '+' : ''}${s.growth} %; ${s.answers} answers, ${s.cpuUs.toFixed(1)} µs CPU each).`)),
    '',
    `Authentication on a key-cache hit: ${(results.auth.verifyHitNs / 1000).toFixed(2)} µs per request (SHA-256 of the key alone: ${(results.auth.sha256Ns / 1000).toFixed(2)} µs); `
      + `of a remembered access token: ${(results.auth.tokenHitNs / 1000).toFixed(2)} µs (SHA-256 of the token alone: ${(results.auth.tokenSha256Ns / 1000).toFixed(2)} µs).`,
    ...againstPeer(results.rows),
    ...tokenAgainstKey(results.rows),
    ...credentialTargets(results.rows),
    '',
    `Credentials over their life, in process: counting an answer's usage ${(results.credentials.countUsageNs / 1000).toFixed(3)} µs; `
      + `an allow-list of 32 entries ${(results.credentials.allowListSameNs / 1000).toFixed(3)} µs for the address asked about last, `
      + `${(results.credentials.allowListChangingNs / 1000).toFixed(3)} µs for an address not asked about lately, each time.`,
    '',
    tracingLine(results.tracing),
    ...results.warnings.map((w) => `\nWarning: ${w}.`),
  ]
  const markdown = lines.join('\n')
  console.log(`\n${markdown}`)
  mkdirSync('bench/results', { recursive: true })
  const stamp = String(machine.date).replace(/[:.]/g, '-')
  writeFileSync(`bench/results/${stamp}.json`, `${JSON.stringify(results, null, 2)}\n`)
  writeFileSync(`bench/results/${stamp}.md`, `${markdown}\n`)
  writeFileSync('bench/results/latest.md', `${markdown}\n`)
}

if (!wrkAvailable()) {
  process.stderr.write(`${INSTALL_HINT}\n`)
  process.exit(1)
}

try {
  await main()
} finally {
  // The gateways first, each shut down as it would be (it drains, then writes its last log
  // lines and spans), and only then what they write to and call (log drains, Redis servers, the
  // stand-ins): stopped together, a gateway lost its pipe or its Redis mid-shutdown and was
  // killed by its own shutdown timeout.
  const stop = async (list: ChildProcess[]): Promise<void> => {
    await Promise.all(list.filter((child) => child.exitCode === null && child.signalCode === null).map(async (child) => {
      const exited = once(child, 'exit')
      // A gateway the webhook row stopped (SIGSTOP) when the run was cut short goes on first.
      child.kill('SIGCONT')
      child.kill('SIGTERM')
      const stopped = await Promise.race([exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 20_000).unref())])
      if (!stopped) child.kill('SIGKILL')
    }))
  }
  await stop([...gatewayProcesses])
  await stop(children.filter((child) => !gatewayProcesses.has(child)))
  const redis = new Redis(REDIS_URL)
  const stale = await redis.keys(`${PREFIX}*`)
  for (let i = 0; i < stale.length; i += 1000) await redis.del(...stale.slice(i, i + 1000))
  redis.disconnect()
}
