import httpProxy from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingHttpHeaders } from 'node:http'
import { Readable } from 'node:stream'
import { ApiError } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_CORRELATION_ID } from '../contract/headers.js'
import { closedForWriteIdle, expectsContinue } from '../http/client-errors.js'
import { MAX_HEAD_BYTES } from '../http/limits.js'
import { callerOf } from '../http/request-state.js'
import type { Principal } from '../keys/principal.js'
import { BODY_METHODS, idempotencyOf, knownScopes, routerPath, type RoutePolicy } from '../routes/policy.js'
import { UpstreamError, type UpstreamOutcome } from '../upstream/errors.js'
import { digest, type IdempotencyOutcome, type IdempotencyRecords, type Lease, type StoredAnswer } from '../idempotency/records.js'
import { errorCode, UPSTREAM_CALL_DEADLINE } from '../upstream/interceptors.js'
import type { Upstream } from '../upstream/upstream.js'
import { headSize, LocationMap, mapLinks, PASSED_RESPONSE_HEADERS, ScopesHeader, serviceRequestHeaders, type ServiceCall } from './headers.js'
import type { Services, ServiceTarget } from './services.js'
import { fillPath, queryOf } from './target.js'

// Declared routes (docs/architecture.md, "Declared routes"): each is forwarded with
// @fastify/http-proxy to its service once the pipeline's checks have passed (app.ts attaches
// them from the route's policy). Every answer of the service is judged here before a byte
// reaches the partner: what may pass is streamed as it comes; every failure becomes
// problem+json that quotes nothing of it.

/**
 * Why a streamed answer ended before its end: the whole-call deadline, the partner taking no
 * bytes (the server's write-idle bound), the partner closing its connection, or the service
 * failing mid-answer.
 */
export type CutReason = 'response_timeout' | 'write_idle' | 'partner_closed' | 'upstream_error'

export interface ProxyHooks {
  onCall?: (upstream: string, outcome: UpstreamOutcome, seconds: number) => void
  onCut?: (upstream: string, reason: CutReason) => void
  /** Writes the request's log line and metrics, which Fastify does only for an answer that finished. */
  onUnfinished?: (request: FastifyRequest, reply: FastifyReply) => void
  /** What an Idempotency-Key's record did for a request of `route`. */
  onIdempotency?: (route: string, outcome: IdempotencyOutcome) => void
}

