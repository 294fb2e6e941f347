import type { FastifyRequest } from 'fastify'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../../src/contract/errors.js'
import { accessibleProperty } from '../../src/properties/access.js'
import { ReadCache, type CacheResult } from '../../src/properties/cache.js'
import { PmsPropertySource } from '../../src/properties/pms-source.js'
import type { SourceContext } from '../../src/properties/source.js'
import type { PmsClient } from '../../src/upstream/pms-client.js'

// A read the cache holds fresh is answered at once (docs/performance.md, "A cache hit answered
// at once"): the cache's `fresh`, the source's `held` and the property check that uses them,
// without a gateway. What a partner and an operator see of the same reads (the answers, the
// log line's `cache`, /status, the metrics) is tested over sockets in test/properties and
// test/mutation-kills/properties.test.ts.

const ID = 'c0ffee00-0000-4000-8000-000000000001'
const HOTEL = {
  hotel_uuid: ID, chain_code: 'ACME', display_name: 'Acme Paris Bastille', short_code: 'ACMPAR1', lifecycle: 'LIVE',
  tz_name: 'Europe/Paris', created_epoch_ms: 1704164645006, last_modified: '2024-03-04T10:00:00+02:00',
}
const PROPERTY = {
  object: 'property', id: ID, name: 'Acme Paris Bastille', code: 'ACMPAR1', status: 'active', timezone: 'Europe/Paris',
  createdAt: '2024-01-02T03:04:05.006Z', updatedAt: '2024-03-04T08:00:00.000Z',
}

function cacheOf(ttlMs: number, observed: CacheResult[] = []): ReadCache {
  return new ReadCache({ ttlMs, staleIfErrorMs: 60_000, maxEntries: 10, observe: (result) => observed.push(result) })
}

describe('ReadCache.fresh', () => {
  it('gives a value loaded and still fresh, counted as a hit as get counts one; nothing for a key never loaded, uncounted', async () => {
    const observed: CacheResult[] = []
    const cache = cacheOf(60_000, observed)
    expect(cache.fresh('a')).toBeUndefined()
    expect(observed).toEqual([])
    expect(await cache.get('a', async () => ({ n: 1 }))).toEqual({ value: { n: 1 }, result: 'miss' })
    expect(cache.fresh('a')).toEqual({ n: 1 })
    expect(cache.fresh('b')).toBeUndefined()
    expect(observed).toEqual(['miss', 'hit'])
    expect(cache.hitRatio).toBe(0.5)
  })

  it('gives nothing while a key loads, nor once its value is stale, which stays for stale-if-error', async () => {
    const observed: CacheResult[] = []
    const cache = cacheOf(30, observed)
    let release: (value: string) => void = () => undefined
    const loading = cache.get('a', () => new Promise<string>((resolve) => { release = resolve }))
    expect(cache.fresh('a')).toBeUndefined()
    release('first')
    expect(await loading).toEqual({ value: 'first', result: 'miss' })
    // Well past its ttl, however slow the machine: a wait can only make it staler.
    await sleep(100)
    expect(cache.fresh('a')).toBeUndefined()
    // The stale copy is still there for a refresh that fails.
    expect(await cache.get('a', async () => { throw new Error('PMS down') })).toEqual({ value: 'first', result: 'stale' })
    expect(observed).toEqual(['miss', 'stale'])
  })

  it('gives nothing when the cache is off (ttlMs 0)', async () => {
    const cache = cacheOf(0)
    expect(await cache.get('a', async () => 'loaded')).toEqual({ value: 'loaded', result: 'miss' })
    expect(cache.fresh('a')).toBeUndefined()
  })
})

/** A source over one PMS whose client answers from `hotels` (undefined: the PMS's 404), counting its calls. */
function sourceOf(hotels: Record<string, unknown>): { source: PmsPropertySource; calls: string[] } {
  const calls: string[] = []
  const client = {
    name: 'pms',
    getHotel: async (id: string) => {
      calls.push(id)
      return hotels[id]
    },
  } as unknown as PmsClient
  return { source: new PmsPropertySource({ live: { client, cache: cacheOf(60_000) } }), calls }
}

