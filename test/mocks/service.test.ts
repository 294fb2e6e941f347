import { gunzipSync } from 'node:zlib'
import { request } from 'undici'
import { rawExchange } from '../helpers/raw.js'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { generateHotels } from '../../mocks/pms/data.js'
import { GUEST_COUNTS, generateGuests, messagesOf, reservationsOf, roomsOf, type Guest } from '../../mocks/service/data.js'
import {
  BODY_LIMIT, LARGE_DEFAULT_BYTES, MockService, SERVICE_PROBLEMS,
  type Failure, type FieldError, type ServiceProblemCode,
} from '../../mocks/service/server.js'

// The stand-in internal service over real sockets: what the gateway's declared routes will
// receive from it, healthy and failing. Expected data comes from the same pure generators.

const TOKEN = 'service-secret'
const REQUEST_ID = 'req_0123456789abcdef0123456789abcdef'
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ACME = generateGuests('acme')
const GLOBEX = generateGuests('globex')
const HOTELS = generateHotels(1).map((h) => String(h.hotel_uuid))
const HOTEL = HOTELS[0] as string
const PROPERTY_HEADERS = { 'x-service-property-id': HOTEL }

interface Answer {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

let service: MockService

beforeAll(async () => {
  service = await new MockService({ token: TOKEN }).listen()
})
afterAll(async () => {
  await service.close()
})
afterEach(() => {
  service.setFailure(undefined)
  service.resetGuests()
  service.received.length = 0
})

async function call(method: string, path: string, options: { headers?: Record<string, string>; body?: string | Buffer; brand?: string | null; target?: MockService } = {}): Promise<Answer> {
  const headers: Record<string, string> = { 'x-service-token': TOKEN, 'x-request-id': REQUEST_ID, ...options.headers }
  if (options.brand !== null) headers['x-service-brand'] = options.brand ?? 'acme'
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  const res = await request(`${(options.target ?? service).url}${path}`, { method: method as 'GET', headers, body: options.body })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

async function control(method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await request(`${service.url}${path}`, { method: method as 'GET', body: body === undefined ? undefined : JSON.stringify(body) })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

function expectLeakyHeaders(res: Answer): void {
  expect(res.headers).toMatchObject({
    server: 'internal-bookings/3.2',
    'x-powered-by': 'bookings',
    'set-cookie': 'session=internal; Path=/',
    'x-internal-shard': 'eu-west-3',
  })
}

function expectEnvelope(res: Answer, status: number, data: unknown, pagination?: { page: number; perPage: number; total: number }): void {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status })
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
  expectLeakyHeaders(res)
  const meta = { requestId: REQUEST_ID, timestamp: expect.stringMatching(TIMESTAMP), ...(pagination === undefined ? {} : { pagination }) }
  expect(JSON.parse(res.body)).toEqual({ data, meta })
  expect(Object.keys(JSON.parse(res.body) as object)).toEqual(['data', 'meta'])
}

function problemOf(code: ServiceProblemCode, detail: string, instance: string, errors: FieldError[] = []): Record<string, unknown> {
  const spec = SERVICE_PROBLEMS[code]
  return {
    type: `https://developer.example.com/errors/${code.toLowerCase().replaceAll('_', '-')}`, title: spec.title, status: spec.status, detail, moreInfo: spec.moreInfo,
    instance, code, errors, requestId: REQUEST_ID, timestamp: expect.stringMatching(TIMESTAMP),
  }
}

function expectProblem(res: Answer, code: ServiceProblemCode, detail: string, instance: string, errors: FieldError[] = []): void {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status: SERVICE_PROBLEMS[code].status })
  expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
  expectLeakyHeaders(res)
  expect(JSON.parse(res.body)).toEqual(problemOf(code, detail, instance, errors))
}

const VALIDATION = 'The request body failed validation.'
const NEW_GUEST = { firstName: 'Zoë', lastName: "D'Angelo-Ørsted", email: 'zoe+vip@example.com', phone: '+33 6 12 34 56 78' }

