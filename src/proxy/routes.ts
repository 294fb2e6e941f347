import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Readable } from 'node:stream'
import { errors, type Dispatcher } from 'undici'
import { ApiError } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_CORRELATION_ID } from '../contract/headers.js'
import { pathOf } from '../contract/problem.js'
import { closedForWriteIdle, expectsContinue } from '../http/client-errors.js'
import { MAX_HEAD_BYTES } from '../http/limits.js'
import { closeWhileDrainingHeader } from '../http/request-context.js'
import { callerOf } from '../http/request-state.js'
import type { Principal } from '../keys/principal.js'
import { BODY_METHODS, idempotencyOf, knownScopes, routerPath, type RoutePolicy } from '../routes/policy.js'
import { UpstreamError, type UpstreamOutcome } from '../upstream/errors.js'
import { digest, type IdempotencyOutcome, type IdempotencyRecords, type Lease, type StoredAnswer } from '../idempotency/records.js'
import { errorCode, UPSTREAM_CALL_DEADLINE, type CallOptions } from '../upstream/interceptors.js'
import type { Upstream } from '../upstream/upstream.js'
import { headSize, LocationMap, mapLinks, PASSED_RESPONSE_HEADERS, ScopesHeader, serviceRequestHeaders, type ServiceCall } from './headers.js'
import type { Services, ServiceTarget } from './services.js'
import { fillPath, queryOf } from './target.js'

// Declared routes (docs/architecture.md, "Declared routes"): each is a route of its own whose
// handler calls the service once the pipeline's checks have passed (app.ts attaches them from
// the route's policy). Every answer of the service is judged here before a byte reaches the
// partner: what may pass is streamed as it comes; every failure becomes problem+json that
// quotes nothing of it.
//
// The call goes straight to the upstream's dispatcher (its pool with the resilience
// interceptors), with one handler object per call that writes the answer's bytes into the
// partner's response as undici hands them over: no proxy plugin rebuilding the URL and the
// headers, no stream between the service's socket and the partner's, and no conversion of the
// answer's headers back and forth between undici's two handler interfaces.

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

function unavailable(upstream: Upstream, error: UpstreamError): ApiError {
  const retryAfter = upstream.retryAfterOf(error)
  return new ApiError('SERVICE_UNAVAILABLE', `The service is temporarily unavailable; retry in ${retryAfter} second${retryAfter === 1 ? '' : 's'}.`, {
    retryAfter, cause: error,
  })
}

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

/**
 * A service's problem as the partner gets it: its `instance` the partner's request path and its
 * `requestId` the gateway's (the `Service-Request-Id`), every other field as the service wrote
 * it, in its order. Undefined when the body is no JSON object.
 */
export function publicProblem(body: Buffer, instance: string, requestId: string): Buffer | undefined {
  let problem: unknown
  try {
    problem = JSON.parse(utf8.decode(body))
  } catch {
    return undefined
  }
  if (typeof problem !== 'object' || problem === null || Array.isArray(problem)) return undefined
  const fields = problem as Record<string, unknown>
  fields.instance = instance
  fields.requestId = requestId
  return Buffer.from(JSON.stringify(fields))
}

/** The service's links after the gateway's own (a deprecated route's `Link`), one header. */
function addLink(reply: FastifyReply, value: string): void {
  const own = reply.getHeader('link')
  reply.header('link', typeof own === 'string' ? `${own}, ${value}` : value)
}

/** An answer kept for replay, as the partner got it: the allowed headers of the service, mapped. */
const REPLAYED_HEADERS = ['content-type', 'content-language', 'location', 'link'] as const

/**
 * What tells two requests with one Idempotency-Key apart (docs/architecture.md, "Idempotency
 * records"): what the service would receive of them. The path and query as they are forwarded
 * (rebuilt from the validated values: `a@b` and `a%40b` are one query), the property, the
 * body's type as it is forwarded (`Application/JSON; charset=UTF-8` and `application/json`
 * are one type) and the body's bytes.
 */
