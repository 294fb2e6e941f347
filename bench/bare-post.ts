import { readFileSync } from 'node:fs'
import { request } from 'undici'

// The reference of the webhook attempt row (webhook-attempts.ts), in a process of its own so
// that its CPU is its own: POSTs of one captured delivery (its signed body and headers, read
// from BARE_SAMPLE) to BARE_URL, BARE_CONCURRENCY at a time on keep-alive connections, as many
// as BARE_COUNT, after BARE_WARMUP of the same. Prints {"cpuUs": <per POST>, "seconds": <…>}.

const url = process.env.BARE_URL as string
const count = Number(process.env.BARE_COUNT)
const concurrency = Number(process.env.BARE_CONCURRENCY)
const warmup = Number(process.env.BARE_WARMUP ?? 200)
const sample = JSON.parse(readFileSync(process.env.BARE_SAMPLE as string, 'utf8')) as { headers: Record<string, string>; body: string }
const body = Buffer.from(sample.body)

async function post(total: number): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async (_, lane) => {
    while (next < total) {
      next += 1
      const res = await request(`${url}/bare-${lane}`, { method: 'POST', headers: sample.headers, body })
      await res.body.dump()
      if (res.statusCode !== 204) throw new Error(`bare POST answered ${res.statusCode}`)
    }
  }))
}

await post(warmup)
const cpu = process.cpuUsage()
const started = performance.now()
await post(count)
const used = process.cpuUsage(cpu)
process.stdout.write(`${JSON.stringify({ cpuUs: (used.user + used.system) / count, seconds: (performance.now() - started) / 1000 })}\n`)