describe('generated data', () => {
  it('is deterministic per seed and brand, with awkward values', () => {
    expect(generateGuests('acme', 1)).toEqual(ACME)
    expect(generateGuests('acme', 2)).not.toEqual(ACME)
    expect(ACME).toHaveLength(GUEST_COUNTS.acme as number)
    expect(GLOBEX).toHaveLength(GUEST_COUNTS.globex as number)
    expect(generateGuests('initech')).toEqual([])
    const all = [...ACME, ...GLOBEX]
    expect(new Set(all.map((g) => g.id)).size).toBe(all.length)
    for (const guest of all) {
      expect(guest.id).toMatch(UUID_V4)
      expect(guest.createdAt).toMatch(TIMESTAMP)
      expect(guest.updatedAt >= guest.createdAt).toBe(true)
    }
    expect(all.some((g) => g.phone === null)).toBe(true)
    expect(all.some((g) => /[^ -~]/.test(g.firstName + g.lastName))).toBe(true)
    expect(ACME.some((g) => messagesOf(g).length === 0) && ACME.some((g) => messagesOf(g).length > 0)).toBe(true)
    expect(ACME.some((g) => reservationsOf(g, 'acme').length === 0) && ACME.some((g) => reservationsOf(g, 'acme').length > 0)).toBe(true)
  })

  it('gives every PMS hotel 5 to 40 rooms and nothing to an unknown property', () => {
    for (const id of HOTELS) {
      const rooms = roomsOf(id) ?? []
      expect(rooms.length).toBeGreaterThanOrEqual(5)
      expect(rooms.length).toBeLessThanOrEqual(40)
      for (const room of rooms) expect(['clean', 'dirty', 'out-of-order']).toContain(room.status)
    }
    const statuses = new Set(HOTELS.flatMap((id) => (roomsOf(id) ?? []).map((r) => r.status)))
    expect([...statuses].sort()).toEqual(['clean', 'dirty', 'out-of-order'])
    expect(roomsOf('00000000-0000-4000-8000-000000000000')).toBeUndefined()
  })
})

describe('problems', () => {
  it('have the titles of the contract', () => {
    expect(SERVICE_PROBLEMS).toMatchObject({
      VALIDATION_FAILED: { status: 422, title: 'Validation failed' },
      MALFORMED_JSON: { status: 400, title: 'Malformed JSON' },
      GUEST_NOT_FOUND: { status: 404, title: 'Guest not found' },
      PROPERTY_NOT_FOUND: { status: 404, title: 'Property not found' },
      PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
      CONFLICT: { status: 409, title: 'Conflict' },
    })
  })
})

describe('GET /partner/v1/guests', () => {
  it('lists the first page of the brand by default', async () => {
    expectEnvelope(await call('GET', '/partner/v1/guests'), 200, ACME.slice(0, 20), { page: 1, perPage: 20, total: ACME.length })
  })

  it('pages and scopes by brand', async () => {
    const res = await call('GET', '/partner/v1/guests?page=3&perPage=10', { brand: 'globex' })
    expectEnvelope(res, 200, GLOBEX.slice(20, 30), { page: 3, perPage: 10, total: GLOBEX.length })
    expectEnvelope(await call('GET', '/partner/v1/guests', { brand: 'initech' }), 200, [], { page: 1, perPage: 20, total: 0 })
  })

  it('filters by exact email', async () => {
    const guest = ACME[7] as Guest
    expectEnvelope(await call('GET', `/partner/v1/guests?email=${encodeURIComponent(guest.email)}`), 200, [guest], { page: 1, perPage: 20, total: 1 })
    const upper = encodeURIComponent(guest.email.toUpperCase())
    expectEnvelope(await call('GET', `/partner/v1/guests?email=${upper}`), 200, [], { page: 1, perPage: 20, total: 0 })
  })

  it('answers HEAD with the headers only', async () => {
    const res = await call('HEAD', '/partner/v1/guests')
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.body).toBe('')
  })

  it('refuses bad paging and a missing brand', async () => {
    expectProblem(await call('GET', '/partner/v1/guests?page=0&perPage=x'), 'INVALID_QUERY_PARAMETER', 'Invalid query parameter.', '/partner/v1/guests', [
      { field: 'page', code: 'OUT_OF_RANGE', detail: 'page must be between 1 and 1000000000.' },
      { field: 'perPage', code: 'INVALID_FORMAT', detail: 'perPage must be given once, as digits.' },
    ])
    expectProblem(await call('GET', '/partner/v1/guests', { brand: null }), 'MISSING_REQUIRED_HEADER', 'The X-Service-Brand header is missing.', '/partner/v1/guests', [
      { field: 'X-Service-Brand', code: 'REQUIRED', detail: 'The caller must name the brand.' },
    ])
  })

  it('answers another method 405 with Allow', async () => {
    const res = await call('DELETE', '/partner/v1/guests')
    expectProblem(res, 'METHOD_NOT_ALLOWED', 'Use GET, HEAD, POST.', '/partner/v1/guests')
    expect(res.headers.allow).toBe('GET, HEAD, POST')
  })
})

