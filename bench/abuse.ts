import { randomBytes } from 'node:crypto'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
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
/** `npm start` needs one when webhooks are configured: a fresh one each run (a bench's endpoints live as long as it does). */
const WEBHOOKS_SECRET_KEY = randomBytes(24).toString('hex')
const SERVICE_TOKEN = 'abuse-service-token'
// The pass-through's bounds: small, so that the rows see them act within a few seconds.
const RESPONSE_TIMEOUT_MS = 4000
const WRITE_IDLE_TIMEOUT_MS = 1500
const MAX_IN_FLIGHT = 64
const MAX_IN_FLIGHT_PER_CREDENTIAL = 32
const SLOW_READERS = 64
const LARGE_ANSWER_BYTES = 5 * 1024 * 1024
const ADMIN_TOKEN = 'abuse-bench-admin-token-0123456789'
const JWKS_COOLDOWN_SECONDS = 30

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
  jwksFetches: number
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

  // The stand-in identity provider: the gateway trusts its tokens, and its request log counts
  // the JWKS fetches that token floods cause.
  const idpPort = await freePort()
  start(process.execPath, ['dist/mocks/idp/server.js'], { MOCK_IDP_PORT: String(idpPort) })
  const idpUrl = `http://127.0.0.1:${idpPort}`
  const issuer = `${idpUrl}/realms/partners`
  await waitFor(async () => (await request(`${idpUrl}/__mock/requests`)).statusCode === 200, 'stand-in identity provider')

  // The stand-in service behind the shipped declared routes (guests, rooms).
  const servicePort = await freePort()
  start(process.execPath, ['dist/mocks/service/server.js'], { MOCK_SERVICE_PORT: String(servicePort), MOCK_SERVICE_TOKEN: SERVICE_TOKEN })
  const serviceUrl = `http://127.0.0.1:${servicePort}`
  await waitFor(async () => (await request(`${serviceUrl}/__mock/requests`)).statusCode === 200, 'stand-in service')
  const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as { routes: unknown[] }

  const configFile = join(dir, 'config.json')
  writeFileSync(configFile, JSON.stringify({
    docsUrl: 'https://developer.example.com',
    // A second brand, on its own host name, for the partner beside the pass-through's attacks.
    brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['127.0.0.1'] }, { id: 'globex', chainCode: 'GLBX', hosts: ['localhost'] }],
    upstreams: {
      bookings: {
        url: serviceUrl, tokenHeader: 'X-Service-Token', maxInFlight: MAX_IN_FLIGHT, maxInFlightPerCredential: MAX_IN_FLIGHT_PER_CREDENTIAL,
        responseTimeoutMs: RESPONSE_TIMEOUT_MS,
      },
    },
    routes: shipped.routes,
    // Quotas off: every Redis command counted below is a key look-up or housekeeping.
    rateLimit: { enabled: false },
    // The driver is the proxy on loopback: each attack and the partner get an address of
    // their own (documentation ranges) through X-Forwarded-For.
    trustProxy: ['127.0.0.1'],
    keyCache: { ttlMs: 60_000, maxEntries: 100 },
    abuse: { authFailuresPerMinute: AUTH_FAILURES_PER_MINUTE },
    server: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, writeIdleTimeoutMs: WRITE_IDLE_TIMEOUT_MS },
    oauth: {
      issuers: [{ issuer, jwksUri: `${issuer}/protocol/openid-connect/certs`, audience: 'partner-api', algorithms: ['RS256', 'ES256'] }],
      jwksCooldownSeconds: JWKS_COOLDOWN_SECONDS,
    },
  }))
  const port = await freePort()
  const adminPort = await freePort()
  // No PMS_SANDBOX_URL: test keys must be refused without a PMS call.
  const gateway = start(process.execPath, ['dist/src/server.js'], {
    PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_FILE: configFile, REDIS_URL: redisUrl, REDIS_PREFIX: 'abuse:',
    PMS_URL: pmsUrl, PMS_TOKEN, ADMIN_TOKEN, LOG_LEVEL: 'info', UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN, WEBHOOKS_SECRET_KEY,
  })
  const base = `http://127.0.0.1:${port}`
  const admin = `http://127.0.0.1:${adminPort}`
  await waitFor(async () => (await request(`${base}/v1/health`)).statusCode === 200, 'gateway')

  const store = new RedisKeyStore(redis, 'abuse:')
  const partners = await Promise.all(Array.from({ length: PARTNER_KEYS }, async () => (await store.create({ brand: 'acme', mode: 'live', properties: '*' })).key))
  const testKey = (await store.create({ brand: 'acme', mode: 'test', properties: '*' })).key
  const globexKey = (await store.create({ brand: 'globex', mode: 'live', properties: '*' })).key
  const pool = new Pool(base, { connections: 50 })
  let attacker = 0
  const headers = (key: string, extra: Record<string, string> = {}): Record<string, string> =>
    ({ host: '127.0.0.1', 'user-agent': 'abuse-bench/1.0', authorization: `Bearer ${key}`, 'x-forwarded-for': `203.0.113.${attacker}`, ...extra })
  // Warm every partner key into the cache, and the page the partner client reads.
  for (const key of partners) await (await pool.request({ path: '/v1/properties?perPage=5', method: 'GET', headers: headers(key) })).body.dump()

  const status = async (): Promise<{ cache: { apiKeys: { entries: number; unknownEntries: number } }; upstreams: Record<string, { breaker: string; callsInFlight: number }> }> =>
    (await (await request(`${admin}/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).body.json()) as never
  const metricsText = async (): Promise<string> => (await request(`${admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).body.text()
  /** A counter's value in the admin port's metrics, 0 while it has no series. */
  const counter = (text: string, series: string): number => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)`, 'm').exec(text)?.[1] ?? 0)
  const serviceControl = async (method: 'PUT' | 'DELETE', path: string, body?: unknown): Promise<unknown> =>
    (await request(`${serviceUrl}${path}`, { method, body: body === undefined ? undefined : JSON.stringify(body) })).body.json()
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
  const jwksFetches = async (): Promise<number> => ((await (await request(`${idpUrl}/__mock/requests`)).body.json()) as { path: string }[])
    .filter((r) => r.path.endsWith('/certs')).length
  const mint = async (body: object): Promise<string[]> =>
    ((await (await request(`${idpUrl}/__mock/mint`, { method: 'POST', body: JSON.stringify(body) })).body.json()) as { tokens: string[] }).tokens

  /** Who the well-behaved partner is: a key of acme reading properties, or another brand's reading guests. */
  interface Partner { path: string; key: string; host: string }
  const propertiesPartner: Partner = { path: '/v1/properties?perPage=5', key: partners[0] as string, host: '127.0.0.1' }
  const otherBrandPartner: Partner = { path: '/v1/guests?perPage=5', key: globexKey, host: 'localhost' }

  /** The well-behaved partner: one request at a time with a valid key, for as long as `running`. */
  function partnerClient(who: Partner): { stop: () => Promise<{ requests: number; failures503: number; other: number }> } {
    let running = true
    const result = { requests: 0, failures503: 0, other: 0 }
    const loop = (async () => {
      // Its own connection, as a real partner has.
      while (running) {
        const res = await request(`${base}${who.path}`, { headers: headers(who.key, { host: who.host, 'x-forwarded-for': '198.51.100.1' }) })
        await res.body.dump()
        result.requests += 1
        if (res.statusCode === 503) result.failures503 += 1
        else if (res.statusCode !== 200) result.other += 1
        await sleep(20)
      }
    })()
    return { stop: async () => { running = false; await loop; return result } }
  }

  async function measure(attack: string, bound: string, run: () => Promise<{ sent: string; socketsHeld?: number; bytes?: number; holds?: boolean }>,
    holds: (c: Omit<Cost, 'holds' | 'bound' | 'attack'>) => boolean, who: Partner = propertiesPartner): Promise<Cost> {
    process.stdout.write(`${attack} … `)
    attacker += 1
    const before = { redis: await commandStats(), pms: await pmsCalls(), keys: (await status()).cache.apiKeys.entries, jwks: await jwksFetches() }
    const partner = partnerClient(who)
    const out = await run()
    const seen = await partner.stop()
    const after = { redis: await commandStats(), pms: await pmsCalls(), keys: (await status()).cache.apiKeys.entries, jwks: await jwksFetches() }
    const cost = {
      sent: out.sent,
      // INFO itself and the partner's traffic are in the count; the look-ups (of keys and of
      // token clients' grants) are HGETALLs.
      redisCommands: after.redis.total - before.redis.total,
      keyLookups: after.redis.hgetall - before.redis.hgetall,
      jwksFetches: after.jwks - before.jwks,
      partnerKeysEvicted: Math.max(0, before.keys - after.keys),
      socketsHeld: out.socketsHeld ?? 0,
      bytesAnswered: out.bytes ?? 0,
      pmsCalls: after.pms - before.pms,
      partnerRequests: seen.requests,
      partner503: seen.failures503,
    }
    const row = { attack, bound, ...cost, holds: holds(cost) && seen.other === 0 && out.holds !== false }
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

  // Token floods come from many addresses (one per request), as from a botnet: the per-address
  // 401 bound would otherwise answer most of them 429 before any check, and the cost of the
  // checks themselves is what these rows measure.
  let spoofed = 0
  const fromAnywhere = (token: string): Record<string, string> =>
    headers(token, { 'x-forwarded-for': `10.${(spoofed >> 16) & 255}.${(spoofed >> 8) & 255}.${spoofed++ & 255}` })
  const [validToken = ''] = await mint({ count: 1, claims: { client_id: 'nobody' } })
  const [validHeader = '', validPayload = ''] = validToken.split('.')
  const garbage = Buffer.alloc(256, 7).toString('base64url')

  rows.push(await measure('Access tokens with invented kids, one address per request', `≤ 1 JWKS fetch per ${JWKS_COOLDOWN_SECONDS} s (jwksCooldownSeconds), 0 key look-ups`, async () => {
    const started = Date.now()
    const r = await flood(ATTACK_SECONDS, 50, (i) => {
      const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'at+jwt', kid: `invented-${i}` })).toString('base64url')
      return { path: '/v1/properties', headers: fromAnywhere(`${header}.${validPayload}.${garbage}`) }
    })
    const seconds = (Date.now() - started) / 1000
    return { sent: `${r.sent} requests in ${seconds.toFixed(1)} s (${describeStatuses(r.statuses)})`, bytes: r.bytes }
  }, (c) => c.jwksFetches <= Math.ceil((ATTACK_SECONDS + 2) / JWKS_COOLDOWN_SECONDS) && c.keyLookups === 0 && c.partner503 === 0))

  rows.push(await measure('Access tokens with a valid kid and a bad signature, one address per request', 'one signature check each, 0 key look-ups, 0 JWKS fetches', async () => {
    const started = Date.now()
    const r = await flood(ATTACK_SECONDS, 50, (i) => {
      // A different payload each time: nothing about one forged token helps with the next.
      const payload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(validPayload, 'base64url').toString()) as object, jti: `forged-${i}` })).toString('base64url')
      return { path: '/v1/properties', headers: fromAnywhere(`${validHeader}.${payload}.${garbage}`) }
    })
    const seconds = (Date.now() - started) / 1000
    const checks = r.statuses.get(401) ?? 0
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)}): ${checks} signature checks, ${Math.round(checks / seconds)} a second`, bytes: r.bytes }
  }, (c) => c.keyLookups === 0 && c.jwksFetches === 0 && c.partner503 === 0))

  const unregistered = await mint({ count: 4000, signature: 'ES256', claims: { client_id: 'unregistered-client', sub: 'unregistered-client', scope: 'properties:read' } })
  rows.push(await measure('Valid access tokens of an unregistered client, 4,000 distinct', '≤ 1 grant look-up per client per keyCache.ttlMs (60 s)', async () => {
    const r = await flood(ATTACK_SECONDS, 50, (i) => ({ path: '/v1/properties', headers: headers(unregistered[i % unregistered.length] as string) }))
    return { sent: `${r.sent} requests (${describeStatuses(r.statuses)})`, bytes: r.bytes }
  }, (c) => c.keyLookups <= 1 && c.jwksFetches === 0 && c.partner503 === 0))

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

  // The pass-through's bounds (docs/architecture.md, "The pass-through's bounds"): a partner of
  // another brand reads guests from the same service beside each attack.
  rows.push(await measure('Expect: 100-continue and Expect: foo on the guests route, one acme key', '0 × 503 to another brand\'s partner, the breaker closed', async () => {
    const acme = partners[3] as string
    const until = Date.now() + ATTACK_SECONDS * 1000
    const statuses = new Map<number, number>()
    let sent = 0
    const guest = '{"firstName":"","email":"not-an-email"}'
    await Promise.all(Array.from({ length: 10 }, async (_, worker) => {
      while (Date.now() < until) {
        const post = (sent + worker) % 2 === 0
        sent += 1
        const head = post
          ? `POST /v1/guests HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: abuse/1.0\r\nAuthorization: Bearer ${acme}\r\nX-Forwarded-For: 203.0.113.${attacker}\r\n`
            + `Content-Type: application/json\r\nContent-Length: ${guest.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`
          : `GET /v1/guests?perPage=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: abuse/1.0\r\nAuthorization: Bearer ${acme}\r\nX-Forwarded-For: 203.0.113.${attacker}\r\nExpect: foo\r\nConnection: close\r\n\r\n`
        const status = await new Promise<number>((resolve) => {
          const chunks: Buffer[] = []
          const socket = connect(port, '127.0.0.1', () => socket.write(head))
          socket.on('data', (c: Buffer) => {
            chunks.push(c)
            const text = Buffer.concat(chunks).toString('latin1')
            if (post && text === 'HTTP/1.1 100 Continue\r\n\r\n') socket.write(guest)
          })
          socket.on('error', () => undefined)
          socket.on('close', () => resolve(Number(/HTTP\/1\.1 ([2-5]\d\d)/.exec(Buffer.concat(chunks).toString('latin1'))?.[1] ?? 0)))
        })
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      }
    }))
    const breaker = (await status()).upstreams.bookings?.breaker
    return { sent: `${sent} requests (${describeStatuses(statuses)}); breaker: ${String(breaker)}`, holds: breaker === 'closed' }
  }, (c) => c.partner503 === 0, otherBrandPartner))

  rows.push(await measure(`${SLOW_READERS} sockets that never read a 5 MB guests answer, one acme key`,
    `0 × 503 to another brand's partner; every slot free within responseTimeoutMs (${RESPONSE_TIMEOUT_MS} ms) + 1 s`, async () => {
      const acme = partners[4] as string
      await serviceControl('PUT', '/__mock/failure', { mode: 'large', bytes: LARGE_ANSWER_BYTES, brand: 'acme' })
      const cutBefore = await metricsText()
      const sockets: Socket[] = []
      for (let i = 0; i < SLOW_READERS; i += 1) {
        const socket = connect(port, '127.0.0.1', () => socket.write(`GET /v1/guests HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow-reader/1.0\r\nAuthorization: Bearer ${acme}\r\nX-Forwarded-For: 203.0.113.${attacker}\r\n\r\n`))
        // It never reads a byte of the answer.
        socket.pause()
        socket.on('error', () => undefined)
        sockets.push(socket)
      }
      const opened = Date.now()
      let heldMost = 0
      let freedAfterMs = -1
      while (Date.now() - opened < RESPONSE_TIMEOUT_MS + 5000) {
        const inFlight = (await status()).upstreams.bookings?.callsInFlight ?? -1
        heldMost = Math.max(heldMost, inFlight)
        if (inFlight === 0 && heldMost > 0) {
          freedAfterMs = Date.now() - opened
          break
        }
        await sleep(50)
      }
      await serviceControl('DELETE', '/__mock/failure')
      const cutAfter = await metricsText()
      const grew = (series: string): number => counter(cutAfter, series) - counter(cutBefore, series)
      const cuts = ['write_idle', 'response_timeout', 'partner_closed', 'upstream_error']
        .map((reason) => [reason, grew(`gateway_upstream_calls_cut_total{upstream="bookings",reason="${reason}"}`)] as const)
        .filter(([, n]) => n > 0).map(([reason, n]) => `${n} ${reason}`)
      const overShare = grew('gateway_upstream_requests_total{upstream="bookings",outcome="share_full"}')
      for (const s of sockets) s.destroy()
      return {
        sent: `${SLOW_READERS} sockets (${overShare} refused 429 over the key's share); at most ${heldMost} calls in flight; cut: ${cuts.join(', ') || 'none'}; `
          + `all slots free ${freedAfterMs < 0 ? 'never' : `${freedAfterMs} ms after the last socket opened`}`,
        socketsHeld: (await status()).upstreams.bookings?.callsInFlight ?? -1,
        holds: freedAfterMs >= 0 && freedAfterMs <= RESPONSE_TIMEOUT_MS + 1000 && overShare === SLOW_READERS - MAX_IN_FLIGHT_PER_CREDENTIAL,
      }
    }, (c) => c.partner503 === 0 && c.socketsHeld === 0, otherBrandPartner))

  rows.push(await measure('Identity headers forged with underscores and duplicates, one acme key', '0 forged or underscore headers reach the service', async () => {
    const acme = partners[5] as string
    const received = async (): Promise<{ rawHeaders: [string, string][] }[]> => (await (await request(`${serviceUrl}/__mock/requests`)).body.json()) as never
    await serviceControl('DELETE', '/__mock/requests')
    const forged = {
      x_service_brand: 'globex', X_Service_Property_Id: '00000000-0000-4000-8000-000000000000', x_service_key_id: 'key_forged', 'x-service-brand': 'globex',
      'x-http-method-override': 'DELETE', 'x-original-url': '/internal/admin', 'x-real-ip': '10.0.0.1', via: '1.1 proxy', 'content-encoding': 'gzip', x_forwarded_for: '10.0.0.1',
    }
    const r = await flood(ATTACK_SECONDS / 2, 10, () => ({ path: '/v1/guests?perPage=1', headers: headers(acme, forged) }))
    // The attacker's calls, told from the partner's by the client address the gateway passes on.
    const seen = (await received()).filter((q) => q.rawHeaders.some(([name, value]) => name === 'x-forwarded-for' && value === `203.0.113.${attacker}`))
    const names = new Map<string, number>()
    for (const request of seen) for (const [name] of request.rawHeaders) names.set(name, (names.get(name) ?? 0) + 1)
    const forgedSeen = seen.filter((q) => q.rawHeaders.some(([name, value]) => name.includes('_') || (name.toLowerCase() === 'x-service-brand' && value !== 'acme')
      || ['x-http-method-override', 'x-original-url', 'x-real-ip', 'via', 'content-encoding'].includes(name.toLowerCase()))).length
    const brands = new Set(seen.map((q) => q.rawHeaders.find(([name]) => name === 'x-service-brand')?.[1]))
    return {
      sent: `${r.sent} requests (${describeStatuses(r.statuses)}); the service got ${seen.length}, each with the headers ${[...names.keys()].join(', ')}; X-Service-Brand: ${[...brands].join(', ')}; forged: ${forgedSeen}`,
      socketsHeld: forgedSeen,
    }
  }, (c) => c.socketsHeld === 0, otherBrandPartner))

  await pool.close()
  redis.disconnect()

  const header = '| attack | sent | Redis commands (key look-ups) | JWKS fetches | partner keys evicted | sockets held at end | bytes answered | PMS calls | partner: requests, 503s | bound | holds |'
  const table = [
    header,
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.attack} | ${r.sent} | ${r.redisCommands} (${r.keyLookups}) | ${r.jwksFetches} | ${r.partnerKeysEvicted} | ${r.socketsHeld} | ${r.bytesAnswered} | ${r.pmsCalls} | ${r.partnerRequests}, ${r.partner503} | ${r.bound} | ${r.holds ? 'yes' : '**no**'} |`),
  ].join('\n')
  const stamp = new Date().toISOString().replaceAll(':', '-').replaceAll('.', '-')
  const markdown = [
    `Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, Node ${process.version}; each flood ${ATTACK_SECONDS / 2}-${ATTACK_SECONDS} s, `
      + `server.headersTimeoutMs ${HEADERS_TIMEOUT_MS}, server.requestTimeoutMs ${REQUEST_TIMEOUT_MS}, abuse.authFailuresPerMinute ${AUTH_FAILURES_PER_MINUTE}, `
      + `${PARTNER_KEYS} partner keys cached, quotas off, oauth.jwksCooldownSeconds ${JWKS_COOLDOWN_SECONDS}; the bookings service with maxInFlight ${MAX_IN_FLIGHT}, `
      + `maxInFlightPerCredential ${MAX_IN_FLIGHT_PER_CREDENTIAL}, responseTimeoutMs ${RESPONSE_TIMEOUT_MS}, server.writeIdleTimeoutMs ${WRITE_IDLE_TIMEOUT_MS}. `
      + `"Sockets held" is the count still open at the end (for the tracestate and admin rows: tracestates forwarded, admin answers not 401; `
      + `for the slow readers: bookings calls still in flight; for the forged headers: requests the service got with one); `
      + `"bytes answered" is the total (per request for the query row; answers per 200 sockets for the identity row). The last three rows' partner is another brand's, reading guests from the same service.`,
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
