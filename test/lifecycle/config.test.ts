import { describe, expect, it } from 'vitest'
import { ConfigError, type FileConfigInput } from '../../src/config.js'
import { deprecationOf, withDeprecation } from '../../src/lifecycle/config.js'
import { builtInRoutes, type RoutePolicy } from '../../src/routes/policy.js'
import { testConfig } from '../helpers/config.js'

// The lifecycle section's rules, checked at start: each bad field named, every one at once.

function problemsOf(overrides: Partial<FileConfigInput>): string[] {
  try {
    testConfig(overrides)
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  return []
}

const FILE = 'config/default.json'
const upstreams = { bookings: { url: 'http://127.0.0.1:4020' } }
const route = (extra: Record<string, unknown>): FileConfigInput['routes'] =>
  [{ path: '/v1/guests', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', ...extra }] as FileConfigInput['routes']

describe('deprecations', () => {
  it('takes a valid one on a built-in and on a declared route, and puts it on the policy', () => {
    const config = testConfig({
      upstreams,
      routes: route({ deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2026-07-01T00:00:00Z' }, replacement: '/v1/properties' }),
      builtinRoutes: { '/v1/events/{eventId}': { deprecated: { since: '2026-01-01T00:00:00+01:00', link: 'https://docs.example.com/m' } } },
    })
    expect(config.routes[0]?.deprecation).toEqual({ since: '2026-01-01T00:00:00Z', sunset: '2026-07-01T00:00:00Z', replacement: '/v1/properties' })
    expect(config.builtinRoutes).toEqual({ '/v1/events/{eventId}': { deprecated: { since: '2026-01-01T00:00:00+01:00', link: 'https://docs.example.com/m' } } })
    expect(config.lifecycle).toEqual({ minNoticeDays: 180 })
  })

  it('names every bad field at once', () => {
    expect(problemsOf({
      upstreams,
      lifecycle: { minNoticeDays: 30 },
      routes: route({ deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2026-01-15T00:00:00Z' }, replacement: '/v1/nowhere' }),
      builtinRoutes: {
        '/v1/health': { deprecated: { since: '2026-01-01T00:00:00Z' } },
        '/v1/propertys': { deprecated: { since: '2026-01-01T00:00:00Z' } },
        '/v1/properties': { deprecated: { since: '2026-01-01', link: 'ftp://x.example' }, replacement: '/v1/properties' },
        '/v1/credential': { deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2025-01-01T00:00:00Z' }, replacement: '/v1/Properties' },
      },
    })).toEqual([
      `${FILE} builtinRoutes./v1/properties.deprecated.since: must be an RFC 3339 date-time with its offset, e.g. 2026-12-01T00:00:00Z`,
      `${FILE} builtinRoutes./v1/properties.deprecated.link: must be an http(s) URL`,
      `${FILE} builtinRoutes./v1/health: health cannot be deprecated: load balancers probe it`,
      expect.stringMatching(/^config\/default\.json builtinRoutes\.\/v1\/propertys: no built-in route has this path/),
      `${FILE} builtinRoutes./v1/properties.replacement: is the route itself`,
      `${FILE} builtinRoutes./v1/credential.deprecated.sunset: sunset gives no notice after since; lifecycle.minNoticeDays asks for at least 30`,
      `${FILE} builtinRoutes./v1/credential.replacement: segment 'Properties' is neither kebab-case nor a whole {camelCase} parameter`,
      `${FILE} routes[0].deprecated.sunset: sunset gives 14 days of notice after since; lifecycle.minNoticeDays asks for at least 30`,
      `${FILE} routes[0].replacement: '/v1/nowhere' is no route of this file`,
    ])
  })

  it('checks dates, paths and replacements of well-formed fields', () => {
    const problems = problemsOf({
      upstreams,
      lifecycle: { minNoticeDays: 30 },
      routes: route({ deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2026-01-15T00:00:00Z' }, replacement: '/v1/nowhere' }),
      builtinRoutes: {
        '/v1/health': { deprecated: { since: '2026-01-01T00:00:00Z' } },
        '/v1/propertys': { deprecated: { since: '2026-01-01T00:00:00Z' } },
        '/v1/properties': { deprecated: { since: '2026-01-01T00:00:00Z' }, replacement: '/v1/properties' },
        '/v1/credential': { deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2025-01-01T00:00:00Z' }, replacement: '/v1/Properties' },
      },
    })
    expect(problems).toEqual([
      `${FILE} builtinRoutes./v1/health: health cannot be deprecated: load balancers probe it`,
      expect.stringMatching(new RegExp(`^${FILE} builtinRoutes\\./v1/propertys: no built-in route has this path \\(/v1/properties, /v1/properties/\\{propertyId\\}, `)),
      `${FILE} builtinRoutes./v1/properties.replacement: is the route itself`,
      `${FILE} builtinRoutes./v1/credential.deprecated.sunset: sunset gives no notice after since; lifecycle.minNoticeDays asks for at least 30`,
      `${FILE} builtinRoutes./v1/credential.replacement: segment 'Properties' is neither kebab-case nor a whole {camelCase} parameter`,
      `${FILE} routes[0].deprecated.sunset: sunset gives 14 days of notice after since; lifecycle.minNoticeDays asks for at least 30`,
      `${FILE} routes[0].replacement: '/v1/nowhere' is no route of this file`,
    ])
  })

  it('refuses a replacement without a deprecation, and the default notice of 180 days', () => {
    expect(problemsOf({ upstreams, routes: route({ replacement: '/v1/properties' }) })).toEqual([`${FILE} routes[0].replacement: only a deprecated route names a replacement`])
    expect(problemsOf({ builtinRoutes: { '/v1/properties': { deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2026-06-29T00:00:00Z' } } } }))
      .toEqual([`${FILE} builtinRoutes./v1/properties.deprecated.sunset: sunset gives 179 days of notice after since; lifecycle.minNoticeDays asks for at least 180`])
  })
})

describe('moved', () => {
  it('takes a move to a route, parameters kept', () => {
    const config = testConfig({ upstreams, routes: route({}), moved: [{ from: '/v1/hotels/{propertyId}', to: '/v1/properties/{propertyId}' }, { from: '/v1/customers', to: '/v1/guests' }] })
    expect(config.moved).toEqual([{ from: '/v1/hotels/{propertyId}', to: '/v1/properties/{propertyId}' }, { from: '/v1/customers', to: '/v1/guests' }])
  })

  it('refuses a from that is a route or moved twice, a to that is none, a parameter from nowhere, bad templates', () => {
    expect(problemsOf({
      upstreams,
      routes: route({}),
      moved: [
        { from: '/v1/guests', to: '/v1/properties' },
        { from: '/v1/properties/{x}', to: '/v1/properties' },
        { from: '/v1/hotels/{a}', to: '/v1/properties/{propertyId}' },
        { from: '/v1/hotels/{b}', to: '/v1/nowhere' },
        { from: '/v1/Hotels', to: 'https://elsewhere.example/v1/properties' },
        { from: '/v1/inns/', to: '/v1/properties' },
      ],
    })).toEqual([
      `${FILE} moved[0].from: '/v1/guests' is a route of this file; a moved path must not be one`,
      `${FILE} moved[1].from: '/v1/properties/{x}' is a route of this file; a moved path must not be one`,
      `${FILE} moved[2].to: {propertyId} is no parameter of from`,
      `${FILE} moved[3].from: moved already by moved[2]`,
      `${FILE} moved[3].to: '/v1/nowhere' is no route of this file`,
      `${FILE} moved[4].from: segment 'Hotels' is neither kebab-case nor a whole {camelCase} parameter`,
      `${FILE} moved[4].to: must start with /v1/`,
      `${FILE} moved[5].from: has an empty segment`,
    ])
  })
})

describe('a built-in route\'s policy', () => {
  const builtinRoutes = {
    '/v1/properties/{propertyId}': { deprecated: { since: '2026-01-01T00:00:00Z', sunset: '2026-07-01T00:00:00Z', link: 'https://docs.example.com/m' }, replacement: '/v1/properties' },
    '/v1/properties': { deprecated: { since: '2026-01-01T00:00:00Z' } },
  }

  it('takes the deprecation the file gives its path, every field it sets and no other', () => {
    expect(withDeprecation(builtInRoutes.getProperty, builtinRoutes)).toStrictEqual({
      ...builtInRoutes.getProperty,
      deprecation: { since: '2026-01-01T00:00:00Z', sunset: '2026-07-01T00:00:00Z', link: 'https://docs.example.com/m', replacement: '/v1/properties' },
    })
    expect(withDeprecation(builtInRoutes.listProperties, builtinRoutes)).toStrictEqual({ ...builtInRoutes.listProperties, deprecation: { since: '2026-01-01T00:00:00Z' } })
  })

  it('is left as it is when the file deprecates none of it, or when it is no built-in route', () => {
    expect(withDeprecation(builtInRoutes.getCredential, builtinRoutes)).toBe(builtInRoutes.getCredential)
    const proxied = { ...builtInRoutes.listProperties, kind: 'proxy' } as unknown as RoutePolicy
    expect(withDeprecation(proxied, builtinRoutes)).toBe(proxied)
    expect(withDeprecation(builtInRoutes.getProperty, {})).toBe(builtInRoutes.getProperty)
  })

  it('names in a declared route\'s deprecation only the fields set', () => {
    expect(deprecationOf({ since: '2026-01-01T00:00:00Z' }, undefined)).toStrictEqual({ since: '2026-01-01T00:00:00Z' })
    expect(deprecationOf({ since: '2026-01-01T00:00:00Z', link: 'https://docs.example.com/m' }, '/v1/new'))
      .toStrictEqual({ since: '2026-01-01T00:00:00Z', link: 'https://docs.example.com/m', replacement: '/v1/new' })
    expect(deprecationOf({ since: '2026-01-01T00:00:00Z', sunset: '2026-07-01T00:00:00Z' }, undefined)).toStrictEqual({ since: '2026-01-01T00:00:00Z', sunset: '2026-07-01T00:00:00Z' })
  })
})