describe('POST /partner/v1/guests', () => {
  it('creates a guest of the brand, with a Location', async () => {
    const res = await call('POST', '/partner/v1/guests', { body: JSON.stringify(NEW_GUEST) })
    const created = (JSON.parse(res.body) as { data: Guest }).data
    expect(created.id).toMatch(UUID_V4)
    expect(created.createdAt).toMatch(TIMESTAMP)
    const guest = { object: 'guest', id: created.id, ...NEW_GUEST, createdAt: created.createdAt, updatedAt: created.createdAt }
    expectEnvelope(res, 201, guest)
    expect(res.headers.location).toBe(`/partner/v1/guests/${created.id}`)

    expectEnvelope(await call('GET', `/partner/v1/guests/${created.id}?with=messages,reservations`), 200, { ...guest, messages: [], reservations: [] })
    expectEnvelope(await call('GET', '/partner/v1/guests?page=2&perPage=36'), 200, [guest], { page: 2, perPage: 36, total: ACME.length + 1 })
    expectProblem(await call('GET', `/partner/v1/guests/${created.id}`, { brand: 'globex' }), 'GUEST_NOT_FOUND',
      `No guest with id '${created.id}' exists for this brand.`, `/partner/v1/guests/${created.id}`)
  })

  it('defaults the phone to null', async () => {
    const { phone: _phone, ...withoutPhone } = NEW_GUEST
    const res = await call('POST', '/partner/v1/guests', { body: JSON.stringify(withoutPhone) })
    expect(res.statusCode).toBe(201)
    expect((JSON.parse(res.body) as { data: Guest }).data.phone).toBeNull()
  })

  it('answers 422 with one error per bad field', async () => {
    const body = JSON.stringify({ firstName: 42, email: 'not-an-email', phone: ['x'], vip: true, lastname: 'Doe' })
    expectProblem(await call('POST', '/partner/v1/guests', { body }), 'VALIDATION_FAILED', VALIDATION, '/partner/v1/guests', [
      { field: 'firstName', code: 'INVALID_FORMAT', detail: 'firstName must be a string of 1 to 100 characters.' },
      { field: 'lastName', code: 'REQUIRED', detail: 'lastName is required.' },
      { field: 'email', code: 'INVALID_FORMAT', detail: 'email must be an email address such as jane@example.com.' },
      { field: 'phone', code: 'INVALID_FORMAT', detail: 'phone must be null or 3 to 32 digits, spaces and + ( ) . - characters.' },
      { field: 'vip', code: 'NOT_ALLOWED', detail: 'Unknown field; allowed: firstName, lastName, email, phone.' },
      { field: 'lastname', code: 'NOT_ALLOWED', detail: 'Unknown field; allowed: firstName, lastName, email, phone.' },
    ])
    expectProblem(await call('POST', '/partner/v1/guests', { body: '[1]' }), 'VALIDATION_FAILED', VALIDATION, '/partner/v1/guests', [
      { field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' },
    ])
    expectEnvelope(await call('GET', '/partner/v1/guests'), 200, ACME.slice(0, 20), { page: 1, perPage: 20, total: ACME.length })
  })

  it('answers 400 MALFORMED_JSON to a body that is not JSON', async () => {
    for (const body of ['{"firstName": "A",', '', 'firstName=A']) {
      expectProblem(await call('POST', '/partner/v1/guests', { body }), 'MALFORMED_JSON', 'The request body is not valid JSON.', '/partner/v1/guests')
    }
  })

  it('answers 413 to a body over 2 MiB and keeps serving', async () => {
    const body = Buffer.alloc(BODY_LIMIT + 1, 'a')
    expectProblem(await call('POST', '/partner/v1/guests', { body }), 'PAYLOAD_TOO_LARGE', `The request body exceeds ${BODY_LIMIT} bytes.`, '/partner/v1/guests')
    expect(service.received.map((r) => r.body)).toEqual([null])
    expectEnvelope(await call('GET', '/partner/v1/guests?perPage=1'), 200, ACME.slice(0, 1), { page: 1, perPage: 1, total: ACME.length })
  })
})

describe('GET /partner/v1/guests/{guestId}', () => {
  const guest = ACME.find((g) => messagesOf(g).length > 0 && reservationsOf(g, 'acme').length > 0) as Guest
  const lonely = ACME.find((g) => messagesOf(g).length === 0 && reservationsOf(g, 'acme').length === 0) as Guest

  it('answers the guest without relations unless asked', async () => {
    expectEnvelope(await call('GET', `/partner/v1/guests/${guest.id}`), 200, guest)
  })

  it('adds the relations asked for', async () => {
    const messages = messagesOf(guest)
    const reservations = reservationsOf(guest, 'acme')
    expectEnvelope(await call('GET', `/partner/v1/guests/${guest.id}?with=reservations,messages`), 200, { ...guest, messages, reservations })
    expectEnvelope(await call('GET', `/partner/v1/guests/${guest.id}?with=reservations`), 200, { ...guest, reservations })
    expectEnvelope(await call('GET', `/partner/v1/guests/${lonely.id}?with=messages,reservations`), 200, { ...lonely, messages: [], reservations: [] })
    const acmeHotels = new Set(generateHotels(1).filter((h) => h.chain_code === 'ACME').map((h) => h.hotel_uuid))
    for (const reservation of reservations) expect(acmeHotels.has(reservation.propertyId)).toBe(true)
  })

  it('answers 404 for an unknown guest or one of another brand', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000'
    expectProblem(await call('GET', `/partner/v1/guests/${unknown}`), 'GUEST_NOT_FOUND', `No guest with id '${unknown}' exists for this brand.`, `/partner/v1/guests/${unknown}`)
    const other = (GLOBEX[0] as Guest).id
    expectProblem(await call('GET', `/partner/v1/guests/${other}`), 'GUEST_NOT_FOUND', `No guest with id '${other}' exists for this brand.`, `/partner/v1/guests/${other}`)
    expectProblem(await call('GET', '/partner/v1/guests/%E0%A4%A'), 'GUEST_NOT_FOUND', "No guest with id '%E0%A4%A' exists for this brand.", '/partner/v1/guests/%E0%A4%A')
  })

  it('refuses an unknown relation', async () => {
    expectProblem(await call('GET', `/partner/v1/guests/${guest.id}?with=messages,bills`), 'INVALID_QUERY_PARAMETER', 'Invalid query parameter.', `/partner/v1/guests/${guest.id}`, [
      { field: 'with', code: 'INVALID_ENUM_VALUE', detail: 'with takes a comma-separated list of messages, reservations.' },
    ])
  })
})

