import type { FastifyReply, FastifyRequest } from 'fastify'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../src/contract/errors.js'
import { runChecks, type Check } from '../src/pipeline/check.js'

// The runner of a route's checks, without a gateway: the first refusal answers, whether the
// check returned it, threw it or rejected with it, and no later check runs. The request and
// reply are never read by the runner, only handed to the checks.

const request = {} as FastifyRequest
const reply = {} as FastifyReply

/** Runs the checks; resolves with what the runner handed to Fastify's `done` and the checks that ran. */
async function run(checks: ((ran: string[]) => Check)[]): Promise<{ error: Error | undefined; ran: string[] }> {
  const ran: string[] = []
  return new Promise((resolve) => {
    runChecks(checks.map((make) => make(ran)))(request, reply, (error) => resolve({ error, ran }))
  })
}

const pass = (name: string) => (ran: string[]): Check => () => { ran.push(name) }
const later = (name: string) => (ran: string[]): Check => async () => { await Promise.resolve(); ran.push(name) }
const refusal = new ApiError('UNKNOWN_QUERY_PARAMETER', "Unknown query parameter 'per_page'.")

describe('the checks of a route', () => {
  it('all run in their order when none refuses, those that wait included', async () => {
    expect(await run([pass('a'), later('b'), pass('c')])).toEqual({ error: undefined, ran: ['a', 'b', 'c'] })
  })

  it('stop at a refusal returned, which answers the request', async () => {
    const returned = (ran: string[]): Check => () => { ran.push('refuses'); return refusal }
    const result = await run([pass('a'), returned, pass('c')])
    expect(result.error).toBe(refusal)
    expect(result.ran).toEqual(['a', 'refuses'])
  })

  it('stop at a refusal a wait ends in, returned or thrown', async () => {
    const waitsThenRefuses = (ran: string[]): Check => async () => { await Promise.resolve(); ran.push('waits'); return refusal }
    expect(await run([later('a'), waitsThenRefuses, pass('c')])).toEqual({ error: refusal, ran: ['a', 'waits'] })
  })

  it('stop at a refusal thrown, or a wait that fails, alike', async () => {
    const thrown = (ran: string[]): Check => () => { ran.push('throws'); throw refusal }
    const rejected = (ran: string[]): Check => async () => { ran.push('rejects'); await Promise.resolve(); throw refusal }
    expect(await run([pass('a'), thrown, pass('c')])).toEqual({ error: refusal, ran: ['a', 'throws'] })
    expect(await run([later('a'), rejected, pass('c')])).toEqual({ error: refusal, ran: ['a', 'rejects'] })
  })
})
