import pino, { type Logger } from 'pino'
import { Agent, request } from 'undici'
import { loadConfig } from '../../src/config.js'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { generateKey } from '../../src/keys/format.js'
import { runKeyTool } from '../../src/credentials/tool.js'
import type { PropertySource } from '../../src/properties/source.js'
import { createRedis, redisTarget } from '../../src/redis.js'
import { until, type HaTopology } from './topology.js'

// The failover scenario, shared by the tests (which assert on it) and `npm run chaos` (which
// reports it): two gateway instances on real sockets in front of HA Redis, a steady load,
// the master of the rate-limit counter killed, and every answer recorded with its time.
//
// Load, per instance: `valid` requests with a cached key (200 expected); `quota` requests with
// a key whose quota runs out during the run (200, then 429); `probe` requests with a new,
// unknown key each time, which need Redis to answer (401; 503 while no master answers).

const HOST = 'api.acme-hotels.example'
const WINDOW_SECONDS = 1_000_000
const PAUSE_MS = 25

/** Properties are not the subject: every list is empty. */
const noProperties: PropertySource = {
  get: async () => undefined,
  listActive: async () => ({ items: [], total: 0 }),
}

export type Kind = 'valid' | 'quota' | 'probe'

export interface Sample {
  /** Milliseconds since the master was killed (negative before). */
  t: number
  instance: string
  kind: Kind
  status: number
  code: string | undefined
  /** Whether the answer carried RateLimit headers (false: the limiter failed open). */
  limited: boolean
}

export interface InstanceReport {
  name: string
  /** When /v1/health first answered 503 after the kill, and 200 again after that (ms since the kill). */
  unhealthyAt: number | null
  healthyAgainAt: number | null
  /** The status of the last health poll, once the load stopped. */
  healthAtEnd: number | null
  /** When the last 503 of any request was sent (ms since the kill). */
  last503At: number | null
  /** When the limiter enforced again after its last fail-open request (ms since the kill). */
  leasedAgainAt: number | null
  /** How long after the suspension this instance first refused the key (ms). */
  suspensionRefusedAfterMs: number
  /** The same for a key revoked after that (refused with 401). */
  revocationRefusedAfterMs: number
  failOpenCounted: number
  /** The `redis` part of the admin port's /status after the failover. */
  redisStatusAfter: Record<string, unknown>
}

export interface ScenarioReport {
  mode: 'sentinel' | 'cluster'
  killedPort: number
  /** From the kill until the topology reports a new master serving the slot (ms). */
  failoverMs: number
  samples: Sample[]
  instances: InstanceReport[]
  /** The port of the master that serves the quota's counter after the failover. */
  newMasterPort: number
  /** What `keys list` shows at the end. */
  listed: string[]
  /** When the key was suspended (ms since the kill). */
  suspendedAt: number
  quota: {
    limit: number
    /** 200s of the quota key with RateLimit headers: admitted by the limiter. */
    admitted: number
    /** 200s of the quota key without them: let through while Redis could not answer. */
    admittedFailOpen: number
    /** Units of the quota key leased by both instances. */
    leased: number
    /** The counter on the surviving master at the end. */
    counterAfter: number
    /** Leased but not in the surviving counter: what the lost master granted and did not replicate. */
    unreplicated: number
  }
}

export interface ScenarioOptions {
  topology: HaTopology
  quota?: number
  warmupMs?: number
  /** Load kept up after the suspension check. */
  afterMs?: number
  logger?: Logger
  log?: (line: string) => void
}

async function tool(args: string[], env: Record<string, string>): Promise<string> {
  const out: string[] = []
  const err: string[] = []
  const code = await runKeyTool(args, { CONFIG_FILE: 'config/default.json', ...env }, { out: (l) => out.push(l), err: (l) => err.push(l) })
  if (code !== 0) throw new Error(`keys ${args[0]} exited ${code}: ${err.join(' ')}`)
  return out.join('\n')
}

async function createKey(env: Record<string, string>, rateLimit?: number): Promise<{ id: string; key: string }> {
  const args = ['create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json']
  if (rateLimit !== undefined) args.push('--rate-limit', String(rateLimit))
  return JSON.parse(await tool(args, env)) as { id: string; key: string }
}