describe('PATCH /partner/v1/guests/{guestId}', () => {
  const guest = ACME[3] as Guest
  const path = `/partner/v1/guests/${guest.id}`

  it('merges the fields given; null clears the phone', async () => {
    const res = await call('PATCH', path, { body: JSON.stringify({ lastName: 'Núñez', phone: null }) })
    const updatedAt = (JSON.parse(res.body) as { data: Guest }).data.updatedAt
    expect(updatedAt).toMatch(TIMESTAMP)
    expect(updatedAt > guest.updatedAt).toBe(true)
    const changed = { ...guest, lastName: 'Núñez', phone: null, updatedAt }
    expectEnvelope(res, 200, changed)
    expectEnvelope(await call('GET', path), 200, changed)
    expectEnvelope(await call('PATCH', path, { body: '{}' }), 200, changed)
  })

  it('answers 422 and changes nothing on a bad field', async () => {
    const body = JSON.stringify({ firstName: null, email: 'a@b', id: 'x' })
    expectProblem(await call('PATCH', path, { body }), 'VALIDATION_FAILED', VALIDATION, path, [
      { field: 'firstName', code: 'REQUIRED', detail: 'firstName is required.' },
      { field: 'email', code: 'INVALID_FORMAT', detail: 'email must be an email address such as jane@example.com.' },
      { field: 'id', code: 'NOT_ALLOWED', detail: 'Unknown field; allowed: firstName, lastName, email, phone.' },
    ])
    expectProblem(await call('PATCH', path, { body: 'nope' }), 'MALFORMED_JSON', 'The request body is not valid JSON.', path)
    expectEnvelope(await call('GET', path), 200, guest)
  })

  it('answers 404 for a guest of another brand', async () => {
    expectProblem(await call('PATCH', path, { brand: 'globex', body: '{}' }), 'GUEST_NOT_FOUND', `No guest with id '${guest.id}' exists for this brand.`, path)
  })
})

