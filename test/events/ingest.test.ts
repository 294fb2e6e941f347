import { randomUUID } from 'node:crypto'
import { request } from 'undici'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { FieldError } from '../../src/contract/errors.js'
import { GLOBEX_HOST } from '../helpers/config.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import {
  accepted, BATCH, EVENT_ID, guestEvent, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS, propertyUpdated, SINGLE,
} from '../helpers/events.js'
import { expectEnvelope, expectProblem, REQUEST_ID, type ExpectedProblem } from '../helpers/problem.js'
import { captureLogs } from '../helpers/logs.js'
import { Redis } from 'ioredis'
import { keysUnder, REDIS_URL } from '../helpers/redis.js'

// The ingest endpoint on the admin port (docs/operations.md, "Events"), over real sockets and
// real Redis: each refusal with its status and field errors, all or nothing, copies, types no
// public type maps, the answer only once the events are written, and what operators see.

const ADMIN_TOKEN = 'the-admin-token-of-these-tests'

it('logs a dropped event at debug, with its publisher, type and id', async () => {
  const logs = captureLogs('debug')
  const t = await TestGateway.start({ env: PUBLISHER_TOKENS, gateway: { logger: logs.logger } })
  try {
    const admin = await listenAdmin(t.gateway)
    const event = hotelChanged(randomUUID(), 'ACME', { type: 'com.example.pms.rateplan.changed' })
    const answer = await publish(admin, event)
    expect(accepted(answer)).toEqual([{ id: event.id, eventId: null, duplicate: false }])
    expect(logs.records().filter((r) => r.msg === 'event dropped: no public type maps its type')).toEqual([{
      level: 'debug', time: expect.any(Number), pid: process.pid, hostname: expect.any(String),
      reqId: answer.headers['service-request-id'], publisher: 'pms', type: 'com.example.pms.rateplan.changed', id: event.id, msg: 'event dropped: no public type maps its type',
    }])
  } finally {
    await t.close()
  }
})

