import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage } from 'node:http'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { RedisKeyStore } from '../src/keys/store.js'

// The webhook attempt row of `npm run bench` (docs/performance.md, "Webhooks"): what one
// delivery attempt costs the instance that makes it, against a bare undici POST of the same
// signed body to the same receiver, in the same run. The attempts are made by a gateway run as
// a delivery instance is deployed (EVENTS_WORKER=only, a process of its own); the events are
// published to a second gateway (EVENTS_WORKER=off) whose fan-out queues the deliveries while
// the delivering one is stopped (SIGSTOP), so that the attempts are measured alone: the
// delivering process's CPU from the moment it is let go (SIGCONT) until the receiver has had
// every delivery. Redis is a server of the row's own: its CPU over the same span is the
// queue's own per attempt; over the publishing, the events' writes and the fan-out's. Beside
// the bare POST, the queue's floor (queue-floor.ts): a BullMQ worker with the delivery
// worker's settings that only POSTs the same body, what any attempt made as a queued job pays
// before the gateway does anything of its own.

export const WEBHOOK_ROW = 'webhook attempt (EVENTS_WORKER=only) against a bare undici POST of the same signed body'
/** `--only` runs the row when one of its terms holds this. */
export const WEBHOOK_ONLY = 'webhook'

const ENDPOINTS = 16
const WARMUP_EVENTS = 300
/** At most this many times the bare POST's CPU (issue 44's target). */
const TARGET = 3

export interface WebhookAttemptRound {
  /** CPU of the delivering instance per attempt, µs. */
  attemptUs: number
  /** Redis's CPU per attempt while they were made, µs. */
  redisUs: number
  /** Redis's CPU per delivery while the events were written and fanned out, µs. */
  fanOutRedisUs: number
  attemptsPerSecond: number
  /** CPU of the bare loop's process per POST, µs. */
  bareUs: number
  /** CPU of the queue's floor (queue-floor.ts: a BullMQ worker that only POSTs) per job, µs. */
  floorUs: number
}

export interface WebhookAttemptCost {
  events: number
  endpoints: number
  rounds: WebhookAttemptRound[]
  /** The round whose attempt ÷ bare POST is the median of the rounds' (with two, the higher). */
  median: WebhookAttemptRound
}

export interface WebhookAttemptDeps {
  /** A redis-server of the row's own. */
  redisUrl: string
  prefix: string
  /** A gateway process on that Redis with these settings; `worker`: EVENTS_WORKER=only (no public port). */
  startGateway(name: string, events: Record<string, unknown>, worker: boolean): Promise<{ url: string | undefined; adminUrl: string; pid: number }>
  startProcess(script: string, env: Record<string, string>): ChildProcess
  cpuMicros(pid: number): number
  /** A batch of `size` events the publisher sends, each id `<prefix>-<n>`, of the type the endpoints take. */
  batch(size: number, prefix: string): string
  publisherToken: string
  events: Record<string, unknown>
  dir: string
}

/** The round whose attempt ÷ bare POST is the median of the rounds' (with an even number, the higher of the middle two), whole: its figures read together. */
export function medianRound(rounds: readonly WebhookAttemptRound[]): WebhookAttemptRound {
  const ratio = (r: WebhookAttemptRound): number => r.attemptUs / r.bareUs
  const sorted = [...rounds].sort((a, b) => ratio(a) - ratio(b))
  const middle = sorted[Math.floor(sorted.length / 2)]
  if (middle === undefined) throw new Error('the webhook row measured no round')
  return middle
}

/** A signed delivery as the receiver got it (its headers but those of the connection, and its body): what the bare loop sends again. */
export interface SignedDelivery {
  headers: Record<string, string>
  body: Buffer
}

/** The delivery of `req`, read whole as `body`, when it is a signed one. */
export function signedDelivery(req: IncomingMessage, body: Buffer): SignedDelivery | undefined {
  if (req.headers['webhook-signature'] === undefined) return undefined
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string' && !['host', 'connection', 'content-length'].includes(name)) headers[name] = value
  return { headers, body }
}

