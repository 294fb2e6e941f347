import Fastify from 'fastify'
import { readRoutes } from './reference-routes.js'

// The floor for every answer the gateway gives itself: bare Fastify 5 (one route, no hooks, no
// logger, no schema) answering each benchmarked request with the bytes the gateway sent for it
// and the same kind of headers. Whatever the gateway costs above it is the gateway's own work.
//
// Started by bench/run.ts with the same routes on stdin as reference-server.ts
// (reference-routes.ts). It prints {"port": n} once listening.

const routes = await readRoutes()
let counter = 0

const app = Fastify({ logger: false, keepAliveTimeout: 72_000 })
app.route({
  method: ['GET', 'POST'],
  url: '/*',
  handler: (request, reply) => {
    const route = routes.get(`${request.headers.authorization ?? ''} ${request.url}`)
    if (route === undefined) return reply.code(404).send()
    counter += 1
    // A string body with its content-type set is sent as it is, not serialised again.
    return reply.code(route.status).headers({ ...route.headers, 'service-request-id': `req_${counter.toString(16).padStart(32, '0')}` }).send(route.body)
  },
})
await app.listen({ port: 0, host: '127.0.0.1' })
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`)
