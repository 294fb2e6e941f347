import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import { request } from 'undici'
import { Redis } from 'ioredis'
import { MockPms } from '../mocks/pms/server.js'
import { loadConfig } from '../src/config.js'
import { createGateway } from '../src/gateway.js'
import { createLogger } from '../src/logger.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { redisCpuUs, signedDelivery, type SignedDelivery } from './webhook-attempts.js'
import { waitingRows } from './webhooks-waiting.js'

// `node dist/bench/webhooks.js`: the webhook rows of docs/performance.md, "Webhooks". One
// gateway instance in this process, a fast receiver on loopback (204 at once), the stand-in
// PMS, Redis at REDIS_URL under a prefix of its own (removed at the end). CPU is this whole
// process's (gateway, publisher and receiver together), so it is an upper bound per attempt.
// WEBHOOK_BENCH_SOAK_SECONDS (120) sets the soak; the other sizes are below. First, the rows of
// a backlog behind a hanging endpoint, on a Redis server of their own (webhooks-waiting.ts); then a
// recovery of 10,000 events beside a live endpoint (recoveryRow).

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = `gwbench:webhooks:${process.pid}:`
const SOAK_SECONDS = Number(process.env.WEBHOOK_BENCH_SOAK_SECONDS ?? 120)
const TOKEN = 'bench-webhooks-publisher-token'
const THROUGHPUT_ENDPOINTS = 16
const THROUGHPUT_EVENTS = 500
const STEADY_RATE = 20
const STEADY_SECONDS = 10
const FAN_OUT = 1000
const RECOVERY_EVENTS = 10_000
const LIVE_RATE = 10
const LIVE_SECONDS = 20

// WEBHOOK_BENCH_ONLY=waiting: only the rows of a backlog behind a hanging endpoint (webhooks-waiting.ts); =delivery: all but
// those; =recovery: only the row of a recovery beside a live endpoint; =throughput: the first delivery row and its
// bare undici reference only.
const ONLY = process.env.WEBHOOK_BENCH_ONLY
if (ONLY === undefined || ONLY === 'waiting') await waitingRows((line) => process.stdout.write(`${line}\n`))
if (ONLY === 'waiting') process.exit(0)

const received = new Map<string, number[]>()
let deliveries = 0
/** Deliveries counted by the receiver's path, and when each event reached `/live`, for the recovery row. */
const byPath = new Map<string, number>()
const liveReceived = new Map<string, number>()
/** The first delivery as sent (headers and body), for the bare undici reference of the first row. */
let sample: SignedDelivery | undefined
const receiver: Server = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => {
    if (sample === undefined) chunks.push(chunk)
  })
  req.on('end', () => {
    sample ??= signedDelivery(req, Buffer.concat(chunks))
    deliveries += 1
    const id = req.headers['webhook-id'] as string
    byPath.set(req.url as string, (byPath.get(req.url as string) ?? 0) + 1)
    if (req.url === '/live') liveReceived.set(id, performance.now())
    const times = received.get(id) ?? []
    times.push(performance.now())
    received.set(id, times)
    res.writeHead(204).end()
  })
})
receiver.listen(0, '127.0.0.1')
await once(receiver, 'listening')
const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`

const pms = await new MockPms({ token: 'bench' }).listen()
const hotel = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
const config = loadConfig({ CONFIG_FILE: 'config/default.json', REDIS_URL, REDIS_PREFIX: PREFIX, PMS_URL: pms.url, PMS_TOKEN: 'bench', EVENTS_PMS_TOKEN: TOKEN }, {
  overrides: { routes: [], upstreams: {}, loadShedding: { maxEventLoopDelayMs: 0, maxEventLoopUtilization: 0, sampleIntervalMs: 1000, sustainedSamples: 3 } },
})
config.events = { ...config.events, allowHttp: true, allowPrivateTargets: true, maxEndpointsPerCredential: FAN_OUT }
const gateway = await createGateway({ config, logger: createLogger({ level: 'error' }) })
await gateway.app.listen({ port: 0, host: '127.0.0.1' })
await gateway.admin.listen({ port: 0, host: '127.0.0.1' })
const base = `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}`
const ingest = `http://127.0.0.1:${(gateway.admin.server.address() as { port: number }).port}/events`
const admin = new Redis(REDIS_URL)
const store = new RedisKeyStore(admin, PREFIX)

