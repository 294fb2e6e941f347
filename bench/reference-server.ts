import { createServer } from 'node:http'
import { readRoutes } from './reference-routes.js'

// The reference: a bare node:http server answering each benchmarked path with the bytes the
// gateway sent for it and the same kind of headers. It does no work, so the ratio of the
// gateway to it is the gateway's own cost on this machine, in this run.
//
// Started by bench/run.ts with its routes on stdin (reference-routes.ts).

const routes = await readRoutes()
let counter = 0
// REFERENCE_WORK_US: microseconds of busy work before each answer, for the calibration row
// (bench/README.md): what this machine charges a server per microsecond of work it adds.
const workMs = Number(process.env.REFERENCE_WORK_US ?? 0) / 1000

function work(): void {
  // Spins on the clock: at most this much CPU, less if the process is descheduled meanwhile.
  const until = performance.now() + workMs
  while (performance.now() < until);
}

const server = createServer((req, res) => {
  const route = routes.get(`${req.headers.authorization ?? ''} ${req.url ?? ''}`)
  if (route === undefined) {
    res.writeHead(404).end()
    return
  }
  counter += 1
  if (workMs > 0) work()
  res.writeHead(route.status, { ...route.headers, 'service-request-id': `req_${counter.toString(16).padStart(32, '0')}` })
  res.end(route.body)
})
server.keepAliveTimeout = 72_000
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
