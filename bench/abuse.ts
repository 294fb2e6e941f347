import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { Pool, request } from 'undici'
import { generateKey } from '../src/keys/format.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { freePort } from './ports.js'

// `npm run abuse`: drives each attack of the hardening review against a running gateway (its
// own process, as `npm start` runs it, with the stand-in PMS and a Redis server of its own on
// loopback) for a bounded time, with a well-behaved partner client beside it, and reports
// what each attack cost. Every address is a loopback one. Writes bench/results/abuse-*.md.

const ATTACK_SECONDS = 4
const AUTH_FAILURES_PER_MINUTE = 600
const HEADERS_TIMEOUT_MS = 2000
const REQUEST_TIMEOUT_MS = 4000
const PARTNER_KEYS = 20
const PMS_TOKEN = 'abuse-pms-token'
const ADMIN_TOKEN = 'abuse-bench-admin-token-0123456789'

const children: ChildProcess[] = []
const dir = mkdtempSync(join(tmpdir(), 'gw-abuse-'))
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

function start(command: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  children.push(child)
  return child
}

async function waitFor(probe: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 300; i += 1) {
    if (await probe().catch(() => false)) return
    await sleep(50)
  }
  throw new Error(`${what} did not come up`)
}

interface Cost {
  attack: string
  sent: string
  redisCommands: number
  keyLookups: number
  partnerKeysEvicted: number
  socketsHeld: number
  bytesAnswered: number
  pmsCalls: number
  partnerRequests: number
  partner503: number
  bound: string
  holds: boolean
}

