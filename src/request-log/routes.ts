import type { FastifyInstance } from 'fastify'
import { sendJsonData } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import { callerOf } from '../http/request-state.js'
import type { Config } from '../config.js'
import { builtInRoutes, requestLogRoutes, routerPath, webhookRoutes } from '../routes/policy.js'
import { filtersOf, type ListQuery } from './filters.js'
import type { RequestLogStore } from './store.js'

// GET /v1/request-logs and GET /v1/request-logs/{requestId} (docs/partners.md, "The request
// log"): routes like the others, their checks up to step 6 composed from their policies in
// app.ts. A credential reads its own log only: the store is keyed by the caller's credential
// and mode, so another credential's request id is not found, as one that never was. Their own
// requests are not logged (pipeline/log.ts).

export interface RequestLogRouteOptions {
  store: RequestLogStore
  /** The templates of the route table: what the `route` filter takes. */
  routes: readonly string[]
}

/** What the `route` filter takes: every template of the route table of `config`. */
export function routeTemplatesOf(config: Pick<Config, 'routes'>): string[] {
  return [...new Set([...Object.values(builtInRoutes), ...Object.values(webhookRoutes), ...config.routes].map((p) => p.path))]
}

/** A failure of the log's store: the fault is ours and passes (docs/architecture.md §D9). */
function unavailable(error: unknown): ApiError {
  return new ApiError('SERVICE_UNAVAILABLE', 'The request log cannot be read right now; retry shortly.', { retryAfter: 1, cause: error })
}

export function requestLogPartnerRoutes(options: RequestLogRouteOptions) {
  const { store, routes } = options
  return async function partnerRoutes(app: FastifyInstance): Promise<void> {
    const list = requestLogRoutes.listRequestLogs
    const single = requestLogRoutes.getRequestLog

    app.get(routerPath(list.path), { config: { policy: list } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const query = request.parsedQuery as unknown as ListQuery
      const filters = filtersOf(query, routes)
      const page = await store.list(principal.keyId, principal.mode, filters, query.page, query.perPage).catch((error: unknown) => { throw unavailable(error) })
      return sendJsonData(request, reply, page.json, { page: query.page, perPage: query.perPage, total: page.total })
    })

    app.get<{ Params: { requestId: string } }>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const id = request.params.requestId
      const json = await store.get(principal.keyId, principal.mode, id).catch((error: unknown) => { throw unavailable(error) })
      if (json === undefined) throw new ApiError('REQUEST_LOG_NOT_FOUND', `No request with id '${id}' is in the log of this credential.`)
      return sendJsonData(request, reply, json)
    })
  }
}
