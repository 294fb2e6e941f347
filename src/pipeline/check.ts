import type { FastifyReply, FastifyRequest } from 'fastify'

// One step of a route's pipeline. It throws the ApiError that answers the request, returns
// nothing when it has decided at once, or returns a promise when it must wait (a key or a
// quota that this instance does not hold). Most requests never wait: on a key-cache hit with
// a lease of quota in hand, every step is synchronous.
export type Check = (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>

/**
 * A route's checks run as one onRequest hook, in their order, the first failure answering.
 * One hook instead of one per step spares Fastify's dispatch of each, and a step that
 * decides at once costs no promise or microtask.
 */
export function runChecks(checks: readonly Check[]) {
  return function pipeline(request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
    let index = 0
    const next = (): void => {
      while (index < checks.length) {
        const check = checks[index] as Check
        index += 1
        let pending: void | Promise<void>
        try {
          pending = check(request, reply)
        } catch (error) {
          done(error as Error)
          return
        }
        if (pending !== undefined) {
          pending.then(next, done)
          return
        }
      }
      done()
    }
    next()
  }
}
