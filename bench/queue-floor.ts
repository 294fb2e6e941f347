import { readFileSync } from 'node:fs'
import { Queue, Worker } from 'bullmq'
import { pino } from 'pino'
import { request } from 'undici'
import { z } from 'zod'
import { webhookFields } from '../src/webhooks/config.js'
import { DELIVERY_QUEUE_STREAMS, deliveryJobOptions, deliveryWorkerOptions, type DeliveryJob, type DeliveryJobOptions } from '../src/webhooks/deliveries.js'
import { createRedis, type RedisClient } from '../src/redis.js'

// The second reference of the webhook attempt row (webhook-attempts.ts), in a process of its
// own: the queue's floor. A BullMQ worker with the delivery worker's options and Redis clients
// (the shipped defaults of `events`: concurrency, lock, retries; each turn's commands in one
// write) whose job is only to POST one captured delivery (FLOOR_SAMPLE: its signed body and
// headers) to FLOOR_URL, on keep-alive connections, spread over FLOOR_PATHS paths as
// deliveries are over endpoints, its jobs enqueued with a delivery's options and fields; no
// lease, no record, no check. What an attempt costs above it is the gateway's own work; what
// it costs above the bare POST loop is BullMQ's and ioredis' handling of a job. FLOOR_WARMUP
// jobs are run before FLOOR_COUNT are measured; all are queued (on FLOOR_REDIS, under
// FLOOR_PREFIX) before the worker starts. Prints {"cpuUs": <per job>, "seconds": <…>}.

const count = Number(process.env.FLOOR_COUNT)
const warmup = Number(process.env.FLOOR_WARMUP ?? 0)
const paths = Number(process.env.FLOOR_PATHS ?? 16)
const url = process.env.FLOOR_URL as string
const prefix = process.env.FLOOR_PREFIX as string
const sample = JSON.parse(readFileSync(process.env.FLOOR_SAMPLE as string, 'utf8')) as { headers: Record<string, string>; body: string }
const body = Buffer.from(sample.body)
const settings = z.object(webhookFields).parse({})
// BullMQ leaves the connections it is given open: they are closed at the end.
const connections: RedisClient[] = []
const connection = (): RedisClient => {
  const client = createRedis({ url: process.env.FLOOR_REDIS as string, name: 'queue-floor', logger: pino({ level: 'silent' }), role: 'subscriber' })
  connections.push(client)
  return client
}
const QUEUE = 'queue-floor'

const queue = new Queue(QUEUE, { connection: connection() as never, prefix, streams: DELIVERY_QUEUE_STREAMS })
const total = warmup + count
for (let i = 0; i < total; i += 500) {
  await queue.addBulk(Array.from({ length: Math.min(500, total - i) }, (_, k): { name: string; data: DeliveryJob; opts: DeliveryJobOptions } => ({
    // A delivery's fields (src/webhooks/deliveries.ts, DeliveryJob), its endpoint the path POSTed to.
    name: 'property.updated', data: { ulid: `01KBFLOOR${String(i + k).padStart(17, '0')}`, brand: 'acme', mode: 'live', endpointId: `we_floor${(i + k) % paths}`, kind: 'event' },
    opts: deliveryJobOptions(settings, `floor-${i + k}`),
  })))
}

let done = 0
let cpu: NodeJS.CpuUsage | undefined
let started = 0
let settle: { resolve: () => void; reject: (error: Error) => void } | undefined
const finished = new Promise<void>((resolve, reject) => { settle = { resolve, reject } })
const worker = new Worker<DeliveryJob>(QUEUE, async (job) => {
  const res = await request(`${url}/${job.data.endpointId}`, { method: 'POST', headers: sample.headers, body })
  await res.body.dump()
  if (res.statusCode !== 204) throw new Error(`the floor's POST answered ${res.statusCode}`)
}, { connection: connection() as never, prefix, ...deliveryWorkerOptions(settings) })
worker.on('failed', (_job, error) => settle?.reject(error))
worker.on('error', (error) => settle?.reject(error))
queue.on('error', (error) => settle?.reject(error))
worker.on('completed', () => {
  done += 1
  if (done === warmup) {
    cpu = process.cpuUsage()
    started = performance.now()
  }
  if (done === total) settle?.resolve()
})
if (warmup === 0) {
  cpu = process.cpuUsage()
  started = performance.now()
}
await finished
const used = process.cpuUsage(cpu)
const seconds = (performance.now() - started) / 1000
await worker.close()
await queue.obliterate({ force: true })
await queue.close()
for (const client of connections) client.disconnect()
process.stdout.write(`${JSON.stringify({ cpuUs: (used.user + used.system) / count, seconds })}\n`)
