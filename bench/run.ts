import autocannon from 'autocannon'
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { cpus, freemem, totalmem, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { RedisKeyStore } from '../src/keys/store.js'
import { benchAuth } from './auth.js'

// `npm run bench [-- --quick] [-- --skip-soak]`: every server in its own process (the gateway
// in three configurations, a bare node:http reference, the stand-in PMS); autocannon drives
// each scenario against the gateway and its reference in alternating rounds with the same
// connections and duration. Figures are ratios within one run: these machines are shared.

const { values: flags } = parseArgs({ options: { quick: { type: 'boolean' }, 'skip-soak': { type: 'boolean' } } })
const QUICK = flags.quick === true
const DURATION = QUICK ? 3 : 5
const ROUNDS = QUICK ? 2 : 3
const CONNECTIONS = 50
const LATENCY_CONNECTIONS = 4
const SOAK_SECONDS = QUICK ? 30 : 120
const SOAK_FIRST_SAMPLE = QUICK ? 5 : 20
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PMS_TOKEN = 'bench-pms-token'
const PREFIX = `bench:${randomUUID().slice(0, 8)}:`

const children: ChildProcess[] = []
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-'))

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
    server.on('error', reject)
  })
}

function startProcess(script: string, env: Record<string, string>, options: { stdin?: string; stdout?: 'pipe' | 'ignore' } = {}): ChildProcess {
  const { stdin, stdout = 'pipe' } = options
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: [stdin === undefined ? 'ignore' : 'pipe', stdout, 'inherit'] })
  if (stdin !== undefined) child.stdin?.end(stdin)
  children.push(child)
  return child
}

