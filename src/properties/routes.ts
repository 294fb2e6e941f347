import type { FastifyInstance } from 'fastify'
import { sendProperties, sendProperty } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import { callerOf } from '../http/request-state.js'
import { builtInRoutes, routerPath } from '../routes/policy.js'
import { accessibleProperty, sourceContext } from './access.js'
import type { PropertySource } from './source.js'

// GET /v1/properties and GET /v1/properties/{propertyId}: authorisation per
// docs/architecture.md, "Properties", decided on every request (a cached PMS answer never
// carries a verdict). Their checks up to step 6 come from their policies (routes/policy.ts),
// composed in app.ts.

export function propertyRoutes(source: PropertySource) {
  return async function routes(app: FastifyInstance): Promise<void> {
    const accessDeniedStatus = app.gatewayConfig.accessDeniedStatus
    const list = builtInRoutes.listProperties
    const single = builtInRoutes.getProperty

    app.get(routerPath(list.path), { config: { policy: list } }, async (request, reply) => {
      const { brand, principal } = callerOf(request)
      const { page, perPage } = request.parsedQuery as { page: number; perPage: number }
      const result = await source.listActive({ chainCode: brand.chainCode, allowed: principal.properties }, page, perPage, sourceContext(request))
      return sendProperties(request, reply, result.items, { page, perPage, total: result.total })
    })

    app.get<{ Params: { propertyId: string } }>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      const property = await accessibleProperty(source, request.params.propertyId.toLowerCase(), request, accessDeniedStatus)
      // A refusal returned is answered as a thrown one is (Fastify sends an Error to the error handler).
      if (property instanceof ApiError) return property
      return sendProperty(request, reply, property)
    })
  }
}
