import { describe, expect, it } from 'vitest'
import { checkEvents, MAX_BATCH, MAX_NESTING, tooDeepAt } from '../../src/events/cloudevents.js'
import type { EventTypeConfig } from '../../src/events/config.js'
import { EventTypes, hasScope, sees, type EventFacts, type Viewer } from '../../src/events/types.js'
import { UlidFactory, ulidMillis } from '../../src/events/ulid.js'

// The event log's rules without a gateway (docs/architecture.md, "Events"): who sees an event,
// how an internal type maps to a public one, what a CloudEvent must carry, how deep a body may
// nest, and the ids. Each module's mutation run uses these (stryker.config.mjs).

const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'
const OTHER_HOTEL = '11111111-1111-4111-8111-111111111111'

const TYPES: EventTypeConfig[] = [
  { type: 'property.updated', publisher: 'pms', internalType: 'hotel.changed', scope: 'properties:read', brand: 'hotel.chain', property: 'hotel.id', object: { type: 'property', id: 'hotel.id', path: '/v1/properties/{id}' } },
  { type: 'guest.created', publisher: 'crm', internalType: 'guest.new', scope: 'guests:read', brand: 'chain', object: { type: 'guest', id: 'guest', path: '/v1/guests/{id}' } },
  // A second publisher of the same public type (a sandbox's).
  { type: 'guest.created', publisher: 'crm-test', internalType: 'guest.new', scope: 'guests:read', brand: 'chain', object: { type: 'guest', id: 'guest', path: '/v1/guests/{id}' } },
]
const types = new EventTypes(TYPES)
const chains = new Map([['ACME', 'acme'], ['GLOBEX', 'globex']])

function viewer(over: Partial<Viewer> = {}): Viewer {
  return { brand: 'acme', mode: 'live', properties: 'all', scopes: 'all', ...over }
}

const event = (over: Partial<EventFacts> = {}): EventFacts => ({ brand: 'acme', mode: 'live', type: 'property.updated', propertyId: HOTEL, ...over })

describe('who sees an event', () => {
  it('sees an event of its brand and mode, of a property it may use or of none, with the scope of its type', () => {
    expect(sees(viewer(), event(), 'properties:read')).toBe(true)
    expect(sees(viewer({ properties: new Set([HOTEL]), scopes: new Set(['properties:read']) }), event(), 'properties:read')).toBe(true)
    expect(sees(viewer({ properties: new Set([OTHER_HOTEL]) }), event({ propertyId: null }), 'properties:read')).toBe(true)
  })

  it('does not see another brand, another mode, another property, a type without its scope or a type the config no longer names', () => {
    expect(sees(viewer(), event({ brand: 'globex' }), 'properties:read')).toBe(false)
    expect(sees(viewer(), event({ mode: 'test' }), 'properties:read')).toBe(false)
    expect(sees(viewer({ mode: 'test' }), event(), 'properties:read')).toBe(false)
    expect(sees(viewer({ properties: new Set([OTHER_HOTEL]) }), event(), 'properties:read')).toBe(false)
    expect(sees(viewer({ scopes: new Set(['guests:read']) }), event(), 'properties:read')).toBe(false)
    expect(sees(viewer(), event(), undefined)).toBe(false)
  })

  it('has a scope when it has every scope or that one', () => {
    expect(hasScope(viewer(), 'x')).toBe(true)
    expect(hasScope(viewer({ scopes: new Set(['x']) }), 'x')).toBe(true)
    expect(hasScope(viewer({ scopes: new Set(['y']) }), 'x')).toBe(false)
  })
})

