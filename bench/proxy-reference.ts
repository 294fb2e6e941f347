import fastifyHttpProxy from '@fastify/http-proxy'
import Fastify from 'fastify'

// The reference for a declared pass-through route: bare Fastify with @fastify/http-proxy
// forwarding to the same service, adding the headers the gateway adds (the service token, the
// brand), and nothing else: no authentication, no limiter, no checks, no log line. The gateway's
// ratio to it is what its own checks cost on top of forwarding.
//
// Started by bench/run.ts with, in the environment:
//   PROXY_UPSTREAM         the service's base URL
//   PROXY_PREFIX           the public path forwarded (e.g. /v1/guests)
//   PROXY_REWRITE_PREFIX   the service's path for it (e.g. /partner/v1/guests)
//   PROXY_HEADERS          JSON object of headers added to every forwarded request
// It prints {"port": n} on stdout once listening.

const upstream = process.env.PROXY_UPSTREAM
if (upstream === undefined) throw new Error('PROXY_UPSTREAM is required')
const added = JSON.parse(process.env.PROXY_HEADERS ?? '{}') as Record<string, string>

const app = Fastify({ logger: false, keepAliveTimeout: 72_000 })
await app.register(fastifyHttpProxy, {
  upstream,
  prefix: process.env.PROXY_PREFIX ?? '/',
  rewritePrefix: process.env.PROXY_REWRITE_PREFIX ?? '',
  replyOptions: { rewriteRequestHeaders: (_request, headers) => ({ ...headers, ...added }) },
})
await app.listen({ port: 0, host: '127.0.0.1' })
const address = app.server.address() as { port: number }
process.stdout.write(`${JSON.stringify({ port: address.port })}\n`)