/** Redis's own CPU so far, µs (INFO cpu: used_cpu_sys + used_cpu_user, every client's work). */
export async function redisCpuUs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu')
  const field = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6
}

export async function webhookAttemptCost(deps: WebhookAttemptDeps, rounds: number, eventsPerRound: number): Promise<WebhookAttemptCost> {
  let delivered = 0
  let sample: SignedDelivery | undefined
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => {
      if (sample === undefined) chunks.push(chunk)
    })
    req.on('end', () => {
      sample ??= signedDelivery(req, Buffer.concat(chunks))
      delivered += 1
      res.writeHead(204).end()
    })
  })
  receiver.listen(0, '127.0.0.1')
  await once(receiver, 'listening')
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`
  const redis = new Redis(deps.redisUrl)
  try {
    const events = { ...deps.events, allowHttp: true, allowPrivateTargets: true, maxEndpointsPerCredential: ENDPOINTS }
    const ingest = await deps.startGateway('webhooks-ingest', events, false)
    const worker = await deps.startGateway('webhooks-worker', events, true)
    const { key } = await new RedisKeyStore(redis, deps.prefix).create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000, name: 'bench-webhooks' })
    for (let i = 0; i < ENDPOINTS; i += 1) {
      const res = await request(`${ingest.url as string}/v1/webhook-endpoints`, {
        method: 'POST', headers: { host: 'localhost', authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0', 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${receiverUrl}/${i}`, eventTypes: ['property.updated'] }),
      })
      const text = await res.body.text()
      if (res.statusCode !== 201) throw new Error(`the webhook row's endpoint was answered ${res.statusCode}: ${text.slice(0, 300)}`)
    }
    let published = 0
    const publish = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i += 100) {
        const res = await request(`${ingest.adminUrl}/events`, {
          method: 'POST', body: deps.batch(Math.min(100, count - i), `bench-webhooks-${(published += 1)}`),
          headers: { authorization: `Bearer ${deps.publisherToken}`, 'content-type': 'application/cloudevents-batch+json' },
        })
        const text = await res.body.text()
        if (res.statusCode !== 202) throw new Error(`the webhook row's events were answered ${res.statusCode}: ${text.slice(0, 300)}`)
      }
    }
    const until = async (count: number): Promise<void> => {
      const deadline = Date.now() + 600_000
      while (delivered < count) {
        if (Date.now() > deadline) throw new Error(`the webhook row: ${delivered} of ${count} deliveries came in 10 minutes`)
        await new Promise((r) => setTimeout(r, 5))
      }
    }
    // A warm-up: the connections to the receiver opened, the scripts loaded, the code compiled, the sample captured.
    await publish(WARMUP_EVENTS)
    await until(WARMUP_EVENTS * ENDPOINTS)
    const sampleFile = join(deps.dir, 'webhook-sample.json')
    if (sample === undefined) throw new Error('the webhook row\'s receiver got no signed delivery')
    writeFileSync(sampleFile, JSON.stringify({ headers: sample.headers, body: sample.body.toString() }))

    const measured: WebhookAttemptRound[] = []
    for (let round = 0; round < rounds; round += 1) {
      const attempts = eventsPerRound * ENDPOINTS
      const start = delivered
      process.kill(worker.pid, 'SIGSTOP')
      let resumed = false
      try {
        const redisBefore = await redisCpuUs(redis)
        await publish(eventsPerRound)
        const redisQueued = await redisCpuUs(redis)
        const cpu = deps.cpuMicros(worker.pid)
        const started = performance.now()
        process.kill(worker.pid, 'SIGCONT')
        resumed = true
        await until(start + attempts)
        const seconds = (performance.now() - started) / 1000
        const attemptUs = (deps.cpuMicros(worker.pid) - cpu) / attempts
        const redisUs = (await redisCpuUs(redis) - redisQueued) / attempts
        // Warmed as long as the delivering process was before its first round: a bare loop measured
        // cold read 113-124 us per POST over 3,200 POSTs and 73-78 us over 8,000.
        const warmup = String(WARMUP_EVENTS * ENDPOINTS)
        const { cpuUs: bareUs } = await loopCost(deps, 'dist/bench/bare-post.js', {
          BARE_URL: receiverUrl, BARE_COUNT: String(attempts), BARE_CONCURRENCY: String(ENDPOINTS), BARE_SAMPLE: sampleFile, BARE_WARMUP: warmup,
        })
        const { cpuUs: floorUs } = await loopCost(deps, 'dist/bench/queue-floor.js', {
          FLOOR_REDIS: deps.redisUrl, FLOOR_PREFIX: `${deps.prefix}floor:`, FLOOR_URL: receiverUrl, FLOOR_SAMPLE: sampleFile, FLOOR_COUNT: String(attempts), FLOOR_WARMUP: warmup, FLOOR_PATHS: String(ENDPOINTS),
        })
        measured.push({ attemptUs, redisUs, fanOutRedisUs: (redisQueued - redisBefore) / attempts, attemptsPerSecond: Math.round(attempts / seconds), bareUs, floorUs })
      } finally {
        if (!resumed) process.kill(worker.pid, 'SIGCONT')
      }
    }
    return { events: eventsPerRound, endpoints: ENDPOINTS, rounds: measured, median: medianRound(measured) }
  } finally {
    redis.disconnect()
    receiver.closeAllConnections()
    receiver.close()
  }
}

