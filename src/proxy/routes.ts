import httpProxy from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import { ApiError } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_CORRELATION_ID } from '../contract/headers.js'
import { callerOf } from '../http/request-state.js'
import { outgoingTraceHeaders } from '../http/trace.js'
import { routerPath, type RoutePolicy } from '../routes/policy.js'
import { UpstreamError, type UpstreamOutcome } from '../upstream/errors.js'
import type { Upstream } from '../upstream/upstream.js'
import { forwardableHeaders, LocationMap, PASSED_RESPONSE_HEADERS } from './headers.js'
import type { Services, ServiceTarget } from './services.js'

// Declared routes (routes.md): each is forwarded with @fastify/http-proxy to its service once
// the pipeline's checks have passed (app.ts attaches them from the route's policy). Every
// answer of the service is judged here before a byte reaches the partner: what may pass is
// streamed as it comes; every failure becomes problem+json that quotes nothing of it.

export interface ProxyHooks {
  onCall?: (upstream: string, outcome: UpstreamOutcome, seconds: number) => void
}

interface ProxyResponse {
  statusCode: number
  headers: IncomingHttpHeaders
  stream: Readable
}

const JSON_TYPE = /^application\/json\s*(;|$)/i
const PROBLEM_TYPE = /^application\/problem\+json\s*(;|$)/i

function isJson(type: unknown): boolean {
  return typeof type === 'string' && JSON_TYPE.test(type)
}

function isProblem(type: unknown): boolean {
  return typeof type === 'string' && PROBLEM_TYPE.test(type)
}

/** Fills `{name}` placeholders of the upstream path, URL-encoded (routes.md). */
function fillPath(template: string, values: Record<string, string>): string {
  return template.replace(/\{([A-Za-z][A-Za-z0-9]*)\}/g, (_m, name: string) => encodeURIComponent(values[name] ?? ''))
}

function unavailable(upstream: Upstream, error: UpstreamError): ApiError {
  const retryAfter = upstream.retryAfterOf(error)
  return new ApiError('SERVICE_UNAVAILABLE', `The service is temporarily unavailable; retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`, {
    retryAfter, cause: error,
  })
}

function internal(cause: unknown): ApiError {
  return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred; it has been logged.', { cause })
}

