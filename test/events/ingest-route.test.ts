import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { IngestMetricOutcome } from '../../src/admin/metrics.js'
import { errorCatalog } from '../../src/contract/errors.js'
import { ingestRoutes, INGEST_BODY_BYTES, INGEST_PATH } from '../../src/events/ingest.js'
import { EventLog } from '../../src/events/log.js'
import { MemoryEventStore } from '../../src/events/store.js'
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

beforeAll(async () => {
  log = new EventLog(new MemoryEventStore(), types, { retentionDays: 1 })
  app = Fastify()
  await app.register(ingestRoutes({
    log,
    publishers: [
      { name: 'pms', mode: 'live', tokenEnv: 'EVENTS_PMS_TOKEN', token: TOKEN },
      { name: 'sandbox', mode: 'test', tokenEnv: 'EVENTS_SANDBOX_TOKEN', token: TEST_TOKEN },
      { name: 'silent', mode: 'live', tokenEnv: 'EVENTS_SILENT_TOKEN', token: undefined },
    ],
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
})
