import { shipped } from '../helpers/declared.js'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Hotel } from '../../mocks/pms/data.js'
import { MockOtlp, type ReceivedSpan } from '../../mocks/otlp/server.js'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfig } from '../../src/config.js'
import { ACME_HOST } from '../helpers/config.js'
import { PMS_TOKEN, TestGateway, type Answer } from '../helpers/gateway.js'
import { eventually, freePort } from '../helpers/redis.js'

// Tracing over real sockets (docs/operations.md, "Tracing"): gateways exporting to the stand-in
// OTLP receiver, calling the stand-in PMS and service, each rule checked on the spans the
// receiver decoded and on the traceparent each upstream received.

const SERVICE_TOKEN = 'svc-live-token-for-tracing'
const COLLECTOR_SECRET = 'collector-secret-0123456789'
const HEX32 = /^[0-9a-f]{32}$/
const HEX16 = /^[0-9a-f]{16}$/

// Exports fast, so a test waits for its spans only as long as the machine needs.
const FAST_EXPORT = { OTEL_BSP_SCHEDULE_DELAY: '20' }

/** Every receiver and key of the file: the last test reads every span for them. */
const receivers: MockOtlp[] = []
const secrets: string[] = [PMS_TOKEN, SERVICE_TOKEN, COLLECTOR_SECRET]

async function receiver(): Promise<MockOtlp> {
  const r = await new MockOtlp().listen()
  receivers.push(r)
  return r
}

async function keyOf(t: TestGateway): Promise<string> {
  const key = await t.key()
  secrets.push(key)
  return key
}

function traceparent(traceId: string, parentId: string, flags: '00' | '01'): string {
  return `00-${traceId}-${parentId}-${flags}`
}

let counter = 0
/** A trace id of the test's own: unique in the file, never all zeros. */
function newTraceId(): string {
  counter += 1
  return `${'4bf92f3577b34da6'}${counter.toString(16).padStart(16, '0')}`
}

/** Waits until the receiver holds `count` spans of `traceId` (or more), and returns them server first, then by start. */
async function spansOf(r: MockOtlp, traceId: string, count: number): Promise<ReceivedSpan[]> {
  const found = await eventually(async () => r.spans.filter((s) => s.traceId === traceId).length >= count, 15_000)
  expect(found, `${count} spans of trace ${traceId}`).toBe(true)
  const order = (s: ReceivedSpan): number => (s.kind === 'server' ? 0 : 1)
  return r.spans.filter((s) => s.traceId === traceId).sort((a, b) => order(a) - order(b) || (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1))
}