async function main(): Promise<void> {
  // A Redis server of the run's own: its command counts are the gateway's alone.
  const redisPort = await freePort()
  start('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'])
  const redisUrl = `redis://127.0.0.1:${redisPort}`
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  redis.on('error', () => undefined)
  await waitFor(async () => { await redis.connect().catch(() => undefined); return (await redis.ping()) === 'PONG' }, 'redis-server')

  const pmsPort = await freePort()
  start(process.execPath, ['dist/mocks/pms/server.js'], { MOCK_PMS_PORT: String(pmsPort), MOCK_PMS_TOKEN: PMS_TOKEN })
  const pmsUrl = `http://127.0.0.1:${pmsPort}`
  await waitFor(async () => (await request(`${pmsUrl}/__mock/requests`)).statusCode === 200, 'stand-in PMS')

  const configFile = join(dir, 'config.json')
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['127.0.0.1', 'localhost'] }],
    // Quotas off: every Redis command counted below is a key look-up or housekeeping.
    rateLimit: { enabled: false },
    // The driver is the proxy on loopback: each attack and the partner get an address of
    // their own (documentation ranges) through X-Forwarded-For.
    trustProxy: ['127.0.0.1'],
    keyCache: { ttlMs: 60_000, maxEntries: 100 },
    abuse: { authFailuresPerMinute: AUTH_FAILURES_PER_MINUTE },
    server: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS },
  }))
  const port = await freePort()
  const adminPort = await freePort()
  // No PMS_SANDBOX_URL: test keys must be refused without a PMS call.
  const gateway = start(process.execPath, ['dist/src/server.js'], {
    PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: configFile, REDIS_URL: redisUrl, REDIS_PREFIX: 'abuse:',
    PMS_URL: pmsUrl, PMS_TOKEN, ADMIN_TOKEN, LOG_LEVEL: 'info',
  })
  const base = `http://127.0.0.1:${port}`
  const admin = `http://127.0.0.1:${adminPort}`
  await waitFor(async () => (await request(`${base}/v1/health`)).statusCode === 200, 'gateway')

  const store = new RedisKeyStore(redis, 'abuse:')
  const partners = await Promise.all(Array.from({ length: PARTNER_KEYS }, async () => (await store.create({ brand: 'acme', mode: 'live', properties: '*' })).key))
  const testKey = (await store.create({ brand: 'acme', mode: 'test', properties: '*' })).key
  const pool = new Pool(base, { connections: 50 })
  let attacker = 0
  const headers = (key: string, extra: Record<string, string> = {}): Record<string, string> =>
    ({ host: '127.0.0.1', 'user-agent': 'abuse-bench/1.0', authorization: `Bearer ${key}`, 'x-forwarded-for': `203.0.113.${attacker}`, ...extra })
  // Warm every partner key into the cache, and the page the partner client reads.
  for (const key of partners) await (await pool.request({ path: '/v1/properties?perPage=5', method: 'GET', headers: headers(key) })).body.dump()

  const status = async (): Promise<{ cache: { apiKeys: { entries: number; unknownEntries: number } } }> =>
    (await (await request(`${admin}/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).body.json()) as never
  const commandStats = async (): Promise<{ total: number; hgetall: number }> => {
    const info = await redis.info('commandstats')
    let total = 0
    let hgetall = 0
    for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
      const calls = Number(match[2])
      total += calls
      if (match[1] === 'hgetall') hgetall = calls
    }
    return { total, hgetall }
  }
  const pmsCalls = async (): Promise<number> => ((await (await request(`${pmsUrl}/__mock/requests`)).body.json()) as unknown[]).length

  /** The well-behaved partner: one request at a time with a valid key, for as long as `running`. */
  function partnerClient(): { stop: () => Promise<{ requests: number; failures503: number; other: number }> } {
    let running = true
    const result = { requests: 0, failures503: 0, other: 0 }
    const key = partners[0] as string
    const loop = (async () => {
      // Its own connection, as a real partner has.
      while (running) {
        const res = await request(`${base}/v1/properties?perPage=5`, { headers: headers(key, { 'x-forwarded-for': '198.51.100.1' }) })
        await res.body.dump()
        result.requests += 1
        if (res.statusCode === 503) result.failures503 += 1
        else if (res.statusCode !== 200) result.other += 1
        await sleep(20)
      }
    })()
    return { stop: async () => { running = false; await loop; return result } }
  }

  async function measure(attack: string, bound: string, run: () => Promise<{ sent: string; socketsHeld?: number; bytes?: number }>,
    holds: (c: Omit<Cost, 'holds' | 'bound' | 'attack'>) => boolean): Promise<Cost> {
    process.stdout.write(`${attack} … `)
    attacker += 1
    const before = { redis: await commandStats(), pms: await pmsCalls(), keys: (await status()).cache.apiKeys.entries }
    const partner = partnerClient()
    const out = await run()
    const seen = await partner.stop()
    const after = { redis: await commandStats(), pms: await pmsCalls(), keys: (await status()).cache.apiKeys.entries }
    const cost = {
      sent: out.sent,
      // INFO itself and the partner's traffic are in the count; the look-ups are HGETALLs.
      redisCommands: after.redis.total - before.redis.total,
      keyLookups: after.redis.hgetall - before.redis.hgetall,
      partnerKeysEvicted: Math.max(0, before.keys - after.keys),
      socketsHeld: out.socketsHeld ?? 0,
      bytesAnswered: out.bytes ?? 0,
      pmsCalls: after.pms - before.pms,
      partnerRequests: seen.requests,
      partner503: seen.failures503,
    }
    const row = { attack, bound, ...cost, holds: holds(cost) && seen.other === 0 }
    process.stdout.write(`${row.holds ? 'holds' : 'DOES NOT HOLD'}${seen.other > 0 ? ` (the partner got ${seen.other} other errors)` : ''}\n`)
    return row
  }

  /** Sends requests as fast as `concurrency` allows for `seconds`; returns counts and bytes. */
  async function flood(seconds: number, concurrency: number, next: (i: number) => { path: string; headers: Record<string, string> }) {
    const until = Date.now() + seconds * 1000
    let sent = 0
    let bytes = 0
    const statuses = new Map<number, number>()
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const { path, headers: h } = next(sent)
        sent += 1
        const res = await pool.request({ path, method: 'GET', headers: h })
        const body = Buffer.from(await res.body.arrayBuffer())
        bytes += body.length
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      }
    }))
    return { sent, bytes, statuses }
  }

  const describeStatuses = (statuses: Map<number, number>): string => [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${n}×${s}`).join(', ')

  /** Opens `count` raw connections, writes `first` and then `drip` every `everyMs`; returns how many the server still holds after `holdMs`. */
  async function slowSockets(count: number, first: string, drip: string, everyMs: number, holdMs: number): Promise<{ held: number; answered: number }> {
    const sockets: Socket[] = []
    const open = new Set<Socket>()
    let answered = 0
    for (let i = 0; i < count; i += 1) {
      const socket = connect(port, '127.0.0.1', () => socket.write(first))
      socket.on('data', () => { answered += 1 })
      socket.on('error', () => undefined)
      socket.on('close', () => open.delete(socket))
      open.add(socket)
      sockets.push(socket)
    }
    const timer = setInterval(() => { for (const s of open) if (s.writable) s.write(drip) }, everyMs)
    await sleep(holdMs)
    clearInterval(timer)
    const held = open.size
    for (const s of sockets) s.destroy()
    return { held, answered }
  }

  const rows: Cost[] = []
  rows.push(await measure('10,000+ invented checksum-valid keys, one address', `≤ ${AUTH_FAILURES_PER_MINUTE} look-ups a minute, 0 partner keys evicted`, async () => {
    const r = await flood(ATTACK_SECONDS, 50, () => ({ path: '/v1/properties', headers: headers(generateKey('live')) }))
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)})`, bytes: r.bytes }
  }, (c) => c.keyLookups <= AUTH_FAILURES_PER_MINUTE && c.partnerKeysEvicted === 0 && c.partner503 === 0))

  rows.push(await measure('Slowloris: a header line every second, 200 sockets', `all cut within headersTimeoutMs (${HEADERS_TIMEOUT_MS} ms) + 1 s`, async () => {
    const r = await slowSockets(200, 'GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n', 'X-Slow: 1\r\n', 1000, HEADERS_TIMEOUT_MS + 1000)
    return { sent: '200 sockets', socketsHeld: r.held }
  }, (c) => c.socketsHeld === 0 && c.partner503 === 0))

  rows.push(await measure('Chunked GET, one chunk, then silence, 200 sockets', 'answered 400 at once, 0 sockets held, 0 look-ups', async () => {
    const r = await slowSockets(200, 'GET /v1/properties HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: abuse/1.0\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n', '', 60_000, 1000)
    return { sent: '200 sockets', socketsHeld: r.held }
  }, (c) => c.socketsHeld === 0 && c.keyLookups === 0))

  rows.push(await measure('svc_test_ key, no sandbox configured', '0 PMS calls', async () => {
    const r = await flood(ATTACK_SECONDS / 2, 20, (i) => ({ path: i % 2 === 0 ? '/v1/properties' : `/v1/properties?page=${i}`, headers: headers(testKey) }))
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)})`, bytes: r.bytes }
  }, (c) => c.pmsCalls === 0))

  const names = Array.from({ length: 2358 }, (_, i) => i.toString(36)).join('&')
  rows.push(await measure('GET /v1/health with 2,358 unknown query names (8 kB)', '≤ 4 kB answered per request', async () => {
    const r = await flood(ATTACK_SECONDS / 2, 20, () => ({ path: `/v1/health?${names}`, headers: { host: '127.0.0.1' } }))
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)})`, bytes: Math.round(r.bytes / r.sent) }
  }, (c) => c.bytesAnswered <= 4096))

  rows.push(await measure('GET /v1/health with Transfer-Encoding: identity, 200 sockets', 'one answer per socket', async () => {
    let answers = 0
    await Promise.all(Array.from({ length: 200 }, async () => new Promise<void>((resolve) => {
      const chunks: Buffer[] = []
      const socket = connect(port, '127.0.0.1', () => socket.write('GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity\r\n\r\n'))
      socket.on('data', (c: Buffer) => chunks.push(c))
      socket.on('error', () => undefined)
      socket.setTimeout(REQUEST_TIMEOUT_MS + 2000, () => socket.destroy())
      socket.on('close', () => { answers += (Buffer.concat(chunks).toString('latin1').match(/^HTTP\/1\.1 \d{3}/gm) ?? []).length; resolve() })
    })))
    return { sent: '200 sockets', bytes: answers }
  }, (c) => c.bytesAnswered === 200))

  const hostileState = Array.from({ length: 30 }, (_, i) => `k${i}=<img src=x>${'\u00e9'.repeat(380)}`).join(',')
  rows.push(await measure('12 kB tracestate with markup and bytes over 0x7F', '0 tracestates reach the PMS', async () => {
    const earlier = await pmsCalls()
    const key = partners[1] as string
    const r = await flood(ATTACK_SECONDS / 2, 10, (i) => ({
      path: `/v1/properties?perPage=${1 + (i % 100)}`,
      headers: headers(key, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: hostileState }),
    }))
    const received = (await (await request(`${pmsUrl}/__mock/requests`)).body.json()) as { tracestate?: string }[]
    const forwarded = received.slice(earlier).filter((x) => x.tracestate !== undefined).length
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)}); tracestates forwarded: ${forwarded}`, socketsHeld: forwarded }
  }, (c) => c.socketsHeld === 0))

  rows.push(await measure('Distinct huge pages (page=10,001 … 2^53-1)', '0 PMS calls', async () => {
    const key = partners[2] as string
    const r = await flood(ATTACK_SECONDS / 2, 20, (i) => ({ path: `/v1/properties?page=${i % 2 === 0 ? 10_001 + i : Number.MAX_SAFE_INTEGER - i}`, headers: headers(key) }))
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)})`, bytes: r.bytes }
  }, (c) => c.pmsCalls === 0))

  rows.push(await measure('Admin port without ADMIN_TOKEN', 'every request 401', async () => {
    let refused = 0
    for (let i = 0; i < 100; i += 1) {
      const res = await request(`${admin}/${i % 2 === 0 ? 'metrics' : 'status'}`)
      await res.body.dump()
      if (res.statusCode === 401) refused += 1
    }
    return { sent: `100 requests, ${refused} answered 401`, socketsHeld: 100 - refused }
  }, (c) => c.socketsHeld === 0))

  rows.push(await measure('Process stopped 1.5 s (SIGSTOP), then continued', '0 503s to the partner', async () => {
    await sleep(500)
    gateway.kill('SIGSTOP')
    await sleep(1500)
    gateway.kill('SIGCONT')
    await sleep(4000)
    return { sent: 'one stall' }
  }, (c) => c.partner503 === 0))

  await pool.close()
  redis.disconnect()

  const header = '| attack | sent | Redis commands (key look-ups) | partner keys evicted | sockets held at end | bytes answered | PMS calls | partner: requests, 503s | bound | holds |'
  const table = [
    header,
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.attack} | ${r.sent} | ${r.redisCommands} (${r.keyLookups}) | ${r.partnerKeysEvicted} | ${r.socketsHeld} | ${r.bytesAnswered} | ${r.pmsCalls} | ${r.partnerRequests}, ${r.partner503} | ${r.bound} | ${r.holds ? 'yes' : '**no**'} |`),
  ].join('\n')
  const stamp = new Date().toISOString().replaceAll(':', '-').replaceAll('.', '-')
  const markdown = [
    `Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, Node ${process.version}; each flood ${ATTACK_SECONDS / 2}-${ATTACK_SECONDS} s, `
      + `server.headersTimeoutMs ${HEADERS_TIMEOUT_MS}, server.requestTimeoutMs ${REQUEST_TIMEOUT_MS}, abuse.authFailuresPerMinute ${AUTH_FAILURES_PER_MINUTE}, `
      + `${PARTNER_KEYS} partner keys cached, quotas off. "Sockets held" is the count still open at the end (for the tracestate and admin rows: tracestates forwarded, admin answers not 401); `
      + `"bytes answered" is the total (per request for the query row; answers per 200 sockets for the identity row).`,
    '',
    table,
  ].join('\n')
  mkdirSync('bench/results', { recursive: true })
  writeFileSync(`bench/results/abuse-${stamp}.md`, `${markdown}\n`)
  console.log(`\n${markdown}\n\nwrote bench/results/abuse-${stamp}.md`)
  if (rows.some((r) => !r.holds)) process.exitCode = 1
}

try {
  await main()
} finally {
  for (const child of children) {
    child.kill('SIGCONT')
    child.kill('SIGTERM')
  }
}
