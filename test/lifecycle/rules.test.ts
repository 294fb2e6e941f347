import { describe, expect, it } from 'vitest'
import { deprecationHeaders, movedPaths, noticeProblem, parameterNames, phaseAt, retiredDetail } from '../../src/lifecycle/rules.js'

// The rules of a route's life without a gateway: phases, headers, notice, moved paths.

describe('phaseAt', () => {
  it('is announced before since, deprecated from since, retired from the sunset', () => {
    expect(phaseAt(1000, 5000, 999)).toBe('announced')
    expect(phaseAt(1000, 5000, 1000)).toBe('deprecated')
    expect(phaseAt(1000, 5000, 4999)).toBe('deprecated')
    expect(phaseAt(1000, 5000, 5000)).toBe('retired')
    expect(phaseAt(1000, undefined, 10 ** 15)).toBe('deprecated')
  })
})

describe('deprecationHeaders', () => {
  it('writes since as @ and Unix seconds, the sunset as an HTTP-date, the link with its relation', () => {
    expect(deprecationHeaders({ since: '2026-01-01T00:00:00Z', sunset: '2099-01-01T00:00:00Z', link: 'https://docs.example.com/migrate' })).toEqual({
      deprecation: '@1767225600',
      sunset: 'Thu, 01 Jan 2099 00:00:00 GMT',
      link: '<https://docs.example.com/migrate>; rel="deprecation"; type="text/html"',
    })
  })

  it('reads offsets, and leaves out what is not set', () => {
    expect(deprecationHeaders({ since: '2026-01-01T02:00:00+02:00' })).toEqual({ deprecation: '@1767225600' })
    expect(deprecationHeaders({ since: '2026-01-01T00:00:00.999Z' })).toEqual({ deprecation: '@1767225600' })
  })
})

describe('retiredDetail', () => {
  it('names the time, the replacement and the guide', () => {
    expect(retiredDetail('/v1/old', { since: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00+01:00', replacement: '/v1/new', link: 'https://x.example/m' }))
      .toBe('/v1/old was retired at 2020-12-31T23:00:00.000Z. Use /v1/new instead. The Link header leads to the migration guide.')
    expect(retiredDetail('/v1/old', { since: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z' })).toBe('/v1/old was retired at 2021-01-01T00:00:00.000Z.')
  })
})

describe('noticeProblem', () => {
  const since = '2026-01-01T00:00:00Z'
  it('accepts a sunset exactly minNoticeDays later, or none', () => {
    expect(noticeProblem({ since, sunset: '2026-06-30T00:00:00Z' }, 180)).toBeUndefined()
    expect(noticeProblem({ since }, 180)).toBeUndefined()
    expect(noticeProblem({ since, sunset: since }, 0)).toBeUndefined()
  })

  it('refuses one a moment short, or before since', () => {
    expect(noticeProblem({ since, sunset: '2026-06-29T23:59:59Z' }, 180)).toBe('sunset gives 179 days of notice after since; lifecycle.minNoticeDays asks for at least 180')
    expect(noticeProblem({ since, sunset: '2026-01-02T00:00:00Z' }, 2)).toBe('sunset gives 1 day of notice after since; lifecycle.minNoticeDays asks for at least 2')
    expect(noticeProblem({ since, sunset: '2025-12-31T00:00:00Z' }, 0)).toBe('sunset gives no notice after since; lifecycle.minNoticeDays asks for at least 0')
    expect(noticeProblem({ since, sunset: since }, 1)).toBe('sunset gives 0 days of notice after since; lifecycle.minNoticeDays asks for at least 1')
  })
})

describe('movedPaths', () => {
  const moves = [
    { from: '/v1/hotels/{hotelId}/rooms/{roomId}', to: '/v1/properties/{hotelId}/units/{roomId}' },
    { from: '/v1/hotels/{propertyId}', to: '/v1/properties/{propertyId}' },
    { from: '/v1/hotels', to: '/v1/properties' },
  ]
  // Compiled inside each test: a matcher built while the file loads runs outside every test,
  // where no mutant of its compiling is tested.
  const locate = (url: string): ReturnType<ReturnType<typeof movedPaths>> => movedPaths(moves)(url)

  it('fills the new path with the values as sent, and keeps the query', () => {
    expect(locate('/v1/hotels/ab%2Fc?x=1&y=%20')).toEqual({ from: '/v1/hotels/{propertyId}', location: '/v1/properties/ab%2Fc?x=1&y=%20' })
    expect(locate('/v1/hotels/h1/rooms/r2')).toEqual({ from: '/v1/hotels/{hotelId}/rooms/{roomId}', location: '/v1/properties/h1/units/r2' })
    expect(locate('/v1/hotels?')).toEqual({ from: '/v1/hotels', location: '/v1/properties?' })
    expect(locate('/v1/hotels')).toEqual({ from: '/v1/hotels', location: '/v1/properties' })
  })

  it('matches exactly: case, trailing slash, whole segments, nothing around', () => {
    for (const url of ['/v1/Hotels', '/v1/hotels/', '/v1/hotels//rooms/r', '/v1/hotels/a/b', '/x/v1/hotels', '/v1/hotelsx', '/v1/hotels/a/rooms/']) {
      expect(locate(url), url).toBeUndefined()
    }
  })

  it('matches nothing without moves', () => {
    expect(movedPaths([])('/v1/hotels')).toBeUndefined()
  })

  it('reads a template\'s parameters', () => {
    expect(parameterNames('/v1/a/{x}/b/{yZ}')).toEqual(['x', 'yZ'])
    expect(parameterNames('/v1/a/{x}y')).toEqual([])
  })
})