/** The records of Idempotency-Key (idempotency/records.ts) and their bounds. */
export interface IdempotencySettings {
  records: IdempotencyRecords
  /** Largest answer body kept for replay. */
  maxBodyBytes: number
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

function isIdentity(encoding: string | string[]): boolean {
  return typeof encoding === 'string' && /^\s*(identity)?\s*$/i.test(encoding)
}

/**
 * Whether an answer's type may be passed on: a 2xx but 204 is JSON, and a body announced empty
 * is no JSON document either (a partner parses it as the contract's envelope; a HEAD answer
 * announces the length of GET's); a 3xx is JSON or has no body; a 4xx is a problem.
 */
function typeFits(status: number, type: string | string[] | undefined, length: string | string[] | undefined, method: string): boolean {
  if (status < 300) return status === 204 || (isJson(type) && (length !== '0' || method === 'HEAD'))
  if (status < 400) return status === 304 || length === '0' || method === 'HEAD' || isJson(type)
  return isProblem(type)
}

/** What the service receives as a body's type, whatever charset spelling the partner used. */
const JSON_MEDIA_TYPE = 'application/json'

/**
 * The partner's body must be UTF-8 (RFC 8259 8.1). The byte order mark is kept, so a body that
 * starts with one is no JSON document, as the service's parser would find.
 */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * reply-from builds a call's URL as `source` resolved against `getUpstream`, and refuses any
 * source that holds `/..` or `../` once decoded: a legitimate parameter `..b` would trip it.
 * So reply-from's `getUpstream` gives the origin and the whole path the gateway built (the
 * proxy plugin's own, asked before the handler runs, gives the origin alone), and `source` is the
 * path's last segment, which resolves to that same path. The last segment is a parameter
 * (never dots only, no `/` or `:`) or the operator's text, so a partner's input cannot trip
 * the check. A segment with a colon is written `./seg`, or it would read as a scheme (RFC 3986
 * 4.2). The query never goes through `source`: reply-from asks `queryString` for it.
 */
function sourceOf(path: string): string {
  const last = path.slice(path.lastIndexOf('/') + 1)
  return last === '' || last.includes(':') ? `./${last}` : last
}

function builtQuery(_search: string, _url: string, request: FastifyRequest): string {
  return (request.upstreamQuery as string).slice(1)
}

function unavailable(upstream: Upstream, error: UpstreamError): ApiError {
  const retryAfter = upstream.retryAfterOf(error)
  return new ApiError('SERVICE_UNAVAILABLE', `The service is temporarily unavailable; retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`, {
    retryAfter, cause: error,
  })
}

function noop(): void {}

function internal(cause: unknown): ApiError {
  return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred; it has been logged.', { cause })
}

/** A call that failed without an answer, as the partner is told of it. */
function refusal(upstream: Upstream, failure: UpstreamError, principal: Principal): ApiError {
  switch (failure.kind) {
    case 'share-full': {
      const credential = principal.kind === 'apiKey' ? 'This API key' : 'The client of this access token'
      return new ApiError('RATE_LIMITED', `${credential} has as many calls in flight to this service as it may (a concurrency bound, apart from the quota); retry in 1 second.`, {
        retryAfter: 1, cause: failure,
      })
    }
    case 'unavailable':
      return unavailable(upstream, failure)
    default:
      return internal(failure)
  }
}

function cutReason(stream: Readable, raw: FastifyReply['raw']): CutReason {
  const code = errorCode(stream.errored)
  if (code === UPSTREAM_CALL_DEADLINE) return 'response_timeout'
  if (closedForWriteIdle(raw.socket)) return 'write_idle'
  // The partner going away destroys the stream, which undici reports as aborted.
  return stream.errored === null || code === 'UND_ERR_ABORTED' ? 'partner_closed' : 'upstream_error'
}

/**
 * A partner that sent `Expect: 100-continue` waits for the 100 before it sends its body: it
 * gets it once the checks before the body have passed, so a refused request costs no upload.
 */
function continueToBody(request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (error: null, payload: Readable) => void): void {
  if (!reply.raw.headersSent && announcesBody(request) && expectsContinue(request.raw)) reply.raw.writeContinue()
  done(null, payload)
}

function announcesBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length']
  return BODY_METHODS.has(request.method) && (request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0'))
}

/** An answer kept for replay, as the partner got it: the allowed headers of the service, mapped. */
const REPLAYED_HEADERS = ['content-type', 'content-language', 'location', 'link'] as const

/**
 * What tells two requests with one Idempotency-Key apart (docs/architecture.md, "Idempotency
 * records"): the public path and query as sent, the property, the body's type and its bytes.
 */
function fingerprintOf(request: FastifyRequest): string {
  const type = request.headers['content-type']
  const body = request.body as Buffer | undefined
  return digest(request.url, request.propertyId ?? '', typeof type === 'string' ? type : '', body ?? '')
}

/**
 * The body of a stream up to `max` bytes; past it, undefined and what was read so far, with
 * the stream paused where it was.
 */
function collect(stream: Readable, max: number): Promise<{ body: Buffer } | { over: Buffer[] }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const done = (): void => {
      stream.off('data', onData)
      stream.off('end', onEnd)
      stream.off('error', onError)
    }
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk)
      size += chunk.length
      if (size <= max) return
      stream.pause()
      done()
      resolve({ over: chunks })
    }
    const onEnd = (): void => {
      done()
      resolve({ body: Buffer.concat(chunks, size) })
    }
    const onError = (error: Error): void => {
      done()
      reject(error)
    }
    stream.on('data', onData)
    stream.once('end', onEnd)
    stream.once('error', onError)
  })
}

/** What was read of an answer, then the rest of it as it comes. */
function resumed(read: Buffer[], rest: Readable): Readable {
  return Readable.from((async function* chunks() {
    yield* read
    yield* rest
  })(), { objectMode: false })
}

