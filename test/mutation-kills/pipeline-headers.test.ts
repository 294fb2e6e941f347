import { describe, expect, it } from 'vitest'
import { roomsOf, type Guest } from '../../mocks/service/data.js'
import type { FieldError } from '../../src/contract/errors.js'
import { ACME_HOST } from '../helpers/config.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import type { Answer, CallOptions } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { parseResponses, rawExchange } from '../helpers/raw.js'

// Steps 1, 3 and 4 of the order of checks (docs/architecture.md, "Order of checks") as a
// partner sees them, and the order in which the steps answer:
// - step 1, the route: 414 for a request target over 8192 characters (and none at 8192), on a
//   known route as on an unknown path; a known path asked on a host of no brand is 404 for the
//   host, before its 405 or trailing-slash answer; a parameter segment left empty
//   (`/v1/properties/`, `/v1/guests/`) is the trailing-slash answer, on built-in and declared
//   routes alike;
// - step 3, the headers: `Service-Property-Id` required and checked on property-scoped routes,
//   refused on brand-wide ones; `Idempotency-Key` required where a declared route says so, read
//   on POST and PATCH only, bare or as an RFC 9651 string (the quoted and the bare form name
//   the same request), sent once; the detail names every missing header, in the plural when
//   there are several;
// - step 4, the scope: each method of a route needs its scope, HEAD the scope of GET.
// (docs/partners.md, "Safe retries of writes (`Idempotency-Key`)".)
//
// Each test builds its own gateway, stand-in service and PMS and closes them at its end: every
// route's stages are made from its policy while the gateway is built (its scope, its
// Idempotency-Key rule, whether its path has parameters, the scope of each method), and code
// run in a file-level beforeAll counts as static for the mutation run (stryker.config.mjs,
// ignoreStatic), so it would be tested against no test of this file. Over real sockets, with
// real Redis.

const UA = 'pipeline-headers-test/1.0'
const UNKNOWN_HOST = 'api.unknown.example'

/** A brand-wide declared route whose POST must carry an Idempotency-Key (served by the stand-in's guest list). */
const RESERVATIONS = {
  path: '/v1/reservations', methods: ['GET', 'POST'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests',
  query: { perPage: { type: 'integer', min: 1, max: 100 } }, body: { maxBytes: 65536 }, idempotency: 'required',
}
/** A property-scoped declared route whose POST must carry an Idempotency-Key. */
const STAYS = {
  path: '/v1/stays', methods: ['POST'], scope: 'property', upstream: 'bookings', upstreamPath: '/partner/v1/guests',
  body: { maxBytes: 65536 }, idempotency: 'required',
}

const PROPERTY_REQUIRED: FieldError = { field: 'Service-Property-Id', code: 'REQUIRED', detail: 'Send the id of the property this request is about, as listed by GET /v1/properties.' }
const PROPERTY_INVALID: FieldError = { field: 'Service-Property-Id', code: 'INVALID_FORMAT', detail: 'Must be a property id (a UUID) as listed by GET /v1/properties.' }
const KEY_INVALID: FieldError = { field: 'Idempotency-Key', code: 'INVALID_FORMAT', detail: 'Send it once: 1 to 255 visible ASCII characters other than " and \\, bare or in double quotes.' }

function call(s: Setup, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  return s.t.call(method, path, { key: s.key, userAgent: UA, ...options })
}

let counter = 0
/** A guest no other request of this file creates. */
function newGuest(): { email: string; body: string } {
  counter += 1
  const email = `ann.lee.${process.pid}.${counter}@example.com`
  return { email, body: JSON.stringify({ firstName: 'Ann', lastName: 'Lee', email }) }
}

/** A POST of a new guest on `path`, with `idempotencyKey` if given. */
async function create(s: Setup, path: string, idempotencyKey: string | undefined, headers: Record<string, string> = {}): Promise<{ email: string; answer: Answer }> {
  const guest = newGuest()
  const answer = await call(s, 'POST', path, { body: guest.body, headers: { ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }), ...headers } })
  return { email: guest.email, answer }
}

