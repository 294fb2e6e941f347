import type { Span } from '@opentelemetry/api'
import { SpanStatusCode } from '@opentelemetry/api'
import { createHash } from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { sendAdminProblem } from '../admin/server.js'
import type { IngestMetricOutcome } from '../admin/metrics.js'
import type { EventPublisher } from './config.js'
import { ApiError, type ErrorCode } from '../contract/errors.js'
import { remoteContext, type Tracing } from '../tracing/tracing.js'
import { checkEvents, MAX_BATCH, MAX_NESTING, tooDeepAt, type CheckedEvent } from './cloudevents.js'
import type { EventLog, IngestOutcome } from './log.js'

// `POST /events` on the admin port (docs/operations.md, "Events"): internal services publish
// CloudEvents here, with their own tokens (never the admin token). The order of its checks: the
// publisher's token (401), the media type (415), the body's size (413), its nesting (400
// INVALID_EVENT, before it is parsed), its JSON (400), the events (400 INVALID_EVENT, all or
// nothing); then the events are written to the log, and only
// once every one is written the publisher gets 202. Each request is one log line, one span and
// its events' counts in `gateway_events_ingested_total`; no token or body is ever logged.

export const INGEST_PATH = '/events'
/** The largest body taken. */
export const INGEST_BODY_BYTES = 1024 * 1024
const SINGLE_TYPE = 'application/cloudevents+json'
const BATCH_TYPE = 'application/cloudevents-batch+json'
const CHALLENGE = { 'www-authenticate': 'Bearer realm="events"' }

/** What the ingest counts events with (src/admin/metrics.ts). */
export interface IngestMetrics {
  eventIngested(publisher: string, type: string, outcome: IngestMetricOutcome, count?: number): void
}

export interface IngestDependencies {
  log: EventLog
  publishers: readonly EventPublisher[]
  /** The brands in force: an event's chain code names one. */
  brands: () => readonly { id: string; chainCode: string }[]
  docsUrl: string
  logger: Logger
  metrics?: IngestMetrics
  tracing?: Tracing
}

/** What one ingest request did, for its log line and span. */
interface IngestState {
  publisher: EventPublisher | undefined
  code: ErrorCode | undefined
  events: number | undefined
  counts: Record<IngestMetricOutcome, number>
  span: Span | undefined
}

function digest(token: string): string {
  return createHash('sha256').update(token).digest('base64')
}