function fingerprintOf(request: FastifyRequest): string {
  const body = request.body as Buffer | undefined
  return digest(`${request.upstreamPath as string}${request.upstreamQuery as string}`, request.propertyId ?? '', body === undefined ? '' : JSON_MEDIA_TYPE, body ?? '')
}

/** A record a request holds from its claim until it is answered or released. */
interface Held {
  lease: Lease
  /** Set once the answer or the call's failure took it over: the answer decides. */
  settled: boolean
}

type Controller = Dispatcher.DispatchController
type AnswerHeaders = Record<string, string | string[] | undefined>

/**
 * What a call does with the bytes of the service's answer: none yet (its head is awaited),
 * passed on as they come, kept whole for an Idempotency-Key's record, held while the record
 * of an answer too large to keep is released, read whole as a problem of the service's (whose
 * `instance` and `requestId` become the partner's), or dropped (an answer refused: it is still
 * read to its end, so its connection serves the next call).
 */
type Mode = 'head' | 'stream' | 'keep' | 'hold' | 'problem' | 'drop'

/**
 * The largest problem of a service's that is passed on: it is read whole to be rewritten. A
 * problem is a few fields and at most a few hundred FieldErrors; a larger body is no problem
 * the contract knows, and is answered 500.
 */
export const MAX_PROBLEM_BYTES = 256 * 1024

const kForwarding = Symbol('forwarding')
type PartnerResponse = ServerResponse & { [kForwarding]?: Forwarding }

/** The partner's response closed: an answer cut short, unless it was complete. */
function partnerClosed(this: PartnerResponse): void {
  this[kForwarding]?.closed()
}

/** What the partner leaving does to the call still running: undici's own reason, as for a stream destroyed. */
function partnerGone(): Error {
  return new errors.RequestAbortedError()
}

/** One call to a service, and undici's handler of its answer. */
class Forwarding implements Dispatcher.DispatchHandler {
  controller: Controller | null = null
  mode: Mode = 'head'
  status = 0
  /** The answer's bytes while they are kept or held. */
  chunks: Buffer[] = []
  size = 0
  /** Bytes of the body still to come, when the service announced its length and they are passed on; -1 otherwise. */
  remaining = -1
  /** The failure that ended the call, if one did. */
  failure: Error | null = null
  /** The call is over: its answer ended, or it failed. */
  done = false
  /** The service's links, mapped: what a replay gives again (the gateway's own, a deprecation's, are added to each answer). */
  serviceLink: string | undefined = undefined

  constructor(
    readonly route: DeclaredRoute,
    readonly request: FastifyRequest,
    readonly reply: FastifyReply,
    readonly target: ServiceTarget,
  ) {}

  onRequestStart(controller: Controller): void {
    this.controller = controller
  }

  onResponseStart(controller: Controller, statusCode: number, headers: AnswerHeaders): void {
    this.controller = controller
    this.route.answer(this, statusCode, headers)
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    switch (this.mode) {
      case 'stream':
        this.write(chunk)
        return
      case 'keep':
        this.chunks.push(chunk)
        this.size += chunk.length
        if (this.size > this.route.maxKeptBytes) {
          // Too large to keep: nothing more is read until the record is released.
          controller.pause()
          this.mode = 'hold'
          this.route.tooLargeToKeep(this)
        }
        return
      case 'hold':
        this.chunks.push(chunk)
        return
      case 'problem':
        this.chunks.push(chunk)
        this.size += chunk.length
        if (this.size > MAX_PROBLEM_BYTES) this.route.problemTooLarge(this)
        return
      default:
        return
    }
  }

  onResponseEnd(): void {
    if (this.done) return
    this.done = true
    if (this.mode === 'stream') {
      const res = this.reply.raw
      if (!res.writableEnded) res.end()
    } else if (this.mode === 'keep') {
      this.route.keep(this, Buffer.concat(this.chunks, this.size))
    } else if (this.mode === 'problem') {
      this.route.problem(this, Buffer.concat(this.chunks, this.size))
    }
  }

