import type { FastifyReply, FastifyRequest } from 'fastify'
import { Writable } from 'node:stream'
import { setImmediate } from 'node:timers/promises'
import { Metrics } from '../src/admin/metrics.js'
import { loadConfig, type TracingSettings } from '../src/config.js'
import { requestContext } from '../src/http/request-context.js'
import { createLogger } from '../src/logger.js'
import { observeStage } from '../src/pipeline/log.js'
import { Tracing } from '../src/tracing/tracing.js'

// The cost of tracing per answer, in process: the two hooks that carry it (the request-context
// stage, which starts the server span, and the observe stage, which ends it and writes the log
// line) run on a cached GET's request as the app runs them, without tracing and with export on
// at 1 % and at 100 %, to the stand-in receiver in a process of its own: this process's CPU
// includes its batching, encoding and sending of the spans, as the gateway's would. The
// end-to-end rows of run.ts measure the same through sockets, where the noise of a whole
// request is larger than the cost looked for.

export interface TracingBenchResult {
  /** Without tracing: the request-context hook starts no span and the observe hook ends none. */
  untracedHooksMakeNoSpan: boolean
  offNs: number
  ratio1Ns: number
  ratio100Ns: number
}

type Hook = (request: FastifyRequest, reply: FastifyReply, done: () => void) => void

function noop(): void {}

const TRACE_ID = /^[0-9a-f]{32}$/

function cachedGet(i: number): { request: FastifyRequest; reply: FastifyReply } {
  const headers = { host: 'api.acme-hotels.example', 'user-agent': 'bench/1.0', authorization: 'Bearer svc_live_x' }
  const raw = { headers }
  const request = {
    id: `req_${i.toString(16).padStart(32, '0')}`, raw, headers, method: 'GET', url: '/v1/properties/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10',
    // `host` as Fastify gives it (the Host header): a traced span of a brand's request names it.
    protocol: 'http', host: 'api.acme-hotels.example', hostname: 'api.acme-hotels.example', ip: '127.0.0.1',
    routeUrl: '/v1/properties/:propertyId', routeOptions: { config: { policy: { path: '/v1/properties/{propertyId}' } } },
    trace: null, span: null, correlationId: null, principal: { keyId: 'key_0123456789abcdef' }, brand: { id: 'acme' },
    errorCode: null, upstreamName: null, upstreamStatus: null, upstreamMs: null, cacheResult: 'hit',
  }
  // The answer written to its end, as when the observe hook runs from Fastify's onResponse.
  const res = { headersSent: true, writableFinished: true, on: () => res }
  const reply = { statusCode: 200, elapsedTime: 0.25, request, raw: res, headers: () => reply, header: () => reply }
  return { request: request as unknown as FastifyRequest, reply: reply as unknown as FastifyReply }
}

function settings(url: string, ratio: number): TracingSettings {
  const config = loadConfig({ CONFIG_FILE: 'config/default.json', OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_TRACES_SAMPLER_ARG: String(ratio), OTEL_BSP_SCHEDULE_DELAY: '200' })
  return config.tracing as TracingSettings
}

/** CPU (user + system) per answer in ns, yielding between chunks so exports and timers run and count. */
async function cpuPerAnswer(iterations: number, context: Hook, observe: Hook): Promise<number> {
  const done = (): void => undefined
  const run = (count: number, from: number): void => {
    for (let i = 0; i < count; i += 1) {
      const { request, reply } = cachedGet(from + i)
      context(request, reply, done)
      observe(request, reply, done)
    }
  }
  run(20_000, 0) // warm up
  await setImmediate()
  const before = process.cpuUsage()
  for (let i = 0; i < iterations; i += 1000) {
    run(1000, i)
    await setImmediate()
  }
  const used = process.cpuUsage(before)
  return ((used.user + used.system) * 1000) / iterations
}

/** `receiverUrl`: an OTLP/HTTP receiver in another process. */
export async function benchTracing(receiverUrl: string, iterations = 200_000): Promise<TracingBenchResult> {
  const sink = new Writable({ write: (_chunk, _encoding, callback) => callback() })
  const logger = createLogger({ level: 'info', destination: sink })
  const metrics = new Metrics()
  const at1 = new Tracing(settings(receiverUrl, 0.01), { exported: () => undefined, dropped: () => undefined })
  const at100 = new Tracing(settings(receiverUrl, 1), { exported: () => undefined, dropped: () => undefined })
  const modes = {
    off: { context: requestContext(undefined, noop), observe: observeStage(logger, metrics) },
    ratio1: { context: requestContext(at1, noop), observe: observeStage(logger, metrics, at1) },
    ratio100: { context: requestContext(at100, noop), observe: observeStage(logger, metrics, at100) },
  }
  // A check that the untraced hooks do not trace, and that the traced ones do: the request's
  // trace id comes out as a span's.
  const untraced = cachedGet(0)
  modes.off.context(untraced.request, untraced.reply, () => undefined)
  modes.off.observe(untraced.request, untraced.reply, () => undefined)
  const probe = cachedGet(0)
  modes.ratio100.context(probe.request, probe.reply, () => undefined)
  if (!TRACE_ID.test(probe.request.span?.spanContext().traceId ?? '')) throw new Error('the traced hooks made no span')
  modes.ratio100.observe(probe.request, probe.reply, () => undefined)
  const rounds: { off: number; ratio1: number; ratio100: number }[] = []
  try {
    // Alternating rounds, so that a noisy neighbour hits all three alike.
    for (let round = 0; round < 3; round += 1) {
      rounds.push({
        off: await cpuPerAnswer(iterations, modes.off.context, modes.off.observe),
        ratio1: await cpuPerAnswer(iterations, modes.ratio1.context, modes.ratio1.observe),
        ratio100: await cpuPerAnswer(iterations, modes.ratio100.context, modes.ratio100.observe),
      })
    }
  } finally {
    await at1.close()
    await at100.close()
  }
  const median = (pick: (r: (typeof rounds)[number]) => number): number => Math.round(rounds.map(pick).sort((x, y) => x - y)[1] as number)
  return {
    untracedHooksMakeNoSpan: untraced.request.span === null,
    offNs: median((r) => r.off),
    ratio1Ns: median((r) => r.ratio1),
    ratio100Ns: median((r) => r.ratio100),
  }
}
