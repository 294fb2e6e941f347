import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, errorCatalog, kebabCode, type ErrorCode, type FieldError } from './errors.js'
import { COMMON_HEADERS, HEADER_REQUEST_ID } from './headers.js'
import { quoted } from '../json-string.js'
import { isoNow } from './timestamp.js'

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8'

/** RFC 9457 body; every field always present (contract 2.6). */
export interface ProblemDetails {
  type: string
  title: string
  status: number
  detail: string
  moreInfo: string
  instance: string
  code: ErrorCode
  errors: FieldError[]
  requestId: string
  timestamp: string
}

export function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

const string = { type: 'string' } as const
/** The JSON schema of a problem body; the OpenAPI document (src/docs) and the contract tests check every answer against it. */
export const problemJsonSchema = {
  type: 'object',
  properties: {
    type: string, title: string, status: { type: 'integer' }, detail: string, moreInfo: string, instance: string, code: string,
    errors: {
      type: 'array',
      items: { type: 'object', properties: { field: string, code: string, detail: string }, required: ['field', 'code', 'detail'] },
    },
    requestId: string, timestamp: string,
  },
  required: ['type', 'title', 'status', 'detail', 'moreInfo', 'instance', 'code', 'errors', 'requestId', 'timestamp'],
} as const

/** No answer grows with the caller's input (docs/security.md, "Big inputs"): at most this many field errors. */
export const MAX_FIELD_ERRORS = 20

/** No problem `detail` quotes more than this many characters of what the partner sent. */
export const MAX_QUOTED_INPUT = 200

/**
 * What one `detail` may still quote of a partner's input: every quote of it draws on the same
 * MAX_QUOTED_INPUT characters, and a quote that does not fit is cut with an ellipsis. A
 * partner sees enough to recognise what it sent; a 15 kB header is not echoed back.
 */
export class QuoteBudget {
  private left = MAX_QUOTED_INPUT

  /** `input`, cut to what is left (an ellipsis marks the cut); '' once the budget is spent. */
  take(input: string): string {
    if (input.length <= this.left) {
      this.left -= input.length
      return input
    }
    let end = this.left
    // Never half a surrogate pair.
    if (end > 0 && /[\uD800-\uDBFF]/.test(input.charAt(end - 1))) end -= 1
    this.left = 0
    return end === 0 ? '…' : `${input.slice(0, end)}…`
  }

  get spent(): boolean {
    return this.left === 0
  }
}

/** `input` as one detail may quote it: at most MAX_QUOTED_INPUT characters. */
export function quoteInput(input: string): string {
  return new QuoteBudget().take(input)
}

// Most of a problem body is fixed by its code and the brand's docs URL (type, title, status,
// moreInfo, code): those parts are escaped once and kept, so a rejection serialises only
// what differs per request (detail, instance, errors, requestId, timestamp). Rejections are
// the answers a flood is made of; they must be the cheapest (bench/README.md). The fields
// come out in the order of ProblemDetails.
interface ProblemFrame {
  /** Up to the value of `detail`. */
  head: string
  /** Between `detail` and the value of `instance`. */
  middle: string
  /** Between `instance` and the value of `errors`. */
  tail: string
}

/** The frames made, by docs URL, then by code: two look-ups of strings kept, not a key made per answer. */
const frames = new Map<string, Map<ErrorCode, ProblemFrame>>()
function frameOf(docsUrl: string, code: ErrorCode): ProblemFrame {
  let ofUrl = frames.get(docsUrl)
  if (ofUrl === undefined) frames.set(docsUrl, ofUrl = new Map())
  let frame = ofUrl.get(code)
  if (frame === undefined) {
    const spec = errorCatalog[code]
    const type = `${docsUrl}/errors/${kebabCode(code)}`
    frame = {
      head: `{"type":${JSON.stringify(type)},"title":${JSON.stringify(spec.title)},"status":${spec.status},"detail":`,
      middle: `,"moreInfo":${JSON.stringify(spec.tip)},"instance":`,
      tail: `,"code":${JSON.stringify(code)},"errors":`,
    }
    ofUrl.set(code, frame)
  }
  return frame
}

/**
 * Field errors as JSON: each says exactly its field, code and detail, whatever object a step
 * built it from. Written by hand: JSON.stringify with a list of keys leaves V8's fast path
 * (1.1 µs for one field error, against 0.23: docs/performance.md, "Problem bodies").
 */
function fieldErrorsJson(errors: readonly FieldError[]): string {
  let json = '['
  for (let i = 0; i < errors.length; i += 1) {
    const { field, code, detail } = errors[i] as FieldError
    // A field error's code is one of fieldErrorCodes: nothing in it to escape.
    json += `${i === 0 ? '' : ','}{"field":${quoted(field)},"code":"${code}","detail":${quoted(detail)}}`
  }
  return `${json}]`
}

/** The problem+json body (RFC 9457) of `error`; every field always present (contract 2.6). */
export function problemBody(error: ApiError, docsUrl: string, instance: string, requestId: string): string {
  const frame = frameOf(docsUrl, error.code)
  const extra = error.errors.length - MAX_FIELD_ERRORS
  const detail = extra > 0 ? `${error.detail} ${extra} more field error${extra > 1 ? 's are' : ' is'} not listed.` : error.detail
  const errors = error.errors.length === 0 ? '[]' : fieldErrorsJson(extra > 0 ? error.errors.slice(0, MAX_FIELD_ERRORS) : error.errors)
  return `${frame.head}${quoted(detail)}${frame.middle}${quoted(instance)}${frame.tail}${errors},"requestId":${quoted(requestId)},"timestamp":"${isoNow()}"}`
}

/**
 * Sends `error` as problem+json. Self-sufficient on purpose: it also runs for requests
 * that never reached the pipeline's hooks (framework errors), so it sets the headers
 * every response carries itself.
 */
export function sendProblem(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  const docsUrl = request.brand?.docsUrl ?? request.server.gatewayConfig.docsUrl
  request.errorCode = error.code
  reply.code(error.status)
  reply.headers(COMMON_HEADERS)
  reply.header(HEADER_REQUEST_ID, request.id)
  // A correlation id is echoed on successes only (docs/partners.md, "Every answer").
  reply.removeHeader('service-correlation-id')
  if (error.headers !== undefined) reply.headers(error.headers)
  if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter))
  reply.type(PROBLEM_CONTENT_TYPE)
  const body = problemBody(error, docsUrl, pathOf(request.url), request.id)
  // Fastify's own HEAD routes drop the body; a HEAD that matched no route is ours to trim,
  // keeping the length GET would have had (RFC 9110 9.3.2).
  // (Requests Fastify builds for framework errors lack our decorations: undefined, not null.)
  if (request.method === 'HEAD' && (request.routeUrl ?? null) === null) {
    reply.header('content-length', String(Buffer.byteLength(body)))
    return reply.send()
  }
  return reply.send(body)
}
