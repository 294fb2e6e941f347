import { createHash } from 'node:crypto'
import type { RedisClient } from './redis.js'

// Our Lua scripts as commands: EVALSHA, and EVAL when the server does not know the script yet
// (a new server, a failover to a replica that never ran it, SCRIPT FLUSH), which loads it for
// the next EVALSHA. ioredis's `defineCommand` does the same, but copies every command defined
// on the client onto each pipeline it makes, and with auto-pipelining it makes one in every
// turn that sends a command: a pipeline of a client with 30 such commands took 13.6–14.8 µs to
// make, against 2.2–2.5 µs with none (docs/performance.md, "Scripts without defineCommand").

export type ScriptArgument = string | number | Buffer

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

/** Runs `lua` by its hash, loading it by EVAL when the server does not know it. */
function scriptRunner(redis: RedisClient, lua: string, replies: 'text' | 'bytes'): (numberOfKeys: number, args: readonly ScriptArgument[]) => Promise<unknown> {
  const sha = createHash('sha1').update(lua).digest('hex')
  // ioredis has a Buffer variant of every command; its types leave out those of EVAL and EVALSHA.
  const client = redis as unknown as Record<'evalsha' | 'evalshaBuffer' | 'eval' | 'evalBuffer', (...args: ScriptArgument[]) => Promise<unknown>>
  const evalsha = (replies === 'bytes' ? client.evalshaBuffer : client.evalsha).bind(redis)
  const evaluate = (replies === 'bytes' ? client.evalBuffer : client.eval).bind(redis)
  return async (numberOfKeys, args) => {
    try {
      return await evalsha(sha, numberOfKeys, ...args)
    } catch (error) {
      if (!isNoScript(error)) throw error
      return await evaluate(lua, numberOfKeys, ...args)
    }
  }
}

/**
 * A command running `lua` with its first `numberOfKeys` arguments as its keys (the hash slot a
 * Cluster sends it to is theirs), typed as `Command` says: its arguments strings, numbers or
 * Buffers, its reply what the script returns. `replies: 'bytes'` answers bulk strings as Buffers.
 */
export function redisScript<Command extends (...args: never[]) => Promise<unknown>>(redis: RedisClient, numberOfKeys: number, lua: string, replies: 'text' | 'bytes' = 'text'): Command {
  const run = scriptRunner(redis, lua, replies)
  return (async (...args: ScriptArgument[]) => run(numberOfKeys, args)) as unknown as Command
}

/** A command running `lua` over as many keys as each call gives (in one hash slot, on a Cluster), then its other arguments. */
export function redisScriptOverKeys<Reply>(redis: RedisClient, lua: string): (keys: readonly string[], args: readonly ScriptArgument[]) => Promise<Reply> {
  const run = scriptRunner(redis, lua, 'text')
  return async (keys, args) => run(keys.length, [...keys, ...args]) as Promise<Reply>
}
