import { once } from 'node:events'
import type { Socket } from 'node:net'
import { Redis } from 'ioredis'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { createRedis } from '../src/redis.js'
import { REDIS_URL } from './helpers/redis.js'

// The commands a connection sends in one turn of the event loop leave in one write
// (src/redis.ts, `batchWritesPerTurn`). A turn here is the timers phase: callbacks of timers
// that fall due together run one after another in it, each its own task, as the I/O callbacks
// of many requests do in a turn of a busy gateway.

const clients: Redis[] = []

afterEach(() => {
  for (const client of clients.splice(0)) client.disconnect()
})

async function ready(client: Redis): Promise<Redis> {
  clients.push(client)
  if (client.status !== 'ready') await once(client, 'ready')
  return client
}

/** Counts the writes the socket's stream hands to the system (its _write and _writev). */
function countWrites(socket: Socket): { count: number } {
  const counted = { count: 0 }
  const stream = socket as unknown as Record<'_write' | '_writev', (...args: unknown[]) => unknown>
  for (const name of ['_write', '_writev'] as const) {
    const original = stream[name]
    stream[name] = function (this: unknown, ...args: unknown[]) {
      counted.count += 1
      return original.apply(this, args)
    }
  }
  return counted
}

/**
 * Ten ECHOs, each sent by a timer of its own, all due at once: their replies in order. Each
 * timer takes the clock as it is set, and ten set one after another can straddle a
 * millisecond: the later ones may not yet be due when the first runs, and then run a turn
 * later. Held here until every one is due, they all run in the loop's next timers phase.
 */
async function echoesFromTimers(client: Redis): Promise<string[]> {
  const replies = Promise.all(Array.from({ length: 10 }, async (_, i) => new Promise<string>((resolve, reject) => {
    setTimeout(() => void client.echo(`m${i}`).then(resolve, reject), 0)
  })))
  const due = performance.now() + 3
  while (performance.now() < due) { /* every timer falls due before the loop goes on */ }
  return replies
}

const expected = Array.from({ length: 10 }, (_, i) => `m${i}`)

describe('the writes of a connection', () => {
  it('send the commands of one turn in one write, each answered in order', async () => {
    const client = await ready(createRedis({ url: REDIS_URL, name: 'writes-test', logger: pino({ level: 'silent' }) }) as Redis)
    const writes = countWrites(client.stream as Socket)
    expect(await echoesFromTimers(client)).toEqual(expected)
    expect(writes.count).toBe(1)
  })

  it('would take a write per command without it (what the test above tells apart)', async () => {
    const client = await ready(new Redis(REDIS_URL))
    const writes = countWrites(client.stream as Socket)
    expect(await echoesFromTimers(client)).toEqual(expected)
    expect(writes.count).toBe(10)
  })

  it('batch on the socket of a reconnect too, and leave none of its commands waiting', async () => {
    const client = await ready(createRedis({ url: REDIS_URL, name: 'writes-test', logger: pino({ level: 'silent' }) }) as Redis)
    const first = client.stream as Socket
    // A command corks the socket for its turn; the socket is gone before the turn ends.
    const lost = client.echo('lost').catch((error: unknown) => (error as Error).message)
    first.destroy()
    // Refused as any command in flight when a connection drops is (the gateway's clients do not retry).
    expect(await lost).toBe('Reached the max retries per request limit (which is 0). Refer to "maxRetriesPerRequest" option for details.')
    await once(client, 'ready')
    expect(client.stream).not.toBe(first)
    const writes = countWrites(client.stream as Socket)
    expect(await echoesFromTimers(client)).toEqual(expected)
    expect(writes.count).toBe(1)
  })
})
