import type { FastifyInstance } from 'fastify'
import { HEADER_CORRELATION_ID } from './contract/headers.js'
import { builtInRoutes } from './routes/policy.js'

// GET /v1/health (docs/operations.md, "Health"; docs/architecture.md §D3): 200 {"status":"ok"}
// or 503 {"status":"unhealthy"}, that object alone. Unhealthy when this instance cannot serve:
// Redis unreachable, the event loop saturated, or draining for shutdown. An open PMS circuit is
// not this instance's fault and shows on the admin port instead.

export type HealthCheck = () => boolean

export class HealthState {
  private readonly checks = new Map<string, HealthCheck>()
  draining = false

  /** Registers a condition the instance needs; `check` returns true while it holds. */
  add(name: string, check: HealthCheck): void {
    this.checks.set(name, check)
  }

  /** Names of the conditions that fail now; empty when healthy. */
  failing(): string[] {
    const failing = this.draining ? ['draining'] : []
    for (const [name, check] of this.checks) if (!check()) failing.push(name)
    return failing
  }

  get healthy(): boolean {
    if (this.draining) return false
    for (const check of this.checks.values()) if (!check()) return false
    return true
  }
}

export const OK = '{"status":"ok"}'
export const UNHEALTHY = '{"status":"unhealthy"}'

export async function healthRoutes(app: FastifyInstance): Promise<void> {
  app.get(builtInRoutes.health.path, { config: { policy: builtInRoutes.health } }, (request, reply) => {
    reply.type('application/json; charset=utf-8')
    if (app.health.healthy) {
      // Echoed on successes only (docs/partners.md, "Every answer"): not on the 503 below.
      if (request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
      return reply.send(OK)
    }
    return reply.code(503).header('retry-after', '1').send(UNHEALTHY)
  })
}
