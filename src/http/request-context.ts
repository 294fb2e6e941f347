import type { FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { COMMON_HEADERS, HEADER_CORRELATION_ID, HEADER_REQUEST_ID } from '../contract/headers.js'
import type { Tracing } from '../tracing/tracing.js'
import { traceFromHeaders, type TraceContext } from './trace.js'

// Stage 0 of every request: its id, its trace and the caller's correlation id.

const kTrace = Symbol('trace')
type TracedMessage = IncomingMessage & { [kTrace]?: TraceContext }

export const CORRELATION_ID_PATTERN = /^[A-Za-z0-9._=+/-]{1,128}$/

/**
 * The trace of a raw request, worked out once. The logger factory asks for it when the
 * request's logger is made, so every log line of the request (the framework's too)
 * carries the trace id.
 */
export function traceOf(raw: IncomingMessage): TraceContext {
  const message = raw as TracedMessage
  let trace = message[kTrace]
  if (trace === undefined) {
    trace = traceFromHeaders(raw.headers.traceparent, raw.headers.tracestate)
    message[kTrace] = trace
  }
  return trace
}

/**
 * While draining, every answer closes its connection, also those to requests that began
 * before: clients reconnect, to another instance, and the server can finish closing.
 */
export function closeWhileDraining(request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void): void {
  closeWhileDrainingHeader(request, reply)
  done(null, payload)
}

/** What closeWhileDraining does to an answer, for one written without Fastify's send (a declared route's stream). */
export function closeWhileDrainingHeader(request: FastifyRequest, reply: FastifyReply): void {
  if (request.server.health.draining) reply.header('connection', 'close')
}

const kReply = Symbol('reply')
type WatchedResponse = ServerResponse & { [kReply]?: FastifyReply }

/** What to do about a request whose partner went away before its answer was written to the end. */
export type AbandonedHandler = (request: FastifyRequest, reply: FastifyReply) => void

/**
 * Fastify runs a request's onResponse hooks only once its answer finished: a request whose
 * partner leaves first would leave no log line and no count. The response's close says so.
 * One listener per app, the reply found on the response, so a request allocates nothing for it.
 */
function closeWatcher(abandoned: AbandonedHandler): (reply: FastifyReply) => void {
  function closed(this: WatchedResponse): void {
    if (this.writableFinished) return
    const reply = this[kReply] as FastifyReply
    abandoned(reply.request, reply)
  }
  return (reply) => {
    const res = reply.raw as WatchedResponse
    res[kReply] = reply
    res.on('close', closed)
  }
}

export function requestContextStage(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  reply.headers(COMMON_HEADERS)
  reply.header(HEADER_REQUEST_ID, request.id)
  request.trace = traceOf(request.raw)
  const correlation = request.headers[HEADER_CORRELATION_ID]
  if (typeof correlation === 'string' && CORRELATION_ID_PATTERN.test(correlation)) request.correlationId = correlation
  done()
}

function nothing(): void {}

/**
 * Stage 0, chosen once when the app is built: with tracing, it also starts the request's
 * server span (ended by the observe stage, pipeline/log.ts); without, it is the stage above
 * and a request pays nothing for tracing.
 */
export function requestContext(tracing: Tracing | undefined, abandoned: AbandonedHandler) {
  const watchClose = closeWatcher(abandoned)
  if (tracing === undefined) {
    return function untracedRequestContext(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
      watchClose(reply)
      requestContextStage(request, reply, done)
    }
  }
  return function tracedRequestContext(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    watchClose(reply)
    requestContextStage(request, reply, nothing)
    tracing.startServerSpan(request)
    done()
  }
}
