import { SpanStatusCode, type Span } from '@opentelemetry/api'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { IngestMetricOutcome } from '../../src/admin/metrics.js'
import { errorCatalog } from '../../src/contract/errors.js'
import type { EventPublisher } from '../../src/events/config.js'
import { ingestRoutes, INGEST_BODY_BYTES, INGEST_PATH, type IngestDependencies } from '../../src/events/ingest.js'
import { EventLog, type LoggedEvent } from '../../src/events/log.js'
import { MemoryEventStore, type EventStore } from '../../src/events/store.js'
import type { Tracing } from '../../src/tracing/tracing.js'
import { EventTypes } from '../../src/events/types.js'
import { captureLogs } from '../helpers/logs.js'

// The ingest's rules without a gateway (docs/operations.md, "Events"): the route on a Fastify
// of its own, over the memory store: which token names which publisher, the media types, the
// body's depth and JSON, what each event became and what the metrics and the log line say.

const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const DOCS = 'https://docs.example'
const TOKEN = 'pms-token-0123456789abcdef'
const TEST_TOKEN = 'sandbox-token-0123456789abcdef'

const types = new EventTypes([
  { type: 'property.updated', publisher: 'pms', internalType: 'hotel.changed', scope: 'properties:read', brand: 'chain', property: 'hotel', object: { type: 'property', id: 'hotel', path: '/v1/properties/{id}' } },
  { type: 'property.updated', publisher: 'sandbox', internalType: 'hotel.changed', scope: 'properties:read', brand: 'chain', property: 'hotel', object: { type: 'property', id: 'hotel', path: '/v1/properties/{id}' } },
])

let app: FastifyInstance
let log: EventLog
const brands = [{ id: 'acme', chainCode: 'ACME' }]
const logs = captureLogs()
const counted: [string, string, IngestMetricOutcome][] = []
const PUBLISHERS: EventPublisher[] = [
  { name: 'pms', mode: 'live', tokenEnv: 'EVENTS_PMS_TOKEN', token: TOKEN },
  { name: 'sandbox', mode: 'test', tokenEnv: 'EVENTS_SANDBOX_TOKEN', token: TEST_TOKEN },
  { name: 'silent', mode: 'live', tokenEnv: 'EVENTS_SILENT_TOKEN', token: undefined },
]

beforeAll(async () => {
  log = new EventLog(new MemoryEventStore(), types, { retentionDays: 1 })
  app = Fastify()
  await app.register(ingestRoutes({
    log,
    publishers: PUBLISHERS,
    brands: () => brands,
    docsUrl: DOCS,
    logger: logs.logger,
    metrics: { eventIngested: (publisher, type, outcome) => { counted.push([publisher, type, outcome]) } },
  }))
})
afterAll(async () => app.close())

function event(id: string, type = 'hotel.changed', source = 'pms'): Record<string, unknown> {
  return { specversion: '1.0', id, source, type, data: { chain: 'ACME', hotel: HOTEL } }
}

async function send(body: string | Buffer, headers: Record<string, string> = {}) {
  counted.length = 0
  logs.lines.length = 0
  const res = await app.inject({
    method: 'POST', url: INGEST_PATH, payload: body,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/cloudevents+json', ...headers },
  })
  return { status: res.statusCode, headers: res.headers, body: res.json<Record<string, unknown>>() }
}

/** Status and body: what a problem is compared by (its headers are the admin listener's). */
async function sent(body: string | Buffer, headers: Record<string, string> = {}) {
  const { status, body: json } = await send(body, headers)
  return { status, body: json }
}

function problem(status: number, code: keyof typeof errorCatalog, detail: string, errors: unknown[] = []) {
  return {
    status,
    body: {
      type: expect.stringMatching(new RegExp(`^${DOCS}/errors/`)) as string, title: expect.any(String) as string, status, detail,
      moreInfo: errorCatalog[code].tip, instance: INGEST_PATH, code, errors, requestId: expect.any(String) as string, timestamp: expect.any(String) as string,
    },
  }
}

/** The log line of the last request, without what changes each time. */
function logLine(): Record<string, unknown> {
  const line = logs.records().find((r) => r.msg === 'events ingest') as Record<string, unknown>
  const { time: _t, pid: _p, hostname: _h, reqId: _r, durationMs, level: _l, ...rest } = line
  expect(typeof durationMs).toBe('number')
  return rest
}

