import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { redisAnswers } from '../../src/redis.js'
import { freePort } from '../../bench/ports.js'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** A namespace of this test file's own in the shared Redis. */
export function testPrefix(): string {
  return `gwtest:${randomUUID().slice(0, 8)}:`
}

/** Every Redis key under `prefix`. */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    found.push(...batch)
  } while (cursor !== '0')
  return found
}

export async function removePrefix(redis: Redis, prefix: string): Promise<void> {
  const keys = await keysUnder(redis, prefix)
  if (keys.length > 0) await redis.del(...keys)
}

/** A Redis server of the test's own, which it may stop and start again. */
export class PrivateRedis {
  private process: ChildProcess | undefined
  constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort())
    await redis.start()
    return redis
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    this.process = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
    const answers = await eventually(async () => redisAnswers(this.url), 5000, 50)
    if (!answers) throw new Error(`redis-server on port ${this.port} did not start`)
  }

  async stop(): Promise<void> {
    const child = this.process
    // A child killed by a signal has a signalCode and no exitCode.
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve())
      child.kill('SIGKILL')
    })
  }
}

/**
 * The calls of each command the server has served since its statistics were last reset, by name
 * (INFO commandstats; the commands a script runs count too). On a server of the test's own, so
 * that no other test's commands count.
 */
export async function commandCalls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats')
  const calls: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1] as string] = Number(match[2])
  return calls
}

/** Every string a key holds, whatever its type (a hash's fields and values, a set's or a sorted set's members, a string): what a scan for secrets reads. */
export async function textsOf(redis: Redis, key: string): Promise<string[]> {
  switch (await redis.type(key)) {
    case 'hash': return Object.entries(await redis.hgetall(key)).flat()
    case 'set': return redis.smembers(key)
    case 'zset': return redis.zrange(key, '0', '-1')
    case 'string': return [await redis.get(key) ?? '']
    default: throw new Error(`a key of a type the scan does not read: ${key}`)
  }
}

/** Polls `probe` until it returns true or `withinMs` passes; returns whether it did. */
export async function eventually(probe: () => Promise<boolean>, withinMs: number, everyMs = 20): Promise<boolean> {
  const deadline = Date.now() + withinMs
  for (;;) {
    if (await probe()) return true
    if (Date.now() > deadline) return false
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

export { freePort }
