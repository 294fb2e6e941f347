import { connect } from 'node:net'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Metrics } from '../../src/admin/metrics.js'
import { buildApp } from '../../src/app.js'
import { generateKey } from '../../src/keys/format.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { FakeKeys } from '../helpers/fake-keys.js'
import { TestGateway } from '../helpers/gateway.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { expectProblem, REQUEST_ID } from '../helpers/problem.js'
import { eventually } from '../helpers/redis.js'
import { secondsBetween } from '../helpers/window.js'
import { contractChecked } from '../helpers/contract.js'

const METRICS = [
  'gateway_http_requests_total', 'gateway_http_request_duration_seconds', 'gateway_upstream_requests_total',
  'gateway_upstream_request_duration_seconds', 'gateway_circuit_breaker_state', 'gateway_cache_requests_total',
  'gateway_auth_failures_total', 'gateway_rate_limited_total', 'process_cpu_user_seconds_total', 'nodejs_eventloop_lag_seconds',
  'gateway_redis_up', 'gateway_healthy', 'gateway_load_shedding', 'gateway_shed_requests_total', 'gateway_trace_spans_exported_total',
  'gateway_trace_spans_dropped_total',
]

let t: TestGateway
let key: string
let adminUrl: string

beforeAll(async () => {
  t = await TestGateway.start({
    config: { breaker: { errorThresholdPercentage: 50, volumeThreshold: 2, resetTimeoutMs: 2000, rollingCountTimeoutMs: 10_000 } },
  })
  await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  adminUrl = `http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}`
  key = await t.key()
})
afterAll(async () => t.close())

async function admin(path: string) {
  const res = await request(`${adminUrl}${path}`)
  return { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
}

/** Sends `text` as it is on a socket of its own and reads the answer until the server closes it. */
async function rawAdmin(base: string, text: string): Promise<string> {
  const { port } = new URL(base)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.end(text))
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')))
  })
}