/** Runs one of the row's reference loops (a process of its own) to its end: what it printed, its CPU per POST. */
async function loopCost(deps: WebhookAttemptDeps, script: string, env: Record<string, string>): Promise<{ cpuUs: number }> {
  const loop = deps.startProcess(script, env)
  let out = ''
  loop.stdout?.on('data', (chunk: Buffer) => { out += chunk.toString() })
  const stuck = setTimeout(() => loop.kill('SIGKILL'), 600_000)
  // 'close', not 'exit': its output is then read to the end.
  const [code] = await once(loop, 'close') as [number | null]
  clearTimeout(stuck)
  if (code !== 0) throw new Error(`${script} exited with ${String(code)}`)
  return JSON.parse(out) as { cpuUs: number }
}

/** The lines of the report under the table: the medians, each round, the target's verdict. */
export function webhookAttemptLines(cost: WebhookAttemptCost | undefined): string[] {
  if (cost === undefined) return []
  const { median: m } = cost
  const times = m.attemptUs / m.bareUs
  const round = (r: WebhookAttemptRound): string => `${r.attemptUs.toFixed(0)} / ${r.bareUs.toFixed(0)} / ${r.floorUs.toFixed(0)} µs`
  return [
    `Webhooks, ${WEBHOOK_ROW}: ${cost.events} events to ${cost.endpoints} endpoints on loopback (a receiver answering 204 at once), ${cost.events * cost.endpoints} attempts per round, `
      + `the round of the median ratio of ${cost.rounds.length} (attempt / bare POST / queue's floor: ${cost.rounds.map(round).join(', ')}): `
      + `${m.attemptUs.toFixed(0)} µs of the delivering instance's CPU per attempt against ${m.bareUs.toFixed(0)} µs per bare POST `
      + `(${times.toFixed(2)}×; target at most ${TARGET}×: ${times <= TARGET ? 'held' : 'missed'}); ${m.attemptsPerSecond} attempts/s; `
      + `Redis's own CPU ${m.redisUs.toFixed(0)} µs per attempt (${((m.attemptUs + m.redisUs) / m.bareUs).toFixed(2)}× with it), and ${m.fanOutRedisUs.toFixed(0)} µs per delivery while the events were written and fanned out. `
      + `The queue's floor, a BullMQ worker with the delivery worker's settings that only POSTs the same body: ${m.floorUs.toFixed(0)} µs per job (${(m.floorUs / m.bareUs).toFixed(2)}× the bare POST); `
      + `the attempt's own work above it ${(m.attemptUs - m.floorUs).toFixed(0)} µs (${((m.attemptUs - m.floorUs) / m.bareUs).toFixed(2)}× the bare POST).`,
    '',
  ]
}