async function call(t: TestGateway, method: string, path: string, key: string | undefined, headers: Record<string, string> = {}): Promise<Answer> {
  const all: Record<string, string> = { host: ACME_HOST, 'user-agent': 'tracing-test/1.0', ...headers }
  if (key !== undefined) all.authorization = `Bearer ${key}`
  const res = await request(`${t.url}${path}`, { method: method as 'GET', headers: all })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

function logLineOf(t: TestGateway, requestId: unknown): Record<string, unknown> | undefined {
  return t.logs.records().find((r) => r.msg === 'request' && r.reqId === requestId)
}

function acmeHotels(t: TestGateway): Hotel[] {
  return t.pms.hotels.filter((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')
}

describe('with a collector (OTLP/HTTP protobuf, the default sampler)', () => {
  let collector: MockOtlp
  let service: MockService
  let t: TestGateway
  let key: string
  let pmsPort: number

  beforeAll(async () => {
    collector = await receiver()
    service = await new MockService({ token: SERVICE_TOKEN }).listen()
    t = await TestGateway.start({
      // A PMS deadline well past the held answer of the coalescing test.
      config: { ...shipped, upstream: { timeoutMs: 10_000 } as FileConfig['upstream'] },
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, ...FAST_EXPORT,
        UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN,
      },
    })
    key = await keyOf(t)
    pmsPort = Number(new URL(t.pms.url).port)
  })
  afterAll(async () => {
    await t.close()
    await service.close()
  })

  it('exports a sampled caller\'s request: a server span under the caller\'s span, a client span under it, whose id the PMS receives', async () => {
    const traceId = newTraceId()
    const hotel = acmeHotels(t)[0] as Hotel
    const id = String(hotel.hotel_uuid)
    t.pms.received.length = 0
    const res = await call(t, 'GET', `/v1/properties/${id}`, key, { traceparent: traceparent(traceId, '00f067aa0ba902b7', '01'), tracestate: 'partner=1' })
    expect(res.statusCode).toBe(200)
    const [server, client, ...more] = await spansOf(collector, traceId, 2)
    expect(more).toEqual([])
    const requestId = res.headers['service-request-id']
    expect(server).toMatchObject({
      traceId, parentSpanId: '00f067aa0ba902b7', spanId: expect.stringMatching(HEX16), traceState: 'partner=1', traceFlags: 1,
      name: 'GET /v1/properties/{propertyId}', kind: 'server', status: { code: 'unset', message: undefined },
      resource: { 'service.name': 'partner-gateway', 'service.version': '1.0.0' }, scope: { name: 'partner-gateway', version: '1.0.0' },
    })
    expect(server?.attributes).toEqual({
      'http.request.method': 'GET', 'url.scheme': 'http', 'server.address': ACME_HOST,
      'client.address': '127.0.0.1', 'user_agent.original': 'tracing-test/1.0', 'gateway.request_id': requestId,
      'http.route': '/v1/properties/{propertyId}', 'http.response.status_code': 200,
      'gateway.brand': 'acme', 'gateway.credential_id': expect.stringMatching(/^key_/), 'gateway.cache': 'miss',
    })
    expect(client).toMatchObject({ traceId, parentSpanId: server?.spanId, name: 'GET', kind: 'client', status: { code: 'unset' }, traceFlags: 1 })
    expect(client?.attributes).toEqual({
      'http.request.method': 'GET', 'server.address': '127.0.0.1', 'server.port': pmsPort,
      'url.full': `${t.pms.url}/internal/v3/hotels/{hotel_uuid}`, 'url.template': '/internal/v3/hotels/{hotel_uuid}',
      'gateway.upstream': 'pms', 'http.response.status_code': 200,
    })
    // The PMS sees the client span as its caller, and the caller's tracestate.
    expect(t.pms.received).toEqual([{ path: `/internal/v3/hotels/${id}`, requestId, traceparent: traceparent(traceId, client?.spanId as string, '01'), tracestate: 'partner=1' }])
    expect(logLineOf(t, requestId)?.traceId).toBe(traceId)
    // The server span covers the client span.
    expect(BigInt(server?.startTimeUnixNano as string) <= BigInt(client?.startTimeUnixNano as string)).toBe(true)
    expect(BigInt(server?.endTimeUnixNano as string) >= BigInt(client?.endTimeUnixNano as string)).toBe(true)
  })

  it('makes no client span for a cached read: the server span says it was a cache hit', async () => {
    const hotel = acmeHotels(t)[1] as Hotel
    const first = newTraceId()
    await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(first, '00f067aa0ba902b7', '01') })
    await spansOf(collector, first, 2)
    const second = newTraceId()
    const res = await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(second, '00f067aa0ba902b7', '01') })
    expect(res.statusCode).toBe(200)
    const spans = await spansOf(collector, second, 1)
    // A later sampled request's spans arrive after any the cached read could have made.
    const marker = newTraceId()
    await call(t, 'GET', '/v1/health', undefined, { traceparent: traceparent(marker, '00f067aa0ba902b7', '01') })
    await spansOf(collector, marker, 1)
    expect(collector.spans.filter((s) => s.traceId === second).map((s) => [s.kind, s.name, s.attributes['gateway.cache']])).toEqual([
      ['server', 'GET /v1/properties/{propertyId}', 'hit'],
    ])
    expect(spans).toHaveLength(1)
  })

  it('makes one client span for concurrent misses that share one PMS call, under the first request\'s span', async () => {
    const hotel = acmeHotels(t)[2] as Hotel
    const [first, second] = [newTraceId(), newTraceId()]
    t.pms.received.length = 0
    // The PMS holds its answer while the second request arrives and joins the first's call.
    t.pms.setFailure({ mode: 'latency', latencyMs: 3000, times: 1 })
    const one = call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(first, '00f067aa0ba902b7', '01') })
    expect(await eventually(async () => t.pms.received.length === 1, 10_000)).toBe(true)
    const two = call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(second, '00f067aa0ba902b7', '01') })
    expect((await Promise.all([one, two])).map((r) => r.statusCode)).toEqual([200, 200])
    const [server1, client] = await spansOf(collector, first, 2)
    const [server2, ...others] = await spansOf(collector, second, 1)
    expect(t.pms.received).toHaveLength(1)
    expect(client).toMatchObject({ kind: 'client', parentSpanId: server1?.spanId, attributes: { 'gateway.upstream': 'pms' } })
    expect(server2).toMatchObject({ kind: 'server', name: 'GET /v1/properties/{propertyId}' })
    expect(others).toEqual([])
    expect(t.pms.received[0]?.traceparent).toBe(traceparent(first, client?.spanId as string, '01'))
  })

  it('exports nothing of an unsampled caller\'s request, and passes its trace on unsampled with a new parent id', async () => {
    const traceId = newTraceId()
    const hotel = acmeHotels(t)[3] as Hotel
    t.pms.received.length = 0
    const res = await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(traceId, '00f067aa0ba902b7', '00') })
    expect(res.statusCode).toBe(200)
    const marker = newTraceId()
    await call(t, 'GET', '/v1/health', undefined, { traceparent: traceparent(marker, '00f067aa0ba902b7', '01') })
    await spansOf(collector, marker, 1)
    expect(collector.spans.filter((s) => s.traceId === traceId)).toEqual([])
    const sent = t.pms.received[0]?.traceparent as string
    expect(sent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`))
    expect(sent).not.toContain('00f067aa0ba902b7')
    expect(logLineOf(t, res.headers['service-request-id'])?.traceId).toBe(traceId)
  })

  it('ties the ids across the PMS and a declared route: each upstream receives its own client span as parent', async () => {
    const traceId = newTraceId()
    const hotel = acmeHotels(t)[4] as Hotel
    const id = String(hotel.hotel_uuid)
    t.pms.received.length = 0
    service.received.length = 0
    const res = await call(t, 'GET', '/v1/rooms?status=dirty&perPage=5', key, {
      traceparent: traceparent(traceId, '00f067aa0ba902b7', '01'), 'service-property-id': id,
    })
    expect(res.statusCode).toBe(200)
    const [server, first, second] = await spansOf(collector, traceId, 3)
    expect(server).toMatchObject({ name: 'GET /v1/rooms', kind: 'server', parentSpanId: '00f067aa0ba902b7' })
    expect(server?.attributes).toMatchObject({ 'http.route': '/v1/rooms', 'http.response.status_code': 200 })
    // The property check reads the PMS first, then the call goes to the service.
    const [pms, bookings] = [first, second] as [ReceivedSpan, ReceivedSpan]
    expect(pms).toMatchObject({ kind: 'client', name: 'GET', parentSpanId: server?.spanId, attributes: { 'gateway.upstream': 'pms' } })
    expect(bookings).toMatchObject({ kind: 'client', name: 'GET', parentSpanId: server?.spanId })
    expect(bookings.attributes).toEqual({
      'http.request.method': 'GET', 'server.address': '127.0.0.1', 'server.port': Number(new URL(service.url).port),
      'url.full': `${service.url}/partner/v1/properties/{propertyId}/rooms`, 'url.template': '/partner/v1/properties/{propertyId}/rooms',
      'gateway.upstream': 'bookings', 'http.response.status_code': 200,
    })
    expect(t.pms.received.map((r) => r.traceparent)).toEqual([traceparent(traceId, pms.spanId, '01')])
    expect(service.received.map((r) => r.headers.traceparent)).toEqual([traceparent(traceId, bookings.spanId, '01')])
  })

  it('makes a client span of each attempt: a retry after a dropped connection says so', async () => {
    const traceId = newTraceId()
    service.received.length = 0
    service.setFailure({ mode: 'drop', times: 1 })
    const res = await call(t, 'GET', '/v1/guests?perPage=2', key, { traceparent: traceparent(traceId, '00f067aa0ba902b7', '01') })
    expect(res.statusCode).toBe(200)
    const [server, failed, retried] = await spansOf(collector, traceId, 3)
    expect(server).toMatchObject({ name: 'GET /v1/guests', attributes: { 'http.response.status_code': 200 } })
    const url = `${service.url}/partner/v1/guests`
    expect(failed).toMatchObject({ kind: 'client', parentSpanId: server?.spanId, status: { code: 'error' } })
    expect(failed?.attributes).toEqual({
      'http.request.method': 'GET', 'server.address': '127.0.0.1', 'server.port': Number(new URL(service.url).port), 'url.full': url,
      'url.template': '/partner/v1/guests', 'gateway.upstream': 'bookings', 'error.type': 'UND_ERR_SOCKET',
    })
    expect(retried).toMatchObject({ kind: 'client', parentSpanId: server?.spanId, status: { code: 'unset' } })
    expect(retried?.attributes).toEqual({
      'http.request.method': 'GET', 'server.address': '127.0.0.1', 'server.port': Number(new URL(service.url).port), 'url.full': url,
      'url.template': '/partner/v1/guests', 'gateway.upstream': 'bookings', 'gateway.retry': true, 'http.response.status_code': 200,
    })
    expect(service.received.map((r) => r.headers.traceparent)).toEqual([
      traceparent(traceId, failed?.spanId as string, '01'), traceparent(traceId, retried?.spanId as string, '01'),
    ])
  })

  it('names no path, query or unknown host in a span: the route\'s template, and a brand\'s host only', async () => {
    // The review's cases (docs/security.md, "Findings of the review of wave 3", 4).
    const [email, pasted, host] = [newTraceId(), newTraceId(), newTraceId()]
    const byEmail = await call(t, 'GET', '/v1/guests/carol@example.com', key, { traceparent: traceparent(email, '00f067aa0ba902b7', '01') })
    const byKey = await call(t, 'GET', `/v1/${key}`, key, { traceparent: traceparent(pasted, '00f067aa0ba902b7', '01') })
    const byHost = await call(t, 'GET', '/v1/properties?page=carol@example.com', key, { host: 'admin.corp.internal', traceparent: traceparent(host, '00f067aa0ba902b7', '01') })
    expect([byEmail.statusCode, byKey.statusCode, byHost.statusCode]).toEqual([400, 404, 404])
    const spans = [...await spansOf(collector, email, 1), ...await spansOf(collector, pasted, 1), ...await spansOf(collector, host, 1)]
    expect(spans.map((span) => span.attributes)).toEqual([
      {
        'http.request.method': 'GET', 'url.scheme': 'http', 'server.address': ACME_HOST, 'client.address': '127.0.0.1', 'user_agent.original': 'tracing-test/1.0',
        'gateway.request_id': byEmail.headers['service-request-id'], 'http.route': '/v1/guests/{guestId}', 'http.response.status_code': 400,
        'error.type': 'INVALID_PATH_PARAMETER', 'gateway.brand': 'acme', 'gateway.credential_id': expect.stringMatching(/^key_/),
      },
      {
        'http.request.method': 'GET', 'url.scheme': 'http', 'server.address': ACME_HOST, 'client.address': '127.0.0.1', 'user_agent.original': 'tracing-test/1.0',
        'gateway.request_id': byKey.headers['service-request-id'], 'http.response.status_code': 404, 'error.type': 'ROUTE_NOT_FOUND', 'gateway.brand': 'acme',
      },
      {
        'http.request.method': 'GET', 'url.scheme': 'http', 'client.address': '127.0.0.1', 'user_agent.original': 'tracing-test/1.0',
        'gateway.request_id': byHost.headers['service-request-id'], 'http.route': '/v1/properties', 'http.response.status_code': 404, 'error.type': 'ROUTE_NOT_FOUND',
      },
    ])
    const text = JSON.stringify(spans)
    for (const leak of ['carol', key, 'corp.internal']) expect(text).not.toContain(leak)
  })

  it('names the error of a 4xx with its problem code, and marks only a 5xx as failed', async () => {
    const [missing, refused, failing] = [newTraceId(), newTraceId(), newTraceId()]
    const notFound = await call(t, 'GET', '/v1/nothing-here', key, { traceparent: traceparent(missing, '00f067aa0ba902b7', '01') })
    const unauthorised = await call(t, 'GET', '/v1/properties', 'svc_live_not-a-key-at-all', { traceparent: traceparent(refused, '00f067aa0ba902b7', '01') })
    const hotel = acmeHotels(t)[5] as Hotel
    t.pms.setFailure({ mode: 'html-5xx', status: 502 })
    let unavailable: Answer
    try {
      unavailable = await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(failing, '00f067aa0ba902b7', '01') })
    } finally {
      t.pms.setFailure(undefined)
    }
    expect([notFound.statusCode, unauthorised.statusCode, unavailable.statusCode]).toEqual([404, 401, 503])
    const [route] = await spansOf(collector, missing, 1)
    expect(route).toMatchObject({ name: 'GET', status: { code: 'unset' } })
    expect(route?.attributes).toEqual({
      'http.request.method': 'GET', 'url.scheme': 'http', 'server.address': ACME_HOST, 'client.address': '127.0.0.1',
      'user_agent.original': 'tracing-test/1.0', 'gateway.request_id': notFound.headers['service-request-id'],
      'http.response.status_code': 404, 'error.type': 'ROUTE_NOT_FOUND', 'gateway.brand': 'acme',
    })
    const [auth] = await spansOf(collector, refused, 1)
    expect(auth).toMatchObject({ name: 'GET /v1/properties', status: { code: 'unset' }, attributes: { 'http.response.status_code': 401, 'error.type': 'INVALID_API_KEY' } })
    expect(auth?.attributes['gateway.credential_id']).toBeUndefined()
    const [server, client, ...more] = await spansOf(collector, failing, 2)
    expect(server).toMatchObject({ status: { code: 'error' }, attributes: { 'http.response.status_code': 503, 'error.type': 'SERVICE_UNAVAILABLE' } })
    expect(client).toMatchObject({ kind: 'client', parentSpanId: server?.spanId, status: { code: 'error' }, attributes: { 'http.response.status_code': 502, 'error.type': '502' } })
    expect(more).toEqual([])
  })
})

describe('with a collector (OTLP/HTTP JSON, every new trace sampled)', () => {
  let collector: MockOtlp
  let t: TestGateway
  let key: string

  beforeAll(async () => {
    collector = await receiver()
    t = await TestGateway.start({
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_TRACES_SAMPLER_ARG: '1',
        OTEL_SERVICE_NAME: 'gateway-eu', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,service.name=ignored',
        OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${COLLECTOR_SECRET}`, ...FAST_EXPORT,
      },
    })
    key = await keyOf(t)
  })
  afterAll(async () => t.close())

  it('starts a trace of its own for a request without traceparent: one id for the span, the log line and the PMS', async () => {
    const hotel = acmeHotels(t)[0] as Hotel
    t.pms.received.length = 0
    const res = await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key)
    expect(res.statusCode).toBe(200)
    const traceId = logLineOf(t, res.headers['service-request-id'])?.traceId as string
    expect(traceId).toMatch(HEX32)
    const [server, client] = await spansOf(collector, traceId, 2)
    expect(server).toMatchObject({ kind: 'server', parentSpanId: undefined, traceState: undefined, traceFlags: 1, name: 'GET /v1/properties/{propertyId}' })
    expect(client).toMatchObject({ kind: 'client', parentSpanId: server?.spanId })
    expect(t.pms.received.map((r) => r.traceparent)).toEqual([traceparent(traceId, client?.spanId as string, '01')])
    expect(t.pms.received.map((r) => r.tracestate)).toEqual([undefined])
  })

  it('sends JSON with the configured headers, and names the service and its resource as configured', async () => {
    const traceId = newTraceId()
    await call(t, 'GET', '/v1/health', undefined, { traceparent: traceparent(traceId, '00f067aa0ba902b7', '01') })
    const [span] = await spansOf(collector, traceId, 1)
    expect(span).toMatchObject({ name: 'GET /v1/health', resource: { 'service.name': 'gateway-eu', 'deployment.environment.name': 'test' } })
    const carrying = collector.exports.find((e) => e.spans.some((s) => s.traceId === traceId))
    expect(carrying).toMatchObject({ encoding: 'json', headers: { 'content-type': 'application/json', authorization: `Bearer ${COLLECTOR_SECRET}` } })
    expect(collector.rejected).toEqual([])
  })
})

