import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRedis } from '../src/redis.js'
import { redisScript } from '../src/redis-script.js'
import { commandCalls, PrivateRedis } from './helpers/redis.js'

// Our scripts as commands (src/redis-script.ts), on a Redis server of the test's own, so that
// it may forget every script (SCRIPT FLUSH, as a server new after a failover has none) without
// touching another test's.

const COUNT_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if ARGV[1] == 'fail' then return redis.error_reply('ERR asked to fail after ' .. n) end
return {n, ARGV[1]}
`
const ECHO_SCRIPT = 'return ARGV[1]'

function sha(lua: string): string {
  return createHash('sha1').update(lua).digest('hex')
}

let server: PrivateRedis
let redis: ReturnType<typeof createRedis>
let admin: Redis

beforeAll(async () => {
  server = await PrivateRedis.start()
  redis = createRedis({ url: server.url, name: 'script-test', logger: pino({ level: 'silent' }) })
  // A command client has no offline queue: it must be connected before the first test sends.
  if (redis.status !== 'ready') await once(redis, 'ready')
  admin = new Redis(server.url)
})

/** How many times the server ran EVAL and EVALSHA since its statistics were reset. */
async function evalCalls(): Promise<{ eval: number; evalsha: number }> {
  const calls = await commandCalls(admin)
  return { eval: calls.eval ?? 0, evalsha: calls.evalsha ?? 0 }
}

afterAll(async () => {
  redis.disconnect()
  admin.disconnect()
  await server.stop()
})

describe('a script as a command', () => {
  it('runs on a server that does not know it, which knows it after', async () => {
    await admin.script('FLUSH')
    await admin.config('RESETSTAT')
    const count = redisScript<(key: string, label: string) => Promise<[number, string]>>(redis, 1, COUNT_SCRIPT)
    expect(await admin.script('EXISTS', sha(COUNT_SCRIPT))).toEqual([0])
    expect(await count('first', 'a')).toEqual([1, 'a'])
    expect(await admin.script('EXISTS', sha(COUNT_SCRIPT))).toEqual([1])
    // By its hash first, which the server did not know; then the whole script, once.
    expect(await evalCalls()).toEqual({ eval: 1, evalsha: 1 })
    expect(await count('first', 'b')).toEqual([2, 'b'])
    expect(await count('first', 'c')).toEqual([3, 'c'])
    // Known now: by its hash alone.
    expect(await evalCalls()).toEqual({ eval: 1, evalsha: 3 })
  })

  it('runs again after the server forgot every script', async () => {
    const count = redisScript<(key: string, label: string) => Promise<[number, string]>>(redis, 1, COUNT_SCRIPT)
    expect(await count('second', 'a')).toEqual([1, 'a'])
    await admin.script('FLUSH')
    // Several at once, as one turn's commands leave in one write: each finds it missing and loads it.
    expect(await Promise.all([count('second', 'b'), count('second', 'c'), count('second', 'd')])).toEqual([[2, 'b'], [3, 'c'], [4, 'd']])
    expect(await admin.get('second')).toBe('4')
  })

  it('takes its first arguments as keys and the rest as arguments, numbers and bytes too', async () => {
    const count = redisScript<(key: string, label: Buffer | number) => Promise<[number, string]>>(redis, 1, COUNT_SCRIPT)
    expect(await count('third', 7)).toEqual([1, '7'])
    expect(await count('third', Buffer.from('bytes'))).toEqual([2, 'bytes'])
    expect(await admin.get('third')).toBe('2')
  })

  it('answers bulk strings as bytes when asked', async () => {
    const echo = redisScript<(value: Buffer) => Promise<Buffer>>(redis, 0, ECHO_SCRIPT, 'bytes')
    const bytes = Buffer.from([0xff, 0x00, 0xc3, 0x28])
    const answer = await echo(bytes)
    expect(Buffer.isBuffer(answer)).toBe(true)
    expect(answer.equals(bytes)).toBe(true)
    const text = redisScript<(value: string) => Promise<string>>(redis, 0, ECHO_SCRIPT)
    expect(await text('plain')).toBe('plain')
  })

  it('rejects with the script\'s own error, run once, whether the server knew the script or not', async () => {
    const count = redisScript<(key: string, label: string) => Promise<[number, string]>>(redis, 1, COUNT_SCRIPT)
    await admin.script('FLUSH')
    await expect(count('fourth', 'fail')).rejects.toThrow('ERR asked to fail after 1')
    await expect(count('fourth', 'fail')).rejects.toThrow('ERR asked to fail after 2')
    expect(await admin.get('fourth')).toBe('2')
  })

  it('rejects at once while Redis is away, as any command of the client does', async () => {
    const offline = createRedis({ url: 'redis://127.0.0.1:1', name: 'script-test-offline', logger: pino({ level: 'silent' }), role: 'tool' })
    const count = redisScript<(key: string, label: string) => Promise<[number, string]>>(offline, 1, COUNT_SCRIPT)
    await expect(count('fifth', 'a')).rejects.toThrow()
    offline.disconnect()
  })
})