describe('the ingest, on a Fastify of its own', () => {
  it('takes the token of each publisher with a token, and no other', async () => {
    for (const [authorization, code] of [[undefined, 'MISSING_AUTH_HEADER'], ['Bearer nope', 'INVALID_AUTH_HEADER'], [`Basic ${TOKEN}`, 'INVALID_AUTH_HEADER'], [`Bearer ${TOKEN} x`, 'INVALID_AUTH_HEADER'], ['Bearer ', 'INVALID_AUTH_HEADER']] as const) {
      const res = await app.inject({ method: 'POST', url: INGEST_PATH, payload: JSON.stringify(event('a')), headers: { 'content-type': 'application/cloudevents+json', ...(authorization === undefined ? {} : { authorization }) } })
      const detail = code === 'MISSING_AUTH_HEADER' ? 'Send `Authorization: Bearer <token>` with the token of the publisher.' : 'The token is no publisher\'s: each publisher sends its own (events.publishers.<name>.tokenEnv).'
      expect({ status: res.statusCode, body: res.json<unknown>() }).toEqual(problem(401, code, detail))
      expect(res.headers['www-authenticate']).toBe('Bearer realm="events"')
    }
    // Any case of the scheme.
    expect((await send(JSON.stringify(event('case')), { authorization: `bearer ${TOKEN}` })).status).toBe(202)
  })

  it('answers 202 with what became of each event, counts each, and logs one line', async () => {
    const first = await send(JSON.stringify(event('one')))
    expect(first).toMatchObject({ status: 202, headers: { 'content-type': 'application/json; charset=utf-8' } })
    const eventId = (first.body.data as { eventId: string }[])[0]?.eventId
    expect(first.body).toEqual({ data: [{ id: 'one', eventId: expect.stringMatching(/^evt_/) as string, duplicate: false }] })
    expect(counted).toEqual([['pms', 'hotel.changed', 'accepted']])
    expect(logLine()).toEqual({ msg: 'events ingest', publisher: 'pms', status: 202, code: null, events: 1, accepted: 1, duplicates: 0, dropped: 0, clientIp: '127.0.0.1' })
    const batch = await send(JSON.stringify([event('one'), event('two', 'other.thing')]), { 'content-type': 'Application/CloudEvents-Batch+JSON; charset="UTF-8"' })
    expect(batch).toMatchObject({ status: 202, body: { data: [{ id: 'one', eventId, duplicate: true }, { id: 'two', eventId: null, duplicate: false }] } })
    expect(counted).toEqual([['pms', 'hotel.changed', 'duplicate'], ['pms', 'other', 'dropped']])
    expect(logLine()).toEqual({ msg: 'events ingest', publisher: 'pms', status: 202, code: null, events: 2, accepted: 0, duplicates: 1, dropped: 1, clientIp: '127.0.0.1' })
    // A test publisher's events are test events.
    const sandbox = await send(JSON.stringify(event('s', 'hotel.changed', 'sandbox')), { authorization: `Bearer ${TEST_TOKEN}` })
    expect(sandbox.status).toBe(202)
    const listed = await log.list({ brand: 'acme', mode: 'test', properties: 'all', scopes: 'all' }, {}, 1, 10)
    expect(listed.total).toBe(1)
  })

  it('takes only the two CloudEvents media types, with no parameter but charset=utf-8', async () => {
    const detail = 'Send CloudEvents in structured mode: `Content-Type: application/cloudevents+json` for one event, `application/cloudevents-batch+json` for a batch.'
    for (const type of ['application/json', 'application/cloudevents+json; charset=latin1', 'application/cloudevents+json; x=1', 'text/plain']) {
      expect(await send(JSON.stringify(event('m')), { 'content-type': type })).toMatchObject(problem(415, 'UNSUPPORTED_MEDIA_TYPE', detail))
      expect(counted).toEqual([['pms', 'other', 'refused']])
    }
    const none = await app.inject({ method: 'POST', url: INGEST_PATH, payload: '', headers: { authorization: `Bearer ${TOKEN}` } })
    expect({ status: none.statusCode, body: none.json<unknown>() }).toEqual(problem(415, 'UNSUPPORTED_MEDIA_TYPE', detail))
    expect(logLine()).toEqual({ msg: 'events ingest', publisher: 'pms', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', events: null, accepted: 0, duplicates: 0, dropped: 0, clientIp: '127.0.0.1' })
  })

  it('refuses a body nested too deep before parsing it, malformed JSON, and bad events, counting each', async () => {
    expect(await sent(`${'['.repeat(33)}${']'.repeat(33)}`)).toEqual(problem(400, 'INVALID_EVENT', 'The body nests arrays and objects deeper than 32 levels; nothing was accepted.',
      [{ field: 'body', code: 'OUT_OF_RANGE', detail: 'Arrays and objects nest at most 32 levels deep.' }]))
    expect(counted).toEqual([['pms', 'other', 'refused']])
    expect(await sent('{"id":')).toEqual(problem(400, 'MALFORMED_JSON', 'The body is not one well-formed JSON document.'))
    expect(counted).toEqual([['pms', 'other', 'refused']])
    expect(await send('', { 'content-type': 'application/cloudevents+json' })).toMatchObject({ status: 400, body: { code: 'MALFORMED_JSON' } })
    const bad = await send(JSON.stringify([event('x'), { ...event('y'), specversion: '0.3' }, 'z']), { 'content-type': 'application/cloudevents-batch+json' })
    expect(bad).toMatchObject({ status: 400, body: { code: 'INVALID_EVENT', detail: '2 of the 3 events break rules of the ingest; none of the batch was accepted.' } })
    expect(counted).toEqual([['pms', 'hotel.changed', 'refused'], ['pms', 'hotel.changed', 'refused'], ['pms', 'other', 'refused']])
    expect(logLine()).toMatchObject({ status: 400, code: 'INVALID_EVENT', events: 3, accepted: 0 })
    expect(await send('{}', { 'content-type': 'application/cloudevents-batch+json' })).toMatchObject({ status: 400, body: { code: 'INVALID_EVENT' } })
    expect(counted).toEqual([['pms', 'other', 'refused']])
  })

  it('refuses a body over its limit, and one whose framing is wrong', async () => {
    const large = await sent(Buffer.alloc(INGEST_BODY_BYTES + 1, 0x20))
    expect(large).toEqual(problem(413, 'PAYLOAD_TOO_LARGE', `The body is over ${INGEST_BODY_BYTES} bytes; send fewer events per request.`))
    expect(counted).toEqual([['pms', 'other', 'refused']])
    const framing = await app.inject({ method: 'POST', url: INGEST_PATH, payload: '{}', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/cloudevents+json', 'content-length': '10' } })
    expect({ status: framing.statusCode, body: framing.json<unknown>() }).toEqual(problem(400, 'MALFORMED_REQUEST', 'The body could not be read as sent (its framing or length).'))
  })

  it('logs a request refused before its publisher is known, with no publisher', async () => {
    logs.lines.length = 0
    const res = await app.inject({ method: 'POST', url: INGEST_PATH, payload: JSON.stringify(event('a')), headers: { authorization: 'Bearer nope', 'content-type': 'application/cloudevents+json' } })
    expect(res.statusCode).toBe(401)
    expect(logLine()).toEqual({ msg: 'events ingest', publisher: null, status: 401, code: 'INVALID_AUTH_HEADER', events: null, accepted: 0, duplicates: 0, dropped: 0, clientIp: '127.0.0.1' })
  })

  it('takes the scheme only at the start of the header', async () => {
    expect(await sent(JSON.stringify(event('late')), { authorization: `Token Bearer ${TOKEN}` }))
      .toEqual(problem(401, 'INVALID_AUTH_HEADER', 'The token is no publisher\'s: each publisher sends its own (events.publishers.<name>.tokenEnv).'))
  })

  it('takes spaces on either side of the charset\'s `=`', async () => {
    for (const [i, type] of ['application/cloudevents+json; charset= utf-8', 'application/cloudevents+json; charset =utf-8', 'application/cloudevents+json; charset = "utf-8"'].entries()) {
      const res = await send(JSON.stringify(event(`spaced-${i}`)), { 'content-type': type })
      expect(res).toMatchObject({ status: 202, body: { data: [{ id: `spaced-${i}`, duplicate: false }] } })
    }
  })

  it('names every bad event of a refused batch in its errors', async () => {
    const bad = await sent(JSON.stringify([event('x'), { ...event('y'), specversion: '0.3' }, { ...event('z'), data: { chain: 'NOPE', hotel: HOTEL } }]), { 'content-type': 'application/cloudevents-batch+json' })
    expect(bad).toEqual(problem(400, 'INVALID_EVENT', '2 of the 3 events break rules of the ingest; none of the batch was accepted.', [
      { field: '[1].specversion', code: 'INVALID_FORMAT', detail: 'Must be "1.0": CloudEvents 1.0 is what the gateway reads.' },
      { field: '[2].data.chain', code: 'NOT_ALLOWED', detail: 'Names no brand of this gateway (`brands[].chainCode`).' },
    ]))
  })

  it('keeps the request\'s traceparent as the origin of events that bring none', async () => {
    const seen: LoggedEvent[] = []
    log.subscribe(async (events) => { seen.push(...events) })
    const trace = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
    expect((await send(JSON.stringify(event('traced')), { traceparent: trace })).status).toBe(202)
    expect((await send(JSON.stringify(event('untraced')))).status).toBe(202)
    expect(seen.map((s) => s.origin)).toStrictEqual([{ source: 'pms', sourceId: 'traced', traceparent: trace }, { source: 'pms', sourceId: 'untraced' }])
  })
})

/** What a span of the ingest was given, and how many times it was ended. */
interface Recorded { name: string; parent: string | undefined; attributes: Record<string, unknown>; links: unknown[]; status: unknown; ended: number }

/** A tracing that keeps each span's calls; `recording` false stands for a span not sampled. */
function recordingTracing(recording = true): { spans: Recorded[]; tracing: Tracing } {
  const spans: Recorded[] = []
  const startSpan = (name: string, parent: string | undefined): Span => {
    const recorded: Recorded = { name, parent, attributes: {}, links: [], status: undefined, ended: 0 }
    spans.push(recorded)
    const span = {
      isRecording: () => recording,
      setAttribute: (key: string, value: unknown) => { recorded.attributes[key] = value; return span },
      setStatus: (status: unknown) => { recorded.status = status; return span },
      addLink: (link: unknown) => { recorded.links.push(link); return span },
      end: () => { recorded.ended += 1 },
    }
    return span as unknown as Span
  }
  return { spans, tracing: { startSpan } as unknown as Tracing }
}

describe('the ingest, on a Fastify each test builds', () => {
  const opened: FastifyInstance[] = []
  afterAll(async () => { for (const own of opened) await own.close() })

  /** A route of its own, its dependencies those of the file but for `over`. */
  async function build(over: Partial<IngestDependencies>): Promise<FastifyInstance> {
    const own = Fastify()
    opened.push(own)
    await own.register(ingestRoutes({
      log: new EventLog(new MemoryEventStore(), types, { retentionDays: 1 }), publishers: PUBLISHERS, brands: () => brands, docsUrl: DOCS, logger: captureLogs().logger, ...over,
    }))
    return own
  }

  async function post(own: FastifyInstance, body: unknown, headers: Record<string, string> = {}) {
    const batch = Array.isArray(body)
    const res = await own.inject({
      method: 'POST', url: INGEST_PATH, payload: JSON.stringify(body),
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': batch ? 'application/cloudevents-batch+json' : 'application/cloudevents+json', ...headers },
    })
    return { status: res.statusCode, headers: res.headers, body: res.json<Record<string, unknown>>() }
  }

  it('says in its span what became of the events, a child of the request\'s trace linked once to each event\'s own', async () => {
    const { spans, tracing } = recordingTracing()
    const own = await build({ tracing })
    const request = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const eventTrace = '0af7651916cd43dd8448eb211c80319c'
    const traced = (id: string, type?: string) => ({ ...event(id, type), traceparent: `00-${eventTrace}-b7ad6b7169203331-01` })
    expect((await post(own, [event('plain'), traced('linked'), traced('again', 'other.thing')], { traceparent: request })).status).toBe(202)
    expect(spans).toStrictEqual([{
      name: 'POST /events', parent: request, links: [{ context: { traceId: eventTrace, spanId: 'b7ad6b7169203331', traceFlags: 1, isRemote: true } }], status: undefined, ended: 1,
      attributes: { 'http.response.status_code': 202, 'gateway.publisher': 'pms', 'gateway.events': 3, 'gateway.events.accepted': 2, 'gateway.events.duplicate': 0, 'gateway.events.dropped': 1 },
    }])
  })

  it('names in its span the error of a refused request, and marks a failure of the gateway\'s own', async () => {
    const { spans, tracing } = recordingTracing()
    let calls = 0
    // The brands are read twice as the route is built, then once per request body: the third read fails.
    const own = await build({ tracing, brands: () => { calls += 1; if (calls > 3) throw new Error('the brands are gone'); return brands } })
    expect((await post(own, event('a'), { authorization: 'Bearer nope' })).status).toBe(401)
    expect((await own.inject({ method: 'POST', url: INGEST_PATH, payload: '{"id":', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/cloudevents+json' } })).statusCode).toBe(400)
    expect((await post(own, event('b'))).status).toBe(202)
    expect((await post(own, event('c'))).status).toBe(500)
    const counts = { 'gateway.events.accepted': 0, 'gateway.events.duplicate': 0, 'gateway.events.dropped': 0 }
    expect(spans).toStrictEqual([
      { name: 'POST /events', parent: undefined, links: [], status: undefined, ended: 1, attributes: { 'http.response.status_code': 401, ...counts, 'error.type': 'INVALID_AUTH_HEADER' } },
      { name: 'POST /events', parent: undefined, links: [], status: undefined, ended: 1, attributes: { 'http.response.status_code': 400, 'gateway.publisher': 'pms', ...counts, 'error.type': 'MALFORMED_JSON' } },
      { name: 'POST /events', parent: undefined, links: [], status: undefined, ended: 1, attributes: { 'http.response.status_code': 202, 'gateway.publisher': 'pms', 'gateway.events': 1, ...counts, 'gateway.events.accepted': 1 } },
      { name: 'POST /events', parent: undefined, links: [], status: { code: SpanStatusCode.ERROR }, ended: 1, attributes: { 'http.response.status_code': 500, 'gateway.publisher': 'pms', ...counts, 'error.type': 'INTERNAL_ERROR' } },
    ])
  })

  it('only ends a span that is not recorded', async () => {
    const { spans, tracing } = recordingTracing(false)
    const own = await build({ tracing })
    expect((await post(own, [{ ...event('t'), traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }])).status).toBe(202)
    expect(spans).toStrictEqual([{ name: 'POST /events', parent: undefined, links: [], status: undefined, ended: 1, attributes: {} }])
  })

  it('answers an unexpected failure 500, with a code of its own or none, and logs it', async () => {
    const captured = captureLogs()
    let calls = 0
    // The brands are read twice as the route is built; then the first request's read fails with no
    // code, the second's with a code that is none of Fastify's.
    const own = await build({
      logger: captured.logger,
      brands: () => {
        calls += 1
        if (calls === 3) throw new Error('the brands are gone')
        if (calls === 4) throw Object.assign(new Error('the brands are still gone'), { code: 'ECONNRESET' })
        return brands
      },
    })
    for (const id of ['a', 'b']) {
      const res = await post(own, event(id))
      expect({ status: res.status, body: res.body }).toEqual(problem(500, 'INTERNAL_ERROR', 'An unexpected error occurred.'))
    }
    const failed = captured.records().filter((r) => r.msg === 'events ingest failed')
    expect(failed).toEqual([
      expect.objectContaining({ level: 'error', reqId: expect.any(String) as string, err: expect.objectContaining({ message: 'the brands are gone' }) as unknown }),
      expect.objectContaining({ level: 'error', reqId: expect.any(String) as string, err: expect.objectContaining({ message: 'the brands are still gone', code: 'ECONNRESET' }) as unknown }),
    ])
  })

  it('answers 503 with Retry-After when the events cannot be stored, and logs why', async () => {
    const captured = captureLogs()
    const fail = async (): Promise<never> => { throw new Error('Redis went away') }
    const broken: EventStore = { claim: fail, append: fail, page: fail, get: fail, records: fail }
    const own = await build({ logger: captured.logger, log: new EventLog(broken, types, { retentionDays: 1 }) })
    const res = await post(own, event('a'))
    expect({ status: res.status, body: res.body }).toEqual(problem(503, 'SERVICE_UNAVAILABLE', 'The events could not be stored; send the same request again.'))
    expect(res.headers['retry-after']).toBe('1')
    const warned = captured.records().filter((r) => r.msg === 'events could not be written; the publisher is told to retry')
    expect(warned).toEqual([expect.objectContaining({ level: 'warn', reqId: expect.any(String) as string, publisher: 'pms', error: 'Redis went away' })])
  })

  it('logs each dropped event at debug, and no other', async () => {
    const captured = captureLogs('debug')
    const own = await build({ logger: captured.logger })
    expect((await post(own, [event('kept'), event('dropped', 'other.thing')])).status).toBe(202)
    const dropped = captured.records().filter((r) => r.msg === 'event dropped: no public type maps its type')
    expect(dropped).toEqual([expect.objectContaining({ level: 'debug', reqId: expect.any(String) as string, publisher: 'pms', type: 'other.thing', id: 'dropped' })])
  })

  it('reads the brands in force at each request: a chain code added by a reload is taken', async () => {
    let current: { id: string; chainCode: string }[] = brands
    const own = await build({ brands: () => current })
    const globex = { ...event('g'), data: { chain: 'GLOBEX', hotel: HOTEL } }
    expect(await post(own, globex)).toMatchObject({ status: 400, body: { code: 'INVALID_EVENT' } })
    current = [...brands, { id: 'globex', chainCode: 'GLOBEX' }]
    expect(await post(own, globex)).toMatchObject({ status: 202, body: { data: [{ id: 'g', duplicate: false }] } })
  })
})
