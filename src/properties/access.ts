import type { FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import type { Property } from '../contract/property.js'
import { callerOf } from '../http/request-state.js'
import type { Principal } from '../keys/principal.js'
import type { PropertyRecord, PropertySource, SourceContext } from './source.js'

// May this key use this property of the host's brand (docs/architecture.md, "Properties")? One
// answer for GET /v1/properties/{id} and for every property-scoped declared route
// (docs/architecture.md, "Order of checks", step 7), decided on every request: a cached PMS
// answer never carries a verdict.

export function notFound(id: string): ApiError {
  return new ApiError('PROPERTY_NOT_FOUND', `No property with id '${id}' exists for this brand.`)
}

/** The source's context for a request: its mode, ids and trace, and where to note cache use. */
export function sourceContext(request: FastifyRequest): SourceContext {
  return {
    mode: callerOf(request).principal.mode,
    requestId: request.id,
    trace: request.trace,
    observe: (observation) => {
      if (observation.upstreamMs !== undefined) request.upstreamMs = (request.upstreamMs ?? 0) + observation.upstreamMs
      if (observation.cache !== undefined) request.cacheResult = observation.cache
    },
  }
}

/**
 * The property `id` (lower case) if the caller may use it; otherwise the 403 or 404 to answer
 * (docs/architecture.md §D2), returned rather than thrown, which spares the refused request a
 * throw and the rethrow of the route's `await` (docs/performance.md, "The key check's and the
 * property check's refusals returned"). Decided at once when the source holds the property
 * (a read-cache hit: no promise, docs/performance.md, "A cache hit answered at once"), else a
 * promise of it. A failure of the source rejects it, as the source failed.
 */
export function accessibleProperty(source: PropertySource, id: string, request: FastifyRequest, accessDeniedStatus: 403 | 404): Property | ApiError | Promise<Property | ApiError> {
  const { brand, principal } = callerOf(request)
  const mayUse = principal.properties === 'all' || principal.properties.has(id)
  // With 404 for denied access, a property the key may not use needs no PMS call.
  if (!mayUse && accessDeniedStatus === 404) return notFound(id)
  const context = sourceContext(request)
  const held = source.held?.(id, context)
  if (held !== undefined) return verdict(held, id, brand.chainCode, principal, mayUse)
  return source.get(id, context).then((record) => verdict(record, id, brand.chainCode, principal, mayUse))
}

/** The answer for the property's record (null or undefined: none with this id) to a caller of the chain `chainCode`. */
function verdict(record: PropertyRecord | null | undefined, id: string, chainCode: string, principal: Principal, mayUse: boolean): Property | ApiError {
  // Another brand's property does not exist as far as this host is concerned.
  if (record == null || record.chainCode !== chainCode) return notFound(id)
  if (!mayUse) return new ApiError('PROPERTY_ACCESS_DENIED', `Your ${principal.kind === 'apiKey' ? 'API key' : 'client'} is not authorised for property '${id}'.`)
  return record.property
}
