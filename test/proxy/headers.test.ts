import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { headSize, LocationMap, mapLinks } from '../../src/proxy/headers.js'
import { encodeComponent, fillPath, queryOf } from '../../src/proxy/target.js'

// The header, path and query rules of declared routes at the unit's edge: how big a head the
// gateway would send, how the service's path and query are built, and where the service's
// Location points. What a service receives over real sockets is in bounds.test.ts.

const routes = loadConfig({ CONFIG_FILE: 'config/default.json' }).routes
const origins = ['http://bookings.internal:4020']

describe('headSize', () => {
  it('counts the request line, each header line and the blank line, as they go on the wire', () => {
    const head = 'GET /partner/v1/guests?page=2 HTTP/1.1\r\nhost: bookings:4020\r\nx-request-id: req_1\r\n\r\n'
    expect(headSize('GET', '/partner/v1/guests?page=2', { host: 'bookings:4020', 'x-request-id': 'req_1' })).toBe(head.length)
  })
})

describe('the service path and query', () => {
  it('percent-encodes all but the RFC 3986 unreserved characters', () => {
    expect(encodeComponent("AZaz09-._~ !'()*;,/?#[]@&=+$%\u00e9\u0000")).toBe('AZaz09-._~%20%21%27%28%29%2A%3B%2C%2F%3F%23%5B%5D%40%26%3D%2B%24%25%C3%A9%00')
  })

  it('fills the placeholders of a path with encoded values', () => {
    expect(fillPath('/partner/v1/properties/{propertyId}/files/{fileId}', { propertyId: 'p-1', fileId: '..b~' })).toBe('/partner/v1/properties/p-1/files/..b~')
  })

  it('rebuilds the query from the validated values, in the order sent', () => {
    const sent = { perPage: '0005', email: 'a;perPage=1000', with: 'messages,reservations', vip: 'true' }
    const parsed = { page: 1, email: 'a;perPage=1000', perPage: 5, with: ['messages', 'reservations'], vip: true }
    expect(queryOf(sent, parsed)).toBe('?perPage=5&email=a%3BperPage%3D1000&with=messages%2Creservations&vip=true')
    expect(queryOf({}, { page: 1 })).toBe('')
  })
})

describe('LocationMap', () => {
  const map = new LocationMap(routes, origins)

  it.each([
    ['/partner/v1/guests/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', '/v1/guests/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'],
    ['/partner/v1/guests?page=2', '/v1/guests?page=2'],
    ['http://bookings.internal:4020/partner/v1/guests/abc', '/v1/guests/abc'],
    ['/partner/v1/properties/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10/rooms', '/v1/rooms'],
  ])('maps %s to %s', (location, expected) => {
    expect(map.map(location)).toBe(expected)
  })

  it.each([
    '/partner/v1/invoices/1', '/internal/admin', 'https://evil.example/partner/v1/guests', 'http://other.internal:4020/partner/v1/guests', 'not a url:::',
  ])('drops %s, which maps to no public path', (location) => {
    expect(map.map(location)).toBeUndefined()
  })
})

describe('mapLinks', () => {
  const map = new LocationMap(routes, origins)

  it('maps each target, keeps its parameters but anchor, and drops the links that map to nothing', () => {
    expect(mapLinks([
      '</partner/v1/guests?page=3>; rel="next"; title="Page, \\"three\\"", <http://bookings.internal:4020/partner/v1/guests?page=1>;rel=first',
      '<https://evil.example/partner/v1/guests>; rel="alternate", </internal/admin>; rel=admin, </partner/v1/guests/abc>; anchor="http://internal/"; rel="item"',
    ], map)).toBe('</v1/guests?page=3>; rel="next"; title="Page, \\"three\\"", </v1/guests?page=1>; rel=first, </v1/guests/abc>; rel="item"')
  })

  it('answers undefined when no link is left, or the header cannot be read', () => {
    expect(mapLinks('</internal/admin>; rel=admin', map)).toBeUndefined()
    expect(mapLinks('rel=next; </partner/v1/guests>', map)).toBeUndefined()
    expect(mapLinks('</partner/v1/guests', map)).toBeUndefined()
  })
})