describe('the event types of the config', () => {
  it('maps an internal type of its publisher only, splitting the data paths', () => {
    expect(types.mappingOf('pms', 'hotel.changed')).toEqual({
      type: 'property.updated', scope: 'properties:read', brand: ['hotel', 'chain'], property: ['hotel', 'id'],
      object: { type: 'property', id: ['hotel', 'id'], path: '/v1/properties/{id}' },
    })
    expect(types.mappingOf('crm', 'guest.new')).toEqual({
      type: 'guest.created', scope: 'guests:read', brand: ['chain'], property: undefined, object: { type: 'guest', id: ['guest'], path: '/v1/guests/{id}' },
    })
    expect(types.mappingOf('crm', 'hotel.changed')).toBeUndefined()
    expect(types.mappingOf('pms', 'guest.new')).toBeUndefined()
  })

  it('names the internal types of each publisher', () => {
    expect([types.names('pms', 'hotel.changed'), types.names('crm', 'guest.new'), types.names('crm-test', 'guest.new')]).toEqual([true, true, true])
    expect([types.names('pms', 'guest.new'), types.names('nobody', 'guest.new'), types.names('crm', 'hotel.changed')]).toEqual([false, false, false])
  })

  it('gives each public type its scope, lists them sorted and those a credential has the scope of', () => {
    expect([types.scopeOf('property.updated'), types.scopeOf('guest.created'), types.scopeOf('hotel.changed')]).toEqual(['properties:read', 'guests:read', undefined])
    expect(types.publicTypes).toEqual(['guest.created', 'property.updated'])
    expect(types.typesSeenBy(viewer())).toEqual(['guest.created', 'property.updated'])
    expect(types.typesSeenBy(viewer({ scopes: new Set(['properties:read']) }))).toEqual(['property.updated'])
    expect(types.typesSeenBy(viewer({ scopes: new Set(['bookings:read']) }))).toEqual([])
  })

  it('judges an event with the scope its type has now', () => {
    expect(types.sees(viewer({ scopes: new Set(['guests:read']) }), event({ type: 'guest.created', propertyId: null }))).toBe(true)
    expect(types.sees(viewer({ scopes: new Set(['guests:read']) }), event())).toBe(false)
    expect(types.sees(viewer(), event({ type: 'gone.type' }))).toBe(false)
  })
})

describe('event ids', () => {
  it('encodes the time in the first 10 characters and reads it back', () => {
    const ulids = new UlidFactory()
    const at = Date.UTC(2026, 10, 28, 12, 0, 0, 123)
    const id = ulids.next(at)
    expect(id.text).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(id.millis).toBe(at)
    expect(ulidMillis(id.text)).toBe(at)
    expect(ulidMillis(id.text.toLowerCase())).toBe(at)
    expect(new UlidFactory().next(0).text.slice(0, 10)).toBe('0000000000')
    expect(new UlidFactory().next(32).text.slice(0, 10)).toBe('0000000010')
    expect(new UlidFactory().next(2 ** 48 - 1).text.slice(0, 10)).toBe('7ZZZZZZZZZ')
  })

  it('counts the random part up within a millisecond, and keeps the last time when the clock goes back', () => {
    const ulids = new UlidFactory()
    const made = [ulids.next(1000), ulids.next(1000), ulids.next(999), ulids.next(1000)]
    expect(made.map((u) => u.millis)).toEqual([1000, 1000, 1000, 1000])
    const texts = made.map((u) => u.text)
    expect([...texts].sort()).toEqual(texts)
    expect(new Set(texts).size).toBe(4)
    // Each step adds one to the last digit, carrying.
    const value = (text: string): bigint => [...text.slice(10)].reduce((n, c) => n * 32n + BigInt('0123456789ABCDEFGHJKMNPQRSTVWXYZ'.indexOf(c)), 0n)
    expect(value(texts[1] as string) - value(texts[0] as string)).toBe(1n)
    expect(value(texts[3] as string) - value(texts[0] as string)).toBe(3n)
    const later = ulids.next(1001)
    expect(later.millis).toBe(1001)
    expect(later.text > (texts[3] as string)).toBe(true)
  })

  it('carries past a digit of 31', () => {
    const ulids = new UlidFactory()
    // Many ids in one millisecond: the count runs through every last digit and carries.
    const texts = Array.from({ length: 100 }, () => ulids.next(5).text)
    expect([...texts].sort()).toEqual(texts)
    expect(new Set(texts).size).toBe(100)
    expect(texts.every((t) => t.slice(0, 10) === '0000000005')).toBe(true)
  })
})