  onResponseError(_controller: Controller, error: Error): void {
    if (this.done) return
    this.done = true
    this.failure = error
    switch (this.mode) {
      case 'head':
        this.route.failed(this, error)
        return
      case 'stream':
        // Begun: it cannot become a problem any more. The partner is cut off, and the close
        // tells why.
        this.reply.raw.destroy()
        return
      case 'keep':
      case 'problem':
        this.route.cutBeforeSent(this, error)
        return
      default:
        // Held: the release that is running finds the failure. Dropped: already answered.
        return
    }
  }

  /**
   * Writes the answer's head, taking the reply over from Fastify: its bytes go into the
   * response from here (Fastify still runs the request's onResponse hooks when it finishes).
   */
  begin(length: string | string[] | undefined): void {
    const { request, reply } = this
    const res = reply.raw as PartnerResponse
    reply.hijack()
    closeWhileDrainingHeader(request, reply)
    const status = this.status
    if (status === 204 || status < 200) {
      // No body: neither its type nor its length is said (RFC 9110 8.6).
      reply.removeHeader('content-type')
      reply.removeHeader('content-length')
    } else if (typeof length === 'string' && request.method !== 'HEAD' && status !== 304) {
      this.remaining = Number(length)
    }
    res.writeHead(status, reply.getHeaders() as OutgoingHttpHeaders)
    res[kForwarding] = this
    res.on('close', partnerClosed)
    this.mode = 'stream'
  }

  write(chunk: Buffer): void {
    const res = this.reply.raw
    if (this.remaining > 0) {
      this.remaining -= chunk.length
      // The last bytes announced: the response ends with them, in the same write.
      if (this.remaining <= 0) {
        res.end(chunk)
        return
      }
    }
    if (!res.write(chunk)) {
      this.controller?.pause()
      res.once('drain', () => this.controller?.resume())
    }
  }

  /** Passes on what was held, then the rest as it comes. */
  release(): void {
    // Nobody is left to pass it to: the call is not read further.
    if (this.reply.raw.destroyed) {
      this.route.abandon(this)
      return
    }
    this.begin(this.reply.getHeader('content-length') as string | undefined)
    const held = this.chunks
    this.chunks = []
    for (const chunk of held) this.write(chunk)
    if (this.done) {
      if (!this.reply.raw.writableEnded) this.reply.raw.end()
      return
    }
    this.controller?.resume()
  }

  /** The partner's response closed. */
  closed(): void {
    const res = this.reply.raw
    if (res.writableFinished) return
    const reason = this.cutReason()
    this.route.cut(this, reason)
    // The service's answer is not read any further: its connection closes, its bounds free.
    if (!this.done) {
      this.done = true
      this.controller?.abort(partnerGone())
    }
  }

  /** Why the answer ended before its end. */
  cutReason(): CutReason {
    const failure = this.failure
    const code = errorCode(failure)
    if (code === UPSTREAM_CALL_DEADLINE) return 'response_timeout'
    if (closedForWriteIdle(this.reply.raw.socket)) return 'write_idle'
    return failure === null || code === 'UND_ERR_ABORTED' ? 'partner_closed' : 'upstream_error'
  }
}

/** One declared route: its service, its records, and how it judges an answer. */
class DeclaredRoute {
  readonly maxKeptBytes: number
  private readonly held = new WeakMap<FastifyRequest, Held>()
  private readonly call: ServiceCall
  private readonly locations: LocationMap
  private readonly uuidParams: string[]
  /** A record's lease outlasts the longest call the gateway makes (its whole-call bound), so only a dead instance's record is ever taken over. */
  private readonly leaseMs: number

  constructor(
    private readonly policy: RoutePolicy & { forward: NonNullable<RoutePolicy['forward']> },
    policies: readonly RoutePolicy[],
    private readonly services: Services,
    scopesHeader: ScopesHeader,
    private readonly hooks: ProxyHooks,
    private readonly idempotency: IdempotencySettings | undefined,
  ) {
    const forward = policy.forward
    const service = services.get(forward.upstream)
    const origins = [service.live, ...(service.sandbox === undefined ? [] : [service.sandbox])].map((t) => t.origin)
    this.locations = new LocationMap(policies.filter((p) => p.forward?.upstream === forward.upstream), origins, services.internalHosts)
    this.call = { tokenHeader: service.settings.tokenHeader, propertyScoped: policy.scope === 'property', scopes: scopesHeader }
    this.uuidParams = Object.entries(policy.pathParams).filter(([, rule]) => rule.type === 'uuid').map(([name]) => name)
    this.leaseMs = Math.max(service.settings.timeoutMs, service.settings.responseTimeoutMs) + 5000
    this.maxKeptBytes = idempotency?.maxBodyBytes ?? 0
  }

