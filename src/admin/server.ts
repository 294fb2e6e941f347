import Fastify, { type FastifyInstance } from 'fastify'
import type { Metrics } from './metrics.js'
import { statusReport, type StatusSources } from './status.js'

// The admin listener (ADMIN_HOST:ADMIN_PORT): metrics and status for operators, on a port
// of its own so that neither route is ever reachable on the public one.

export async function buildAdmin(metrics: Metrics, sources: StatusSources): Promise<FastifyInstance> {
  const admin = Fastify({ logger: false })
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