/** A record a request holds from its claim until it is answered or released. */
interface Held {
  lease: Lease
  /** Set once onResponse or onError took it over: the answer decides. */
  settled: boolean
}

export function declaredRoutes(policies: readonly RoutePolicy[], services: Services, hooks: ProxyHooks = {}, idempotency?: IdempotencySettings) {
  const scopesHeader = new ScopesHeader(knownScopes(policies))
  return async function routes(app: FastifyInstance): Promise<void> {
    for (const policy of policies) {
      const forward = policy.forward
      if (forward === undefined) continue
      const service = services.get(forward.upstream)
      const origins = [service.live, ...(service.sandbox === undefined ? [] : [service.sandbox])].map((t) => new URL(t.upstream.url).origin)
      const locations = new LocationMap(policies.filter((p) => p.forward?.upstream === forward.upstream), origins)
      const call: ServiceCall = { tokenHeader: service.settings.tokenHeader, propertyScoped: policy.scope === 'property', scopes: scopesHeader }
      const uuidParams = Object.entries(policy.pathParams).filter(([, rule]) => rule.type === 'uuid').map(([name]) => name)
      // A record's lease outlasts the longest call the gateway makes (its whole-call bound), so
      // only a dead instance's record is ever taken over.
      const leaseMs = Math.max(service.settings.timeoutMs, service.settings.responseTimeoutMs) + 5000
      const held = new WeakMap<FastifyRequest, Held>()

      const counted = (request: FastifyRequest, outcome: IdempotencyOutcome): void => {
        request.idempotency = outcome
        hooks.onIdempotency?.(policy.path, outcome)
      }

      /** Releases the request's record (a retry is forwarded again); resolves once Redis answered or failed. */
      const release = async (request: FastifyRequest, entry: Held, why: string): Promise<void> => {
        if (idempotency === undefined) return
        try {
          await idempotency.records.release(entry.lease)
          counted(request, 'released')
        } catch (error) {
          request.log.warn({ err: error, why }, 'idempotency record not released (Redis failed); it frees itself when its lease runs out')
        }
      }

      /** The release the answer chose, then `send`. */
      const settle = (request: FastifyRequest, why: string, send: () => void): void => {
        const entry = held.get(request)
        if (entry === undefined || entry.settled) return send()
        entry.settled = true
        void release(request, entry, why).then(send)
      }

      /** Claims the request's record; true when the request was answered from it (a replay). */
      const claim = async (request: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
        const records = (idempotency as IdempotencySettings).records
        const key = records.keyOf(callerOf(request).principal.keyId, request.method, policy.path, request.idempotencyKey as string)
        let result
        try {
          result = await records.claim(key, fingerprintOf(request), leaseMs)
        } catch (error) {
          // A duplicate is worse than a wait: without its record, a keyed request is not
          // forwarded (docs/architecture.md §D23).
          throw new ApiError('SERVICE_UNAVAILABLE', 'Idempotency keys cannot be checked right now; retry in 1 second.', { retryAfter: 1, cause: error })
        }
        switch (result.kind) {
          case 'claimed': {
            const entry: Held = { lease: result.lease, settled: false }
            held.set(request, entry)
            // A request that ends before any answer took its record over (the partner went
            // away, a refusal on the way out) frees it.
            reply.raw.once('close', () => {
              if (!entry.settled) settle(request, 'request ended before an answer', noop)
            })
            return false
          }
          case 'in_use':
            counted(request, 'in_use')
            throw new ApiError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still in flight; retry in 1 second to get its answer.', { retryAfter: 1 })
          case 'reused':
            counted(request, 'reused')
            throw new ApiError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for a different request; send a new key with each new request.')
          case 'answered':
            counted(request, 'replayed')
            replay(request, reply, result.answer)
            return true
        }
      }

      const replay = (request: FastifyRequest, reply: FastifyReply, answer: StoredAnswer): void => {
        reply.code(answer.status)
        for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value)
        reply.header('idempotent-replayed', 'true')
        reply.headers(COMMON_HEADERS)
        // Echoed on successes only (docs/partners.md, "Every answer"), as on the answer first sent.
        if (answer.status >= 200 && answer.status < 300 && request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
        reply.send(answer.body)
      }

      /**
       * A keyed request's answer (docs/architecture.md §D22): read whole (up to maxBodyBytes),
       * kept, then sent; a larger one is passed on as it comes and its record released.
       */
      const keepAndSend = (request: FastifyRequest, reply: FastifyReply, target: ServiceTarget, status: number, stream: Readable): void => {
        const entry = held.get(request) as Held
        const settings = idempotency as IdempotencySettings
        collect(stream, settings.maxBodyBytes).then(async (read) => {
          if ('over' in read) {
            request.log.warn({ maxBodyBytes: settings.maxBodyBytes, route: policy.path },
              'answer over idempotency.maxBodyBytes: passed on without being kept; the idempotency record is released')
            await release(request, entry, 'answer over maxBodyBytes')
            streamOn(request, reply, target, resumed(read.over, stream), stream)
            return
          }
          const headers: Record<string, string> = {}
          for (const name of REPLAYED_HEADERS) {
            const value = reply.getHeader(name)
            if (typeof value === 'string') headers[name] = value
          }
          try {
            if (await settings.records.answer(entry.lease, { status, headers, body: read.body })) counted(request, 'stored')
            else request.log.warn('idempotency record was taken over before the answer came; the answer is not kept')
          } catch (error) {
            request.log.warn({ err: error }, 'idempotency answer not kept (Redis failed); its record frees itself when its lease runs out')
          }
          reply.send(read.body)
        }, async (error: unknown) => {
          // The service failed mid-answer, before the partner got a byte: as if it failed at once.
          const reason = cutReason(stream, reply.raw)
          request.upstreamCut = reason
          hooks.onCut?.(target.upstream.name, reason)
          await release(request, entry, 'answer cut')
          reply.send(unavailable(target.upstream, target.upstream.failure(error)))
        })
      }

      /** Passes a stream on; `source` is the service's own stream, whose end tells why a cut happened. */
      const streamOn = (request: FastifyRequest, reply: FastifyReply, target: ServiceTarget, stream: Readable, source: Readable): void => {
        reply.raw.once('close', () => {
          if (reply.raw.writableFinished) return
          const reason = cutReason(source, reply.raw)
          request.upstreamCut = reason
          hooks.onCut?.(target.upstream.name, reason)
          hooks.onUnfinished?.(request, reply)
        })
        reply.send(stream)
      }

      const targetOf = (request: FastifyRequest): ServiceTarget => {
        const target = services.target(forward.upstream, callerOf(request).principal.mode)
        // The test-mode stage answered before a test key could get here without a sandbox.
        if (target === undefined) throw new Error(`no ${callerOf(request).principal.mode} target for ${forward.upstream}`)
        return target
      }

      const serviceUrl = (request: FastifyRequest): string => `${targetOf(request).origin}${request.upstreamPath as string}`

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
        const encoding = headers['content-encoding']
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
        } else if (encoding !== undefined && !isIdentity(encoding)) {
          // Asked for identity: an encoded body would reach the partner as bytes it cannot read.
          outcome = 'bad_response'
          verdict = internal(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: answered ${status} with Content-Encoding ${String(encoding)}`))
        } else if (!typeFits(status, type, headers['content-length'], request.method)) {
          outcome = 'bad_response'
          verdict = internal(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: answered ${status} with ${String(type ?? 'no content type')}`))
        } else if (status >= 400) {
          outcome = 'client_error'
        }
        observe(request, target, outcome, status)
        const entry = held.get(request)
        if (verdict !== undefined) {
          res.stream.resume()
          const refused = verdict
          settle(request, `service answered ${status}`, () => reply.send(refused))
          return
        }
        if (entry !== undefined) entry.settled = true
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
        const link = headers.link
        if (link !== undefined) {
          const mapped = mapLinks(link, locations)
          if (mapped !== undefined) reply.header('link', mapped)
        }
        // A correlation id is echoed on successes only (docs/partners.md, "Every answer"): 2xx,
        // not a redirect.
        if (status >= 200 && status < 300 && request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
        if (entry !== undefined) keepAndSend(request, reply, target, status, res.stream)
        else streamOn(request, reply, target, res.stream, res.stream)
      }

      const onError = (reply: FastifyReply, { error }: { error: Error & { cause?: unknown } }): void => {
        const request = reply.request
        const target = targetOf(request)
        // reply-from wraps what failed; the interceptors' codes are on the cause.
        const failure = target.upstream.failure(error.cause ?? error)
        observe(request, target, failure.outcome, null)
        const refused = refusal(target.upstream, failure, callerOf(request).principal)
        settle(request, failure.outcome, () => reply.send(refused))
      }

      /** 431 when the service's request head would be over what services take. */
      const checkHeadSize = (request: FastifyRequest, out: Record<string, string>): void => {
        const size = headSize(request.method, `${request.upstreamPath as string}${request.upstreamQuery as string}`, out)
        if (size > MAX_HEAD_BYTES) {
          throw new ApiError('REQUEST_HEADERS_TOO_LARGE',
            `With the headers the gateway adds, this request comes to ${size} bytes of headers; at most ${MAX_HEAD_BYTES} are accepted. Send shorter Accept, Accept-Language or query values.`)
        }
      }

      const serviceHeaders = (request: FastifyRequest, host: string, length: string | undefined): Record<string, string> => {
        const out = serviceRequestHeaders(request, call, targetOf(request).token)
        out.host = host
        if (request.body !== undefined) {
          // reply-from counted the body it sends; its type is plain JSON, whatever the partner's spelling.
          out['content-type'] = JSON_MEDIA_TYPE
          out['content-length'] = String(length)
        }
        return out
      }

      const rewriteRequestHeaders = (request: FastifyRequest, headers: IncomingHttpHeaders): Record<string, string> => {
        const out = serviceHeaders(request, headers.host as string, headers['content-length'] as string | undefined)
        checkHeadSize(request, out)
        return out
      }

      await app.register(async (scope) => {
        // The body is read only after the key is valid (content parsing follows onRequest),
        // kept byte for byte, and checked to be JSON (docs/architecture.md, "Order of checks",
        // step 6).
        if (policy.body !== 'none') {
          scope.addHook('preParsing', continueToBody)
          scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: policy.body.maxBytes }, (_request, body, done) => {
            let text: string
            try {
              text = utf8.decode(body as Buffer)
            } catch {
              done(new ApiError('MALFORMED_JSON', 'The request body is not valid UTF-8.'), undefined)
              return
            }
            try {
              JSON.parse(text)
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
            getUpstream: (request: FastifyRequest) => targetOf(request).origin,
            queryString: builtQuery,
            rewriteRequestHeaders,
            rewriteHeaders: () => ({}),
            onResponse,
            onError,
          },
          handler: async (request: FastifyRequest, reply: FastifyReply, _dest: string, replyOptions: object) => {
            const params: Record<string, string> = { ...(request.params as Record<string, string>) }
            for (const name of uuidParams) params[name] = (params[name] as string).toLowerCase()
            if (request.propertyId !== null) params.propertyId = request.propertyId
            const path = fillPath(forward.path, params)
            request.upstreamPath = path
            request.upstreamQuery = queryOf(request.query as object, request.parsedQuery ?? {})
            request.upstreamStartedAt = performance.now()
            const body = request.body as Buffer | undefined
            if (idempotency !== undefined && request.idempotencyKey !== null && idempotencyOf(policy, request.method) !== undefined) {
              // Every refusal of the gateway's own comes before the record (docs/architecture.md
              // §D21): the head's size too, measured as the call will send it.
              checkHeadSize(request, serviceHeaders(request, new URL(targetOf(request).origin).host, body === undefined ? undefined : String(body.length)))
              if (await claim(request, reply)) return reply
            }
            const options: object = body === undefined
              ? { ...replyOptions, getUpstream: serviceUrl }
              : { ...replyOptions, getUpstream: serviceUrl, body, contentType: JSON_MEDIA_TYPE }
            reply.headers(COMMON_HEADERS)
            return reply.from(sourceOf(path), options)
          },
        } as unknown as Parameters<typeof httpProxy>[1])
      })
    }
  }
}