async function waitFor(url: string, headers: Record<string, string> = {}): Promise<void> {
  for (let i = 0; i < 200; i += 1) {
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

async function startGateway(name: string, pmsUrl: string, overrides: Record<string, unknown>): Promise<{ url: string; pid: number }> {
  const configFile = join(dir, `${name}.json`)
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['127.0.0.1', 'localhost'] }],
    rateLimit: { enabled: true, limit: 1000, windowSeconds: 60 },
    ...overrides,
  }))
  const port = await freePort()
  const child = startProcess('dist/src/server.js', {
    PORT: String(port), ADMIN_PORT: String(await freePort()), CONFIG_FILE: configFile, REDIS_URL, REDIS_PREFIX: PREFIX,
    PMS_URL: pmsUrl, PMS_TOKEN, LOG_LEVEL: 'info',
  // One log line per request, as in production, written to /dev/null: the driver must not
  // spend its CPU reading them.
  }, { stdout: 'ignore' })
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/v1/health`)
  return { url, pid: child.pid as number }
}

interface Target { url: string; headers: Record<string, string> }
interface Measure { rps: number; p50: number; p99: number; non2xx: number; errors: number }

async function load(target: Target, seconds: number, connections: number): Promise<Measure> {
  const result = await autocannon({ url: target.url, headers: target.headers, connections, duration: seconds, pipelining: 1 })
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors + result.timeouts }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

interface Scenario { name: string; gateway: Target; reference: Target; referenceName: string; connections: number }
interface Row { scenario: string; reference: string; connections: number; gateway: Measure; ref: Measure; ratio: number; addedP50Ms: number }

function rss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
}

async function main(): Promise<void> {
  const machine = { cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), freeGiB: Math.round(freemem() / 2 ** 30), node: process.version, date: new Date().toISOString() }
  console.log(`node ${machine.node}, ${machine.cpus} × ${machine.cpu}; ${QUICK ? 'quick run' : 'full run'}: ${ROUNDS} alternating rounds of ${DURATION} s`)

  // The stand-in PMS, answering at once: what is measured is the gateway, not the PMS.
  const pmsPort = await freePort()
  startProcess('dist/mocks/pms/server.js', { MOCK_PMS_PORT: String(pmsPort), MOCK_PMS_TOKEN: PMS_TOKEN }, { stdout: 'ignore' })
  const pmsUrl = `http://127.0.0.1:${pmsPort}`
  const pmsHeaders = { 'x-pms-service-token': PMS_TOKEN }
  await waitFor(`${pmsUrl}/internal/v3/ping`, pmsHeaders)

  const redis = new Redis(REDIS_URL)
  const { key } = await new RedisKeyStore(redis, PREFIX).create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench' })

  const cached = await startGateway('cached', pmsUrl, {})
  const noLimiter = await startGateway('no-limiter', pmsUrl, { rateLimit: { enabled: false } })
  const uncached = await startGateway('uncached', pmsUrl, { cache: { ttlMs: 0 } })

  const auth = { authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0' }
  const firstPage = JSON.parse(await (await request(`${cached.url}/v1/properties?perPage=1`, { headers: auth })).body.text()) as { data: { id: string }[] }
  const id = firstPage.data[0]?.id as string

  // What the reference answers: the gateway's own bytes for each path.
  const paths = {
    health: { path: '/v1/health', headers: {} },
    single: { path: `/v1/properties/${id}`, headers: auth },
    list: { path: '/v1/properties?perPage=100', headers: auth },
    unauthorized: { path: '/v1/properties', headers: { ...auth, authorization: `Bearer svc_live_${'x'.repeat(28)}` } },
    badRequest: { path: '/v1/properties?per_page=100', headers: auth },
  } satisfies Record<string, { path: string; headers: Record<string, string> }>
  const routes: Record<string, { status: number; headers: Record<string, string>; body: string }> = {}
  for (const { path, headers } of Object.values(paths)) {
    const res = await request(`${cached.url}${path}`, { headers })
    const kept: Record<string, string> = {}
    for (const name of ['content-type', 'x-content-type-options', 'cache-control', 'www-authenticate', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
      const value = res.headers[name]
      if (typeof value === 'string') kept[name] = value
    }
    routes[path] = { status: res.statusCode, headers: kept, body: await res.body.text() }
  }
  const reference = startProcess('dist/bench/reference-server.js', {}, { stdin: JSON.stringify(routes) })
  const referencePort = await new Promise<number>((resolve) => reference.stdout?.once('data', (line: Buffer) => resolve((JSON.parse(line.toString()) as { port: number }).port)))
  const referenceUrl = `http://127.0.0.1:${referencePort}`

  const at = (base: string, key: keyof typeof paths): Target => ({ url: `${base}${paths[key].path}`, headers: paths[key].headers })
  const scenarios: Scenario[] = [
    { name: 'GET /v1/health', gateway: at(cached.url, 'health'), reference: at(referenceUrl, 'health'), referenceName: 'node:http', connections: CONNECTIONS },
    { name: 'GET /v1/properties/{id}, cache hit, rate limiter on', gateway: at(cached.url, 'single'), reference: at(referenceUrl, 'single'), referenceName: 'node:http', connections: CONNECTIONS },
    { name: 'GET /v1/properties/{id}, cache hit, rate limiter off', gateway: at(noLimiter.url, 'single'), reference: at(referenceUrl, 'single'), referenceName: 'node:http', connections: CONNECTIONS },
    { name: 'GET /v1/properties?perPage=100, cache hit', gateway: at(cached.url, 'list'), reference: at(referenceUrl, 'list'), referenceName: 'node:http', connections: CONNECTIONS },
    { name: 'GET /v1/properties/{id}, cache off', gateway: at(uncached.url, 'single'), reference: { url: `${pmsUrl}/internal/v3/hotels/${id}`, headers: pmsHeaders }, referenceName: 'PMS direct', connections: LATENCY_CONNECTIONS },
    { name: 'GET /v1/properties?perPage=100, cache off', gateway: at(uncached.url, 'list'), reference: { url: `${pmsUrl}/internal/v3/hotels?chain_code=ACME&lifecycle=LIVE&offset=0&limit=100`, headers: pmsHeaders }, referenceName: 'PMS direct', connections: LATENCY_CONNECTIONS },
    { name: '401, unknown key', gateway: at(cached.url, 'unauthorized'), reference: at(referenceUrl, 'unauthorized'), referenceName: 'node:http', connections: CONNECTIONS },
    { name: '400, unknown parameter', gateway: at(cached.url, 'badRequest'), reference: at(referenceUrl, 'badRequest'), referenceName: 'node:http', connections: CONNECTIONS },
  ]

  const measured = new Map<string, { gateway: Measure[]; ref: Measure[] }>()
  for (const s of scenarios) {
    // Warm both sides (JIT, caches, connections) before anything counts.
    await load(s.gateway, 1, s.connections)
    await load(s.reference, 1, s.connections)
    measured.set(s.name, { gateway: [], ref: [] })
  }
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const s of scenarios) {
      const m = measured.get(s.name) as { gateway: Measure[]; ref: Measure[] }
      m.gateway.push(await load(s.gateway, DURATION, s.connections))
      m.ref.push(await load(s.reference, DURATION, s.connections))
    }
    console.log(`round ${round}/${ROUNDS} done`)
  }

  const rows: Row[] = scenarios.map((s) => {
    const m = measured.get(s.name) as { gateway: Measure[]; ref: Measure[] }
    const summarise = (list: Measure[]): Measure => ({
      rps: Math.round(median(list.map((x) => x.rps))), p50: median(list.map((x) => x.p50)), p99: median(list.map((x) => x.p99)),
      non2xx: list.reduce((a, x) => a + x.non2xx, 0), errors: list.reduce((a, x) => a + x.errors, 0),
    })
    const gateway = summarise(m.gateway)
    const ref = summarise(m.ref)
    return { scenario: s.name, reference: s.referenceName, connections: s.connections, gateway, ref, ratio: Math.round((gateway.rps / ref.rps) * 100) / 100, addedP50Ms: Math.round((gateway.p50 - ref.p50) * 100) / 100 }
  })

  let soak: { seconds: number; rssFirstMiB: number; rssEndMiB: number; growth: number } | undefined
  if (flags['skip-soak'] !== true) {
    console.log(`memory soak: ${SOAK_SECONDS} s at full load on the cached single GET`)
    const samples: number[] = []
    const timer = setTimeout(() => samples.push(rss(cached.pid)), SOAK_FIRST_SAMPLE * 1000)
    await load(at(cached.url, 'single'), SOAK_SECONDS, CONNECTIONS)
    clearTimeout(timer)
    const end = rss(cached.pid)
    const first = samples[0] ?? end
    soak = { seconds: SOAK_SECONDS, rssFirstMiB: Math.round(first / 2 ** 20), rssEndMiB: Math.round(end / 2 ** 20), growth: Math.round(((end - first) / first) * 1000) / 10 }
  }

  const authCost = await benchAuth(QUICK ? 200_000 : 500_000)
  report({ machine, rounds: ROUNDS, durationSeconds: DURATION, rows, soak, auth: authCost })
  await redis.quit()
}