describe('GET /partner/v1/properties/{propertyId}/rooms', () => {
  const rooms = roomsOf(HOTEL) ?? []
  const path = `/partner/v1/properties/${HOTEL}/rooms`

  it('lists the rooms of the property', async () => {
    expectEnvelope(await call('GET', path, { headers: PROPERTY_HEADERS, brand: null }), 200, rooms.slice(0, 20), { page: 1, perPage: 20, total: rooms.length })
    expectEnvelope(await call('GET', `${path}?page=2&perPage=3`, { headers: PROPERTY_HEADERS }), 200, rooms.slice(3, 6), { page: 2, perPage: 3, total: rooms.length })
  })

  it('filters by status', async () => {
    for (const status of ['clean', 'dirty', 'out-of-order'] as const) {
      const matching = rooms.filter((r) => r.status === status)
      expectEnvelope(await call('GET', `${path}?status=${status}&perPage=100`, { headers: PROPERTY_HEADERS }), 200, matching, { page: 1, perPage: 100, total: matching.length })
    }
  })

  it('answers 400 when X-Service-Property-Id is missing or names another property', async () => {
    expectProblem(await call('GET', path), 'MISSING_REQUIRED_HEADER', 'The X-Service-Property-Id header is missing.', path, [
      { field: 'X-Service-Property-Id', code: 'REQUIRED', detail: 'The caller must name the property of the path.' },
    ])
    expectProblem(await call('GET', path, { headers: { 'x-service-property-id': HOTELS[1] as string } }), 'INVALID_HEADER', 'The X-Service-Property-Id header does not match the path.', path, [
      { field: 'X-Service-Property-Id', code: 'INVALID_FORMAT', detail: 'It must equal the property id of the path.' },
    ])
  })

  it('answers 404 PROPERTY_NOT_FOUND for a property the PMS does not know', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000'
    const unknownPath = `/partner/v1/properties/${unknown}/rooms`
    expectProblem(await call('GET', unknownPath, { headers: { 'x-service-property-id': unknown } }), 'PROPERTY_NOT_FOUND', `No property with id '${unknown}' exists.`, unknownPath)
  })

  it('answers an unknown path 404', async () => {
    expectProblem(await call('GET', `${path}/extra`, { headers: PROPERTY_HEADERS }), 'ROUTE_NOT_FOUND', `No endpoint at ${path}/extra.`, `${path}/extra`)
  })
})

describe('token', () => {
  it('answers 401 application/json to a missing or wrong token', async () => {
    for (const headers of [{ 'x-service-token': '' }, { 'x-service-token': 'wrong' }]) {
      const res = await call('GET', '/partner/v1/guests', { headers })
      expect(res.statusCode).toBe(401)
      expect(res.headers['content-type']).toBe('application/json')
      expectLeakyHeaders(res)
      expect(res.body).toBe('{"error":"unauthenticated"}')
    }
  })

  it('reads the token from the configured header', async () => {
    const other = await new MockService({ token: TOKEN, tokenHeader: 'X-Bookings-Token' }).listen()
    try {
      expect((await call('GET', '/partner/v1/guests', { target: other })).statusCode).toBe(401)
      const res = await call('GET', '/partner/v1/guests?perPage=1', { target: other, headers: { 'x-bookings-token': TOKEN } })
      expectEnvelope(res, 200, ACME.slice(0, 1), { page: 1, perPage: 1, total: ACME.length })
    } finally {
      await other.close()
    }
  })
})

