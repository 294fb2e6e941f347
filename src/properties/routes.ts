import type { FastifyInstance, FastifyRequest } from 'fastify'
import { sendProperties, sendProperty } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import type { Brand } from '../pipeline/brands.js'
import type { QuerySpec } from '../pipeline/parameters.js'
import type { Principal } from '../keys/principal.js'
import type { PropertySource, SourceContext } from './source.js'

// GET /v1/properties and GET /v1/properties/{propertyId}: authorisation per decisions 4,
// decided on every request (a cached PMS answer never carries a verdict).

export const PER_PAGE_DEFAULT = 20

const listQuery: QuerySpec = {
  page: { min: 1, max: Number.MAX_SAFE_INTEGER, default: 1 },
  perPage: { min: 1, max: 100, default: PER_PAGE_DEFAULT },
}

const propertyRoute = { brandScoped: true, authenticated: true, takesPropertyHeader: false } as const

function contextOf(request: FastifyRequest, principal: Principal): SourceContext {
  return {
    mode: principal.mode,
    requestId: request.id,
    trace: request.trace,
    observe: (observation) => {
      if (observation.upstreamMs !== undefined) request.upstreamMs = (request.upstreamMs ?? 0) + observation.upstreamMs
      if (observation.cache !== undefined) request.cacheResult = observation.cache
    },
  }
}

function notFound(id: string): ApiError {
  return new ApiError('PROPERTY_NOT_FOUND', `No property with id '${id}' exists for this brand.`)
}

export function propertyRoutes(source: PropertySource) {
  return async function routes(app: FastifyInstance): Promise<void> {
    const accessDeniedStatus = app.gatewayConfig.accessDeniedStatus

    app.get('/v1/properties', {
      config: { ...propertyRoute, query: listQuery },
    }, async (request, reply) => {
      const brand = request.brand as Brand
      const principal = request.principal as Principal
      const { page, perPage } = request.parsedQuery as { page: number; perPage: number }
      const result = await source.listActive(
        { chainCode: brand.chainCode, allowed: principal.properties }, page, perPage, contextOf(request, principal))
      return sendProperties(request, reply, result.items, { page, perPage, total: result.total })
    })

    app.get<{ Params: { propertyId: string } }>('/v1/properties/:propertyId', {
      config: { ...propertyRoute, query: {}, params: { propertyId: 'uuid' } },
    }, async (request, reply) => {
      const brand = request.brand as Brand
      const principal = request.principal as Principal
      const id = request.params.propertyId.toLowerCase()
      const mayUse = principal.properties === 'all' || principal.properties.has(id)
      // With 404 for denied access, a property the key may not use needs no PMS call.
      if (!mayUse && accessDeniedStatus === 404) throw notFound(id)
      const record = await source.get(id, contextOf(request, principal))
      // Another brand's property does not exist as far as this host is concerned.
      if (record === undefined || record.chainCode !== brand.chainCode) throw notFound(id)
      if (!mayUse) throw new ApiError('PROPERTY_ACCESS_DENIED', `Your API key is not authorised for property '${id}'.`)
      return sendProperty(request, reply, record.property)
    })
  }
}