  /** The route's handler: builds the call and sends it (after the record's claim, for a keyed request). */
  handle(request: FastifyRequest, reply: FastifyReply): void {
    const forward = this.policy.forward
    const params: Record<string, string> = { ...(request.params as Record<string, string>) }
    for (const name of this.uuidParams) params[name] = (params[name] as string).toLowerCase()
    if (request.propertyId !== null) params.propertyId = request.propertyId
    const path = fillPath(forward.path, params)
    request.upstreamPath = path
    request.upstreamQuery = queryOf(request.query as object, request.parsedQuery ?? {})
    request.upstreamStartedAt = performance.now()
    const target = this.targetOf(request)
    const body = request.body as Buffer | undefined
    // Every refusal of the gateway's own comes before the record (docs/architecture.md §D21):
    // the head's size too, measured as the call will send it.
    const headers = this.serviceHeaders(request, target, body)
    // Gone before anything was sent on its behalf (its line is written): nothing is.
    if (reply.raw.destroyed) return
    // From here the request's work may outlive its partner: its line waits for the work's end.
    request.logDeferred = true
    if (this.idempotency !== undefined && request.idempotencyKey !== null && idempotencyOf(this.policy, request.method) !== undefined) {
      this.claim(request, reply).then((replayed) => {
        if (replayed) return
        if (reply.raw.destroyed) {
          // The partner left while the record was claimed: the request was never forwarded, so
          // its record is freed and a retry is forwarded (docs/architecture.md §D24).
          void this.release(request, this.held.get(request) as Held, 'partner went away before the request was forwarded')
            .then(() => this.hooks.onUnfinished?.(request, reply))
          return
        }
        this.send(request, reply, target, headers, body)
      }, (error: unknown) => {
        this.deliver(request, reply, error)
      })
      return
    }
    this.send(request, reply, target, headers, body)
  }

  /**
   * Answers the request with `payload` through Fastify; when its partner has gone, only its
   * line is written (the answer has no one to go to).
   */
  private deliver(request: FastifyRequest, reply: FastifyReply, payload: unknown): void {
    if (reply.raw.destroyed) {
      this.hooks.onUnfinished?.(request, reply)
      return
    }
    // Fastify's onResponse writes the line from here, or the request's close if the partner
    // leaves while it is written.
    request.logDeferred = false
    reply.send(payload)
  }

  private send(request: FastifyRequest, reply: FastifyReply, target: ServiceTarget, headers: Record<string, string>, body: Buffer | undefined): void {
    const forwarding = new Forwarding(this, request, reply, target)
    const options: CallOptions = {
      origin: target.origin,
      path: `${request.upstreamPath as string}${request.upstreamQuery as string}`,
      pathTemplate: this.policy.forward.path,
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body: body ?? null,
    }
    try {
      target.upstream.dispatcher.dispatch(options, forwarding)
    } catch (error) {
      // Refused before anything left (undici checks its arguments as it takes them).
      forwarding.onResponseError(forwarding.controller as Controller, error as Error)
    }
  }

  private targetOf(request: FastifyRequest): ServiceTarget {
    const upstream = this.policy.forward.upstream
    const target = this.services.target(upstream, callerOf(request).principal.mode)
    // The test-mode stage answered before a test key could get here without a sandbox.
    if (target === undefined) throw new Error(`no ${callerOf(request).principal.mode} target for ${upstream}`)
    return target
  }