export async function runFailoverScenario(options: ScenarioOptions): Promise<ScenarioReport> {
  const { topology } = options
  const log = options.log ?? (() => undefined)
  const limit = options.quota ?? 400
  const env = { ...topology.env }
  const logger = options.logger ?? pino({ level: 'silent' })

  const valid = await createKey(env)
  const quota = await createKey(env, limit)
  const suspended = await createKey(env)
  const revoked = await createKey(env)
  log(`keys created through the key tool (${topology.mode})`)

  const config = loadConfig({ CONFIG_FILE: 'config/default.json', ...env }, {
    overrides: { rateLimit: { enabled: true, limit: 1_000_000, windowSeconds: WINDOW_SECONDS } },
  })
  const leased = new Map<string, number>()
  const gateways: { name: string; gateway: Gateway; url: string }[] = []
  const agent = new Agent({ connections: 16 })
  try {
    for (const name of ['a', 'b']) {
      const gateway = await createGateway({
        config, logger: logger.child({ instance: name }), properties: noProperties,
        onLease: (keyId, granted) => {
          if (keyId === quota.id) leased.set(name, (leased.get(name) ?? 0) + granted)
        },
      })
      await gateway.app.listen({ port: 0, host: '127.0.0.1' })
      gateways.push({ name, gateway, url: `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}` })
    }
    const call = async (url: string, path: string, key?: string) => {
      const headers: Record<string, string> = { host: HOST, 'user-agent': 'failover-scenario/1.0' }
      if (key !== undefined) headers.authorization = `Bearer ${key}`
      const res = await request(`${url}${path}`, { headers, dispatcher: agent, headersTimeout: 10_000, bodyTimeout: 10_000 })
      const text = await res.body.text()
      let code: string | undefined
      if (res.statusCode >= 400 && String(res.headers['content-type']).startsWith('application/problem+json')) code = (JSON.parse(text) as { code?: string }).code
      return { status: res.statusCode, code, limited: res.headers['ratelimit-limit'] !== undefined }
    }
    for (const { name, url } of gateways) {
      await until(`instance ${name} to be healthy`, async () => (await call(url, '/v1/health')).status === 200, 30_000)
      for (const key of [valid.key, quota.key]) {
        await until(`instance ${name} to admit a key`, async () => (await call(url, '/v1/properties', key)).status === 200, 10_000)
      }
    }
    log('two instances ready')

    // Times are taken from one clock; `killedAt` shifts them to "since the kill" at the end.
    let killedAt = Number.POSITIVE_INFINITY
    const raw: (Omit<Sample, 't'> & { at: number })[] = []
    const health = new Map<string, { at: number; status: number }[]>()
    let running = true
    const workers: Promise<void>[] = []
    for (const { name, url } of gateways) {
      health.set(name, [])
      const kinds: Kind[] = ['valid', 'quota', 'probe']
      for (const kind of kinds) {
        workers.push((async () => {
          while (running) {
            const at = Date.now()
            const key = kind === 'valid' ? valid.key : kind === 'quota' ? quota.key : generateKey('live')
            try {
              const answer = await call(url, '/v1/properties', key)
              raw.push({ at, instance: name, kind, ...answer })
            } catch (error) {
              raw.push({ at, instance: name, kind, status: 0, code: (error as Error).message, limited: false })
            }
            await new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
          }
        })())
      }
      workers.push((async () => {
        while (running) {
          const at = Date.now()
          const status = await call(url, '/v1/health').then((a) => a.status, () => 0)
          health.get(name)?.push({ at, status })
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
      })())
    }

    await new Promise((resolve) => setTimeout(resolve, options.warmupMs ?? 3000))
    const counter = `${config.redisPrefix}rl:{${quota.id}}:${Math.floor(Date.now() / (WINDOW_SECONDS * 1000))}`
    killedAt = Date.now()
    const killedPort = await topology.killMasterOf(counter)
    log(`killed the master on port ${killedPort}`)
    await until('the failover', () => topology.failedOver(), 60_000, 50)
    const failoverMs = Date.now() - killedAt
    log(`failed over in ${failoverMs} ms`)

    for (const { name, url, gateway } of gateways) {
      try {
        await until(`instance ${name} to be healthy after the failover`, async () => (await call(url, '/v1/health')).status === 200, 30_000)
      } catch (error) {
        const status = (await gateway.admin.inject({ url: '/status' })).body
        throw new Error(`${(error as Error).message}; its client is ${gateway.redis?.status}, /status says ${status}`, { cause: error })
      }
      // The key to suspend is in both instances' key cache (10 s), so only the change
      // message can make them refuse it within a second.
      await until(`instance ${name} to admit the key to suspend`, async () => (await call(url, '/v1/properties', suspended.key)).status === 200, 10_000)
    }
    const newMasterPort = await topology.masterOf(counter)
    const redisStatusAfter = await Promise.all(gateways.map(async ({ gateway }) =>
      (JSON.parse((await gateway.admin.inject({ url: '/status' })).body) as { redis: Record<string, unknown> }).redis))
    await tool(['suspend', suspended.id], env)
    const suspendedAt = Date.now()
    log('suspended a key')
    const refusedAfter = async (since: number, status: number, code: string) => Promise.all(gateways.map(async ({ name, url }) => {
      let at = 0
      await until(`instance ${name} to answer ${status} ${code}`, async () => {
        const answer = await call(url, '/v1/properties', key.key)
        at = Date.now()
        return answer.status === status && answer.code === code
      }, 10_000, 20)
      return at - since
    }))
    let key = suspended
    const refusedAt = await refusedAfter(suspendedAt, 403, 'API_KEY_SUSPENDED')
    // A revocation, through the same channel, with a key both instances hold in their cache.
    key = revoked
    for (const { name, url } of gateways) {
      await until(`instance ${name} to admit the key to revoke`, async () => (await call(url, '/v1/properties', revoked.key)).status === 200, 10_000)
    }
    await tool(['revoke', revoked.id], env)
    const revokedAt = Date.now()
    const revokedRefusedAt = await refusedAfter(revokedAt, 401, 'INVALID_API_KEY')
    const listed = (JSON.parse(await tool(['list', '--json'], env)) as { id: string; status: string }[])
      .map((k) => `${k.id === valid.id ? 'valid' : k.id === quota.id ? 'quota' : k.id === suspended.id ? 'suspended' : k.id} ${k.status}`).sort()

    await new Promise((resolve) => setTimeout(resolve, options.afterMs ?? 2000))
    running = false
    await Promise.all(workers)

    const reader = createRedis({ ...redisTarget(config), name: 'scenario', logger, role: 'tool' })
    let counterAfter: number
    try {
      await reader.connect()
      counterAfter = Number(await reader.get(counter) ?? 0)
    } finally {
      reader.disconnect()
    }

    const samples = raw.map(({ at, ...rest }) => ({ t: at - killedAt, ...rest }))
    const instances: InstanceReport[] = []
    for (const [i, { name, gateway }] of gateways.entries()) {
      const polls = (health.get(name) ?? []).filter((p) => p.at >= killedAt)
      const down = polls.find((p) => p.status !== 200)
      const up = down === undefined ? undefined : polls.find((p) => p.at > down.at && p.status === 200)
      const mine = samples.filter((s) => s.instance === name)
      const last503 = mine.filter((s) => s.status === 503).at(-1)
      const lastFailOpen = mine.filter((s) => s.t >= 0 && s.status === 200 && !s.limited).at(-1)
      const leasedAgain = lastFailOpen === undefined ? undefined : mine.find((s) => s.t > lastFailOpen.t && s.limited)
      const counted = await gateway.metrics.registry.getSingleMetricAsString('gateway_rate_limiter_fail_open_total')
      instances.push({
        name,
        unhealthyAt: down === undefined ? null : down.at - killedAt,
        healthyAgainAt: up === undefined ? null : up.at - killedAt,
        healthAtEnd: polls.at(-1)?.status ?? null,
        last503At: last503 === undefined ? null : last503.t,
        leasedAgainAt: leasedAgain === undefined ? null : leasedAgain.t,
        suspensionRefusedAfterMs: refusedAt[i] as number,
        revocationRefusedAfterMs: revokedRefusedAt[i] as number,
        failOpenCounted: Number(/gateway_rate_limiter_fail_open_total (\d+)/.exec(counted)?.[1] ?? 0),
        redisStatusAfter: redisStatusAfter[i] as Record<string, unknown>,
      })
    }
    const quotaSamples = samples.filter((s) => s.kind === 'quota' && s.status === 200)
    const leasedTotal = [...leased.values()].reduce((a, b) => a + b, 0)
    return {
      mode: topology.mode,
      killedPort,
      failoverMs,
      newMasterPort,
      samples,
      instances,
      suspendedAt: suspendedAt - killedAt,
      listed,
      quota: {
        limit,
        admitted: quotaSamples.filter((s) => s.limited).length,
        admittedFailOpen: quotaSamples.filter((s) => !s.limited).length,
        leased: leasedTotal,
        counterAfter,
        unreplicated: Math.max(0, leasedTotal - counterAfter),
      },
    }
  } finally {
    await Promise.all(gateways.map(({ gateway }) => gateway.app.close()))
    await agent.close()
  }
}

/** Answers by status in buckets of `bucketMs`, from the first sample to the last. */
export function statusesOverTime(samples: Sample[], bucketMs = 1000): { from: number; counts: Record<string, number> }[] {
  if (samples.length === 0) return []
  const first = Math.floor(Math.min(...samples.map((s) => s.t)) / bucketMs)
  const last = Math.floor(Math.max(...samples.map((s) => s.t)) / bucketMs)
  const buckets = Array.from({ length: last - first + 1 }, (_, i) => ({ from: (first + i) * bucketMs, counts: {} as Record<string, number> }))
  for (const s of samples) {
    const bucket = buckets[Math.floor(s.t / bucketMs) - first]
    if (bucket !== undefined) bucket.counts[String(s.status)] = (bucket.counts[String(s.status)] ?? 0) + 1
  }
  return buckets
}
