import { createHash, timingSafeEqual } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Metrics } from './metrics.js'
import { statusReport, type StatusSources } from './status.js'

// The admin listener (ADMIN_HOST:ADMIN_PORT): metrics and status for operators, on a port
// of its own so that neither route is ever reachable on the public one. With ADMIN_TOKEN
// set, both need `Authorization: Bearer <ADMIN_TOKEN>`. `/livez` needs none: an orchestrator's
// liveness probe carries no token, and it tells nothing but that the process answers.

const LIVENESS_PATH = '/livez'

export interface AdminOptions {
  token?: string | undefined
}

// Digests of equal length, so the comparison takes the same time whatever was sent.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

export async function buildAdmin(metrics: Metrics, sources: StatusSources, options: AdminOptions = {}): Promise<FastifyInstance> {
  const admin = Fastify({ logger: false })
  const token = options.token
  if (token !== undefined) {
    const expected = digest(`Bearer ${token}`)
    admin.addHook('onRequest', async (request, reply) => {
      if (request.url === LIVENESS_PATH) return
      const presented = request.headers.authorization
      if (presented !== undefined && timingSafeEqual(digest(presented), expected)) return
      return reply.code(401).header('www-authenticate', 'Bearer realm="admin"').header('cache-control', 'no-store')
        .type('application/problem+json; charset=utf-8')
        .send({ title: 'Unauthorized', status: 401, detail: 'The admin routes need `Authorization: Bearer <ADMIN_TOKEN>`.' })
    })
  }
  // Alive while the event loop turns; Redis or an upstream being down is not a reason to
  // restart the process (readiness, on the public port's /v1/health, covers those).
  admin.get(LIVENESS_PATH, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    return { status: 'ok' }
  })
  admin.get('/metrics', async (_request, reply) => {
    reply.type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })
  admin.get('/status', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    return statusReport(sources)
  })
  return admin
}