export function declaredRoutes(policies: readonly RoutePolicy[], services: Services, hooks: ProxyHooks = {}) {
  return async function routes(app: FastifyInstance): Promise<void> {
    for (const policy of policies) {
      const forward = policy.forward
      if (forward === undefined) continue
      const service = services.get(forward.upstream)
      const origins = [service.live, ...(service.sandbox === undefined ? [] : [service.sandbox])].map((t) => new URL(t.upstream.url).origin)
      const locations = new LocationMap(policies.filter((p) => p.forward?.upstream === forward.upstream), origins)
      const tokenHeader = service.settings.tokenHeader
      const uuidParams = Object.entries(policy.pathParams).filter(([, rule]) => rule.type === 'uuid').map(([name]) => name)

      const targetOf = (request: FastifyRequest): ServiceTarget => {
        const target = services.target(forward.upstream, callerOf(request).principal.mode)
        // The test-mode stage answered before a test key could get here without a sandbox.
        if (target === undefined) throw new Error(`no ${callerOf(request).principal.mode} target for ${forward.upstream}`)
        return target
      }

      const observe = (request: FastifyRequest, target: ServiceTarget, outcome: UpstreamOutcome, status: number | null): void => {
        const seconds = (performance.now() - (request.upstreamStartedAt ?? performance.now())) / 1000
        request.upstreamMs = seconds * 1000
        request.upstreamName = target.upstream.name
        request.upstreamStatus = status
        hooks.onCall?.(target.upstream.name, outcome, seconds)
      }

      const onResponse = (request: FastifyRequest, reply: FastifyReply, res: ProxyResponse): void => {
        const target = targetOf(request)
        const { statusCode: status, headers } = res
        const type = headers['content-type']
        const noBody = status === 204 || status === 304 || headers['content-length'] === '0' || request.method === 'HEAD'
        const failure = target.upstream.unavailableAnswer(status, headers)
        let verdict: ApiError | undefined
        let outcome: UpstreamOutcome = 'success'
        if (failure !== undefined) {
          outcome = failure.outcome
          verdict = unavailable(target.upstream, failure)
        } else if (status === 401 || status === 407) {
          // The service refused the gateway's own token: ours to fix, not the partner's.
          outcome = 'bad_response'
          verdict = internal(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: answered ${status} to the gateway's token`))
        } else if (status < 400 ? !(noBody || isJson(type)) : !isProblem(type)) {
          outcome = 'bad_response'
          verdict = internal(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: answered ${status} with ${String(type ?? 'no content type')}`))
        } else if (status >= 400) {
          outcome = 'client_error'
        }
        observe(request, target, outcome, status)
        if (verdict !== undefined) {
          res.stream.resume()
          reply.send(verdict)
          return
        }
        reply.code(status)
        for (const name of PASSED_RESPONSE_HEADERS) {
          const value = headers[name]
          if (value !== undefined) reply.header(name, value)
        }
        const location = headers.location
        if (typeof location === 'string') {
          const mapped = locations.map(location)
          if (mapped !== undefined) reply.header('location', mapped)
        }
        // A correlation id is echoed on successes only (decisions 2).
        if (status < 400 && request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
        reply.send(res.stream)
      }

      const onError = (reply: FastifyReply, { error }: { error: Error & { cause?: unknown } }): void => {
        const request = reply.request
        const target = targetOf(request)
        // reply-from wraps what failed; the interceptors' codes are on the cause.
        const failure = target.upstream.failure(error.cause ?? error)
        observe(request, target, failure.outcome, null)
        reply.send(unavailable(target.upstream, failure))
      }

      const rewriteRequestHeaders = (request: FastifyRequest, headers: IncomingHttpHeaders): Record<string, string | string[]> => {
        const { brand, principal } = callerOf(request)
        const target = targetOf(request)
        const out = forwardableHeaders(headers, tokenHeader)
        if (tokenHeader !== undefined && target.token !== undefined) out[tokenHeader] = target.token
        out['x-request-id'] = request.id
        if (request.trace !== null) Object.assign(out, outgoingTraceHeaders(request.trace))
        out['x-service-key-id'] = principal.keyId
        out['x-service-brand'] = brand.id
        out['x-service-mode'] = principal.mode
        if (policy.scope === 'property' && request.propertyId !== null) out['x-service-property-id'] = request.propertyId
        return out
      }

      await app.register(async (scope) => {
        // The body is read only after the key is valid (content parsing follows onRequest),
        // kept byte for byte, and checked to be JSON (routes.md, step 6).
        if (policy.body !== 'none') {
          scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: policy.body.maxBytes }, (_request, body, done) => {
            try {
              JSON.parse((body as Buffer).toString('utf8'))
            } catch {
              done(new ApiError('MALFORMED_JSON', 'The request body is not well-formed JSON.'), undefined)
              return
            }
            done(null, body)
          })
        }
        await scope.register(httpProxy, {
          prefix: routerPath(policy.path),
          // Exactly the declared path: a prefix route would forward /v1/rooms/extra too.
          routes: [''],
          httpMethods: [...policy.methods],
          // The target (live or sandbox) is chosen per request below.
          upstream: '',
          proxyPayloads: false,
          internalRewriteLocationHeader: false,
          disableRequestLogging: true,
          // No retry by reply-from: a 503 is passed on, connection errors are retried by the upstream's own interceptor.
          retryMethods: [],
          undici: services.dispatcher(forward.upstream),
          config: { policy },
          replyOptions: {
            getUpstream: (request: FastifyRequest) => targetOf(request).upstream.url,
            rewriteRequestHeaders,
            rewriteHeaders: () => ({}),
            onResponse,
            onError,
          },
          handler: (request: FastifyRequest, reply: FastifyReply, _dest: string, replyOptions: object) => {
            const params: Record<string, string> = { ...(request.params as Record<string, string>) }
            for (const name of uuidParams) params[name] = (params[name] as string).toLowerCase()
            if (request.propertyId !== null) params.propertyId = request.propertyId
            request.upstreamStartedAt = performance.now()
            const body = request.body as Buffer | undefined
            const options = body === undefined ? replyOptions : { ...replyOptions, body, contentType: request.headers['content-type'] as string }
            reply.headers(COMMON_HEADERS)
            return reply.from(fillPath(forward.path, params), options)
          },
        } as unknown as Parameters<typeof httpProxy>[1])
      })
    }
  }
}
