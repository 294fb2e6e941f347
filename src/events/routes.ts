import type { FastifyInstance } from 'fastify'
import { sendJsonData } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import { callerOf } from '../http/request-state.js'
import { builtInRoutes, eventListPolicy, routerPath } from '../routes/policy.js'
import type { EventFilters, EventLog } from './log.js'
import type { EventTypes } from './types.js'

// GET /v1/events and GET /v1/events/{eventId} (docs/architecture.md, "Events"): routes like the
// others, their checks up to step 6 composed from their policies in app.ts. What a credential
// sees is decided on every request, by the indexes read for the list and by the same rule
// for one event; an event it may not see is not found, as one that does not exist.

interface ListQuery extends EventFilters {
  page: number
  perPage: number
}

/** A failure of the log's store: the fault is ours and passes (docs/architecture.md §D9). */
function unavailable(error: unknown): ApiError {
  return new ApiError('SERVICE_UNAVAILABLE', 'The event log cannot be read right now; retry shortly.', { retryAfter: 1, cause: error })
}

/** `types`: those of the configuration the app is built from (a reload builds it before they are in force). */
export function eventRoutes(log: EventLog, types: EventTypes = log.types) {
  return async function routes(app: FastifyInstance): Promise<void> {
    const list = eventListPolicy(types.publicTypes)
    const single = builtInRoutes.getEvent

    app.get(routerPath(list.path), { config: { policy: list } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const { page, perPage, ...filters } = request.parsedQuery as unknown as ListQuery
      const result = await log.list(principal, filters, page, perPage).catch((error: unknown) => { throw unavailable(error) })
      return sendJsonData(request, reply, result.json, { page, perPage, total: result.total })
    })

    app.get<{ Params: { eventId: string } }>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const id = request.params.eventId
      const json = await log.get(principal, id).catch((error: unknown) => { throw unavailable(error) })
      if (json === undefined) throw new ApiError('EVENT_NOT_FOUND', `No event with id '${id}' exists for this credential.`)
      return sendJsonData(request, reply, json)
    })
  }
}
