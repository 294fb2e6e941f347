import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { sendProperties, sendProperty } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import type { Property } from '../contract/property.js'
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

    // Not an async function: a property the source holds is answered in the handler's own turn
    // (docs/performance.md, "A cache hit answered at once"); one it must load, when it loads.
    app.get<{ Params: { propertyId: string } }>(routerPath(single.path), { config: { policy: single } }, (request, reply) => {
      const found = accessibleProperty(source, request.params.propertyId.toLowerCase(), request, accessDeniedStatus)
      if (found instanceof Promise) return found.then((property) => answerWith(request, reply, property))
      // A handler that is not async returns nothing once it has sent its answer.
      if (found instanceof ApiError) return found
      sendProperty(request, reply, found)
      return undefined
    })
  }
}

/** The property sent; a refusal returned, which Fastify answers as it answers a thrown one (its error handler). */
function answerWith(request: FastifyRequest, reply: FastifyReply, found: Property | ApiError): FastifyReply | ApiError {
  return found instanceof ApiError ? found : sendProperty(request, reply, found)
}