describe('how deep a body nests', () => {
  const bytes = (text: string): Uint8Array => Buffer.from(text)
  it('finds the bracket that nests one level too deep, and nothing at the limit', () => {
    expect(tooDeepAt(bytes(`${'['.repeat(MAX_NESTING)}${']'.repeat(MAX_NESTING)}`))).toBeUndefined()
    expect(tooDeepAt(bytes(`${'['.repeat(MAX_NESTING + 1)}`))).toBe(MAX_NESTING)
    expect(tooDeepAt(bytes('{"a":{"b":[1]}}'), 2)).toBe(10)
    expect(tooDeepAt(bytes('{"a":{"b":1}}'), 2)).toBeUndefined()
    expect(tooDeepAt(bytes('[[],[],[]]'), 2)).toBeUndefined()
    expect(tooDeepAt(bytes('[{},{}]'), 1)).toBe(1)
  })

  it('does not count brackets inside strings, escaped quotes included', () => {
    expect(tooDeepAt(bytes('["[[[[", "{{{{"]'), 1)).toBeUndefined()
    expect(tooDeepAt(bytes('["\\"[[[", 1]'), 1)).toBeUndefined()
    expect(tooDeepAt(bytes('["\\\\", [1]]'), 1)).toBe(7)
  })
})

function cloudEvent(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specversion: '1.0', id: 'e-1', source: 'pms', type: 'hotel.changed', datacontenttype: 'application/json',
    data: { hotel: { chain: 'ACME', id: HOTEL.toUpperCase() } }, ...over,
  }
}