describe('POST /events', () => {
  let t: TestGateway
  let admin: string
  let key: string
  let hotel: string
  let otherHotel: string
  const redis = new Redis(REDIS_URL)

  beforeAll(async () => {
    t = await TestGateway.start({ env: { ...PUBLISHER_TOKENS, ADMIN_TOKEN } })
    admin = await listenAdmin(t.gateway)
    key = await t.key()
    const acme = t.pms.hotels.filter((h) => h.chain_code === 'ACME')
    hotel = String(acme[0]?.hotel_uuid)
    otherHotel = String(acme[1]?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
    redis.disconnect()
  })

  /** Every event key the gateway holds in Redis (a refused request must add none). */
  const eventKeys = async (): Promise<string[]> => (await keysUnder(redis, `${t.prefix}ev:`)).sort()
  const list = async (query = ''): Promise<Answer> => t.get(`/v1/events${query}`, key)

  beforeEach(async () => {
    const keys = await eventKeys()
    if (keys.length > 0) await redis.del(...keys)
  })

  it('accepts one event with 202, once it is written, and a partner reads it at /v1/events', async () => {
    const event = hotelChanged(hotel)
    const answer = await publish(admin, event)
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(answer.headers['service-request-id']).toMatch(REQUEST_ID)
    const data = accepted(answer)
    expect(data).toEqual([{ id: event.id, eventId: expect.stringMatching(EVENT_ID), duplicate: false }])
    const read = expectEnvelope(await list(), { page: 1, perPage: 20, total: 1 }) as { createdAt: string }[]
    expect(read).toEqual([propertyUpdated(data[0]?.eventId as string, read[0]?.createdAt as string, hotel)])
    expect(Date.now() - Date.parse(read[0]?.createdAt as string)).toBeLessThan(60_000)
  })

  it('accepts a batch in its order, each event with an id of its own, sortable by time', async () => {
    const events = [hotelChanged(hotel), hotelChanged(otherHotel), hotelChanged(hotel, 'ACME', {}, { revision: 2 })]
    const data = accepted(await publish(admin, events))
    expect(data.map((d) => d.id)).toEqual(events.map((e) => e.id))
    const ids = data.map((d) => d.eventId as string)
    expect(new Set(ids).size).toBe(3)
    expect([...ids].sort()).toEqual(ids)
    const read = expectEnvelope(await list(), { page: 1, perPage: 20, total: 3 }) as { id: string }[]
    expect(read.map((e) => e.id)).toEqual(ids)
  })

  it('takes the media types with a utf-8 charset, in any case', async () => {
    accepted(await publish(admin, hotelChanged(hotel), { contentType: 'Application/CloudEvents+JSON; charset=UTF-8' }))
    accepted(await publish(admin, [hotelChanged(hotel)], { contentType: `${BATCH};charset="utf-8"` }))
  })

  describe('refuses a caller that is no publisher with 401', () => {
    it.each([
      ['no Authorization header', null, 'MISSING_AUTH_HEADER'],
      ['an unknown token', 'not-the-token-of-anybody', 'INVALID_AUTH_HEADER'],
      ['the admin token, which publishes nothing', ADMIN_TOKEN, 'INVALID_AUTH_HEADER'],
      ['a partner\'s API key', 'KEY', 'INVALID_AUTH_HEADER'],
    ] as const)('%s', async (_name, token, code) => {
      const answer = await publish(admin, hotelChanged(hotel), { token: token === 'KEY' ? key : token })
      expectProblem(answer, { code, instance: '/events', headers: { 'www-authenticate': 'Bearer realm="events"' } })
      expect(await eventKeys()).toEqual([])
    })

    it('with the token in another scheme', async () => {
      const answer = await publish(admin, hotelChanged(hotel), { token: null, headers: { authorization: `Basic ${PUBLISHER_TOKENS.EVENTS_PMS_TOKEN}` } })
      expectProblem(answer, { code: 'INVALID_AUTH_HEADER', instance: '/events', headers: { 'www-authenticate': 'Bearer realm="events"' } })
    })

    it('before it reads the body: a wrong token with a malformed or oversized body is still 401', async () => {
      expectProblem(await publish(admin, undefined, { token: 'wrong-token-wrong-token', raw: '{"no', contentType: SINGLE }), { code: 'INVALID_AUTH_HEADER', instance: '/events', headers: { 'www-authenticate': 'Bearer realm="events"' } })
      expectProblem(await publish(admin, undefined, { token: 'wrong-token-wrong-token', raw: Buffer.alloc(2 * 1024 * 1024, 32), contentType: 'text/plain' }),
        { code: 'INVALID_AUTH_HEADER', instance: '/events', headers: { 'www-authenticate': 'Bearer realm="events"' } })
    })
  })

  it('lets publishers through the admin token while the other admin routes still need it', async () => {
    const metrics = await request(`${admin}/metrics`, { headers: { authorization: `Bearer ${PUBLISHER_TOKENS.EVENTS_PMS_TOKEN}` } })
    await metrics.body.dump()
    expect(metrics.statusCode).toBe(401)
    accepted(await publish(admin, hotelChanged(hotel)))
  })

  it.each([
    ['application/json', 'application/json'],
    ['no Content-Type', null],
    ['a batch type with another parameter', `${BATCH}; charset=latin1`],
    ['text/plain', 'text/plain'],
  ])('refuses %s with 415 and stores nothing', async (_name, contentType) => {
    const answer = await publish(admin, hotelChanged(hotel), { contentType })
    expectProblem(answer, { code: 'UNSUPPORTED_MEDIA_TYPE', instance: '/events', detail: 'Send CloudEvents in structured mode: `Content-Type: application/cloudevents+json` for one event, `application/cloudevents-batch+json` for a batch.' })
    expect(await eventKeys()).toEqual([])
  })

  it('refuses a body over 1 MiB with 413', async () => {
    const big = [hotelChanged(hotel, 'ACME', {}, { padding: 'x'.repeat(1024 * 1024) })]
    expectProblem(await publish(admin, big), { code: 'PAYLOAD_TOO_LARGE', instance: '/events', detail: 'The body is over 1048576 bytes; send fewer events per request.' })
    expect(await eventKeys()).toEqual([])
  })

  it('refuses JSON nested deeper than 32 levels with 400, before parsing it: a 1 MiB body of nested arrays', async () => {
    const nested: ExpectedProblem = { code: 'INVALID_EVENT', instance: '/events', detail: 'The body nests arrays and objects deeper than 32 levels; nothing was accepted.',
      errors: [{ field: 'body', code: 'OUT_OF_RANGE', detail: 'Arrays and objects nest at most 32 levels deep.' }] }
    // Unbalanced, so a parse would call it malformed: the nesting is what refuses it.
    expectProblem(await publish(admin, undefined, { raw: '['.repeat(1024 * 1024 - 16), contentType: BATCH }), nested)
    const deep = (levels: number): unknown => (levels === 0 ? 'x' : { x: deep(levels - 1) })
    // 33 levels: the batch, the event, its data and 30 more objects in it; one level less is taken.
    expectProblem(await publish(admin, [hotelChanged(hotel, 'ACME', {}, { nested: deep(30) })]), nested)
    expect(accepted(await publish(admin, [hotelChanged(hotel, 'ACME', {}, { nested: deep(29) })]))).toHaveLength(1)
    // Brackets in strings are text.
    expect(accepted(await publish(admin, [hotelChanged(hotel, 'ACME', {}, { text: '[{'.repeat(100) })]))).toHaveLength(1)
  })

  it('refuses malformed JSON with 400', async () => {
    expectProblem(await publish(admin, undefined, { raw: '[{"specversion": "1.0",', contentType: BATCH }), { code: 'MALFORMED_JSON', instance: '/events', detail: 'The body is not one well-formed JSON document.' })
    expectProblem(await publish(admin, undefined, { raw: '', contentType: SINGLE }), { code: 'MALFORMED_JSON', instance: '/events', detail: 'The body is not one well-formed JSON document.' })
  })

  it.each([
    ['an empty batch', [], 'this one is 0 events'],
    ['a batch of 101', 'MANY', 'this one is 101 events'],
    ['a batch that is no array', 'OBJECT', 'this one is no JSON array'],
  ])('refuses %s with 400', async (_name, body, size) => {
    const events = body === 'MANY' ? Array.from({ length: 101 }, () => hotelChanged(hotel)) : body === 'OBJECT' ? hotelChanged(hotel) : body
    const answer = await publish(admin, events, { contentType: BATCH })
    expectProblem(answer, { code: 'INVALID_EVENT', instance: '/events', detail: `A batch is a JSON array of 1 to 100 events; ${size}. Nothing was accepted.` })
    expect(await eventKeys()).toEqual([])
  })

  it('takes a batch of 100', async () => {
    const data = accepted(await publish(admin, Array.from({ length: 100 }, () => hotelChanged(hotel))))
    expect(data).toHaveLength(100)
    expectEnvelope(await list('?perPage=1'), { page: 1, perPage: 1, total: 100 })
  })

  it('refuses a whole batch when one event is invalid, listing each mistake by index', async () => {
    const events = [
      hotelChanged(hotel),
      hotelChanged(hotel, 'ACME', { specversion: '0.3', source: 'pms-sandbox', type: undefined }),
      hotelChanged(otherHotel),
      'not an event',
      hotelChanged(hotel, 'INIT'),
    ]
    const answer = await publish(admin, events)
    const errors: FieldError[] = [
      { field: '[1].specversion', code: 'INVALID_FORMAT', detail: 'Must be "1.0": CloudEvents 1.0 is what the gateway reads.' },
      { field: '[1].source', code: 'NOT_ALLOWED', detail: "Must be 'pms', the name of the publisher whose token was sent." },
      { field: '[1].type', code: 'REQUIRED', detail: 'A CloudEvent needs `type`.' },
      { field: '[3]', code: 'INVALID_FORMAT', detail: 'Must be a JSON object: a CloudEvent in structured mode.' },
      { field: '[4].data.chain_code', code: 'NOT_ALLOWED', detail: 'Names no brand of this gateway (`brands[].chainCode`).' },
    ]
    expectProblem(answer, { code: 'INVALID_EVENT', instance: '/events', detail: '3 of the 5 events break rules of the ingest; none of the batch was accepted.', errors })
    expect(await eventKeys()).toEqual([])
  })

  describe('refuses an event that breaks a rule', () => {
    const cases: [string, Record<string, unknown>, FieldError][] = [
      ['no specversion', { specversion: undefined }, { field: 'specversion', code: 'REQUIRED', detail: 'A CloudEvent needs `specversion`: "1.0".' }],
      ['no id', { id: undefined }, { field: 'id', code: 'REQUIRED', detail: 'A CloudEvent needs `id`.' }],
      ['an empty id', { id: '' }, { field: 'id', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' }],
      ['an id of 256 characters', { id: 'x'.repeat(256) }, { field: 'id', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' }],
      ['a numeric id', { id: 42 }, { field: 'id', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' }],
      ['no source', { source: undefined }, { field: 'source', code: 'REQUIRED', detail: 'A CloudEvent needs `source`.' }],
      ['another publisher\'s source', { source: 'bookings' }, { field: 'source', code: 'NOT_ALLOWED', detail: "Must be 'pms', the name of the publisher whose token was sent." }],
      ['a type that is no string', { type: ['a'] }, { field: 'type', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' }],
      ['another data content type', { datacontenttype: 'application/xml' }, { field: 'datacontenttype', code: 'INVALID_FORMAT', detail: 'Must be "application/json", or left out.' }],
      ['binary data', { data_base64: 'AAAA' }, { field: 'data_base64', code: 'NOT_ALLOWED', detail: 'Send `data` as a JSON object; binary data is not taken.' }],
      ['no data', { data: undefined }, { field: 'data', code: 'REQUIRED', detail: 'An event needs `data`, a JSON object.' }],
      ['data that is an array', { data: [1] }, { field: 'data', code: 'INVALID_FORMAT', detail: 'Must be a JSON object.' }],
      ['a time that is no RFC 3339 date-time', { time: '2026-11-26 12:00:00' }, { field: 'time', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, or left out.' }],
      ['a malformed traceparent', { traceparent: '00-abc' }, { field: 'traceparent', code: 'INVALID_FORMAT', detail: 'Must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), or left out.' }],
    ]
    it.each(cases)('%s', async (_name, overrides, error) => {
      const answer = await publish(admin, hotelChanged(hotel, 'ACME', overrides))
      expectProblem(answer, { code: 'INVALID_EVENT', instance: '/events', detail: 'The event breaks a rule of the ingest; it was not accepted.', errors: [error] })
      expect(await eventKeys()).toEqual([])
    })

    const dataCases: [string, Record<string, unknown>, FieldError][] = [
      ['no chain code', { chain_code: undefined }, { field: 'data.chain_code', code: 'REQUIRED', detail: "Events of type 'com.example.pms.hotel.changed' name their chain code here." }],
      ['a chain code that is a number', { chain_code: 7 }, { field: 'data.chain_code', code: 'INVALID_FORMAT', detail: 'Must be a chain code (a string).' }],
      ['a chain code of no brand', { chain_code: 'NOPE' }, { field: 'data.chain_code', code: 'NOT_ALLOWED', detail: 'Names no brand of this gateway (`brands[].chainCode`).' }],
      ['no hotel', { hotel_uuid: undefined }, {
        field: 'data.hotel_uuid', code: 'REQUIRED', detail: "Events of type 'com.example.pms.hotel.changed' name their property here.",
      }],
      ['a hotel id that is no UUID', { hotel_uuid: 'hotel-1' }, { field: 'data.hotel_uuid', code: 'INVALID_FORMAT', detail: 'Must be a property id (a UUID).' }],
    ]
    it.each(dataCases)('a mapped field with %s', async (_name, data, error) => {
      const event = hotelChanged(hotel)
      const answer = await publish(admin, { ...event, data: { ...(event.data as object), ...data } })
      // A missing hotel is missing twice: as the property and as the changed object's id.
      const errors: FieldError[] = Object.hasOwn(data, 'hotel_uuid') && data.hotel_uuid === undefined
        ? [error, { field: 'data.hotel_uuid', code: 'REQUIRED', detail: "Events of type 'com.example.pms.hotel.changed' name the id of the changed property here." }]
        : [error]
      expectProblem(answer, { code: 'INVALID_EVENT', instance: '/events', detail: `The event breaks ${errors.length === 1 ? 'a rule' : `${errors.length} rules`} of the ingest; it was not accepted.`, errors })
    })
  })

  it('answers a copy of an event with the first one\'s id and creates nothing', async () => {
    const event = hotelChanged(hotel)
    const [first] = accepted(await publish(admin, event))
    const keys = await eventKeys()
    const before = await list()
    const copies = accepted(await publish(admin, [event, hotelChanged(otherHotel), { ...event, data: { ...(event.data as object), revision: 9 } }]))
    expect(copies[0]).toEqual({ id: event.id, eventId: first?.eventId, duplicate: true })
    expect(copies[1]).toEqual({ id: expect.any(String), eventId: expect.stringMatching(EVENT_ID), duplicate: false })
    // The same (source, id) within one request is a copy too.
    expect(copies[2]).toEqual({ id: event.id, eventId: first?.eventId, duplicate: true })
    const after = expectEnvelope(await list(), { page: 1, perPage: 20, total: 2 }) as { id: string }[]
    expect(after.map((e) => e.id)).toEqual([first?.eventId, copies[1]?.eventId])
    expect((JSON.parse(before.body) as { data: unknown[] }).data).toEqual([after[0]])
    // One new event's keys: its record and copy record, and a property index of another hotel.
    expect((await eventKeys()).filter((k) => !keys.includes(k))).toHaveLength(3)
  })

  it('recognises a copy by its source and id whatever brand it names: the same id under another chain code creates nothing', async () => {
    const globexKey = await t.key({ brand: 'globex' })
    const globexHotel = String(t.pms.hotels.find((h) => h.chain_code === 'GLBX')?.hotel_uuid)
    const id = randomUUID()
    const [first] = accepted(await publish(admin, hotelChanged(hotel, 'ACME', { id })))
    const keys = await eventKeys()
    // Sent again naming another brand, alone and in a batch with a copy naming the first brand.
    const [again] = accepted(await publish(admin, hotelChanged(globexHotel, 'GLBX', { id })))
    expect(again).toEqual({ id, eventId: first?.eventId, duplicate: true })
    const batch = accepted(await publish(admin, [hotelChanged(globexHotel, 'GLBX', { id }), hotelChanged(hotel, 'ACME', { id })]))
    expect(batch).toEqual([{ id, eventId: first?.eventId, duplicate: true }, { id, eventId: first?.eventId, duplicate: true }])
    expect(await eventKeys()).toEqual(keys)
    const globexEvents = async (): Promise<Answer> => t.call('GET', '/v1/events', { key: globexKey, host: GLOBEX_HOST })
    expectEnvelope(await globexEvents(), { page: 1, perPage: 20, total: 0 })
    // The first copy of an id in one request decides its brand, for the copies after it too.
    const fresh = randomUUID()
    const both = accepted(await publish(admin, [hotelChanged(globexHotel, 'GLBX', { id: fresh }), hotelChanged(hotel, 'ACME', { id: fresh })]))
    expect(both).toEqual([{ id: fresh, eventId: expect.stringMatching(EVENT_ID), duplicate: false }, { id: fresh, eventId: both[0]?.eventId, duplicate: true }])
    expect((JSON.parse((await globexEvents()).body) as { data: { id: string }[] }).data.map((e) => e.id)).toEqual([both[0]?.eventId])
  })

  it('recognises a copy by its source and id: another publisher\'s event of the same id is its own', async () => {
    const id = randomUUID()
    const [pms] = accepted(await publish(admin, hotelChanged(hotel, 'ACME', { id })))
    const [bookings] = accepted(await publish(admin, guestEvent('created', randomUUID(), 'ACME', { id }), { token: PUBLISHER_TOKENS.EVENTS_BOOKINGS_TOKEN }))
    expect(bookings?.duplicate).toBe(false)
    expect(bookings?.eventId).not.toBe(pms?.eventId)
  })

  it('accepts and drops a type no public type maps: no event, no id', async () => {
    const unmapped = hotelChanged(hotel, 'ACME', { type: 'com.example.pms.rateplan.changed' })
    const mapped = hotelChanged(hotel)
    const data = accepted(await publish(admin, [unmapped, mapped]))
    expect(data).toEqual([
      { id: unmapped.id, eventId: null, duplicate: false },
      { id: mapped.id, eventId: expect.stringMatching(EVENT_ID), duplicate: false },
    ])
    expectEnvelope(await list(), { page: 1, perPage: 20, total: 1 })
  })

  it('refuses nothing of a type no public type maps beyond the CloudEvents rules: its data names nothing', async () => {
    const answer = await publish(admin, { ...hotelChanged(hotel, 'ACME', { type: 'com.example.pms.other' }), data: { anything: true } })
    expect(accepted(answer)).toEqual([{ id: expect.any(String), eventId: null, duplicate: false }])
  })

  it('keeps a sandbox publisher\'s events as test events', async () => {
    const [test] = accepted(await publish(admin, hotelChanged(hotel, 'ACME', { source: 'pms-sandbox' }), { token: PUBLISHER_TOKENS.EVENTS_PMS_SANDBOX_TOKEN }))
    expectEnvelope(await list(), { page: 1, perPage: 20, total: 0 })
    const testKey = await t.key({ mode: 'test' })
    const read = expectEnvelope(await t.get('/v1/events', testKey), { page: 1, perPage: 20, total: 1 }) as { createdAt: string }[]
    expect(read).toEqual([propertyUpdated(test?.eventId as string, read[0]?.createdAt as string, hotel, 'test')])
  })

  it('counts events by publisher, type and outcome', async () => {
    const counter = async (): Promise<string[]> => {
      const res = await request(`${admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      return (await res.body.text()).split('\n').filter((l) => l.startsWith('gateway_events_ingested_total{'))
    }
    const value = (lines: string[], labels: string): number => Number(lines.find((l) => l.startsWith(`gateway_events_ingested_total{${labels}}`))?.split(' ')[1] ?? 0)
    const before = await counter()
    const event = hotelChanged(hotel)
    accepted(await publish(admin, [event, hotelChanged(hotel, 'ACME', { type: 'com.example.pms.unknown' })]))
    accepted(await publish(admin, event))
    await publish(admin, [hotelChanged(hotel), hotelChanged(hotel, 'NOPE')])
    await publish(admin, undefined, { raw: 'nope', contentType: SINGLE })
    const after = await counter()
    const delta = (labels: string): number => value(after, labels) - value(before, labels)
    expect({
      accepted: delta('publisher="pms",type="com.example.pms.hotel.changed",outcome="accepted"'),
      duplicate: delta('publisher="pms",type="com.example.pms.hotel.changed",outcome="duplicate"'),
      dropped: delta('publisher="pms",type="other",outcome="dropped"'),
      refused: delta('publisher="pms",type="com.example.pms.hotel.changed",outcome="refused"'),
      refusedOther: delta('publisher="pms",type="other",outcome="refused"'),
    }).toEqual({ accepted: 1, duplicate: 1, dropped: 1, refused: 2, refusedOther: 1 })
  })

  it('writes one log line per request, without the token or the body', async () => {
    const event = hotelChanged(hotel, 'ACME', {}, { secret_note: 'private-field-of-the-pms' })
    const answer = await publish(admin, [event, hotelChanged(hotel, 'ACME', { type: 'com.example.pms.unknown' })])
    const requestId = answer.headers['service-request-id']
    await publish(admin, event, { token: 'a-wrong-token-for-the-log' })
    const lines = t.logs.records().filter((r) => r.msg === 'events ingest')
    const line = lines.find((r) => r.reqId === requestId)
    expect(line).toMatchObject({
      level: 'info', reqId: requestId, publisher: 'pms', status: 202, code: null, events: 2, accepted: 1, duplicates: 0, dropped: 1, clientIp: '127.0.0.1', durationMs: expect.any(Number),
    })
    expect(lines.at(-1)).toMatchObject({ publisher: null, status: 401, code: 'INVALID_AUTH_HEADER', events: null })
    const text = t.logs.lines.join('\n')
    for (const secret of [PUBLISHER_TOKENS.EVENTS_PMS_TOKEN, 'a-wrong-token-for-the-log', 'private-field-of-the-pms', String(event.id)]) expect(text).not.toContain(secret)
  })
})