describe('sampling', () => {
  it('keeps about the configured ratio of new traces, and exactly the sampled ones reach the PMS marked sampled', async () => {
    const collector = await receiver()
    const t = await TestGateway.start({ config: { cache: { ttlMs: 0, staleIfErrorMs: 0, maxEntries: 10 } }, env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER_ARG: '0.25', ...FAST_EXPORT } })
    const key = await keyOf(t)
    const hotel = acmeHotels(t)[0] as Hotel
    const requests = 400
    const answers: Answer[] = []
    try {
      // Ten at a time: the count matters, not the pace.
      for (let i = 0; i < requests; i += 10) {
        answers.push(...await Promise.all(Array.from({ length: 10 }, () => call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key))))
      }
    } finally {
      // Closing exports whatever is left.
      await t.close()
    }
    expect(answers.map((a) => a.statusCode)).toEqual(Array.from({ length: requests }, () => 200))
    const traceIds = answers.map((a) => logLineOf(t, a.headers['service-request-id'])?.traceId as string)
    expect(new Set(traceIds).size).toBe(requests)
    const servers = collector.spans.filter((s) => s.kind === 'server')
    const sampled = new Set(servers.map((s) => s.traceId))
    // 100 expected; the binomial spread (sd 8.7) leaves 50..150 wide of any chance failure.
    expect(sampled.size).toBeGreaterThanOrEqual(50)
    expect(sampled.size).toBeLessThanOrEqual(150)
    expect(servers).toHaveLength(sampled.size)
    expect([...sampled].every((id) => traceIds.includes(id))).toBe(true)
    // The PMS hears "sampled" exactly for the traces the gateway kept.
    const flags = new Map(t.pms.received.map((r) => [r.traceparent?.slice(3, 35), r.traceparent?.slice(53)]))
    expect(traceIds.filter((id) => flags.get(id) === '01').sort()).toEqual([...sampled].sort())
    expect(traceIds.filter((id) => flags.get(id) === '00')).toHaveLength(requests - sampled.size)
  })

  it('follows OTEL_TRACES_SAMPLER: traceidratio decides by the trace id alone, whatever the caller\'s flag', async () => {
    const collector = await receiver()
    const t = await TestGateway.start({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5', ...FAST_EXPORT } })
    // A trace is kept when the rightmost 48 bits of its id, as a fraction of 2^48, are below
    // the ratio: ...000000000001 is far below half, ...fffffffffffe far above.
    const low = `${'f'.repeat(20)}000000000001`
    const high = `${'0'.repeat(19)}1fffffffffffe`
    try {
      await call(t, 'GET', '/v1/health', undefined, { traceparent: traceparent(low, '00f067aa0ba902b7', '00') })
      await call(t, 'GET', '/v1/health', undefined, { traceparent: traceparent(high, '00f067aa0ba902b7', '01') })
    } finally {
      await t.close()
    }
    expect(collector.spans.map((s) => [s.traceId, s.name])).toEqual([[low, 'GET /v1/health']])
  })
})