describe('the checks of a CloudEvent', () => {
  it('accepts one event and maps it: brand by chain code, property and object ids lower-cased, the path filled in', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    expect(checkEvents(cloudEvent({ traceparent, time: '2026-11-28T12:00:00Z' }), false, 'pms', types, chains)).toEqual({
      ok: true,
      events: [{
        index: 0, id: 'e-1', internalType: 'hotel.changed', traceparent,
        mapped: { type: 'property.updated', brand: 'acme', propertyId: HOTEL, object: { type: 'property', id: HOTEL, path: `/v1/properties/${HOTEL}` } },
      }],
    })
  })

  it('accepts an event of a type no public type maps, to drop it, and takes a mapping without a property', () => {
    expect(checkEvents(cloudEvent({ type: 'other.thing', datacontenttype: undefined }), false, 'pms', types, chains)).toEqual({
      ok: true, events: [{ index: 0, id: 'e-1', internalType: 'other.thing', traceparent: undefined, mapped: undefined }],
    })
    const guest = checkEvents({ specversion: '1.0', id: 'g', source: 'crm', type: 'guest.new', datacontenttype: 'Application/JSON', data: { chain: 'GLOBEX', guest: 'G-1.x_~' } }, false, 'crm', types, chains)
    expect(guest).toEqual({
      ok: true, events: [{ index: 0, id: 'g', internalType: 'guest.new', traceparent: undefined, mapped: { type: 'guest.created', brand: 'globex', propertyId: null, object: { type: 'guest', id: 'G-1.x_~', path: '/v1/guests/G-1.x_~' } } }],
    })
  })

  it('names every missing field of an event, once each', () => {
    expect(checkEvents({}, false, 'pms', types, chains)).toEqual({
      ok: false, detail: 'The event breaks 5 rules of the ingest; it was not accepted.', types: [undefined],
      errors: [
        { field: 'specversion', code: 'REQUIRED', detail: 'A CloudEvent needs `specversion`: "1.0".' },
        { field: 'id', code: 'REQUIRED', detail: 'A CloudEvent needs `id`.' },
        { field: 'source', code: 'REQUIRED', detail: 'A CloudEvent needs `source`.' },
        { field: 'type', code: 'REQUIRED', detail: 'A CloudEvent needs `type`.' },
        { field: 'data', code: 'REQUIRED', detail: 'An event needs `data`, a JSON object.' },
      ],
    })
  })

  it('names every malformed field', () => {
    const long = 'x'.repeat(256)
    const result = checkEvents({
      specversion: '0.3', id: '', source: long, type: 7, datacontenttype: 'text/plain', data_base64: 'AA==', data: [1], time: '2026-11-28', traceparent: '00-zz',
    }, false, 'pms', types, chains)
    expect(result).toEqual({
      ok: false, detail: 'The event breaks 9 rules of the ingest; it was not accepted.', types: [undefined],
      errors: [
        { field: 'specversion', code: 'INVALID_FORMAT', detail: 'Must be "1.0": CloudEvents 1.0 is what the gateway reads.' },
        { field: 'id', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' },
        { field: 'source', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' },
        { field: 'type', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' },
        { field: 'datacontenttype', code: 'INVALID_FORMAT', detail: 'Must be "application/json", or left out.' },
        { field: 'data_base64', code: 'NOT_ALLOWED', detail: 'Send `data` as a JSON object; binary data is not taken.' },
        { field: 'data', code: 'INVALID_FORMAT', detail: 'Must be a JSON object.' },
        { field: 'time', code: 'INVALID_FORMAT', detail: 'Must be an RFC 3339 date-time with an offset, or left out.' },
        { field: 'traceparent', code: 'INVALID_FORMAT', detail: 'Must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), or left out.' },
      ],
    })
    // At the bounds: 255 characters pass, and types other than strings are malformed too.
    const edge = checkEvents(cloudEvent({ id: 'x'.repeat(255), datacontenttype: 5, time: 5, traceparent: 5, data: null }), false, 'pms', types, chains)
    expect(edge.ok ? [] : edge.errors.map((e) => `${e.field} ${e.code}`)).toEqual(['datacontenttype INVALID_FORMAT', 'data INVALID_FORMAT', 'time INVALID_FORMAT', 'traceparent INVALID_FORMAT'])
  })

  it('takes the source only as the name of the publisher whose token was sent', () => {
    expect(checkEvents(cloudEvent({ source: 'crm' }), false, 'pms', types, chains)).toEqual({
      ok: false, detail: 'The event breaks a rule of the ingest; it was not accepted.', types: ['hotel.changed'],
      errors: [{ field: 'source', code: 'NOT_ALLOWED', detail: "Must be 'pms', the name of the publisher whose token was sent." }],
    })
  })

  it('names each field the mapping needs that is missing or malformed in data', () => {
    expect(checkEvents(cloudEvent({ data: {} }), false, 'pms', types, chains)).toMatchObject({
      ok: false,
      errors: [
        { field: 'data.hotel.chain', code: 'REQUIRED', detail: "Events of type 'hotel.changed' name their chain code here." },
        { field: 'data.hotel.id', code: 'REQUIRED', detail: "Events of type 'hotel.changed' name their property here." },
        { field: 'data.hotel.id', code: 'REQUIRED', detail: "Events of type 'hotel.changed' name the id of the changed property here." },
      ],
    })
    expect(checkEvents(cloudEvent({ data: { hotel: { chain: 5, id: 'not-a-uuid' } } }), false, 'pms', types, chains)).toMatchObject({
      ok: false,
      errors: [
        { field: 'data.hotel.chain', code: 'INVALID_FORMAT', detail: 'Must be a chain code (a string).' },
        { field: 'data.hotel.id', code: 'INVALID_FORMAT', detail: 'Must be a property id (a UUID).' },
      ],
    })
    expect(checkEvents(cloudEvent({ data: { hotel: { chain: 'NOPE', id: HOTEL } } }), false, 'pms', types, chains)).toMatchObject({
      ok: false, errors: [{ field: 'data.hotel.chain', code: 'NOT_ALLOWED', detail: 'Names no brand of this gateway (`brands[].chainCode`).' }],
    })
    // A step of the path that is not an object, or only inherited, is missing.
    expect(checkEvents(cloudEvent({ data: { hotel: 'ACME' } }), false, 'pms', types, chains)).toMatchObject({ ok: false, errors: [{ field: 'data.hotel.chain', code: 'REQUIRED' }, { field: 'data.hotel.id' }, { field: 'data.hotel.id' }] })
    expect(checkEvents(cloudEvent({ data: { hotel: [] } }), false, 'pms', types, chains)).toMatchObject({ ok: false, errors: [{ field: 'data.hotel.chain', code: 'REQUIRED' }, { field: 'data.hotel.id' }, { field: 'data.hotel.id' }] })
    expect(checkEvents(cloudEvent({ data: { hotel: null } }), false, 'pms', types, chains)).toMatchObject({ ok: false, errors: [{ field: 'data.hotel.chain', code: 'REQUIRED' }, { field: 'data.hotel.id' }, { field: 'data.hotel.id' }] })
    expect(checkEvents(cloudEvent({ data: { hotel: Object.create({ chain: 'ACME', id: HOTEL }) as object } }), false, 'pms', types, chains))
      .toMatchObject({ ok: false, errors: [{ field: 'data.hotel.chain', code: 'REQUIRED' }, { field: 'data.hotel.id' }, { field: 'data.hotel.id' }] })
    const guest = { specversion: '1.0', id: 'g', source: 'crm', type: 'guest.new', data: { chain: 'ACME', guest: 'bad id!' } }
    expect(checkEvents(guest, false, 'crm', types, chains)).toMatchObject({
      ok: false, errors: [{ field: 'data.guest', code: 'INVALID_FORMAT', detail: 'Must be an id of 1 to 128 characters of A-Z a-z 0-9 . _ ~ -.' }],
    })
    expect(checkEvents({ ...guest, data: { chain: 'ACME', guest: 7 } }, false, 'crm', types, chains)).toMatchObject({ ok: false, errors: [{ field: 'data.guest', code: 'INVALID_FORMAT' }] })
  })

  it('refuses a body that is not an object', () => {
    expect(checkEvents([cloudEvent()], false, 'pms', types, chains)).toEqual({
      ok: false, detail: 'The event breaks a rule of the ingest; it was not accepted.', types: [undefined],
      errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'Must be a JSON object: a CloudEvent in structured mode.' }],
    })
  })
})

