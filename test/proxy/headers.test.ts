import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { forwardableHeaders, LocationMap } from '../../src/proxy/headers.js'

// The header rules of declared routes (routes.md), at the unit's edge: what a partner's
// headers become on the way to the service, and where the service's Location points.

const routes = loadConfig({ CONFIG_FILE: 'config/default.json' }).routes
const origins = ['http://bookings.internal:4020']

describe('forwardableHeaders', () => {
  it("drops credentials, hop-by-hop headers and anything in the gateway's own headers", () => {
    expect(forwardableHeaders({
      authorization: 'Bearer svc_live_x', cookie: 'a=b', connection: 'keep-alive, x-hop', 'keep-alive': 'timeout=5', te: 'trailers',
      'transfer-encoding': 'chunked', upgrade: 'h2c', 'proxy-authorization': 'Basic x', 'accept-encoding': 'gzip', traceparent: 'x', tracestate: 'y',
      'x-request-id': 'mine', 'x-service-brand': 'globex', 'x-service-anything': '1', 'x-bookings-token': 'forged', 'service-property-id': 'p',
      'x-forwarded-for': '10.0.0.1', forwarded: 'for=10.0.0.1', 'service-request-id': 'r',
      'user-agent': 'partner/1.0', accept: 'application/json', 'content-type': 'application/json', 'accept-language': 'fr', 'service-correlation-id': 'c',
    }, 'x-bookings-token')).toEqual({
      'user-agent': 'partner/1.0', accept: 'application/json', 'content-type': 'application/json', 'accept-language': 'fr', 'service-correlation-id': 'c',
    })
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