/** The value of one series in the Prometheus text. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

describe('metrics', () => {
  it('exposes every metric of docs/operations.md, "Metrics", moving with traffic', async () => {
    const ids = t.pms.hotels.filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid))
    const before = (await admin('/metrics')).body
    await t.get(`/v1/properties/${ids[0]}`, key) // miss, PMS call
    await t.get(`/v1/properties/${ids[0]}`, key) // hit
    await t.get('/v1/properties', generateKey('live')) // 401
    const res = await admin('/metrics')
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/)
    for (const name of METRICS) expect(res.body).toContain(`# TYPE ${name} `)
    const moved = (series: string) => sample(res.body, series) - sample(before, series)
    expect(moved('gateway_http_requests_total{route="/v1/properties/:propertyId",method="GET",status="200",code=""}')).toBe(2)
    expect(moved('gateway_http_requests_total{route="/v1/properties",method="GET",status="401",code="INVALID_API_KEY"}')).toBe(1)
    expect(moved('gateway_http_request_duration_seconds_count{route="/v1/properties/:propertyId",method="GET",status="200"}')).toBe(2)
    expect(moved('gateway_upstream_requests_total{upstream="pms",outcome="success"}')).toBe(1)
    expect(moved('gateway_upstream_request_duration_seconds_count{upstream="pms"}')).toBe(1)
    expect(moved('gateway_cache_requests_total{cache="properties",result="miss"}')).toBe(1)
    expect(moved('gateway_cache_requests_total{cache="properties",result="hit"}')).toBe(1)
    expect(moved('gateway_auth_failures_total{code="INVALID_API_KEY"}')).toBe(1)
    expect(sample(res.body, 'gateway_circuit_breaker_state{upstream="pms"}')).toBe(0)
    expect([sample(res.body, 'gateway_redis_up'), sample(res.body, 'gateway_healthy')]).toEqual([1, 1])
  })

  it('measures latency from 100 µs up, so a cached answer falls in a bucket of its own', async () => {
    const text = (await admin('/metrics')).body
    const bounds = (metric: string): string[] => [...new Set(text.split('\n').filter((l) => l.startsWith(`${metric}_bucket{`)).map((l) => /le="([^"]+)"/.exec(l)?.[1] as string))]
    const expected = ['0.0001', '0.00025', '0.0005', '0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '+Inf']
    expect(bounds('gateway_http_request_duration_seconds')).toEqual(expected)
    expect(bounds('gateway_upstream_request_duration_seconds')).toEqual(expected)
  })

  it('labels unmatched paths as one route', async () => {
    await t.get('/v1/scan/1', key)
    await t.get('/v1/scan/2', key)
    const text = (await admin('/metrics')).body
    expect(sample(text, 'gateway_http_requests_total{route="unmatched",method="GET",status="404",code="ROUTE_NOT_FOUND"}')).toBeGreaterThanOrEqual(2)
    expect(text).not.toContain('/v1/scan')
  })

  it('answers a malformed percent-escape as problem+json with a request id', async () => {
    const res = await admin('/status%zz')
    expectProblem(res, { code: 'MALFORMED_REQUEST', instance: '/status%zz', detail: 'The request path is not valid percent-encoding.' })
  })

  it('never answers admin routes on the public port, nor the API on the admin port', async () => {
    for (const path of ['/metrics', '/status']) {
      expectProblem(await t.get(path, key), { code: 'ROUTE_NOT_FOUND', instance: path })
    }
    expectProblem(await admin('/v1/health'), {
      code: 'ROUTE_NOT_FOUND', instance: '/v1/health', detail: 'There is no admin route at /v1/health; the admin port serves /metrics, /status, /events, /admin/v1/openapi.json, /admin/v1/config/reload and /livez.',
    })
  })
})

describe('/status follows the breaker', () => {
  it('goes closed, open (counting down), half-open, closed', async () => {
    const status = async () => JSON.parse((await admin('/status')).body) as {
      status: string; redis: { status: string; latencyMs: number | null }; upstreams: { pms: { breaker: string; retryAfterSeconds: number; stats: Record<string, number> } }
      cache: { properties: { entries: number; hitRatio: number } }; version: string; uptimeSeconds: number
    }
    const first = await status()
    expect(first).toMatchObject({
      status: 'ok', version: '1.0.0', uptimeSeconds: expect.any(Number),
      redis: { status: 'up' },
      upstreams: { pms: { breaker: 'closed', retryAfterSeconds: 0, stats: { successes: expect.any(Number), failures: 0, timeouts: 0, rejects: 0 } } },
      cache: { properties: { entries: expect.any(Number), hitRatio: expect.any(Number) } },
    })
    expect(await eventually(async () => (await status()).redis.latencyMs !== null, 3000)).toBe(true)

    t.pms.setFailure({ mode: 'html-5xx', status: 502 })
    await t.get('/v1/properties/00000000-0000-4000-8000-000000000000', key)
    // The second failure opens the circuit, at some instant between these two readings.
    const opening = Date.now()
    await t.get('/v1/properties/00000000-0000-4000-8000-000000000001', key)
    const opened = Date.now()
    await t.get('/v1/properties/00000000-0000-4000-8000-000000000002', key)
    const asking = Date.now()
    const open = await status()
    const answered = Date.now()
    expect(open).toMatchObject({ status: 'degraded', upstreams: { pms: { breaker: 'open', stats: { failures: 2, rejects: 1 } } } })
    // The whole seconds until half-open, 2 s after it opened.
    expect(secondsBetween(opening + 2000 - answered, opened + 2000 - asking)).toContain(open.upstreams.pms.retryAfterSeconds)
    // An open circuit is the PMS's trouble, shared by every instance: this one stays healthy.
    const health = await t.get('/v1/health', undefined)
    expect({ status: health.statusCode, body: health.body }).toEqual({ status: 200, body: '{"status":"ok"}' })
    const metricsText = (await admin('/metrics')).body
    expect(sample(metricsText, 'gateway_circuit_breaker_state{upstream="pms"}')).toBe(2)
    expect(sample(metricsText, 'gateway_upstream_requests_total{upstream="pms",outcome="circuit_open"}')).toBe(1)

    expect(await eventually(async () => (await status()).upstreams.pms.retryAfterSeconds === 1, 3000, 50)).toBe(true)
    expect(await eventually(async () => (await status()).upstreams.pms.breaker === 'halfOpen', 3000, 50)).toBe(true)
    expect(sample((await admin('/metrics')).body, 'gateway_circuit_breaker_state{upstream="pms"}')).toBe(1)

    t.pms.setFailure(undefined)
    // A property not in the cache: the half-open trial call reaches the PMS, succeeds, closes.
    const id = String(t.pms.hotels.filter((h) => h.chain_code === 'ACME')[5]?.hotel_uuid)
    await t.get(`/v1/properties/${id}`, key)
    expect((await status())).toMatchObject({ status: 'ok', upstreams: { pms: { breaker: 'closed', retryAfterSeconds: 0 } } })
  })
})

describe('load shedding', () => {
  it('answers 503 problem+json and unhealthy while the event loop is saturated', async () => {
    const metrics = new Metrics()
    const app = await buildApp({
      config: testConfig({ loadShedding: { maxEventLoopDelayMs: 20, maxEventLoopUtilization: 0, sampleIntervalMs: 50, sustainedSamples: 3 } }),
      logger: captureLogs().logger,
      keys: new FakeKeys({}),
      properties: new MemorySource([]),
      metrics,
    })
    contractChecked(app)
    await app.ready()
    // The loop kept busy in stretches of 40 ms, timers running between them: each stretch is a
    // delay the shedder's histogram records, sample after sample, however the machine schedules
    // this process. It stays busy until the answers below are taken, so no sample that keeps up
    // can end the shedding in between (a single long block, then a pause, made samples with no
    // delay recorded at all on a loaded machine, and the test failed there).
    let saturating = true
    const busy = (async () => {
      while (saturating) {
        const stretch = Date.now() + 40
        while (Date.now() < stretch) { /* saturate the event loop */ }
        await new Promise((resolve) => setImmediate(resolve))
      }
    })()
    const gauge = async (): Promise<string[]> => (await metrics.registry.getSingleMetricAsString('gateway_load_shedding')).split('\n').filter((l) => !l.startsWith('#'))
    try {
      expect(await eventually(async () => (await gauge())[0] === 'gateway_load_shedding 1', 10_000, 0)).toBe(true)
      const [res, health] = [
        await app.inject({ url: '/v1/properties', headers: { host: ACME_HOST } }),
        await app.inject({ url: '/v1/health' }),
      ]
      expect(await gauge()).toEqual(['gateway_load_shedding 1'])
      const counted = await metrics.registry.getSingleMetricAsString('gateway_shed_requests_total')
      expect(counted.split('\n').filter((l) => !l.startsWith('#'))).toEqual(['gateway_shed_requests_total 1'])
      expectProblem(res, {
        code: 'SERVICE_UNAVAILABLE', instance: '/v1/properties', headers: { 'retry-after': '1' },
        detail: 'The gateway is overloaded; retry shortly.',
      })
      expect({ status: health.statusCode, body: health.body }).toEqual({ status: 503, body: '{"status":"unhealthy"}' })
    } finally {
      saturating = false
      await busy
      await app.close()
    }
  })
})