function report(results: { machine: Record<string, unknown>; rounds: number; durationSeconds: number; rows: Row[]; soak?: { seconds: number; rssFirstMiB: number; rssEndMiB: number; growth: number } | undefined; auth: Awaited<ReturnType<typeof benchAuth>> }): void {
  const { machine } = results
  const lines = [
    `Measured ${String(machine.date).slice(0, 10)} on ${String(machine.cpus)} × ${String(machine.cpu)} (${String(machine.memoryGiB)} GiB), Node ${String(machine.node)}; median of ${results.rounds} alternating rounds of ${results.durationSeconds} s each. Gateway logging at info, one line per request.`,
    '',
    '| scenario | conns | gateway req/s | p50 ms | p99 ms | reference | ref req/s | ref p50 | ref p99 | ratio | added p50 ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...results.rows.map((r) => `| ${r.scenario} | ${r.connections} | ${r.gateway.rps} | ${r.gateway.p50} | ${r.gateway.p99} | ${r.reference} | ${r.ref.rps} | ${r.ref.p50} | ${r.ref.p99} | ${r.ratio.toFixed(2)} | ${r.addedP50Ms} |`),
    '',
    results.soak === undefined ? 'Memory soak skipped.' : `Memory: resident size ${results.soak.rssFirstMiB} MiB after ${SOAK_FIRST_SAMPLE} s and ${results.soak.rssEndMiB} MiB after ${results.soak.seconds} s at full load (${results.soak.growth >= 0 ? '+' : ''}${results.soak.growth} %).`,
    '',
    `Authentication on a key-cache hit: ${(results.auth.verifyHitNs / 1000).toFixed(2)} µs per request (SHA-256 of the key alone: ${(results.auth.sha256Ns / 1000).toFixed(2)} µs).`,
  ]
  const markdown = lines.join('\n')
  console.log(`\n${markdown}`)
  mkdirSync('bench/results', { recursive: true })
  const stamp = String(machine.date).replace(/[:.]/g, '-')
  writeFileSync(`bench/results/${stamp}.json`, `${JSON.stringify(results, null, 2)}\n`)
  writeFileSync(`bench/results/${stamp}.md`, `${markdown}\n`)
  writeFileSync('bench/results/latest.md', `${markdown}\n`)
  for (const row of results.rows) {
    if (row.gateway.errors > 0 || row.ref.errors > 0) console.log(`warning: ${row.scenario} had connection errors or timeouts`)
  }
}

try {
  await main()
} finally {
  for (const child of children) child.kill('SIGTERM')
  const redis = new Redis(REDIS_URL)
  const stale = await redis.keys(`${PREFIX}*`)
  if (stale.length > 0) await redis.del(...stale)
  redis.disconnect()
}