describe('without a collector', () => {
  it('makes and exports nothing unless an endpoint is set, and nothing with OTEL_SDK_DISABLED=true', async () => {
    const collector = await receiver()
    const off = await TestGateway.start({ env: { OTEL_TRACES_SAMPLER: 'always_on', ...FAST_EXPORT } })
    const disabled = await TestGateway.start({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SDK_DISABLED: 'true', OTEL_TRACES_SAMPLER: 'always_on' } })
    const traceId = newTraceId()
    try {
      expect([off.gateway.tracing, disabled.gateway.tracing]).toEqual([undefined, undefined])
      for (const t of [off, disabled]) {
        const key = await keyOf(t)
        const hotel = acmeHotels(t)[0] as Hotel
        t.pms.received.length = 0
        const res = await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key, { traceparent: traceparent(traceId, '00f067aa0ba902b7', '01') })
        expect(res.statusCode).toBe(200)
        // The trace still goes on (docs/partners.md, "Every answer"): same id, a new parent,
        // the caller's flag.
        expect(t.pms.received[0]?.traceparent).toMatch(new RegExp(`^00-${traceId}-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$`))
      }
    } finally {
      await off.close()
      await disabled.close()
    }
    expect(collector.exports).toEqual([])
  })
})

describe('a collector that fails', () => {
  it('drops and counts the spans of an unreachable collector, logs it once, and answers every request', async () => {
    const port = await freePort()
    const t = await TestGateway.start({
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'always_on', OTEL_EXPORTER_OTLP_TIMEOUT: '500', ...FAST_EXPORT },
    })
    try {
      const key = await keyOf(t)
      const hotel = acmeHotels(t)[0] as Hotel
      const answers: number[] = []
      for (let i = 0; i < 20; i += 1) answers.push((await call(t, 'GET', `/v1/properties/${hotel.hotel_uuid}`, key)).statusCode)
      expect(answers).toEqual(Array.from({ length: 20 }, () => 200))
      // 20 server spans and the one client span of the first (the others were cache hits).
      const metrics = t.gateway.metrics.registry
      const lost = async (): Promise<number> => {
        const values = (await metrics.getSingleMetric('gateway_trace_spans_dropped_total')?.get())?.values ?? []
        return values.reduce((sum, v) => sum + v.value, 0)
      }
      expect(await eventually(async () => (await lost()) === 21, 15_000)).toBe(true)
      expect((await metrics.getSingleMetric('gateway_trace_spans_exported_total')?.get())?.values.map((v) => v.value)).toEqual([0])
      const warnings = t.logs.records().filter((r) => typeof r.msg === 'string' && r.msg.startsWith('trace export failing'))
      expect(warnings.map((r) => [r.level, r.msg])).toEqual([['warn', 'trace export failing: spans are dropped (gateway_trace_spans_dropped_total) until the collector accepts them again']])
    } finally {
      await t.close()
    }
  })

  it('drops what does not fit its queue while the collector hangs, and keeps answering', async () => {
    const collector = await receiver()
    collector.setFailure({ mode: 'hang' })
    const t = await TestGateway.start({
      env: {
        // Exported only when a batch of 4 is full, so what is held and what is dropped is exact.
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_MAX_QUEUE_SIZE: '4', OTEL_EXPORTER_OTLP_TIMEOUT: '60000',
        OTEL_BSP_EXPORT_TIMEOUT: '60000', OTEL_BSP_SCHEDULE_DELAY: '60000',
      },
    })
    try {
      const answers: number[] = []
      for (let i = 0; i < 30; i += 1) answers.push((await call(t, 'GET', '/v1/health', undefined)).statusCode)
      expect(answers).toEqual(Array.from({ length: 30 }, () => 200))
      const dropped = async (): Promise<number> => {
        const values = (await t.gateway.metrics.registry.getSingleMetric('gateway_trace_spans_dropped_total')?.get())?.values ?? []
        return values.find((v) => v.labels.reason === 'queue_full')?.value ?? 0
      }
      // One batch of 4 hangs in the exporter, 4 more wait in the queue: the other 22 are dropped.
      expect(await eventually(async () => (await dropped()) === 22, 15_000)).toBe(true)
    } finally {
      collector.setFailure(undefined)
      await t.close()
    }
  })
})

describe('what a span never holds', () => {
  afterAll(async () => {
    for (const r of receivers) await r.close()
  })

  it('holds no key, token or query string in any span any test exported', () => {
    const spans = receivers.flatMap((r) => r.spans)
    expect(spans.length).toBeGreaterThan(50)
    const text = JSON.stringify(spans)
    for (const secret of secrets) expect(text, 'a secret in a span').not.toContain(secret)
    // No attribute holds a query string: no URL or path in a span has a `?`.
    const values = spans.flatMap((span) => Object.values(span.attributes).map(String))
    expect(values.filter((value) => value.includes('?'))).toEqual([])
    expect(text).not.toContain('status=dirty')
    expect(text).not.toContain('perPage')
  })
})
