import { Validator } from '@seriousme/openapi-schema-validator'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import { describe, expect, it } from 'vitest'
import { openApiDocument, type JsonObject } from '../../src/docs/openapi.js'
import { errorPage } from '../../src/docs/site.js'
import { testConfig } from '../helpers/config.js'

// What the documents say of a deprecated route: the OpenAPI document (and so the reference
// rendered from it) marks its operations with both dates and documents the 410, the client's
// generated types mark the call, and the error page of ROUTE_RETIRED lists it.

const config = testConfig({
  upstreams: { bookings: { url: 'http://127.0.0.1:4020' } },
  routes: [{ path: '/v1/guests', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', deprecated: { since: '2026-01-01T00:00:00Z' } }],
  builtinRoutes: {
    '/v1/properties/{propertyId}': {
      deprecated: { since: '2026-12-01T00:00:00Z', sunset: '2027-06-01T00:00:00Z', link: 'https://docs.example.com/migrate/properties-v2' },
      replacement: '/v1/properties',
    },
  },
})
const document = openApiDocument(config)
const paths = document.paths as Record<string, Record<string, JsonObject>>

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document with deprecations in it', async () => {
    const validator = new Validator()
    const result = await validator.validate(document as unknown as Parameters<Validator['validate']>[0])
    expect({ version: validator.version, result }).toEqual({ version: '3.1', result: { valid: true } })
  })

  it('marks a deprecated operation with both dates, its headers and its 410', () => {
    const get = paths['/v1/properties/{propertyId}']?.get as JsonObject
    expect({ deprecated: get.deprecated, since: get['x-deprecated-since'], sunset: get['x-sunset'] })
      .toEqual({ deprecated: true, since: '2026-12-01T00:00:00Z', sunset: '2027-06-01T00:00:00Z' })
    expect(String(get.description).split('\n\n')[0]).toBe('**Deprecated** since 2026-12-01T00:00:00Z: every answer carries `Deprecation` and `Sunset`; from 2027-06-01T00:00:00Z (the sunset)'
      + ' it answers 410 `ROUTE_RETIRED` to every request. Use `/v1/properties` instead. How to move: https://docs.example.com/migrate/properties-v2')
    const responses = get.responses as Record<string, JsonObject>
    expect(responses['410']?.description).toBe('- [`ROUTE_RETIRED`](errors/route-retired.html): Route retired')
    const headers = responses['200']?.headers as Record<string, JsonObject>
    expect(Object.keys(headers).filter((name) => ['Deprecation', 'Sunset', 'Link'].includes(name))).toEqual(['Deprecation', 'Sunset', 'Link'])
    expect(headers.Deprecation?.required).toBe(false)
  })

  it('marks a declared route, and without a sunset promises no 410', () => {
    const get = paths['/v1/guests']?.get as JsonObject
    expect({ deprecated: get.deprecated, since: get['x-deprecated-since'], sunset: get['x-sunset'] }).toEqual({ deprecated: true, since: '2026-01-01T00:00:00Z', sunset: undefined })
    expect(Object.keys(get.responses as JsonObject)).not.toContain('410')
  })

  it('leaves the other operations as they were', () => {
    const list = paths['/v1/properties']?.get as JsonObject
    expect({ deprecated: list.deprecated, has410: '410' in (list.responses as JsonObject) }).toEqual({ deprecated: undefined, has410: false })
    const headers = (list.responses as Record<string, JsonObject>)['200']?.headers as JsonObject
    expect(Object.keys(headers)).not.toContain('Deprecation')
  })
})

describe('the client\'s generated types', () => {
  it('mark the deprecated calls', async () => {
    const types = astToString(await openapiTS(document as unknown as OpenAPI3, { emptyObjectsUnknown: true, silent: true }))
    // Each operation's comment sits on its method under its path: `get: operations["getProperty"]`.
    const deprecatedOperations = [...types.matchAll(/@deprecated(?:(?!\*\/)[\s\S])*\*\/\s*\w+: operations\["(\w+)"\]/g)].map((m) => m[1])
    expect(deprecatedOperations.sort()).toEqual(['getProperty', 'listGuests'])
  })
})

describe('the error page of ROUTE_RETIRED', () => {
  it('lists the operations that can answer it', () => {
    const page = errorPage('ROUTE_RETIRED', config)
    expect(page).toContain('<ul class="ops"><li><code>GET /v1/properties/{propertyId}</code></li></ul>')
  })
})