function contextOf(mode: 'live' | 'test', observations: unknown[]): SourceContext {
  return { mode, requestId: 'req_1', trace: null, observe: (observation) => observations.push(observation) }
}

describe('PmsPropertySource.held', () => {
  it('is the record get read, or null for a property the PMS does not know, noted as a cache hit; nothing before a read', async () => {
    const { source, calls } = sourceOf({ [ID]: HOTEL })
    const observations: unknown[] = []
    const context = contextOf('live', observations)
    expect(source.held(ID, context)).toBeUndefined()
    expect(await source.get(ID, context)).toEqual({ chainCode: 'ACME', property: PROPERTY })
    expect(source.held(ID, context)).toEqual({ chainCode: 'ACME', property: PROPERTY })
    const unknown = 'c0ffee00-0000-4000-8000-00000000dead'
    expect(await source.get(unknown, context)).toBeUndefined()
    expect(source.held(unknown, context)).toBeNull()
    expect(calls).toEqual([ID, unknown])
    expect(observations).toEqual([{ cache: 'miss', upstreamMs: expect.any(Number) }, { cache: 'hit' }, { cache: 'miss', upstreamMs: expect.any(Number) }, { cache: 'hit' }])
  })

  it('holds nothing for a mode without its PMS: get refuses it', async () => {
    const { source } = sourceOf({ [ID]: HOTEL })
    const context = contextOf('test', [])
    expect(source.held(ID, context)).toBeUndefined()
    await expect(source.get(ID, context)).rejects.toMatchObject({ code: 'TEST_MODE_UNAVAILABLE' })
  })
})

describe('accessibleProperty', () => {
  /** The request as the property check reads it: its caller (brand, credential), id and trace. */
  function requestOf(properties: 'all' | Set<string>, chainCode = 'ACME'): FastifyRequest {
    return {
      id: 'req_1', trace: null, upstreamMs: null, cacheResult: null,
      brand: { id: 'acme', chainCode }, principal: { kind: 'apiKey', keyId: 'key_1', mode: 'live', properties },
    } as unknown as FastifyRequest
  }

  it('decides at once, without a promise, when the source holds the property; through get when it does not', async () => {
    const { source } = sourceOf({ [ID]: HOTEL })
    const first = accessibleProperty(source, ID, requestOf('all'), 404)
    expect(first).toBeInstanceOf(Promise)
    expect(await first).toEqual(PROPERTY)
    const request = requestOf('all')
    expect(accessibleProperty(source, ID, request, 404)).toEqual(PROPERTY)
    expect(request.cacheResult).toBe('hit')
  })

  it('gives the same refusals at once as through get: another chain\'s property, one the key may not use, one unknown', async () => {
    const { source } = sourceOf({ [ID]: HOTEL })
    await accessibleProperty(source, ID, requestOf('all'), 404)
    const unknown = 'c0ffee00-0000-4000-8000-00000000dead'
    await accessibleProperty(source, unknown, requestOf('all'), 404)
    const refusals = [
      accessibleProperty(source, ID, requestOf('all', 'OTHER'), 404),
      accessibleProperty(source, ID, requestOf(new Set(['someone-else'])), 403),
      accessibleProperty(source, ID, requestOf(new Set(['someone-else'])), 404),
      accessibleProperty(source, unknown, requestOf('all'), 403),
    ]
    for (const refusal of refusals) expect(refusal).toBeInstanceOf(ApiError)
    expect(refusals.map((r) => [(r as ApiError).code, (r as ApiError).message])).toEqual([
      ['PROPERTY_NOT_FOUND', `No property with id '${ID}' exists for this brand.`],
      ['PROPERTY_ACCESS_DENIED', `Your API key is not authorised for property '${ID}'.`],
      ['PROPERTY_NOT_FOUND', `No property with id '${ID}' exists for this brand.`],
      ['PROPERTY_NOT_FOUND', `No property with id '${unknown}' exists for this brand.`],
    ])
  })
})