describe('ADMIN_TOKEN (operations: admin port)', () => {
  const TOKEN = 'admin-token-for-the-test-0123456789'
  let guarded: TestGateway
  let url: string
  beforeAll(async () => {
    guarded = await TestGateway.start({ env: { ADMIN_TOKEN: TOKEN } })
    await guarded.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
    url = `http://127.0.0.1:${(guarded.gateway.admin.server.address() as { port: number }).port}`
  })
  afterAll(async () => guarded.close())

  const call = async (path: string, authorization?: string) => {
    const res = await request(`${url}${path}`, { headers: authorization === undefined ? {} : { authorization } })
    return { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
  }

  it.each([
    ['no Authorization header', undefined, 'MISSING_AUTH_HEADER'],
    ['a wrong token', 'Bearer admin-token-for-the-test-012345678X', 'INVALID_AUTH_HEADER'],
    ['a prefix of the token', 'Bearer admin-token', 'INVALID_AUTH_HEADER'],
    ['another scheme', `Basic ${TOKEN}`, 'INVALID_AUTH_HEADER'],
  ] as const)('answers 401 problem+json to %s, on both routes', async (_name, authorization, code) => {
    for (const path of ['/metrics', '/status?verbose=1']) {
      const res = await call(path, authorization)
      expectProblem(res, {
        code, instance: path.split('?')[0] as string, detail: 'The admin routes need `Authorization: Bearer <ADMIN_TOKEN>`.',
        headers: { 'www-authenticate': 'Bearer realm="admin"' },
      })
      expect(res.body).not.toContain(TOKEN)
    }
  })

  /** An answer as a caller compares it: what differs between any two requests (their id, time and path) left out. */
  const comparable = (res: { statusCode: number; headers: Record<string, unknown>; body: string }) => {
    const { requestId: _id, timestamp: _at, instance: _path, ...body } = JSON.parse(res.body) as Record<string, unknown>
    const { date: _date, 'service-request-id': _rid, 'content-length': _length, connection: _connection, 'keep-alive': _keepAlive, ...headers } = res.headers
    return { status: res.statusCode, headers, body }
  }

  it('answers a malformed percent-escape as problem+json with a request id: 401 without the token, 400 with it', async () => {
    for (const path of ['/metrics%zz', '/%E0%A4%A', '/admin/v1/credentials/%zz']) {
      expectProblem(await call(path), {
        code: 'MISSING_AUTH_HEADER', instance: path, detail: 'The admin routes need `Authorization: Bearer <ADMIN_TOKEN>`.',
        headers: { 'www-authenticate': 'Bearer realm="admin"' },
      })
      expectProblem(await call(path, 'Bearer wrong'), {
        code: 'INVALID_AUTH_HEADER', instance: path, detail: 'The admin routes need `Authorization: Bearer <ADMIN_TOKEN>`.',
        headers: { 'www-authenticate': 'Bearer realm="admin"' },
      })
      expectProblem(await call(path, `Bearer ${TOKEN}`), { code: 'MALFORMED_REQUEST', instance: path, detail: 'The request path is not valid percent-encoding.' })
    }
  })

  it('tells a request without the token nothing of the routes: one 401 for known and unknown routes, methods and paths the router refuses', async () => {
    const long = 'c'.repeat(150)
    const asks: Array<[string, string]> = [
      ['GET', '/metrics'], ['GET', '/no-such-route'], ['DELETE', '/status'], ['OPTIONS', '/metrics'],
      // The ingest's path and the liveness probe's skip the admin token, for the routes they serve only.
      ['GET', '/events'], ['DELETE', '/events'], ['POST', '/livez'],
      // A parameter longer than the router takes, on a route that has one and on a path that has none.
      ['GET', `/admin/v1/credentials/${long}`], ['GET', `/admin/v1/no-such-route/${long}`],
      ['GET', '/admin/v1/credentials/%zz'], ['GET', '/no-such-route/%zz'],
    ]
    const answers = await Promise.all(asks.map(async ([method, path]) => {
      const res = await request(`${url}${path}`, { method: method as 'GET' })
      return { ask: `${method} ${path}`, answer: comparable({ statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }) }
    }))
    const first = answers[0]?.answer
    expect(first).toMatchObject({ status: 401, body: { code: 'MISSING_AUTH_HEADER' } })
    expect(answers).toEqual(asks.map(([method, path]) => ({ ask: `${method} ${path}`, answer: first })))
  })

  it('answers what the HTTP parser refuses as problem+json with a request id, naming no route', async () => {
    const answer = await rawAdmin(url, 'GET /metrics HTTP/1.1\r\nHost: admin\r\nBad Header\r\n\r\n')
    const [head = '', body = ''] = answer.split('\r\n\r\n')
    const headers = Object.fromEntries(head.split('\r\n').slice(1).map((line) => {
      const colon = line.indexOf(':')
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]
    }))
    expect(head.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request')
    expectProblem({ statusCode: 400, headers, body }, { code: 'MALFORMED_REQUEST', instance: '/metrics', detail: 'The request is not valid HTTP/1.1.' })
  })

  it('answers the liveness probe without a token, telling nothing else', async () => {
    const res = await call('/livez')
    expect({ status: res.statusCode, type: res.headers['content-type'], cache: res.headers['cache-control'], body: res.body })
      .toEqual({ status: 200, type: 'application/json; charset=utf-8', cache: 'no-store', body: '{"status":"ok"}' })
  })

  it('serves both routes to the bearer of the token', async () => {
    const metrics = await call('/metrics', `Bearer ${TOKEN}`)
    expect({ status: metrics.statusCode, requestId: metrics.headers['service-request-id'], nosniff: metrics.headers['x-content-type-options'] })
      .toEqual({ status: 200, requestId: expect.stringMatching(REQUEST_ID), nosniff: 'nosniff' })
    expect(metrics.body).toContain('# TYPE gateway_http_requests_total counter')
    const status = await call('/status', `Bearer ${TOKEN}`)
    expect({ status: status.statusCode, body: JSON.parse(status.body) as unknown }).toMatchObject({ status: 200, body: { status: 'ok', redis: { status: 'up' } } })
  })
})