describe('request log', () => {
  it('records method, path with query, headers and body, readable and clearable over HTTP', async () => {
    const body = JSON.stringify(NEW_GUEST)
    await call('POST', '/partner/v1/guests?dryRun=1', { body, headers: { 'X-Service-Mode': 'live' } })
    await call('GET', '/partner/v1/guests')
    const log = await control('GET', '/__mock/requests')
    expect(log.statusCode).toBe(200)
    const entries = JSON.parse(log.body) as unknown[]
    expect(entries).toEqual([
      { method: 'POST', path: '/partner/v1/guests?dryRun=1', requestLine: 'POST /partner/v1/guests?dryRun=1 HTTP/1.1', rawHeaders: expect.arrayContaining([['X-Service-Mode', 'live']]), headers: expect.objectContaining({ 'x-service-token': TOKEN, 'x-service-mode': 'live', 'x-request-id': REQUEST_ID, 'content-type': 'application/json', 'x-service-brand': 'acme' }), body },
      { method: 'GET', path: '/partner/v1/guests', requestLine: 'GET /partner/v1/guests HTTP/1.1', rawHeaders: expect.arrayContaining([['x-service-brand', 'acme']]), headers: expect.objectContaining({ 'x-service-brand': 'acme' }), body: '' },
    ])
    expect(await control('DELETE', '/__mock/requests')).toMatchObject({ statusCode: 200, body: '[]' })
    expect((await control('GET', '/__mock/requests')).body).toBe('[]')
  })

  it('records the request line and the header lines exactly as they came, where Node would normalise them', async () => {
    const port = Number(new URL(service.url).port)
    const sent = `GET /partner/v1/./guests?perPage=1&x=%2541 HTTP/1.1\r\nHost: service\r\nX_Service_Brand: globex\r\nX-Service-Token: ${TOKEN}\r\n`
      + 'X-Dup: 1\r\nx-dup: 2\r\nX-Service-Brand: acme\r\nConnection: close\r\n\r\n'
    const answer = await rawExchange(port, [sent])
    expect(answer.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(service.received).toEqual([{
      method: 'GET',
      path: '/partner/v1/guests?perPage=1&x=%2541',
      requestLine: 'GET /partner/v1/./guests?perPage=1&x=%2541 HTTP/1.1',
      rawHeaders: [['Host', 'service'], ['X_Service_Brand', 'globex'], ['X-Service-Token', TOKEN], ['X-Dup', '1'], ['x-dup', '2'], ['X-Service-Brand', 'acme'], ['Connection', 'close']],
      headers: { host: 'service', x_service_brand: 'globex', 'x-service-token': TOKEN, 'x-dup': '1, 2', 'x-service-brand': 'acme', connection: 'close' },
      body: '',
    }])
  })

  it('keeps only the latest logLimit requests', async () => {
    const small = await new MockService({ token: TOKEN, logLimit: 2 }).listen()
    try {
      for (const page of [1, 2, 3]) await call('GET', `/partner/v1/guests?page=${page}`, { target: small })
      expect(small.received.map((r) => r.path)).toEqual(['/partner/v1/guests?page=2', '/partner/v1/guests?page=3'])
    } finally {
      await small.close()
    }
  })

  it('restores the seeded guests over HTTP', async () => {
    await call('POST', '/partner/v1/guests', { body: JSON.stringify(NEW_GUEST) })
    expect((await control('DELETE', '/__mock/guests')).statusCode).toBe(200)
    expectEnvelope(await call('GET', '/partner/v1/guests?perPage=1'), 200, ACME.slice(0, 1), { page: 1, perPage: 1, total: ACME.length })
  })
})

describe('failure switches', () => {
  const list = '/partner/v1/guests?perPage=2'
  const healthy = async (): Promise<void> => {
    expectEnvelope(await call('GET', list), 200, ACME.slice(0, 2), { page: 1, perPage: 2, total: ACME.length })
  }
  const fail = async (failure: Failure): Promise<void> => {
    const res = await control('PUT', '/__mock/failure', failure)
    expect(res.statusCode).toBe(200)
    expect(JSON.parse(res.body)).toEqual({ failure })
  }

  it('fails only the requests of one brand when given one, and counts only them', async () => {
    await fail({ mode: 'html-5xx', status: 502, times: 1, brand: 'globex' })
    await healthy()
    const failed = await call('GET', list, { brand: 'globex' })
    expect({ status: failed.statusCode, type: failed.headers['content-type'] }).toEqual({ status: 502, type: 'text/html' })
    expectEnvelope(await call('GET', list, { brand: 'globex' }), 200, GLOBEX.slice(0, 2), { page: 1, perPage: 2, total: GLOBEX.length })
  })

  it('latency: delays, then answers normally', async () => {
    await fail({ mode: 'latency', latencyMs: 2000, times: 1 })
    // The delay is the subject: the headers cannot come within 100 ms.
    const slow = await request(`${service.url}${list}`, { headers: { 'x-service-token': TOKEN, 'x-service-brand': 'acme' }, headersTimeout: 100 }).then(() => 'answered', (e: Error) => e.name)
    expect(slow).toBe('HeadersTimeoutError')
    await fail({ mode: 'latency', latencyMs: 20, times: 1 })
    await healthy()
  })

  it('html-5xx: the given status, text/html', async () => {
    for (const [status, expected] of [[undefined, 503], [502, 502], [504, 504]] as const) {
      service.setFailure({ mode: 'html-5xx', status, times: 1 })
      const res = await call('GET', list)
      expect(res.statusCode).toBe(expected)
      expect(res.headers['content-type']).toBe('text/html')
      expectLeakyHeaders(res)
      expect(res.body).toBe('<html><body><h1>503 Service Temporarily Unavailable</h1><hr>bookings-lb-eu-west-3</body></html>')
    }
    await healthy()
  })

  it('json-500: an internal error in JSON', async () => {
    await fail({ mode: 'json-500' })
    for (let i = 0; i < 2; i += 1) {
      const res = await call('GET', list)
      expect(res.statusCode).toBe(500)
      expect(res.headers['content-type']).toBe('application/json')
      expectLeakyHeaders(res)
      expect(JSON.parse(res.body)).toEqual({ error: 'internal', message: 'NullPointerException at com.bookings.guests.GuestService.find(GuestService.java:87)' })
    }
    expect(await control('DELETE', '/__mock/failure')).toMatchObject({ statusCode: 200, body: '{"failure":null}' })
    await healthy()
  })

  it('throttle: 429 with Retry-After', async () => {
    await fail({ mode: 'throttle', retryAfter: 7, times: 2 })
    for (let i = 0; i < 2; i += 1) {
      const res = await call('GET', list)
      expect(res.statusCode).toBe(429)
      expect(res.headers['retry-after']).toBe('7')
      expectLeakyHeaders(res)
      expect(JSON.parse(res.body)).toEqual({ error: 'throttled' })
    }
    await healthy()
  })

  it('reset: the socket is destroyed mid-response', async () => {
    await fail({ mode: 'reset', times: 1 })
    await expect(call('GET', list)).rejects.toThrow()
    await healthy()
  })

  it('drop: the socket is destroyed before any answer', async () => {
    await fail({ mode: 'drop', times: 1 })
    await expect(call('GET', list)).rejects.toThrow()
    await healthy()
  })

  it('non-json: 200 text/plain', async () => {
    await fail({ mode: 'non-json', times: 1 })
    const res = await call('GET', list)
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('text/plain')
    expectLeakyHeaders(res)
    expect(res.body).toBe('OK bookings service v3.2.7 build 4c1d2e')
    await healthy()
  })

  it('unauthorized: 401 whatever the token', async () => {
    await fail({ mode: 'unauthorized', times: 1 })
    const res = await call('GET', list)
    expect(res.statusCode).toBe(401)
    expect(res.headers['content-type']).toBe('application/json')
    expect(res.body).toBe('{"error":"unauthenticated"}')
    await healthy()
  })

  it('problem-4xx: a problem+json client error, 409 CONFLICT by default', async () => {
    await fail({ mode: 'problem-4xx', times: 1 })
    expectProblem(await call('PATCH', `/partner/v1/guests/${(ACME[0] as Guest).id}`, { body: '{}' }), 'CONFLICT',
      'The guest was changed by another request.', `/partner/v1/guests/${(ACME[0] as Guest).id}`)
    await fail({ mode: 'problem-4xx', status: 410, times: 1 })
    expectProblem(await call('GET', list), 'GONE', 'The guest was changed by another request.', '/partner/v1/guests')
    await healthy()
  })

  it('plain-4xx: 400 text/plain', async () => {
    await fail({ mode: 'plain-4xx', times: 1 })
    const res = await call('GET', list)
    expect(res.statusCode).toBe(400)
    expect(res.headers['content-type']).toBe('text/plain')
    expectLeakyHeaders(res)
    expect(res.body).toBe('Bad Request: rejected by bookings request filter')
    await healthy()
  })

  it('large: a streamed envelope of about the bytes asked, 5 MiB by default', async () => {
    const itemBytes = Math.max(...ACME.map((g) => Buffer.byteLength(JSON.stringify(g)) + 1))
    for (const [bytes, expected] of [[undefined, LARGE_DEFAULT_BYTES], [300_000, 300_000]] as const) {
      await fail({ mode: 'large', bytes, times: 1 })
      const res = await call('GET', list)
      expect(res.statusCode).toBe(200)
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(res.headers['transfer-encoding']).toBe('chunked')
      expect(res.headers['content-length']).toBeUndefined()
      expectLeakyHeaders(res)
      const size = Buffer.byteLength(res.body)
      expect(size).toBeGreaterThanOrEqual(expected)
      expect(size).toBeLessThan(expected + itemBytes)
      const parsed = JSON.parse(res.body) as { data: Guest[]; meta: unknown }
      expect(parsed.meta).toEqual({ requestId: REQUEST_ID, timestamp: expect.stringMatching(TIMESTAMP) })
      expect(parsed.data).toEqual(Array.from({ length: parsed.data.length }, (_, i) => ACME[i % ACME.length]))
    }
    await healthy()
  })

  it('no-content: 204 without a body', async () => {
    await fail({ mode: 'no-content', times: 1 })
    const res = await call('GET', list)
    expect(res.statusCode).toBe(204)
    expect(res.headers['content-type']).toBeUndefined()
    expectLeakyHeaders(res)
    expect(res.body).toBe('')
    await healthy()
  })

  it('stall: 200 and the first bytes, then nothing until the caller closes', async () => {
    await fail({ mode: 'stall', times: 1 })
    const res = await request(`${service.url}${list}`, { headers: { 'x-service-token': TOKEN, 'x-service-brand': 'acme' } })
    expect({ status: res.statusCode, type: res.headers['content-type'] }).toEqual({ status: 200, type: 'application/json; charset=utf-8' })
    const reader = res.body[Symbol.asyncIterator]()
    expect(((await reader.next()).value as Buffer).toString()).toBe('{"data":[')
    res.body.destroy()
    await healthy()
  })

  it('links: the first page with Link headers to itself, its own URL, another host and an internal path, and a Content-Language', async () => {
    await fail({ mode: 'links', times: 1 })
    const res = await call('GET', list)
    expectEnvelope(res, 200, ACME.slice(0, 2), { page: 1, perPage: 2, total: ACME.length })
    expect(res.headers['content-language']).toBe('en-GB')
    expect(res.headers.link).toBe(`</partner/v1/guests?page=2&perPage=2>; rel="next", <${service.url}/partner/v1/guests?page=1&perPage=2>; rel="first"; title="First, page", `
      + `<https://bookings.example/partner/v1/guests>; rel="alternate", </internal/admin>; rel="admin", </partner/v1/guests/${(ACME[0] as Guest).id}>; rel="item"; anchor="http://bookings.internal/x"`)
  })

  it('gzip: the first page, gzip-encoded', async () => {
    await fail({ mode: 'gzip', times: 1 })
    const res = await request(`${service.url}${list}`, { headers: { 'x-service-token': TOKEN, 'x-service-brand': 'acme', 'x-request-id': REQUEST_ID } })
    expect({ status: res.statusCode, encoding: res.headers['content-encoding'] }).toEqual({ status: 200, encoding: 'gzip' })
    expect(JSON.parse(gunzipSync(Buffer.from(await res.body.arrayBuffer())).toString())).toEqual({ data: ACME.slice(0, 2), meta: { requestId: REQUEST_ID, timestamp: expect.stringMatching(TIMESTAMP) } })
  })

  it('empty: the status and content type asked for, no body', async () => {
    await fail({ mode: 'empty', status: 202, contentType: 'text/html', times: 1 })
    const res = await call('GET', list)
    expect({ status: res.statusCode, type: res.headers['content-type'], length: res.headers['content-length'], body: res.body }).toEqual({ status: 202, type: 'text/html', length: '0', body: '' })
  })

  it('redirect: 302 to a guest', async () => {
    await fail({ mode: 'redirect', times: 1 })
    const res = await call('GET', list, { brand: 'globex' })
    expect(res.statusCode).toBe(302)
    expect(res.headers.location).toBe(`/partner/v1/guests/${(GLOBEX[0] as Guest).id}`)
    expectLeakyHeaders(res)
    expect(res.body).toBe('')
    await healthy()
  })

  it('redirect: 302 to the location asked for', async () => {
    await fail({ mode: 'redirect', location: 'http://bookings.internal/admin', times: 1 })
    const res = await call('GET', list)
    expect({ status: res.statusCode, location: res.headers.location }).toEqual({ status: 302, location: 'http://bookings.internal/admin' })
    await healthy()
  })

  it('refuses an unknown mode or a body that is not JSON, and keeps serving', async () => {
    expect(await control('PUT', '/__mock/failure', { mode: 'explode' })).toMatchObject({ statusCode: 400 })
    const res = await request(`${service.url}/__mock/failure`, { method: 'PUT', body: '{"mode":' })
    expect(res.statusCode).toBe(400)
    expect(JSON.parse(await res.body.text())).toEqual({ error: expect.stringMatching(/^mode must be one of latency, html-5xx/) })
    await healthy()
  })
})
