import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import { request } from 'undici'
import { Redis } from 'ioredis'
import { MockPms } from '../mocks/pms/server.js'
import { loadConfig } from '../src/config.js'
import { createGateway } from '../src/gateway.js'
import { createLogger } from '../src/logger.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { waitingRows } from './webhooks-waiting.js'

// `node dist/bench/webhooks.js`: the webhook rows of docs/performance.md, "Webhooks". One
// gateway instance in this process, a fast receiver on loopback (204 at once), the stand-in
// PMS, Redis at REDIS_URL under a prefix of its own (removed at the end). CPU is this whole
// process's (gateway, publisher and receiver together), so it is an upper bound per attempt.
// WEBHOOK_BENCH_SOAK_SECONDS (120) sets the soak; the other sizes are below. First, the rows of
// a backlog behind a hanging endpoint, on a Redis server of their own (webhooks-waiting.ts).

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = `gwbench:webhooks:${process.pid}:`
const SOAK_SECONDS = Number(process.env.WEBHOOK_BENCH_SOAK_SECONDS ?? 120)
const TOKEN = 'bench-webhooks-publisher-token'
const THROUGHPUT_ENDPOINTS = 16
const THROUGHPUT_EVENTS = 500
const STEADY_RATE = 20
const STEADY_SECONDS = 10
const FAN_OUT = 1000

// WEBHOOK_BENCH_ONLY=waiting: only the rows of a backlog behind a hanging endpoint (webhooks-waiting.ts); =delivery: all but those.
const ONLY = process.env.WEBHOOK_BENCH_ONLY
if (ONLY !== 'delivery') await waitingRows((line) => process.stdout.write(`${line}\n`))
if (ONLY === 'waiting') process.exit(0)

const received = new Map<string, number[]>()
let deliveries = 0
const receiver: Server = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    deliveries += 1
    const id = req.headers['webhook-id'] as string
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

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}
const rows: string[] = []
const row = (line: string): void => {
  rows.push(line)
  process.stdout.write(`${line}\n`)
}

try {
  // 1. Deliveries per second to a fast receiver, CPU per attempt.
  await endpoints(THROUGHPUT_ENDPOINTS)
  let before = deliveries
  let cpu = process.cpuUsage()
  let started = performance.now()
  for (let i = 0; i < THROUGHPUT_EVENTS; i += 100) await publish(100)
  const expected = THROUGHPUT_EVENTS * THROUGHPUT_ENDPOINTS
  await until(() => deliveries - before >= expected, 300_000)
  let seconds = (performance.now() - started) / 1000
  let used = process.cpuUsage(cpu)
  row(`deliveries/s, ${THROUGHPUT_EVENTS} events × ${THROUGHPUT_ENDPOINTS} endpoints: ${Math.round(expected / seconds)}/s; CPU per attempt ${Math.round((used.user + used.system) / expected)} µs (whole process)`)

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
