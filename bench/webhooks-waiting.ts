import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type ServerResponse } from 'node:http'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { MockPms } from '../mocks/pms/server.js'
import { loadConfig } from '../src/config.js'
import { createGateway } from '../src/gateway.js'
import { RedisKeyStore } from '../src/keys/store.js'
import { createLogger } from '../src/logger.js'
import { redisAnswers } from '../src/redis.js'
import { freePort } from './ports.js'

// The rows of docs/performance.md, "A backlog behind a hanging endpoint": 1,000
// deliveries waiting behind an endpoint that never answers, with the default delivery
// settings, on a Redis server of the bench's own (so that every command it serves is on the
// deliveries' account). Measured over WEBHOOK_BENCH_WAIT_SECONDS (60): the Redis commands a
// second, this process's CPU (gateway, publisher and receivers), and the latency of another
// endpoint's deliveries against the same latency before the backlog existed. Then the cost of
// one sleeper's safety wake-up (all 1,000 woken at once and asleep again), from which the rate
// over the whole sleep (10 to 15 minutes) follows; and Redis memory per waiting and per
// finished delivery. The bound (docs/architecture.md §D37): at most 200 commands a second.

const WAIT_SECONDS = Number(process.env.WEBHOOK_BENCH_WAIT_SECONDS ?? 60)
const BACKLOG = 1000
const OTHER_RATE = 5
const BOUND = 200
const TOKEN = 'bench-waiting-publisher-token'
const BOOKINGS_TOKEN = 'bench-waiting-bookings-token'
const PREFIX = 'gwbench:waiting:'
/** A parked delivery's sleep is 10 to 15 minutes (src/webhooks/rules.ts): 12.5 on average. */
const MEAN_SLEEP_SECONDS = 12.5 * 60

async function commandsServed(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats')
  return [...stats.matchAll(/calls=(\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0)
}

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1])
}

const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function until(done: () => Promise<boolean> | boolean, limitMs: number, what: string): Promise<void> {
  const end = Date.now() + limitMs
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`waited too long for ${what}`)
    await sleep(20)
  }
}

