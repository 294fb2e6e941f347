import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GLOBEX_HOST } from '../helpers/config.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import { expectProblem, REQUEST_ID } from '../helpers/problem.js'

// Deprecated, retired and moved routes over a real socket (docs/partners.md, "What may
// change"): the three headers on every answer after step 1, the 410 and the 308 before any
// credential is asked for.

const GUIDE = 'https://docs.example.com/migrate/properties-v2'
const PAST = '2026-01-01T00:00:00Z'
const FAR = '2099-01-01T00:00:00Z'
const deprecationHeaders = { deprecation: '@1767225600', sunset: 'Thu, 01 Jan 2099 00:00:00 GMT', link: `<${GUIDE}>; rel="deprecation"; type="text/html"` }
const RETIRED = { since: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z' }
const retiredHeaders = { deprecation: '@1577836800', sunset: 'Fri, 01 Jan 2021 00:00:00 GMT' }

let s: Setup
let propertyId: string

beforeAll(async () => {
  s = await startWithService({
    config: {
      builtinRoutes: {
        '/v1/properties': { deprecated: { since: PAST, sunset: FAR, link: GUIDE } },
        '/v1/events/{eventId}': { deprecated: { ...RETIRED, link: GUIDE }, replacement: '/v1/events' },
        // Announced for later: nothing shows yet.
        '/v1/credential': { deprecated: { since: '2098-01-01T00:00:00Z' } },
      },
      moved: [
        { from: '/v1/hotels', to: '/v1/properties' },
        { from: '/v1/hotels/{hotelId}', to: '/v1/properties/{hotelId}' },
        { from: '/v1/customers', to: '/v1/guests' },
      ],
    },
    routes: [
      { path: '/v1/guest-list', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', deprecated: { since: PAST, sunset: FAR, link: GUIDE }, replacement: '/v1/guests' },
      { path: '/v1/old-guests', methods: ['GET', 'POST'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', deprecated: RETIRED },
    ],
  })
  propertyId = String(s.t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
})
afterAll(async () => s.close())

function pick(headers: Record<string, unknown>, names: string[]): Record<string, unknown> {
  return Object.fromEntries(names.map((name) => [name, headers[name]]))
}
const LIFECYCLE = ['deprecation', 'sunset', 'link']

describe('a deprecated route', () => {
  it('answers as before, with the three headers', async () => {
    const res = await s.t.get('/v1/properties?perPage=2', s.key)
    expect(res.statusCode).toBe(200)
    expect(pick(res.headers, LIFECYCLE)).toEqual(deprecationHeaders)
    const plain = await s.t.get('/v1/properties/' + propertyId, s.key)
    expect({ status: plain.statusCode, ...pick(plain.headers, LIFECYCLE) }).toEqual({ status: 200, deprecation: undefined, sunset: undefined, link: undefined })
    const body = JSON.parse(res.body) as { data: { id: string }[]; meta: { pagination: { total: number } } }
    const acme = s.t.pms.hotels.filter((h) => h.chain_code === 'ACME').map((h) => String(h.hotel_uuid))
    expect(body.data.map((p) => acme.includes(p.id))).toEqual([true, true])
    expect(body.meta.pagination).toEqual({ page: 1, perPage: 2, total: expect.any(Number) })
    expect(body.meta.pagination.total).toBeGreaterThan(2)
  })

  it.each([
    ['no credential', '/v1/properties', undefined, {}, 'MISSING_AUTH_HEADER', []],
    ['a bad query', '/v1/properties?perPage=0', 'key', {}, 'INVALID_QUERY_PARAMETER', [{ field: 'perPage', code: 'OUT_OF_RANGE', detail: 'Must be between 1 and 100.' }]],
    ['an Accept without JSON', '/v1/properties', 'key', { accept: 'text/html' }, 'NOT_ACCEPTABLE', []],
    ['a Service-Property-Id', '/v1/properties', 'key', { 'service-property-id': '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10' }, 'HEADER_NOT_ALLOWED',
      [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }]],
  ] as const)('carries them on a refusal after step 1: %s', async (_name, path, key, headers, code, errors) => {
    const res = await s.t.get(path, key === undefined ? undefined : s.key, headers)
    expectProblem(res, { code, instance: '/v1/properties', headers: deprecationHeaders, errors: [...errors] })
  })

  it('does not carry them on the refusals of step 1', async () => {
    for (const [path, code, method] of [['/v1/properties/', 'TRAILING_SLASH_NOT_ALLOWED', 'GET'], ['/v1/Properties', 'PATH_CASE_MISMATCH', 'GET'], ['/v1/properties', 'METHOD_NOT_ALLOWED', 'POST']] as const) {
      const res = await s.t.call(method, path, { key: s.key })
      expectProblem(res, { code, instance: path })
      expect(pick(res.headers, LIFECYCLE)).toEqual({ deprecation: undefined, sunset: undefined, link: undefined })
    }
    const otherHost = await s.t.call('GET', '/v1/properties', { key: s.key, host: 'unknown.example' })
    expectProblem(otherHost, { code: 'ROUTE_NOT_FOUND', instance: '/v1/properties' })
    expect(otherHost.headers.deprecation).toBeUndefined()
  })

  it('carries them on a declared route, the service\'s answer passed on', async () => {
    const [old, current] = [await s.t.get('/v1/guest-list', s.key), await s.t.get('/v1/guests', s.key)]
    expect({ status: old.statusCode, ...pick(old.headers, LIFECYCLE) }).toEqual({ status: 200, ...deprecationHeaders })
    expect((JSON.parse(old.body) as { data: unknown }).data).toEqual((JSON.parse(current.body) as { data: unknown }).data)
    expect(current.headers.deprecation).toBeUndefined()
  })

  it('shows nothing before its since', async () => {
    const res = await s.t.get('/v1/credential', s.key)
    expect({ status: res.statusCode, ...pick(res.headers, LIFECYCLE) }).toEqual({ status: 200, deprecation: undefined, sunset: undefined, link: undefined })
  })

  it('is counted per route', async () => {
    const before = await counted()
    await s.t.get('/v1/properties', undefined)
    await s.t.get('/v1/guest-list', s.key)
    await s.t.get('/v1/events/evt_01JD0000000000000000000000', undefined)
    await s.t.get('/v1/credential', s.key)
    const after = await counted()
    expect({
      properties: after['/v1/properties'] - before['/v1/properties'],
      guests: after['/v1/guest-list'] - before['/v1/guest-list'],
      event: after['/v1/events/{eventId}'] - before['/v1/events/{eventId}'],
      credential: after['/v1/credential'],
    }).toEqual({ properties: 1, guests: 1, event: 1, credential: 0 })
  })
})

type Counts = Record<'/v1/properties' | '/v1/guest-list' | '/v1/events/{eventId}' | '/v1/credential', number>

async function counted(): Promise<Counts> {
  const text = await s.t.gateway.metrics.registry.getSingleMetricAsString('gateway_deprecated_requests_total')
  const values: Counts = { '/v1/properties': 0, '/v1/guest-list': 0, '/v1/events/{eventId}': 0, '/v1/credential': 0 }
  for (const line of text.split('\n')) {
    const match = /^gateway_deprecated_requests_total\{route="([^"]+)"\} (\d+)$/.exec(line)
    if (match !== null) values[match[1] as keyof Counts] = Number(match[2])
  }
  return values
}

describe('a retired route', () => {
  it('answers 410 before authentication, naming the replacement, with the link', async () => {
    const res = await s.t.get('/v1/events/evt_01JD0000000000000000000000', undefined)
    expectProblem(res, {
      code: 'ROUTE_RETIRED', instance: '/v1/events/evt_01JD0000000000000000000000',
      detail: '/v1/events/{eventId} was retired at 2021-01-01T00:00:00.000Z. Use /v1/events instead. The Link header leads to the migration guide.',
      headers: { ...retiredHeaders, link: `<${GUIDE}>; rel="deprecation"; type="text/html"` },
    })
  })

  it('answers 410 to every method and credential, the body never read, HEAD without a body', async () => {
    const post = await s.t.call('POST', '/v1/old-guests', { body: '{not json', headers: { 'content-type': 'text/plain' } })
    expectProblem(post, { code: 'ROUTE_RETIRED', instance: '/v1/old-guests', detail: '/v1/old-guests was retired at 2021-01-01T00:00:00.000Z.', headers: retiredHeaders })
    const get = await s.t.get('/v1/old-guests?unknown=1', s.key)
    expectProblem(get, { code: 'ROUTE_RETIRED', instance: '/v1/old-guests', headers: retiredHeaders })
    const head = await s.t.call('HEAD', '/v1/old-guests', {})
    expect({ status: head.statusCode, body: head.body, type: head.headers['content-type'], ...pick(head.headers, ['deprecation', 'sunset']) })
      .toEqual({ status: 410, body: '', type: 'application/problem+json; charset=utf-8', ...retiredHeaders })
    expect(s.service.received.filter((r) => r.path.startsWith('/partner/v1/guests') && r.method === 'POST')).toEqual([])
  })
})

describe('a moved path', () => {
  it('answers 308 before authentication, to the same parameters and query, with no body', async () => {
    const res = await s.t.call('GET', '/v1/hotels/AB%2Fc?with=x&y=%20', {})
    expect({ status: res.statusCode, location: res.headers.location, body: res.body, id: res.headers['service-request-id'], nosniff: res.headers['x-content-type-options'] })
      .toEqual({ status: 308, location: '/v1/properties/AB%2Fc?with=x&y=%20', body: '', id: expect.stringMatching(REQUEST_ID), nosniff: 'nosniff' })
  })

  it('answers every method, and a client that follows it gets the new route\'s answer', async () => {
    const post = await s.t.call('POST', '/v1/customers', { key: s.key, body: '{"firstName":"A"}' })
    expect({ status: post.statusCode, location: post.headers.location, body: post.body }).toEqual({ status: 308, location: '/v1/guests', body: '' })
    const moved = await s.t.get(`/v1/hotels/${propertyId}`, s.key)
    const followed = await s.t.get(moved.headers.location as string, s.key)
    expect({ status: followed.statusCode, id: (JSON.parse(followed.body) as { data: { id: string } }).data.id }).toEqual({ status: 200, id: propertyId })
  })

  it('is matched exactly, and only on a brand\'s host', async () => {
    for (const path of ['/v1/Hotels', '/v1/hotels/', '/v1/hotels/a/b']) {
      const res = await s.t.call('GET', path, { key: s.key })
      expectProblem(res, { code: 'ROUTE_NOT_FOUND', instance: path })
    }
    const res = await s.t.call('GET', '/v1/hotels', { host: 'unknown.example' })
    expectProblem(res, { code: 'ROUTE_NOT_FOUND', instance: '/v1/hotels' })
    const globex = await s.t.call('GET', '/v1/hotels', { host: GLOBEX_HOST })
    expect({ status: globex.statusCode, location: globex.headers.location }).toEqual({ status: 308, location: '/v1/properties' })
  })

  it('is answered to a raw request that names its host once', async () => {
    const res = await request(`${s.t.url}/v1/hotels?page=2`, { headers: { host: 'API.ACME-HOTELS.EXAMPLE:443' } })
    expect({ status: res.statusCode, location: res.headers.location, body: await res.body.text() }).toEqual({ status: 308, location: '/v1/properties?page=2', body: '' })
  })
})
