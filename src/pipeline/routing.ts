import type { FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import { pathOf, quoteInput } from '../contract/problem.js'
import { headerLines } from '../http/header-lines.js'
import { MAX_URL_LENGTH } from '../http/limits.js'
import type { RouteIndex } from '../http/route-index.js'

// Step 1 of the order of checks (docs/architecture.md, "Order of checks"): the route. Unknown
// host or path 404, trailing slash and wrong case 400, other method 405 with Allow, oversize
// target 414. A detail quotes the path or host the partner sent, cut to a bounded length.

function checkUrlLength(request: FastifyRequest): void {
  if (request.url.length > MAX_URL_LENGTH) {
    throw new ApiError('URI_TOO_LONG', `The request target is ${request.url.length} characters long; at most ${MAX_URL_LENGTH} are accepted.`)
  }
}

/**
 * The host, then the brand it selects. An HTTP/1.1 request names its host exactly once (RFC
 * 9112 3.2): none, or two (Node would keep the first), is a malformed request, answered
 * before anything is decided on a host.
 */
function resolveBrand(request: FastifyRequest): void {
  const lines = headerLines(request.raw.rawHeaders, 'host')
  if (lines === 0 && request.raw.httpVersion === '1.1') {
    throw new ApiError('MISSING_REQUIRED_HEADER', 'The Host header is required.', {
      errors: [{ field: 'Host', code: 'REQUIRED', detail: 'Send the host name of the API you call, e.g. api.acme-hotels.example.' }],
    })
  }
  if (lines > 1) {
    throw new ApiError('INVALID_HEADER', 'Invalid Host header.', { errors: [{ field: 'Host', code: 'INVALID_FORMAT', detail: 'Send one Host header.' }] })
  }
  request.brand = request.server.brands.forHost(request.host) ?? null
}

function hostNotServed(request: FastifyRequest): ApiError {
  return new ApiError('ROUTE_NOT_FOUND', `No API is served at host '${quoteInput(request.hostname)}'.`)
}

function hasEmptyParameter(params: unknown): boolean {
  for (const value of Object.values(params as Record<string, string>)) if (value === '') return true
  return false
}

/** Why nothing answers this request: the route step's verdict on an unmatched path. */
function explainMiss(request: FastifyRequest, index: RouteIndex): ApiError {
  const path = pathOf(request.url)
  const diagnosis = index.diagnose(request.method, path)
  if (diagnosis === undefined) return new ApiError('ROUTE_NOT_FOUND', `There is no endpoint at ${quoteInput(path)}.`)
  if (diagnosis.brandScoped && request.brand === null) return hostNotServed(request)
  switch (diagnosis.kind) {
    case 'methodNotAllowed':
      return new ApiError('METHOD_NOT_ALLOWED', `${quoteInput(path)} does not support ${request.method}; it supports ${diagnosis.allow}.`, {
        headers: { allow: diagnosis.allow },
      })
    case 'trailingSlash':
      return new ApiError('TRAILING_SLASH_NOT_ALLOWED', `Remove the trailing slash: request ${quoteInput(path.slice(0, -1))}.`)
    case 'caseMismatch':
      // The right path carries the partner's own parameter values.
      return new ApiError('PATH_CASE_MISMATCH', `Paths are case-sensitive: request ${quoteInput(diagnosis.path)}.`)
  }
}

/**
 * Step 1 for a matched route, named `label` in logs and metrics; a brand-scoped route answers
 * only on a brand's host.
 */
export function routingStage(index: RouteIndex, label: string, brandScoped: boolean) {
  const hasParameters = label.includes(':') || label.includes('{')
  return function route(request: FastifyRequest): void {
    request.routeUrl = label
    checkUrlLength(request)
    resolveBrand(request)
    // The router lets a parameter match nothing (`/v1/properties/`); no route takes that.
    if (hasParameters && hasEmptyParameter(request.params)) throw explainMiss(request, index)
    if (brandScoped && request.brand === null) throw hostNotServed(request)
  }
}

/** The not-found handler: explains why nothing matched. */
export function notFoundHandler(index: RouteIndex) {
  return function notFound(request: FastifyRequest): never {
    checkUrlLength(request)
    resolveBrand(request)
    throw explainMiss(request, index)
  }
}

/**
 * Step 1 for a path no route serves but that moved (config `moved`): where it went, with the
 * query it came with. Only on a brand's host, as every route it may move to; undefined
 * otherwise, and the not-found handler explains the miss.
 */
export function movedStage(locate: (url: string) => { from: string; location: string } | undefined) {
  return function moved(request: FastifyRequest): string | undefined {
    const found = locate(request.url)
    if (found === undefined) return undefined
    checkUrlLength(request)
    resolveBrand(request)
    if (request.brand === null) return undefined
    request.routeUrl = found.from
    return found.location
  }
}
