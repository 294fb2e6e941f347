import { createHash, timingSafeEqual } from 'node:crypto'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { toApiError } from '../contract/error-handler.js'
import { ApiError } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_REQUEST_ID } from '../contract/headers.js'
import { pathOf, PROBLEM_CONTENT_TYPE, problemBody } from '../contract/problem.js'
import { clientErrorHandler } from '../http/client-errors.js'
import { generateRequestId } from '../http/request-id.js'
import type { Metrics } from './metrics.js'
import { statusReport, type StatusSources } from './status.js'

// The admin listener (ADMIN_HOST:ADMIN_PORT): metrics and status for operators, on a port
// of its own so that neither route is ever reachable on the public one. With ADMIN_TOKEN
// set, both need `Authorization: Bearer <ADMIN_TOKEN>`. `/livez` needs none: an orchestrator's
// liveness probe carries no token, and it tells nothing but that the process answers. Its
// refusals are problem+json like the public port's, with a Service-Request-Id
// (docs/architecture.md §D18). With the token set, a request without it gets the same 401
// whatever it asks for: a known route, an unknown one, a path Fastify's router refuses before
// any hook runs (a malformed percent-escape, an over-long parameter) or a method a route does
// not take, so that nothing tells it which routes exist (docs/architecture.md §D67).

const LIVENESS_PATH = '/livez'
const ADMIN_CHALLENGE = 'Bearer realm="admin"'
const TOKEN_DETAIL = 'The admin routes need `Authorization: Bearer <ADMIN_TOKEN>`.'

export interface AdminOptions {
  token?: string | undefined
  /** Where the `type` links of its problems point (the config's docsUrl). */
  docsUrl: string
  /** Routes of other parts on this listener (the credentials API), behind the same token; `paths` names them for the 404's detail. */
  extensions?: readonly AdminExtension[]
  /**
   * Paths whose routes check their callers' tokens themselves (the ingest of events, with
   * publisher tokens: docs/operations.md, "Events"): the admin token is neither asked for nor
   * taken there.
   */
  ownAuthPaths?: readonly string[]
}

export interface AdminExtension {
  paths: string
  routes: (admin: FastifyInstance) => Promise<void>
}

/** Sends `error` as problem+json from the admin listener (its common headers are set by its first hook). */
export function sendAdminProblem(request: FastifyRequest, reply: FastifyReply, error: ApiError, docsUrl: string): FastifyReply {
  if (error.headers !== undefined) reply.headers(error.headers)
  if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter))
  return reply.code(error.status).type(PROBLEM_CONTENT_TYPE).send(problemBody(error, docsUrl, pathOf(request.url), request.id))
}

// Digests of equal length, so the comparison takes the same time whatever was sent.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

export async function buildAdmin(metrics: Metrics, sources: StatusSources, options: AdminOptions): Promise<FastifyInstance> {
  const token = options.token
  const expected = token === undefined ? undefined : digest(`Bearer ${token}`)
  const ownAuth = new Set(options.ownAuthPaths)
  const problem = (request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply => sendAdminProblem(request, reply, error, options.docsUrl)
  /** The 401 for a request without the token, or undefined when it may go on. */
  const refusal = (request: FastifyRequest): ApiError | undefined => {
    if (expected === undefined) return undefined
    const presented = request.headers.authorization
    if (presented !== undefined && timingSafeEqual(digest(presented), expected)) return undefined
    const code = presented === undefined ? 'MISSING_AUTH_HEADER' : 'INVALID_AUTH_HEADER'
    return new ApiError(code, TOKEN_DETAIL, { headers: { 'www-authenticate': ADMIN_CHALLENGE } })
  }
  const commonHeaders = (reply: FastifyReply): void => {
    reply.headers(COMMON_HEADERS)
    reply.header(HEADER_REQUEST_ID, reply.request.id)
  }
  const admin = Fastify({
    logger: false,
    genReqId: generateRequestId,
    // The router refuses these before any hook: the token is checked here as in the hook.
    frameworkErrors: (error, request, reply) => {
      commonHeaders(reply)
      return problem(request, reply, refusal(request) ?? toApiError(error))
    },
    // What Node's parser refuses never reaches a route: answered on the socket, the same
    // for every path, with no route's methods.
    clientErrorHandler: clientErrorHandler(options.docsUrl, { allowFor: () => undefined }),
  })
  admin.addHook('onRequest', async (_request, reply) => commonHeaders(reply))
  if (expected !== undefined) {
    admin.addHook('onRequest', async (request, reply) => {
      // Only a route that exists skips the token: another method on its path is a 404 whose
      // detail lists the routes.
      if (!request.is404 && (request.url === LIVENESS_PATH || ownAuth.has(pathOf(request.url)))) return
      const refused = refusal(request)
      if (refused !== undefined) return problem(request, reply, refused)
    })
  }
  const served = ['/metrics', '/status', ...(options.ownAuthPaths ?? []), ...(options.extensions ?? []).map((e) => e.paths)]
  admin.setNotFoundHandler((request, reply) => problem(request, reply,
    new ApiError('ROUTE_NOT_FOUND', `There is no admin route at ${pathOf(request.url)}; the admin port serves ${served.join(', ')} and ${LIVENESS_PATH}.`)))
  admin.setErrorHandler((_error, request, reply) => problem(request, reply, new ApiError('INTERNAL_ERROR', 'An unexpected error occurred.')))
  // Alive while the event loop turns; Redis or an upstream being down is not a reason to
  // restart the process (readiness, on the public port's /v1/health, covers those).
  admin.get(LIVENESS_PATH, async () => ({ status: 'ok' }))
  admin.get('/metrics', async (_request, reply) => {
    reply.type(metrics.registry.contentType)
    return metrics.registry.metrics()
  })
  admin.get('/status', async () => statusReport(sources))
  for (const extension of options.extensions ?? []) await admin.register(extension.routes)
  return admin
}