describe('the checks of a batch', () => {
  it('accepts 1 to 100 events, each with its index', () => {
    const batch = [cloudEvent({ id: 'a' }), cloudEvent({ id: 'b', type: 'other.thing' })]
    const result = checkEvents(batch, true, 'pms', types, chains)
    expect(result.ok && result.events.map((e) => [e.index, e.id, e.mapped?.type])).toEqual([[0, 'a', 'property.updated'], [1, 'b', undefined]])
    const full = checkEvents(Array.from({ length: MAX_BATCH }, (_, i) => cloudEvent({ id: `e${i}` })), true, 'pms', types, chains)
    expect(full.ok && full.events.length).toBe(MAX_BATCH)
  })

  it('refuses what is not an array of 1 to 100, naming what it is', () => {
    expect(checkEvents([], true, 'pms', types, chains)).toEqual({ ok: false, detail: 'A batch is a JSON array of 1 to 100 events; this one is 0 events. Nothing was accepted.', errors: [], types: [] })
    const over = Array.from({ length: MAX_BATCH + 1 }, () => cloudEvent())
    expect(checkEvents(over, true, 'pms', types, chains)).toEqual({
      ok: false, detail: 'A batch is a JSON array of 1 to 100 events; this one is 101 events. Nothing was accepted.', errors: [], types: over.map(() => 'hotel.changed'),
    })
    expect(checkEvents(cloudEvent(), true, 'pms', types, chains)).toEqual({ ok: false, detail: 'A batch is a JSON array of 1 to 100 events; this one is no JSON array. Nothing was accepted.', errors: [], types: [] })
  })

  it('refuses the whole batch for one bad event, prefixing each field with its index and counting the bad events', () => {
    const result = checkEvents([cloudEvent(), 'x', cloudEvent({ id: undefined, source: undefined }), cloudEvent({ type: 5 })], true, 'pms', types, chains)
    expect(result).toEqual({
      ok: false, detail: '3 of the 4 events break rules of the ingest; none of the batch was accepted.', types: ['hotel.changed', undefined, 'hotel.changed', undefined],
      errors: [
        { field: '[1]', code: 'INVALID_FORMAT', detail: 'Must be a JSON object: a CloudEvent in structured mode.' },
        { field: '[2].id', code: 'REQUIRED', detail: 'A CloudEvent needs `id`.' },
        { field: '[2].source', code: 'REQUIRED', detail: 'A CloudEvent needs `source`.' },
        { field: '[3].type', code: 'INVALID_FORMAT', detail: 'Must be a string of 1 to 255 characters.' },
      ],
    })
  })
})