/** The body's media type, lower-cased, when it is one of the two the ingest takes with no parameter but `charset=utf-8`. */
function mediaTypeOf(header: string | undefined): typeof SINGLE_TYPE | typeof BATCH_TYPE | undefined {
  if (header === undefined) return undefined
  const [type = '', ...parameters] = header.split(';').map((part) => part.trim().toLowerCase())
  if (parameters.some((p) => p.replace(/\s*=\s*/, '=').replace(/"/g, '') !== 'charset=utf-8')) return undefined
  return type === SINGLE_TYPE || type === BATCH_TYPE ? type : undefined
}

/** The Fastify plugin of the ingest route, registered on the admin listener (src/gateway.ts). */
export function ingestRoutes(deps: IngestDependencies) {
  // Tokens are looked up by their digest: the map never holds a token, and the comparison is of
  // digests, whose time tells nothing about the token.
  const byToken = new Map<string, EventPublisher>()
  for (const publisher of deps.publishers) if (publisher.token !== undefined) byToken.set(digest(publisher.token), publisher)
  // The brands in force, which a reload may change: the map is made again when they do.
  let chainsOf = { brands: deps.brands(), chains: new Map(deps.brands().map((brand) => [brand.chainCode, brand.id])) }
  const chainsNow = (): ReadonlyMap<string, string> => {
    const brands = deps.brands()
    if (brands !== chainsOf.brands) chainsOf = { brands, chains: new Map(brands.map((brand) => [brand.chainCode, brand.id])) }
    return chainsOf.chains
  }
  const states = new WeakMap<FastifyRequest, IngestState>()
  const stateOf = (request: FastifyRequest): IngestState => {
    let state = states.get(request)
    if (state === undefined) {
      state = { publisher: undefined, code: undefined, events: undefined, counts: { accepted: 0, duplicate: 0, dropped: 0, refused: 0 }, span: undefined }
      states.set(request, state)
    }
    return state
  }
  const refuse = (request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply => {
    stateOf(request).code = error.code
    return sendAdminProblem(request, reply, error, deps.docsUrl)
  }
  const count = (publisher: EventPublisher, type: string | undefined, outcome: IngestMetricOutcome, state: IngestState): void => {
    state.counts[outcome] += 1
    deps.metrics?.eventIngested(publisher.name, type !== undefined && deps.log.types.names(publisher.name, type) ? type : 'other', outcome)
  }

  return async function routes(admin: FastifyInstance): Promise<void> {
    // This plugin's own context: the body is read as bytes and parsed here, and its failures
    // are answered here, not by the admin listener's catch-all handler.
    admin.removeAllContentTypeParsers()
    admin.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: INGEST_BODY_BYTES }, (_request, body, done) => done(null, body))
    admin.setErrorHandler((error: Error & { code?: string }, request, reply) => {
      if (error instanceof ApiError) return refuse(request, reply, error)
      if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
        const publisher = stateOf(request).publisher
        if (publisher !== undefined) count(publisher, undefined, 'refused', stateOf(request))
        return refuse(request, reply, new ApiError('PAYLOAD_TOO_LARGE', `The body is over ${INGEST_BODY_BYTES} bytes; send fewer events per request.`))
      }
      if (error.code?.startsWith('FST_ERR_CTP_') === true) return refuse(request, reply, new ApiError('MALFORMED_REQUEST', 'The body could not be read as sent (its framing or length).'))
      deps.logger.error({ err: error, reqId: request.id }, 'events ingest failed')
      return refuse(request, reply, new ApiError('INTERNAL_ERROR', 'An unexpected error occurred.'))
    })
    admin.addHook('onResponse', async (request, reply) => {
      const state = stateOf(request)
      const status = reply.statusCode
      const { publisher, code, counts } = state
      deps.logger.info({
        reqId: request.id, publisher: publisher?.name ?? null, status, code: code ?? null, events: state.events ?? null,
        accepted: counts.accepted, duplicates: counts.duplicate, dropped: counts.dropped, durationMs: Math.round(reply.elapsedTime * 1000) / 1000,
        clientIp: request.ip,
      }, 'events ingest')
      const span = state.span
      if (span !== undefined) {
        if (span.isRecording()) {
          span.setAttribute('http.response.status_code', status)
          if (publisher !== undefined) span.setAttribute('gateway.publisher', publisher.name)
          if (state.events !== undefined) span.setAttribute('gateway.events', state.events)
          span.setAttribute('gateway.events.accepted', counts.accepted)
          span.setAttribute('gateway.events.duplicate', counts.duplicate)
          span.setAttribute('gateway.events.dropped', counts.dropped)
          if (status >= 400) span.setAttribute('error.type', code ?? String(status))
          if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
        }
        span.end()
      }
    })

    /** The publisher's token, before the body is read (docs/operations.md, "Events"). */
    const authenticate = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
      const state = stateOf(request)
      const traceparent = request.headers.traceparent
      state.span = deps.tracing?.startSpan(`POST ${INGEST_PATH}`, typeof traceparent === 'string' ? traceparent : undefined)
      const header = request.headers.authorization
      if (header === undefined) return refuse(request, reply, new ApiError('MISSING_AUTH_HEADER', 'Send `Authorization: Bearer <token>` with the token of the publisher.', { headers: CHALLENGE }))
      const match = /^Bearer ([^\s]+)$/i.exec(header)
      const publisher = match === null ? undefined : byToken.get(digest(match[1] as string))
      // The admin token is no publisher's: it publishes nothing.
      if (publisher === undefined) return refuse(request, reply, new ApiError('INVALID_AUTH_HEADER', 'The token is no publisher\'s: each publisher sends its own (events.publishers.<name>.tokenEnv).', { headers: CHALLENGE }))
      state.publisher = publisher
      return undefined
    }
    const mediaType = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
      if (mediaTypeOf(request.headers['content-type']) !== undefined) return undefined
      const state = stateOf(request)
      count(state.publisher as EventPublisher, undefined, 'refused', state)
      return refuse(request, reply, new ApiError('UNSUPPORTED_MEDIA_TYPE', `Send CloudEvents in structured mode: \`Content-Type: ${SINGLE_TYPE}\` for one event, \`${BATCH_TYPE}\` for a batch.`))
    }

    admin.post(INGEST_PATH, { onRequest: [authenticate, mediaType], bodyLimit: INGEST_BODY_BYTES }, async (request, reply) => {
      const state = stateOf(request)
      const publisher = state.publisher as EventPublisher
      const batch = mediaTypeOf(request.headers['content-type']) === BATCH_TYPE
      const bytes = request.body as Buffer | undefined ?? Buffer.alloc(0)
      // Nesting is bounded before the body is parsed (docs/operations.md, "The ingest endpoint").
      if (tooDeepAt(bytes) !== undefined) {
        count(publisher, undefined, 'refused', state)
        return refuse(request, reply, new ApiError('INVALID_EVENT', `The body nests arrays and objects deeper than ${MAX_NESTING} levels; nothing was accepted.`, {
          errors: [{ field: 'body', code: 'OUT_OF_RANGE', detail: `Arrays and objects nest at most ${MAX_NESTING} levels deep.` }],
        }))
      }
      let body: unknown
      try {
        body = JSON.parse(bytes.toString('utf8'))
      } catch {
        count(publisher, undefined, 'refused', state)
        return refuse(request, reply, new ApiError('MALFORMED_JSON', 'The body is not one well-formed JSON document.'))
      }
      const checked = checkEvents(body, batch, publisher.name, deps.log.types, chainsNow())
      if (!checked.ok) {
        state.events = checked.types.length
        if (checked.types.length === 0) count(publisher, undefined, 'refused', state)
        for (const type of checked.types) count(publisher, type, 'refused', state)
        return refuse(request, reply, new ApiError('INVALID_EVENT', checked.detail, { errors: checked.errors }))
      }
      state.events = checked.events.length
      linkEvents(state.span, checked.events)
      let outcomes: IngestOutcome[]
      try {
        outcomes = await deps.log.ingest(publisher.name, publisher.mode, checked.events, typeof request.headers.traceparent === 'string' ? request.headers.traceparent : undefined)
      } catch (error) {
        // Nothing is answered as kept that is not: the publisher sends the request again, and
        // what was written before the failure comes back as copies.
        deps.logger.warn({ reqId: request.id, publisher: publisher.name, error: (error as Error).message }, 'events could not be written; the publisher is told to retry')
        return refuse(request, reply, new ApiError('SERVICE_UNAVAILABLE', 'The events could not be stored; send the same request again.', { retryAfter: 1, cause: error }))
      }
      for (const [i, outcome] of outcomes.entries()) {
        const event = checked.events[i] as CheckedEvent
        count(publisher, event.internalType, outcome.kind, state)
        if (outcome.kind === 'dropped' && deps.logger.isLevelEnabled('debug')) {
          deps.logger.debug({ reqId: request.id, publisher: publisher.name, type: event.internalType, id: event.id }, 'event dropped: no public type maps its type')
        }
      }
      reply.code(202).type('application/json; charset=utf-8')
      return JSON.stringify({
        data: outcomes.map((o) => ({ id: o.sourceId, eventId: o.kind === 'dropped' ? null : o.eventId, duplicate: o.kind === 'duplicate' })),
      })
    })
  }
}

/** Links the ingest's span to the trace of each event that came with one (at most one batch's worth). */
function linkEvents(span: Span | undefined, events: readonly CheckedEvent[]): void {
  if (span === undefined || !span.isRecording()) return
  const seen = new Set<string>()
  for (const event of events.slice(0, MAX_BATCH)) {
    if (event.traceparent === undefined || seen.has(event.traceparent)) continue
    seen.add(event.traceparent)
    const context = remoteContext(event.traceparent)
    if (context !== undefined) span.addLink({ context })
  }
}