async function endpoints(count: number): Promise<void> {
  const { key } = await store.create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000 })
  for (let i = 0; i < count; i += 1) {
    const res = await request(`${base}/v1/webhook-endpoints`, {
      method: 'POST', headers: { host: 'localhost', authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0', 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiverUrl}/${i}`, eventTypes: ['property.updated'] }),
    })
    if (res.statusCode !== 201) throw new Error(`endpoint: ${res.statusCode} ${await res.body.text()}`)
    await res.body.dump()
  }
}

/** One endpoint under a key of its own, at the receiver's `path`: its id and the key. */
async function endpointAt(path: string): Promise<{ id: string; key: string }> {
  const { key } = await store.create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000 })
  const res = await request(`${base}/v1/webhook-endpoints`, {
    method: 'POST', headers: { ...headersOf(key), 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${receiverUrl}${path}`, eventTypes: ['property.updated'] }),
  })
  const text = await res.body.text()
  if (res.statusCode !== 201) throw new Error(`endpoint: ${res.statusCode} ${text}`)
  return { id: (JSON.parse(text) as { data: { id: string } }).data.id, key }
}
const headersOf = (key: string): Record<string, string> => ({ host: 'localhost', authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0' })
async function call(key: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const res = await request(`${base}${path}`, {
    method, headers: body === undefined ? headersOf(key) : { ...headersOf(key), 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.body.text()
  return { status: res.statusCode, json: text === '' ? null : JSON.parse(text) }
}

let sequence = 0
async function publish(count: number): Promise<string[]> {
  const batch = Array.from({ length: count }, () => ({
    specversion: '1.0', id: `bench-${process.pid}-${(sequence += 1)}`, source: 'pms', type: 'com.example.pms.hotel.changed',
    data: { hotel_uuid: hotel, chain_code: 'ACME', changed: ['status'] },
  }))
  const res = await request(ingest, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/cloudevents-batch+json' }, body: JSON.stringify(batch) })
  const body = await res.body.json() as { data: { eventId: string }[] }
  return body.data.map((d) => d.eventId)
}

async function until(done: () => boolean, limitMs: number): Promise<void> {
  const end = Date.now() + limitMs
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 5))
  if (!done()) throw new Error('the deliveries did not all come in time')
}

/**
 * The reference of the first row: `count` POSTs of the captured delivery (its signed body and
 * headers) to the same receiver with undici, `concurrency` at a time, on keep-alive
 * connections: what sending an attempt costs with no queue, no lease and no signing. The CPU
 * per POST of this process (the receiver's included, as in the row).
 */
async function bareUndiciUs(count: number, concurrency: number): Promise<number> {
  const { headers, body } = sample as NonNullable<typeof sample>
  let next = 0
  const cpu = process.cpuUsage()
  await Promise.all(Array.from({ length: concurrency }, async (_, lane) => {
    while (next < count) {
      next += 1
      const res = await request(`${receiverUrl}/bare-${lane}`, { method: 'POST', headers, body })
      await res.body.dump()
      if (res.statusCode !== 204) throw new Error(`bare POST: ${res.statusCode}`)
    }
  }))
  const used = process.cpuUsage(cpu)
  return (used.user + used.system) / count
}

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}
const rows: string[] = []
const row = (line: string): void => {
  rows.push(line)
  process.stdout.write(`${line}\n`)
}

/**
 * A recovery of RECOVERY_EVENTS events to one endpoint while another keeps receiving live
 * events: the recovery's deliveries a second, and the live endpoint's ingest-to-delivery
 * latency with it against the same live traffic just before, without it. The recovered events
 * were published while their endpoint was disabled (so each is due and never attempted), and
 * the live endpoint was made after them (so none of them is its). Both endpoints go at the end.
 */
async function recoveryRow(): Promise<void> {
  const recovered = await endpointAt('/recovered')
  const disabled = await call(recovered.key, 'PATCH', `/v1/webhook-endpoints/${recovered.id}`, { status: 'disabled' })
  if (disabled.status !== 200) throw new Error(`disable: ${disabled.status} ${JSON.stringify(disabled.json)}`)
  const since = new Date(Date.now() - 1000).toISOString()
  for (let i = 0; i < RECOVERY_EVENTS; i += 100) await publish(100)
  await new Promise((r) => setTimeout(r, 5))
  const upTo = new Date().toISOString()
  const enabled = await call(recovered.key, 'PATCH', `/v1/webhook-endpoints/${recovered.id}`, { status: 'enabled' })
  if (enabled.status !== 200) throw new Error(`enable: ${enabled.status} ${JSON.stringify(enabled.json)}`)
  const live = await endpointAt('/live')

  /** Live events at LIVE_RATE, `count` of them or until `stop`: the live endpoint's latencies in ms. */
  const liveTraffic = async (count: number, stop: () => boolean): Promise<number[]> => {
    const sent = new Map<string, number>()
    const interval = 1000 / LIVE_RATE
    for (let i = 0; i < count && !stop(); i += 1) {
      const at = performance.now()
      const [id] = await publish(1)
      sent.set(id as string, at)
      const wait = interval - (performance.now() - at)
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    }
    await until(() => [...sent.keys()].every((id) => liveReceived.has(id)), 120_000)
    return [...sent].map(([id, at]) => (liveReceived.get(id) as number) - at)
  }
  const liveBefore = byPath.get('/live') ?? 0
  const quiet = await liveTraffic(LIVE_RATE * LIVE_SECONDS, () => false)

  const recoveredBefore = byPath.get('/recovered') ?? 0
  const allBefore = deliveries
  const cpu = process.cpuUsage()
  const started = performance.now()
  const made = await call(recovered.key, 'POST', `/v1/webhook-endpoints/${recovered.id}/recover`, { since, until: upTo, include: 'failed' })
  const queued = (made.json as { data?: { queued?: number } } | null)?.data?.queued
  if (made.status !== 202 || queued !== RECOVERY_EVENTS) throw new Error(`recover: ${made.status} ${JSON.stringify(made.json)}`)
  const recoveryId = (made.json as { data: { id: string } }).data.id
  let finishedAt = 0
  const watch = (async () => {
    for (;;) {
      const one = await call(recovered.key, 'GET', `/v1/webhook-endpoints/${recovered.id}/recoveries/${recoveryId}`)
      const view = (one.json as { data: { status: string; delivered: number; failed: number } }).data
      if (view.status !== 'running') {
        finishedAt = performance.now()
        return view
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  })()
  const during = await liveTraffic(LIVE_RATE * 1800, () => finishedAt !== 0)
  const view = await watch
  const seconds = (finishedAt - started) / 1000
  const used = process.cpuUsage(cpu)
  const attempts = deliveries - allBefore
  const sentToRecovered = (byPath.get('/recovered') ?? 0) - recoveredBefore
  if (view.status !== 'done' || view.delivered !== RECOVERY_EVENTS) throw new Error(`recovery ended ${JSON.stringify(view)}`)
  if ((byPath.get('/live') ?? 0) - liveBefore !== quiet.length + during.length) throw new Error('a live event did not reach the live endpoint')
  const ms = (values: number[]): string => `p50 ${quantile(values, 0.5).toFixed(1)} ms, p99 ${quantile(values, 0.99).toFixed(1)} ms`
  row(`recovery of ${RECOVERY_EVENTS} events to one endpoint: ${Math.round(RECOVERY_EVENTS / seconds)} deliveries/s (${seconds.toFixed(1)} s; ${sentToRecovered} requests to it, live events included); CPU per delivery ${Math.round((used.user + used.system) / attempts)} µs (whole process, live deliveries included)`)
  row(`another endpoint's ingest-to-delivery at ${LIVE_RATE} events/s: without the recovery ${ms(quiet)} (${quiet.length} events); during it ${ms(during)} (${during.length} events)`)
  for (const ep of [recovered, live]) {
    const gone = await call(ep.key, 'DELETE', `/v1/webhook-endpoints/${ep.id}`)
    if (gone.status !== 204) throw new Error(`delete: ${gone.status}`)
  }
}

async function deliveryRows(): Promise<void> {
  // 1. Deliveries per second to a fast receiver, CPU per attempt.
  await endpoints(THROUGHPUT_ENDPOINTS)
  let before = deliveries
  const redisBefore = await redisCpuUs(admin)
  let cpu = process.cpuUsage()
  let started = performance.now()
  for (let i = 0; i < THROUGHPUT_EVENTS; i += 100) await publish(100)
  const expected = THROUGHPUT_EVENTS * THROUGHPUT_ENDPOINTS
  await until(() => deliveries - before >= expected, 300_000)
  let seconds = (performance.now() - started) / 1000
  let used = process.cpuUsage(cpu)
  const redisPerAttempt = (await redisCpuUs(admin) - redisBefore) / expected
  const attemptUs = (used.user + used.system) / expected
  row(`deliveries/s, ${THROUGHPUT_EVENTS} events × ${THROUGHPUT_ENDPOINTS} endpoints: ${Math.round(expected / seconds)}/s; CPU per attempt ${Math.round(attemptUs)} µs (whole process); Redis's own CPU per attempt ${Math.round(redisPerAttempt)} µs`)
  const bare = await bareUndiciUs(expected, THROUGHPUT_ENDPOINTS)
  row(`the same signed body POSTed by a bare undici loop to the same receiver, ${expected} times, ${THROUGHPUT_ENDPOINTS} at a time: CPU per POST ${Math.round(bare)} µs (whole process); an attempt costs ${(attemptUs / bare).toFixed(2)}× (target at most 3×), ${((attemptUs + redisPerAttempt) / bare).toFixed(2)}× with Redis's CPU`)
  if (ONLY === 'throughput') return

  // 2. Ingest-to-delivery latency at a steady rate (one event a time, to the same 16 endpoints).
  const latencies: number[] = []
  const sent = new Map<string, number>()
  const interval = 1000 / STEADY_RATE
  for (let i = 0; i < STEADY_RATE * STEADY_SECONDS; i += 1) {
    const at = performance.now()
    const [id] = await publish(1)
    sent.set(id as string, at)
    const wait = interval - (performance.now() - at)
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
  }
  await until(() => [...sent.keys()].every((id) => (received.get(id)?.length ?? 0) >= THROUGHPUT_ENDPOINTS), 120_000)
  for (const [id, at] of sent) for (const t of received.get(id) ?? []) latencies.push(t - at)
  row(`ingest-to-delivery at ${STEADY_RATE} events/s × ${THROUGHPUT_ENDPOINTS} endpoints: p50 ${quantile(latencies, 0.5).toFixed(1)} ms, p99 ${quantile(latencies, 0.99).toFixed(1)} ms`)

  // 3. One event fanned out to 1,000 endpoints: time to the last delivery.
  await endpoints(FAN_OUT - THROUGHPUT_ENDPOINTS)
  started = performance.now()
  const [fanned] = await publish(1)
  await until(() => (received.get(fanned as string)?.length ?? 0) >= FAN_OUT, 300_000)
  const times = received.get(fanned as string) as number[]
  row(`one event to ${FAN_OUT} endpoints: last delivery after ${Math.round(Math.max(...times) - started)} ms`)

  // 4. Memory over a soak: events to all 1,000 endpoints for SOAK_SECONDS.
  const rss: number[] = []
  before = deliveries
  cpu = process.cpuUsage()
  started = performance.now()
  while (performance.now() - started < SOAK_SECONDS * 1000) {
    if (deliveries - before < (performance.now() - started) / 1000 * 2000) await publish(1)
    rss.push(process.memoryUsage().rss)
    await new Promise((r) => setTimeout(r, 100))
  }
  seconds = (performance.now() - started) / 1000
  used = process.cpuUsage(cpu)
  const mib = (bytes: number): string => (bytes / 1048576).toFixed(0)
  const tenth = Math.max(1, Math.floor(rss.length / 10))
  row(`soak ${SOAK_SECONDS} s to ${FAN_OUT} endpoints: ${Math.round((deliveries - before) / seconds)} deliveries/s; RSS first tenth ${mib(quantile(rss.slice(0, tenth), 0.5))} MiB, last tenth ${mib(quantile(rss.slice(-tenth), 0.5))} MiB; CPU per attempt ${Math.round((used.user + used.system) / Math.max(1, deliveries - before))} µs`)
}

try {
  if (ONLY !== 'throughput') await recoveryRow()
  if (ONLY !== 'recovery') await deliveryRows()
} finally {
  await gateway.app.close()
  await pms.close()
  receiver.closeAllConnections()
  receiver.close()
  const keys = await admin.keys(`${PREFIX}*`)
  for (let i = 0; i < keys.length; i += 500) await admin.del(...keys.slice(i, i + 500))
  admin.disconnect()
}
process.exit(0)
