import { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { envelopeJson } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import { sendAdminProblem } from '../admin/server.js'
import { ADMIN_API_PREFIX } from '../credentials/admin-api.js'
import { CredentialNotFound, type CredentialService } from '../credentials/service.js'
import { parseQuery } from '../pipeline/parameters.js'
import { requestLogRoutes, type QuerySpec } from '../routes/policy.js'
import { CSV_HEADER, csvRow } from './csv.js'
import { filtersOf, type ListQuery } from './filters.js'
import type { RequestLogEntry } from './entry.js'
import type { RequestLogStore } from './store.js'

// The request log on the admin port (docs/operations.md, "The request log"): any credential's
// log with the partner's filters and pages, one entry by its request id whatever its
// credential, and a credential's entries of a window as CSV, streamed a chunk at a time so
// that an export of 100,000 rows costs the gateway the memory of one chunk. Served only with
// ADMIN_TOKEN, as the credentials API.

const JSON_TYPE = 'application/json; charset=utf-8'
/** The most rows one export holds: a larger window is refused, not cut. */
export const CSV_MAX_ROWS = 100_000
const CSV_QUERY: QuerySpec = { createdAfter: { type: 'timestamp' }, createdBefore: { type: 'timestamp' } }
/** A look-up by request id takes no query parameter. */
const NO_QUERY: QuerySpec = {}

export const REQUEST_LOG_ADMIN_PATHS = `${ADMIN_API_PREFIX}/credentials/{id}/request-logs, …/request-logs.csv and ${ADMIN_API_PREFIX}/request-logs/{requestId}`

export interface RequestLogAdminOptions {
  store: RequestLogStore
  credentials: CredentialService
  /** The templates of the route table in force: what the `route` filter takes. */
  routes: () => readonly string[]
  docsUrl: string
  /** Whether Redis answers now: a failure while it does not is a 503, else a 500. */
  storeUp: () => boolean
  onError?: (error: unknown) => void
}

function toApiError(error: unknown, options: RequestLogAdminOptions): ApiError {
  if (error instanceof ApiError) return error
  if (error instanceof CredentialNotFound) return new ApiError('CREDENTIAL_NOT_FOUND', `No API key or client grant has the id '${quoteInput(error.id)}'.`)
  if (!options.storeUp()) return new ApiError('SERVICE_UNAVAILABLE', 'The request log cannot be read right now (Redis does not answer); retry shortly.', { retryAfter: 1, cause: error })
  options.onError?.(error)
  return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred; it has been logged.', { cause: error })
}

export function requestLogAdminRoutes(options: RequestLogAdminOptions) {
  const { store, credentials } = options
  /** The credential's mode: its log's; 404 CREDENTIAL_NOT_FOUND when it has none (never issued, or revoked). */
  const modeOf = async (id: string): Promise<string> => (await credentials.show(id)).mode

  return async function routes(app: FastifyInstance): Promise<void> {
    app.setErrorHandler((error, request, reply) => sendAdminProblem(request, reply, toApiError(error, options), options.docsUrl))

    app.get<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/request-logs`, async (request, reply) => {
      const query = parseQuery(request.query as Record<string, unknown>, requestLogRoutes.listRequestLogs.query) as unknown as ListQuery
      const filters = filtersOf(query, options.routes())
      const id = request.params.id
      const found = await store.list(id, await modeOf(id), filters, query.page, query.perPage)
      return reply.code(200).type(JSON_TYPE).send(envelopeJson(found.json, request.id, { page: query.page, perPage: query.perPage, total: found.total }))
    })

    app.get<{ Params: { requestId: string } }>(`${ADMIN_API_PREFIX}/request-logs/:requestId`, async (request, reply) => {
      parseQuery(request.query as Record<string, unknown>, NO_QUERY)
      const id = request.params.requestId
      const json = await store.find(id)
      if (json === undefined) throw new ApiError('REQUEST_LOG_NOT_FOUND', `No request with id '${quoteInput(id)}' is in the request log.`)
      return reply.code(200).type(JSON_TYPE).send(envelopeJson(json, request.id))
    })

    app.get<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/request-logs.csv`, async (request, reply) => {
      const query = parseQuery(request.query as Record<string, unknown>, CSV_QUERY) as { createdAfter?: number; createdBefore?: number }
      const id = request.params.id
      const mode = await modeOf(id)
      // The window's end is fixed now, so that what arrives while the rows are read is not in them.
      const before = query.createdBefore ?? Date.now() + 1
      const rows = await store.count(id, mode, query.createdAfter, before)
      if (rows > CSV_MAX_ROWS) {
        throw new ApiError('VALIDATION_FAILED', `The window holds ${rows} entries, more than the ${CSV_MAX_ROWS} an export takes; narrow it with createdAfter and createdBefore.`, {
          errors: [{ field: 'createdAfter', code: 'OUT_OF_RANGE', detail: `Choose a window of at most ${CSV_MAX_ROWS} entries.` }],
        })
      }
      return sendCsv(reply, id, store.entries(id, mode, query.createdAfter, before), options)
    })
  }
}

/** Streams the header row, then each chunk's rows as it is read; a failure midway cuts the answer (its status is sent). */
function sendCsv(reply: FastifyReply, id: string, chunks: AsyncGenerator<RequestLogEntry[]>, options: RequestLogAdminOptions): FastifyReply {
  async function* text(): AsyncGenerator<string> {
    yield CSV_HEADER
    try {
      for await (const chunk of chunks) yield chunk.map(csvRow).join('')
    } catch (error) {
      options.onError?.(error)
      throw error
    }
  }
  return reply.code(200)
    .type('text/csv; charset=utf-8')
    .header('content-disposition', `attachment; filename="${id}-request-log.csv"`)
    .send(Readable.from(text(), { objectMode: false }))
}