export async function waitingRows(row: (line: string) => void): Promise<void> {
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  const redisUrl = `redis://127.0.0.1:${port}`
  await until(() => redisAnswers(redisUrl), 10_000, 'redis-server')
  const redis = new Redis(redisUrl)

  // An endpoint that never answers, and another whose arrivals are timed.
  const hung: ServerResponse[] = []
  const hanging = createServer((req, res) => { req.resume(); hung.push(res) })
  const arrivals = new Map<string, number>()
  const fast = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      arrivals.set(req.headers['webhook-id'] as string, performance.now())
      res.writeHead(204).end()
    })
  })
  for (const s of [hanging, fast]) {
    s.listen(0, '127.0.0.1')
    await once(s, 'listening')
  }
  const urlOf = (s: typeof fast): string => `http://127.0.0.1:${(s.address() as { port: number }).port}/`

  const pms = await new MockPms({ token: 'bench' }).listen()
  const hotel = String(pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  const config = loadConfig({
    CONFIG_FILE: 'config/default.json', REDIS_URL: redisUrl, REDIS_PREFIX: PREFIX, PMS_URL: pms.url, PMS_TOKEN: 'bench', EVENTS_PMS_TOKEN: TOKEN, EVENTS_BOOKINGS_TOKEN: BOOKINGS_TOKEN,
  }, { overrides: { routes: [], upstreams: {}, loadShedding: { maxEventLoopDelayMs: 0, maxEventLoopUtilization: 0, sampleIntervalMs: 1000, sustainedSamples: 3 } } })
  // The default delivery settings, but for endpoints on this machine.
  config.events = { ...config.events, allowHttp: true, allowPrivateTargets: true }
  const gateway = await createGateway({ config, logger: createLogger({ level: 'error' }) })
  try {
    await gateway.app.listen({ port: 0, host: '127.0.0.1' })
    await gateway.admin.listen({ port: 0, host: '127.0.0.1' })
    const base = `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}`
    const ingest = `http://127.0.0.1:${(gateway.admin.server.address() as { port: number }).port}/events`
    const { key } = await new RedisKeyStore(redis, PREFIX).create({ brand: 'acme', mode: 'live', properties: '*', rateLimit: 2_000_000_000 })
    const call = async (method: 'POST' | 'PATCH', path: string, body: unknown): Promise<Record<string, unknown>> => {
      const res = await request(`${base}${path}`, {
        method, headers: { host: 'localhost', authorization: `Bearer ${key}`, 'user-agent': 'bench/1.0', 'content-type': 'application/json' }, body: JSON.stringify(body),
      })
      const text = await res.body.text()
      if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`)
      return (JSON.parse(text) as { data: Record<string, unknown> }).data
    }
    const publish = async (events: unknown[], token = TOKEN): Promise<string[]> => {
      const res = await request(ingest, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/cloudevents-batch+json' }, body: JSON.stringify(events) })
      return ((await res.body.json()) as { data: { eventId: string }[] }).data.map((d) => d.eventId)
    }
    let sequence = 0
    const hotelEvents = (count: number): unknown[] => Array.from({ length: count }, () => ({
      specversion: '1.0', id: `waiting-${(sequence += 1)}`, source: 'pms', type: 'com.example.pms.hotel.changed', data: { hotel_uuid: hotel, chain_code: 'ACME', changed: ['status'] },
    }))
    const guestEvents = (count: number): unknown[] => Array.from({ length: count }, () => ({
      specversion: '1.0', id: `waiting-guest-${(sequence += 1)}`, source: 'bookings', type: 'com.example.bookings.guest.created', data: { guest_id: `g-${sequence}`, chain_code: 'ACME' },
    }))
    const publishMany = async (make: (n: number) => unknown[], count: number, token?: string): Promise<string[]> => {
      const ids: string[] = []
      for (let i = 0; i < count; i += 100) ids.push(...await publish(make(Math.min(100, count - i)), token))
      return ids
    }
    /** Another endpoint's ingest-to-delivery latency, one guest event every 1/OTHER_RATE s for `seconds`. */
    const otherLatency = async (seconds: number): Promise<number[]> => {
      const sent = new Map<string, number>()
      const end = performance.now() + seconds * 1000
      while (performance.now() < end) {
        const at = performance.now()
        const [id] = await publish(guestEvents(1), BOOKINGS_TOKEN)
        sent.set(id as string, at)
        await sleep(Math.max(0, 1000 / OTHER_RATE - (performance.now() - at)))
      }
      await until(() => [...sent.keys()].every((id) => arrivals.has(id)), 60_000, 'the other endpoint\'s deliveries')
      return [...sent].map(([id, at]) => (arrivals.get(id) as number) - at)
    }
    const hangingEndpoint = await call('POST', '/v1/webhook-endpoints', { url: urlOf(hanging), eventTypes: ['property.updated'] })
    await call('POST', '/v1/webhook-endpoints', { url: urlOf(fast), eventTypes: ['guest.created'] })
    const deliveries = gateway.deliveries
    if (deliveries === undefined) throw new Error('no deliveries')

    // Memory: the same events with the hanging endpoint disabled (events only) and enabled (events and deliveries).
    const path = `/v1/webhook-endpoints/${hangingEndpoint.id as string}`
    await call('PATCH', path, { status: 'disabled' })
    let before = await usedMemory(redis)
    await publishMany(hotelEvents, BACKLOG)
    const eventsOnly = await usedMemory(redis) - before
    await call('PATCH', path, { status: 'enabled' })

    // The other endpoint's traffic alone: its commands (and the gateway's own, with no backlog) a second.
    let from = { commands: await commandsServed(redis), at: performance.now() }
    const baseline = await otherLatency(20)
    const baselineRate = (await commandsServed(redis) - from.commands) / ((performance.now() - from.at) / 1000)
    before = await usedMemory(redis)
    await publishMany(hotelEvents, BACKLOG)
    await until(async () => hung.length >= config.events.endpointConcurrency && (await deliveries.backlog()).pending === BACKLOG, 120_000, 'the backlog to form')
    await sleep(3000)
    const perWaiting = (await usedMemory(redis) - before - eventsOnly) / BACKLOG
    const jobKeys = async (ids: string[]): Promise<number> => {
      const sizes = await Promise.all(ids.slice(0, 50).map(async (id) => Number(await redis.memory('USAGE', `${PREFIX}{webhooks}:deliveries:${id}`))))
      return sizes.reduce((a, b) => a + b, 0) / sizes.length
    }
    const waitingHash = await jobKeys(await redis.zrange(`${PREFIX}{webhooks}:park:${hangingEndpoint.id as string}`, '0', '-1'))

    // The window: Redis commands, CPU, and the other endpoint's latency. The other endpoint's own
    // commands (the baseline's rate) are not on the backlog's account.
    const cpu = process.cpuUsage()
    from = { commands: await commandsServed(redis), at: performance.now() }
    const during = await otherLatency(WAIT_SECONDS)
    const seconds = (performance.now() - from.at) / 1000
    const commands = await commandsServed(redis) - from.commands
    const used = process.cpuUsage(cpu)
    const backlogRate = commands / seconds - baselineRate

    // One safety wake-up of each sleeper: all woken at once, each asleep again.
    const parked = await redis.zrange(`${PREFIX}{webhooks}:park:${hangingEndpoint.id as string}`, '0', '-1')
    const wakeFrom = await commandsServed(redis)
    for (const id of parked) await deliveries.queue.backend.promote(id).catch(() => undefined)
    await until(async () => (await deliveries.queue.getJobCounts('wait', 'active')).wait === 0 && await redis.zcard(`${PREFIX}{webhooks}:park:${hangingEndpoint.id as string}`) >= parked.length, 120_000, 'the sleepers to sleep again')
    const perWake = (await commandsServed(redis) - wakeFrom) / Math.max(1, parked.length)
    const overSleep = backlogRate + BACKLOG * perWake / MEAN_SLEEP_SECONDS

    const p = (values: number[]): string => `p50 ${quantile(values, 0.5).toFixed(1)} ms, p99 ${quantile(values, 0.99).toFixed(1)} ms`
    const holds = overSleep <= BOUND && quantile(during, 0.5) <= 2 * quantile(baseline, 0.5) + 20
    row(`${BACKLOG} deliveries behind an endpoint that never answers, ${WAIT_SECONDS} s: ${backlogRate.toFixed(1)} Redis commands/s on their account (${(commands / seconds).toFixed(1)}/s in all, less ${baselineRate.toFixed(1)}/s without the backlog); CPU ${(100 * (used.user + used.system) / 1e6 / seconds).toFixed(1)} % of a core (whole process)`)
    row(`  one safety wake-up of each: ${perWake.toFixed(1)} commands; over the 12.5-minute mean sleep ${overSleep.toFixed(1)} commands/s (bound ${BOUND}): ${overSleep <= BOUND ? 'holds' : 'FAILS'}`)
    row(`  another endpoint, ${OTHER_RATE} events/s: before the backlog ${p(baseline)}; with it ${p(during)}: ${holds ? 'holds' : 'FAILS'}`)

    // Finished deliveries: the other endpoint's events with it disabled (events only), then enabled and delivered.
    const otherEndpoints = await call('POST', '/v1/webhook-endpoints', { url: urlOf(fast), eventTypes: ['guest.updated'] })
    await call('PATCH', `/v1/webhook-endpoints/${otherEndpoints.id as string}`, { status: 'disabled' })
    const updates = (count: number): unknown[] => (guestEvents(count) as { type: string }[]).map((e) => ({ ...e, type: 'com.example.bookings.guest.updated' }))
    before = await usedMemory(redis)
    await publishMany(updates, BACKLOG, BOOKINGS_TOKEN)
    const updatesOnly = await usedMemory(redis) - before
    await call('PATCH', `/v1/webhook-endpoints/${otherEndpoints.id as string}`, { status: 'enabled' })
    before = await usedMemory(redis)
    const completed = (await deliveries.queue.getJobCounts('completed')).completed ?? 0
    const finishedIds = await publishMany(updates, BACKLOG, BOOKINGS_TOKEN)
    await until(() => finishedIds.every((id) => arrivals.has(id)), 120_000, 'the finished deliveries')
    await until(async () => ((await deliveries.queue.getJobCounts('completed')).completed ?? 0) >= completed + BACKLOG, 60_000, 'the jobs to complete')
    await sleep(1000)
    const perFinished = (await usedMemory(redis) - before - updatesOnly) / BACKLOG
    const finishedHash = await jobKeys(await redis.zrange(`${PREFIX}{webhooks}:deliveries:completed`, '-50', '-1'))
    row(`Redis memory per delivery: ${Math.round(perWaiting)} B waiting (asleep behind a busy endpoint; its job's hash ${Math.round(waitingHash)} B), ${Math.round(perFinished)} B finished and kept 24 h (its hash ${Math.round(finishedHash)} B); events not counted`)
  } finally {
    for (const res of hung) res.destroy()
    await gateway.app.close()
    await pms.close()
    for (const s of [hanging, fast]) {
      s.closeAllConnections()
      s.close()
    }
    redis.disconnect()
    server.kill('SIGKILL')
  }
}
