import type { FastifyReply, FastifyRequest } from 'fastify'

// One step of a route's pipeline. It returns nothing when it lets the request on at once, the
// error that answers the request when it refuses it, or a promise of either when it must wait
// (a key or a quota that this instance does not hold). Most requests never wait: on a key-cache
// hit with a lease of quota in hand, every step is synchronous. A step may throw its error
// too; step 6 (a query or path parameter), step 4 (a credential refused; the key check returns
// an invalid or unknown key's 401) and step 5 (a spent quota) return theirs, because a throw
// costs V8 a message and a walk of the stack, 1-2 µs, a twentieth of a rejection's CPU
// (docs/performance.md, "Full run of 2026-11-29 (night), as deployed").
export type Check = (request: FastifyRequest, reply: FastifyReply) => void | Error | Promise<void | Error>

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
        let pending: void | Error | Promise<void | Error>
        try {
          pending = check(request, reply)
        } catch (error) {
          done(error as Error)
          return
        }
        if (pending instanceof Error) {
          done(pending)
          return
        }
        if (pending !== undefined) {
          pending.then((refusal) => {
            if (refusal instanceof Error) done(refusal)
            else next()
          }, done)
          return
        }
      }
      done()
    }
    next()
  }
}
