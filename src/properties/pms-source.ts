import { createHash } from 'node:crypto'
import { ApiError } from '../contract/errors.js'
import type { Property } from '../contract/property.js'
import { ContractError, UpstreamError } from '../upstream/errors.js'
import type { CallContext, PmsClient } from '../upstream/pms-client.js'
import { parseHotel } from '../upstream/pms-record.js'
import type { CacheResult, ReadCache } from './cache.js'
import { toProperty } from './mapping.js'
import type { KeyMode } from '../keys/principal.js'
import type { ListScope, PropertyPage, PropertyRecord, PropertySource, SourceContext } from './source.js'

// Properties read from the PMS through the read cache. What is cached is the PMS's answer
// (mapped), never an authorisation verdict: the routes decide access on every request.

/** One PMS with its own client (and so breaker) and cache entries. */
export interface PmsUpstream {
  client: PmsClient
  cache: ReadCache
}

/** The PMS takes at most 100 ids per list call. */
const IDS_PER_CALL = 100
/** Allow-list chunks read at once, so a cold list of thousands does not flood the PMS. */
const CHUNK_CONCURRENCY = 4

/** What the cache holds for a property the PMS does not know (the cache holds no undefined). */
const NOT_FOUND = { found: false } as const

/** The record a cached entry stands for; null for a property known not to exist. */
function recordOf(cached: PropertyRecord | typeof NOT_FOUND): PropertyRecord | null {
  return 'found' in cached ? null : cached
}

/** The read cache's key of one property. */
function hotelKey(id: string): string {
  return `hotel:${id}`
}

/** What a read served from the cache notes for the request's log line: one object for all. */
const CACHE_HIT = { cache: 'hit' } as const

function byCreatedThenId(a: Property, b: Property): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}

export class PmsPropertySource implements PropertySource {
  constructor(private readonly upstreams: Partial<Record<KeyMode, PmsUpstream>>) {}

  /** The PMS of a key's mode; a test key without a sandbox was refused before (docs/architecture.md, "Test mode"). */
  private upstreamFor(mode: KeyMode): PmsUpstream {
    const upstream = this.upstreams[mode]
    if (upstream === undefined) throw new ApiError('TEST_MODE_UNAVAILABLE', 'This endpoint has no sandbox: test keys (svc_test_) cannot use it; use a live key.')
    return upstream
  }

  async get(id: string, context: SourceContext): Promise<PropertyRecord | undefined> {
    const upstream = this.upstreamFor(context.mode)
    const cached = await this.read(upstream, hotelKey(id), context, async () => {
      const body = await upstream.client.getHotel(id, this.callContext(context))
      if (body === undefined) return NOT_FOUND
      const hotel = parseHotel(upstream.client.name, body)
      return { chainCode: hotel.chain_code, property: toProperty(hotel, upstream.client.name) }
    })
    return recordOf(cached) ?? undefined
  }

  held(id: string, context: SourceContext): PropertyRecord | null | undefined {
    // A mode without its PMS is refused by `get`.
    const cached = this.upstreams[context.mode]?.cache.fresh(hotelKey(id)) as PropertyRecord | typeof NOT_FOUND | undefined
    if (cached === undefined) return undefined
    context.observe?.(CACHE_HIT)
    return recordOf(cached)
  }

  async listActive(scope: ListScope, page: number, perPage: number, context: SourceContext): Promise<PropertyPage> {
    const upstream = this.upstreamFor(context.mode)
    if (scope.allowed === 'all') {
      // Offsets beyond what the PMS can hold are past the end anyway.
      const offset = Math.min((page - 1) * perPage, Number.MAX_SAFE_INTEGER)
      return this.read(upstream, `list:${scope.chainCode}:${offset}:${perPage}`, context, async () =>
        this.loadActive(upstream, scope.chainCode, { offset: String(offset), limit: String(perPage) }, context))
    }
    // An allow-list: read the active ones among its ids, 100 per call (each chunk cached on
    // its own), merge them into the PMS's order, then page here.
    const ids = [...scope.allowed].sort()
    const chunks: string[][] = []
    for (let i = 0; i < ids.length; i += IDS_PER_CALL) chunks.push(ids.slice(i, i + IDS_PER_CALL))
    const parts: Property[][] = new Array(chunks.length)
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < chunks.length) {
        const index = next
        next += 1
        const chunk = chunks[index] as string[]
        const digest = createHash('sha1').update(chunk.join(',')).digest('hex')
        const result = await this.read(upstream, `chunk:${scope.chainCode}:${digest}`, context, async () =>
          this.loadActive(upstream, scope.chainCode, { hotel_uuid: chunk.join(','), offset: '0', limit: String(IDS_PER_CALL) }, context))
        parts[index] = result.items
      }
    }
    await Promise.all(Array.from({ length: Math.min(CHUNK_CONCURRENCY, chunks.length) }, worker))
    const active = parts.flat().sort(byCreatedThenId)
    const start = (page - 1) * perPage
    // A page past the end is empty, with the true total (docs/architecture.md §D1).
    return { items: start >= active.length ? [] : active.slice(start, start + perPage), total: active.length }
  }

  private async loadActive(upstream: PmsUpstream, chainCode: string, query: Record<string, string>, context: SourceContext): Promise<PropertyPage> {
    const list = await upstream.client.listHotels({ chain_code: chainCode, lifecycle: 'LIVE', ...query }, this.callContext(context))
    const items = list.results.map((value) => {
      const hotel = parseHotel(upstream.client.name, value)
      // The filter asked for one chain's LIVE hotels; anything else must not reach a partner.
      if (hotel.chain_code !== chainCode) throw new ContractError(upstream.client.name, hotel.hotel_uuid, 'chain_code', `is not the requested ${chainCode}`)
      if (hotel.lifecycle !== 'LIVE') throw new ContractError(upstream.client.name, hotel.hotel_uuid, 'lifecycle', 'is not the requested LIVE')
      return toProperty(hotel, upstream.client.name)
    })
    return { items, total: list.total_count }
  }

  private callContext(context: SourceContext): CallContext {
    return { requestId: context.requestId, trace: context.trace }
  }

  private async read<T>(upstream: PmsUpstream, key: string, context: SourceContext, load: () => Promise<T>): Promise<T> {
    const started = performance.now()
    let loaded = false
    try {
      const { value, result } = await upstream.cache.get(key, async () => {
        loaded = true
        return load()
      })
      this.observe(context, result, loaded ? started : undefined)
      return value
    } catch (error) {
      this.observe(context, 'miss', started)
      throw this.normalise(error, upstream)
    }
  }

  private observe(context: SourceContext, cache: CacheResult, started: number | undefined): void {
    context.observe?.({ cache, ...(started === undefined ? {} : { upstreamMs: performance.now() - started }) })
  }

  /** Every upstream failure as the partner sees it (docs/architecture.md, "Upstream failures"); `detail` never quotes the PMS. */
  private normalise(error: unknown, upstream: PmsUpstream): ApiError {
    if (error instanceof ApiError) return error
    if (error instanceof UpstreamError && error.kind === 'unavailable') {
      const retryAfter = upstream.client.upstream.retryAfterOf(error)
      return new ApiError('SERVICE_UNAVAILABLE', `Property data is temporarily unavailable; retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`, {
        retryAfter, cause: error,
      })
    }
    // A ContractError's message names the record and the field; the error log line carries it.
    return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred; it has been logged.', { cause: error })
  }
}