/** Asserts that `answer` is the stand-in's 201 for the guest of `email`, and returns that guest. */
function expectCreated(s: Setup, answer: Answer, email: string): Guest {
  const guest = s.service.guestsOf('acme').find((g) => g.email === email) as Guest
  expect(guest).toBeDefined()
  expect({ status: answer.statusCode, location: answer.headers.location, body: JSON.parse(answer.body) as unknown }).toEqual({
    status: 201, location: `/v1/guests/${guest.id}`,
    body: { data: guest, meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP) } },
  })
  return guest
}

/** The id of a live property of the brand acme in the stand-in PMS. */
function acmeProperty(s: Setup): string {
  return String(s.t.pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)
}

describe('step 1: the route', () => {
  it('accepts a request target of exactly 8192 characters and answers one of 8193 with 414, on an unknown path and on a known route', async () => {
    const s = await startWithService()
    try {
      const longest = `/v1/${'x'.repeat(8188)}`
      expect(longest.length).toBe(8192)
      expectProblem(await call(s, 'GET', longest), {
        code: 'ROUTE_NOT_FOUND', instance: longest, detail: `There is no endpoint at /v1/${'x'.repeat(196)}….`,
      })
      const over = `/v1/${'x'.repeat(8189)}`
      expectProblem(await call(s, 'GET', over), {
        code: 'URI_TOO_LONG', instance: over, detail: 'The request target is 8193 characters long; at most 8192 are accepted.',
      })
      // On a known route the length is checked first of all, before the key.
      const query = `/v1/guests?email=${'a'.repeat(8193 - 17)}`
      expect(query.length).toBe(8193)
      expectProblem(await call(s, 'GET', query, { key: undefined }), {
        code: 'URI_TOO_LONG', instance: '/v1/guests', detail: 'The request target is 8193 characters long; at most 8192 are accepted.',
      })
    } finally {
      await s.close()
    }
  })

  it('answers a known path on a host of no brand with 404 for the host, before its 405 or trailing-slash answer', async () => {
    const s = await startWithService()
    try {
      const host = { host: UNKNOWN_HOST }
      const notServed = `No API is served at host '${UNKNOWN_HOST}'.`
      expectProblem(await call(s, 'POST', '/v1/properties', { ...host, body: '{}' }), { code: 'ROUTE_NOT_FOUND', instance: '/v1/properties', detail: notServed })
      expectProblem(await call(s, 'DELETE', '/v1/guests', host), { code: 'ROUTE_NOT_FOUND', instance: '/v1/guests', detail: notServed })
      expectProblem(await call(s, 'GET', '/v1/guests/', host), { code: 'ROUTE_NOT_FOUND', instance: '/v1/guests/', detail: notServed })
      expectProblem(await call(s, 'GET', '/v1/Rooms', host), { code: 'ROUTE_NOT_FOUND', instance: '/v1/Rooms', detail: notServed })
      // Health is served on every host: its wrong method is 405 there too.
      expectProblem(await call(s, 'POST', '/v1/health', { ...host, key: undefined, body: '{}' }), {
        code: 'METHOD_NOT_ALLOWED', instance: '/v1/health', detail: '/v1/health does not support POST; it supports GET, HEAD.', headers: { allow: 'GET, HEAD' },
      })
      // On the brand's host, the same requests get the route's own answers.
      expectProblem(await call(s, 'POST', '/v1/properties', { body: '{}' }), {
        code: 'METHOD_NOT_ALLOWED', instance: '/v1/properties', detail: '/v1/properties does not support POST; it supports GET, HEAD.', headers: { allow: 'GET, HEAD' },
      })
      expectProblem(await call(s, 'DELETE', '/v1/guests'), {
        code: 'METHOD_NOT_ALLOWED', instance: '/v1/guests', detail: '/v1/guests does not support DELETE; it supports GET, HEAD, POST.', headers: { allow: 'GET, HEAD, POST' },
      })
      expectProblem(await call(s, 'GET', '/v1/Rooms'), { code: 'PATH_CASE_MISMATCH', instance: '/v1/Rooms', detail: 'Paths are case-sensitive: request /v1/rooms.' })
    } finally {
      await s.close()
    }
  })

  it('answers an empty parameter segment as a trailing slash, on a built-in and on a declared route, before the key is checked', async () => {
    const s = await startWithService()
    try {
      for (const key of [s.key, undefined]) {
        expectProblem(await call(s, 'GET', '/v1/properties/', { key }), {
          code: 'TRAILING_SLASH_NOT_ALLOWED', instance: '/v1/properties/', detail: 'Remove the trailing slash: request /v1/properties.',
        })
        expectProblem(await call(s, 'GET', '/v1/guests/', { key }), {
          code: 'TRAILING_SLASH_NOT_ALLOWED', instance: '/v1/guests/', detail: 'Remove the trailing slash: request /v1/guests.',
        })
      }
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })
})

describe('step 3: Service-Property-Id', () => {
  it('requires a property id on a property-scoped route, checks its format, and forwards a valid one', async () => {
    const s = await startWithService()
    try {
      expectProblem(await call(s, 'GET', '/v1/rooms'), {
        code: 'MISSING_REQUIRED_HEADER', instance: '/v1/rooms', detail: 'The Service-Property-Id header is required.', errors: [PROPERTY_REQUIRED],
      })
      for (const bad of ['not-a-uuid', '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a1', `${acmeProperty(s)}x`]) {
        expectProblem(await call(s, 'GET', '/v1/rooms', { headers: { 'service-property-id': bad } }), {
          code: 'INVALID_HEADER', instance: '/v1/rooms', detail: 'Invalid Service-Property-Id header.', errors: [PROPERTY_INVALID],
        })
      }
      expect(s.service.received).toEqual([])

      const propertyId = acmeProperty(s)
      const res = await call(s, 'GET', '/v1/rooms', { headers: { 'service-property-id': propertyId.toUpperCase() } })
      const rooms = roomsOf(propertyId, 1) ?? []
      expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown }).toEqual({
        status: 200,
        body: { data: rooms.slice(0, 20), meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 20, total: rooms.length } } },
      })
      expect(s.service.received.map((r) => [r.path, r.headers['x-service-property-id']])).toEqual([[`/partner/v1/properties/${propertyId}/rooms`, propertyId]])
    } finally {
      await s.close()
    }
  })

  it('refuses a property id on a brand-wide route', async () => {
    const s = await startWithService()
    try {
      expectProblem(await call(s, 'GET', '/v1/guests', { headers: { 'service-property-id': acmeProperty(s) } }), {
        code: 'HEADER_NOT_ALLOWED', instance: '/v1/guests', detail: 'This endpoint takes no Service-Property-Id header.',
        errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
      })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('answers a property-scoped route\'s checks in their order: Accept, then the property id, then the key', async () => {
    const s = await startWithService()
    try {
      expectProblem(await call(s, 'GET', '/v1/rooms', { key: undefined, headers: { accept: 'text/html' } }), { code: 'NOT_ACCEPTABLE', instance: '/v1/rooms' })
      expectProblem(await call(s, 'GET', '/v1/rooms', { key: undefined }), {
        code: 'MISSING_REQUIRED_HEADER', instance: '/v1/rooms', detail: 'The Service-Property-Id header is required.', errors: [PROPERTY_REQUIRED],
      })
      expectProblem(await call(s, 'GET', '/v1/rooms', { key: undefined, headers: { 'service-property-id': 'not-a-uuid' } }), {
        code: 'INVALID_HEADER', instance: '/v1/rooms', detail: 'Invalid Service-Property-Id header.', errors: [PROPERTY_INVALID],
      })
      expectProblem(await call(s, 'GET', '/v1/rooms', { key: undefined, headers: { 'service-property-id': acmeProperty(s) } }), {
        code: 'MISSING_AUTH_HEADER', instance: '/v1/rooms', headers: { 'www-authenticate': 'Bearer' },
      })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })
})

describe('step 3: Idempotency-Key', () => {
  it('requires a key on a route that says so, and forwards a request that has one', async () => {
    const s = await startWithService({ routes: [RESERVATIONS] })
    try {
      const missing = await create(s, '/v1/reservations', undefined)
      expectProblem(missing.answer, {
        code: 'MISSING_REQUIRED_HEADER', instance: '/v1/reservations', detail: 'The Idempotency-Key header is required.',
        errors: [{ field: 'Idempotency-Key', code: 'REQUIRED', detail: 'POST on this endpoint needs a key that names this request, e.g. a UUID you keep until you have its answer.' }],
      })
      expect(s.service.received).toEqual([])

      const idempotencyKey = `reservation-${process.pid}-1`
      const sent = await create(s, '/v1/reservations', idempotencyKey)
      expectCreated(s, sent.answer, sent.email)
      expect(s.service.received.map((r) => [r.method, r.path, r.headers['idempotency-key']])).toEqual([['POST', '/partner/v1/guests', idempotencyKey]])
      // The rule is about POST and PATCH: a GET of the same route needs no key.
      const read = await call(s, 'GET', '/v1/reservations?perPage=1')
      expect(read.statusCode).toBe(200)
    } finally {
      await s.close()
    }
  })

  it('names every missing header in one answer, in the plural, in the order of the checks', async () => {
    const s = await startWithService({ routes: [STAYS] })
    try {
      const answer = await call(s, 'POST', '/v1/stays', { body: newGuest().body })
      expectProblem(answer, {
        code: 'MISSING_REQUIRED_HEADER', instance: '/v1/stays', detail: 'The Service-Property-Id and Idempotency-Key headers are required.',
        errors: [
          PROPERTY_REQUIRED,
          { field: 'Idempotency-Key', code: 'REQUIRED', detail: 'POST on this endpoint needs a key that names this request, e.g. a UUID you keep until you have its answer.' },
        ],
      })
      // With both, the header step lets the request through: a bad property id is now the answer.
      expectProblem(await call(s, 'POST', '/v1/stays', { body: newGuest().body, headers: { 'service-property-id': 'nope', 'idempotency-key': 'a b' } }), {
        code: 'INVALID_HEADER', instance: '/v1/stays', detail: 'Invalid Service-Property-Id and Idempotency-Key header.', errors: [PROPERTY_INVALID, KEY_INVALID],
      })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('takes a key bare or in double quotes, the two forms naming the same request, and a key of one character', async () => {
    const s = await startWithService()
    try {
      const bare = `quoted-${process.pid}`
      const first = await create(s, '/v1/guests', `"${bare}"`)
      const guest = expectCreated(s, first.answer, first.email)
      // The service receives the key itself, unquoted: what it deduplicates on is the same for both forms.
      expect(s.service.received.map((r) => r.headers['idempotency-key'])).toEqual([bare])

      // The same request with the bare key is a retry of the first: its answer is replayed.
      const retry = await call(s, 'POST', '/v1/guests', { body: JSON.stringify({ firstName: 'Ann', lastName: 'Lee', email: first.email }), headers: { 'idempotency-key': bare } })
      expect({ status: retry.statusCode, replayed: retry.headers['idempotent-replayed'], location: retry.headers.location, body: retry.body })
        .toEqual({ status: 201, replayed: 'true', location: `/v1/guests/${guest.id}`, body: first.answer.body })
      expect(s.service.received).toHaveLength(1)

      const single = await create(s, '/v1/guests', 'a')
      expectCreated(s, single.answer, single.email)
      expect(s.service.received.map((r) => r.headers['idempotency-key'])).toEqual([bare, 'a'])
    } finally {
      await s.close()
    }
  })

  it('refuses a key with a stray or lone double quote, an empty quoted key, or a space, and forwards none of them', async () => {
    const s = await startWithService()
    try {
      for (const bad of ['abc"', '"abc', '"', '""', 'a b', '"a\\b"']) {
        const { answer } = await create(s, '/v1/guests', bad)
        expectProblem(answer, { code: 'INVALID_HEADER', instance: '/v1/guests', detail: 'Invalid Idempotency-Key header.', errors: [KEY_INVALID] })
      }
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('counts only Idempotency-Key lines: a header of another name and the same length does not make the key a repeat', async () => {
    const s = await startWithService()
    try {
      // accept-language and x-request-label are 15 characters long, as idempotency-key is.
      const idempotencyKey = `counted-${process.pid}`
      const { email, answer } = await create(s, '/v1/guests', idempotencyKey, { 'accept-language': 'en', 'x-request-label': 'sync' })
      expectCreated(s, answer, email)
      expect(s.service.received.map((r) => r.headers['idempotency-key'])).toEqual([idempotencyKey])
    } finally {
      await s.close()
    }
  })

  it('refuses a key sent on two lines', async () => {
    const s = await startWithService()
    try {
      const port = Number(new URL(s.t.url).port)
      const body = newGuest().body
      const head = [
        'POST /v1/guests HTTP/1.1', `Host: ${ACME_HOST}`, `User-Agent: ${UA}`, `Authorization: Bearer ${s.key}`, 'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(body)}`, 'Idempotency-Key: first', 'Idempotency-Key: second', 'Connection: close',
      ].join('\r\n')
      const [answer] = parseResponses((await rawExchange(port, [`${head}\r\n\r\n${body}`])).text)
      expectProblem(answer as Answer, { code: 'INVALID_HEADER', instance: '/v1/guests', detail: 'Invalid Idempotency-Key header.', errors: [KEY_INVALID] })
      expect(s.service.received).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('ignores the header on GET, however it is written', async () => {
    const s = await startWithService({ routes: [RESERVATIONS] })
    try {
      for (const path of ['/v1/guests?perPage=1', '/v1/reservations?perPage=1']) {
        const res = await call(s, 'GET', path, { headers: { 'idempotency-key': 'not a key "' } })
        const guests = s.service.guestsOf('acme')
        expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown }).toEqual({
          status: 200,
          body: { data: guests.slice(0, 1), meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 1, total: guests.length } } },
        })
      }
      expect(s.service.received.map((r) => [r.method, r.path])).toEqual([['GET', '/partner/v1/guests?perPage=1'], ['GET', '/partner/v1/guests?perPage=1']])
    } finally {
      await s.close()
    }
  })
})

describe('step 4: the scope of each method', () => {
  it('needs the scope of GET for GET and HEAD, and the scope of POST for POST', async () => {
    const s = await startWithService()
    try {
      const writer = await s.t.key({ scopes: ['guests:write'] })
      const challenge = 'Bearer error="insufficient_scope", scope="guests:read"'
      expectProblem(await call(s, 'GET', '/v1/guests', { key: writer }), {
        code: 'INSUFFICIENT_SCOPE', instance: '/v1/guests', detail: "This API key lacks the scope 'guests:read' that this request needs.", headers: { 'www-authenticate': challenge },
      })
      const head = await call(s, 'HEAD', '/v1/guests', { key: writer })
      expect({ status: head.statusCode, challenge: head.headers['www-authenticate'], type: head.headers['content-type'], body: head.body })
        .toEqual({ status: 403, challenge, type: 'application/problem+json; charset=utf-8', body: '' })
      expect(s.service.received).toEqual([])

      const written = newGuest()
      expectCreated(s, await call(s, 'POST', '/v1/guests', { key: writer, body: written.body }), written.email)

      const reader = await s.t.key({ scopes: ['guests:read'] })
      const read = await call(s, 'HEAD', '/v1/guests?perPage=1', { key: reader })
      expect({ status: read.statusCode, body: read.body }).toEqual({ status: 200, body: '' })
      expectProblem(await call(s, 'POST', '/v1/guests', { key: reader, body: newGuest().body }), {
        code: 'INSUFFICIENT_SCOPE', instance: '/v1/guests', detail: "This API key lacks the scope 'guests:write' that this request needs.",
        headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="guests:write"' },
      })
      expect(s.service.received.map((r) => [r.method, r.path])).toEqual([['POST', '/partner/v1/guests'], ['HEAD', '/partner/v1/guests?perPage=1']])
    } finally {
      await s.close()
    }
  })
})