  /** The service's request headers; 431 when its head would be over what services take. */
  private serviceHeaders(request: FastifyRequest, target: ServiceTarget, body: Buffer | undefined): Record<string, string> {
    const out = serviceRequestHeaders(request, this.call, target.token)
    out.host = target.host
    if (body !== undefined) {
      // The body is sent as the partner sent it; its type is plain JSON, whatever the partner's spelling.
      out['content-type'] = JSON_MEDIA_TYPE
      out['content-length'] = String(body.length)
    }
    const size = headSize(request.method, `${request.upstreamPath as string}${request.upstreamQuery as string}`, out)
    if (size > MAX_HEAD_BYTES) {
      throw new ApiError('REQUEST_HEADERS_TOO_LARGE',
        `With the headers the gateway adds, this request comes to ${size} bytes of headers; at most ${MAX_HEAD_BYTES} are accepted. Send shorter Accept, Accept-Language or query values.`)
    }
    return out
  }

  private counted(request: FastifyRequest, outcome: IdempotencyOutcome): void {
    request.idempotency = outcome
    this.hooks.onIdempotency?.(this.policy.path, outcome)
  }

  /** Releases the request's record (a retry is forwarded again); resolves once Redis answered or failed. */
  private async release(request: FastifyRequest, entry: Held, why: string): Promise<void> {
    if (this.idempotency === undefined) return
    try {
      await this.idempotency.records.release(entry.lease)
      this.counted(request, 'released')
    } catch (error) {
      request.log.warn({ err: error, why }, 'idempotency record not released (Redis failed); it frees itself when its lease runs out')
    }
  }

  /** The release the answer chose, then `send`. */
  private settle(request: FastifyRequest, why: string, send: () => void): void {
    const entry = this.held.get(request)
    if (entry === undefined || entry.settled) return send()
    entry.settled = true
    void this.release(request, entry, why).then(send)
  }

  /** Claims the request's record; true when the request was answered from it (a replay). */
  private async claim(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const records = (this.idempotency as IdempotencySettings).records
    const key = records.keyOf(callerOf(request).principal.keyId, request.method, this.policy.path, request.idempotencyKey as string)
    let result
    try {
      result = await records.claim(key, fingerprintOf(request), this.leaseMs)
    } catch (error) {
      // A duplicate is worse than a wait: without its record, a keyed request is not
      // forwarded (docs/architecture.md §D23).
      throw new ApiError('SERVICE_UNAVAILABLE', 'Idempotency keys cannot be checked right now; retry in 1 second.', { retryAfter: 1, cause: error })
    }
    switch (result.kind) {
      case 'claimed':
        // Forwarded next, in the same turn: from then on the call decides (docs/architecture.md
        // §D24), whether or not its partner waits for it.
        this.held.set(request, { lease: result.lease, settled: false })
        return false
      case 'in_use':
        this.counted(request, 'in_use')
        throw new ApiError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still in flight; retry in 1 second to get its answer.', { retryAfter: 1 })
      case 'reused':
        this.counted(request, 'reused')
        throw new ApiError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for a different request; send a new key with each new request.')
      case 'answered':
        this.counted(request, 'replayed')
        this.replay(request, reply, result.answer)
        return true
    }
  }

  private replay(request: FastifyRequest, reply: FastifyReply, answer: StoredAnswer): void {
    reply.code(answer.status)
    for (const [name, value] of Object.entries(answer.headers)) {
      if (name === 'link') addLink(reply, value)
      else reply.header(name, value)
    }
    reply.header('idempotent-replayed', 'true')
    reply.headers(COMMON_HEADERS)
    // Echoed on successes only (docs/partners.md, "Every answer"), as on the answer first sent.
    if (answer.status >= 200 && answer.status < 300 && request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
    this.deliver(request, reply, answer.body)
  }

  private observe(request: FastifyRequest, target: ServiceTarget, outcome: UpstreamOutcome, status: number | null): void {
    const seconds = (performance.now() - (request.upstreamStartedAt ?? performance.now())) / 1000
    request.upstreamMs = seconds * 1000
    request.upstreamName = target.upstream.name
    request.upstreamStatus = status
    this.hooks.onCall?.(target.upstream.name, outcome, seconds)
  }

  /** The head of the service's answer: refused as problem+json, or passed on (or kept, for a keyed request). */
  answer(call: Forwarding, status: number, headers: AnswerHeaders): void {
    const { request, reply, target } = call
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
    this.observe(request, target, outcome, status)
    const entry = this.held.get(request)
    if (reply.raw.destroyed && entry === undefined) {
      // The partner went away before the answer came: there is no one to send it to, and it
      // is not read any further. (A keyed call goes on: its answer is kept or its record
      // released, as if the partner waited, so that its retry gets it.)
      this.abandon(call)
      return
    }
    if (verdict !== undefined) {
      call.mode = 'drop'
      const refused = verdict
      this.settle(request, `service answered ${status}`, () => this.deliver(request, reply, refused))
      return
    }
    if (entry !== undefined) entry.settled = true
    call.status = status
    reply.code(status)
    for (const name of PASSED_RESPONSE_HEADERS) {
      const value = headers[name]
      if (value !== undefined) reply.header(name, value)
    }
    const location = headers.location
    if (typeof location === 'string') {
      const mapped = this.locations.map(location)
      if (mapped !== undefined) reply.header('location', mapped)
    }
    const link = headers.link
    if (link !== undefined) {
      const mapped = mapLinks(link, this.locations)
      call.serviceLink = mapped
      if (mapped !== undefined) addLink(reply, mapped)
    }
    // A correlation id is echoed on successes only (docs/partners.md, "Every answer"): 2xx,
    // not a redirect.
    if (status >= 200 && status < 300 && request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
    // A connection whose request body was not read to its end cannot carry another request.
    if (!request.raw.complete) reply.header('connection', 'close')
    // A problem is read whole: it names the partner's request, not the service's.
    if (status >= 400 && request.method !== 'HEAD') call.mode = 'problem'
    else if (entry !== undefined) call.mode = 'keep'
    else call.begin(headers['content-length'])
  }

  /** The call failed before any answer. */
  failed(call: Forwarding, error: Error): void {
    const { request, reply, target } = call
    const failure = target.upstream.failure(error)
    this.observe(request, target, failure.outcome, null)
    const refused = refusal(target.upstream, failure, callerOf(request).principal)
    this.settle(request, failure.outcome, () => this.deliver(request, reply, refused))
  }

  /** A keyed request's answer, read whole (docs/architecture.md §D22): kept, then sent. */
  keep(call: Forwarding, body: Buffer): void {
    void this.keepAndSend(call, body)
  }

  private async keepAndSend(call: Forwarding, body: Buffer): Promise<void> {
    const { request, reply } = call
    const entry = this.held.get(request) as Held
    const headers: Record<string, string> = {}
    for (const name of REPLAYED_HEADERS) {
      const value = name === 'link' ? call.serviceLink : reply.getHeader(name)
      if (typeof value === 'string') headers[name] = value
    }
    try {
      if (await (this.idempotency as IdempotencySettings).records.answer(entry.lease, { status: call.status, headers, body })) this.counted(request, 'stored')
      else request.log.warn('idempotency record was taken over before the answer came; the answer is not kept')
    } catch (error) {
      request.log.warn({ err: error }, 'idempotency answer not kept (Redis failed); its record frees itself when its lease runs out')
    }
    this.deliver(request, reply, body)
  }

  /** A keyed request's answer over maxBodyBytes: passed on as it comes, its record released first. */
  tooLargeToKeep(call: Forwarding): void {
    const { request } = call
    request.log.warn({ maxBodyBytes: this.maxKeptBytes, route: this.policy.path },
      'answer over idempotency.maxBodyBytes: passed on without being kept; the idempotency record is released')
    void this.release(request, this.held.get(request) as Held, 'answer over maxBodyBytes').then(() => {
      // The service failed while the record was released, before the partner got a byte.
      if (call.failure !== null) this.cutBeforeSent(call, call.failure)
      else call.release()
    })
  }

  /** The service failed mid-answer, before the partner got a byte: as if it failed at once. */
  cutBeforeSent(call: Forwarding, error: Error): void {
    const { request, reply, target } = call
    this.cut(call, call.cutReason())
    const entry = this.held.get(request) as Held
    const answer = (): void => {
      this.deliver(request, reply, unavailable(target.upstream, target.upstream.failure(error)))
    }
    if (call.mode === 'hold' || entry === undefined) answer()
    else void this.release(request, entry, 'answer cut').then(answer)
  }

  /** The partner went away and nothing is left to do for it: the call is not read further, and the line is written. */
  abandon(call: Forwarding): void {
    call.mode = 'drop'
    if (!call.done) {
      call.done = true
      call.controller?.abort(partnerGone())
    }
    this.cut(call, 'partner_closed')
    this.hooks.onUnfinished?.(call.request, call.reply)
  }

  /**
   * A problem of the service's, read whole: passed on (or kept, for a keyed request) with the
   * partner's request path as its `instance` and the gateway's request id as its `requestId`
   * (docs/architecture.md, "What the partner receives"); a body that is no JSON object is the
   * service breaking its contract, 500.
   */
  problem(call: Forwarding, body: Buffer): void {
    const { request, reply, target } = call
    const entry = this.held.get(request)
    const rewritten = publicProblem(body, pathOf(request.url), request.id)
    if (rewritten === undefined) {
      const refused = internal(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: answered ${call.status} with a problem that is not a JSON object`))
      this.settle(request, 'problem not JSON', () => this.deliver(request, reply, refused))
      return
    }
    if (entry !== undefined && rewritten.length <= this.maxKeptBytes) {
      void this.keepAndSend(call, rewritten)
      return
    }
    this.settle(request, 'answer over maxBodyBytes', () => this.deliver(request, reply, rewritten))
  }

  /** A problem of the service's over MAX_PROBLEM_BYTES: not read further, 500. */
  problemTooLarge(call: Forwarding): void {
    const { request, reply, target } = call
    call.mode = 'drop'
    call.done = true
    call.controller?.abort(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: a problem over ${MAX_PROBLEM_BYTES} bytes`))
    const refused = internal(new UpstreamError('bad-response', 'bad_response', `${target.upstream.name}: answered ${call.status} with a problem over ${MAX_PROBLEM_BYTES} bytes`))
    this.settle(request, 'problem too large', () => this.deliver(request, reply, refused))
  }

  /** An answer that ended before its end. */
  cut(call: Forwarding, reason: CutReason): void {
    const { request, reply, target } = call
    request.upstreamCut = reason
    this.hooks.onCut?.(target.upstream.name, reason)
    // A streamed answer cut short never finishes: Fastify runs no onResponse hook for it.
    if (call.mode === 'stream') this.hooks.onUnfinished?.(request, reply)
  }
}

export function declaredRoutes(policies: readonly RoutePolicy[], services: Services, hooks: ProxyHooks = {}, idempotency?: IdempotencySettings) {
  const scopesHeader = new ScopesHeader(knownScopes(policies))
  return async function routes(app: FastifyInstance): Promise<void> {
    for (const policy of policies) {
      if (policy.forward === undefined) continue
      const route = new DeclaredRoute(policy as RoutePolicy & { forward: NonNullable<RoutePolicy['forward']> }, policies, services, scopesHeader, hooks, idempotency)
      await app.register(async (scope) => {
        // The body is read only after the key is valid (content parsing follows onRequest),
        // kept byte for byte, and checked to be JSON (docs/architecture.md, "Order of checks",
        // step 6).
        if (policy.body !== 'none') {
          scope.addHook('preParsing', continueToBody)
          scope.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: policy.body.maxBytes }, (request, body, done) => {
            // A method of this route that takes no body has none (step 3 refused it): nothing to check.
            if (!BODY_METHODS.has(request.method)) {
              done(null, undefined)
              return
            }
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
        scope.route({
          // Exactly the declared path: a prefix route would forward /v1/rooms/extra too.
          url: routerPath(policy.path),
          method: [...policy.methods],
          config: { policy },
          handler: (request, reply) => route.handle(request, reply),
        })
      })
    }
  }
}
