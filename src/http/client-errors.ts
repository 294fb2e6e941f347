import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { ApiError, type ErrorCode } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_REQUEST_ID } from '../contract/headers.js'
import { PROBLEM_CONTENT_TYPE, problemBody } from '../contract/problem.js'
import { CoalescedResponse } from './coalesced-response.js'
import { generateRequestId } from './request-id.js'
import { MAX_URL_LENGTH } from './limits.js'
import type { RouteIndex } from './route-index.js'

// Requests that Node's HTTP parser refuses, and those Node's server would answer or drop on its
// own (CONNECT, an unknown Expect), never reach Fastify's routes or hooks as they are; this
// answers them on the socket itself, still as problem+json with a request id
// (docs/architecture.md, "Order of checks"), or hands them to the routes in a form they take
// (an absolute-form target).

interface ParserError extends Error {
  code?: string
  rawPacket?: unknown
}

const kLatest = Symbol('latestResponse')
const kWriteIdle = Symbol('writeIdle')
const kStall = Symbol('stall')

/**
 * Node keeps the response in progress on its socket (the same field its own handler reads), and
 * the bytes its handle has yet to write (its own socket timeout reads them); we keep the latest
 * response, and what a write-idle check saw.
 */
type HttpSocket = Socket & {
  _httpMessage?: { headersSent?: boolean } | null
  _handle?: { writeQueueSize?: number } | null
  [kLatest]?: ServerResponse
  [kWriteIdle]?: true
  [kStall]?: { response: object; waiting: number }
}

const SLASH = 0x2f

/**
 * An absolute-form target (`GET http://host/v1/guests HTTP/1.1`) as the routes take it: its
 * path and query, and its authority as the Host (RFC 9112 3.2.2: an origin server ignores
 * the Host field then). Taken textually, not through a URL parser, which would resolve the
 * path's dot segments and percent-encoding before the routes see them.
 */
function fromAbsoluteForm(req: IncomingMessage): void {
  const url = req.url ?? ''
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(url)
  if (scheme === null) return
  const rest = url.slice(scheme[0].length)
  const end = rest.search(/[/?#]/)
  const authority = end === -1 ? rest : rest.slice(0, end)
  const target = end === -1 ? '/' : rest.slice(end)
  req.url = target.startsWith('/') ? target : `/${target}`
  req.headers.host = authority.slice(authority.lastIndexOf('@') + 1)
}

/**
 * Runs before the routes on every request: remembers each socket's latest response, so that a
 * parser error or a timeout on a request that was already answered (its body still arriving)
 * closes the socket instead of writing a second answer. A GET or HEAD that announces a chunked
 * body is answered with `Connection: close` whichever step answers it: its unread body could
 * not be told from a next request, and waiting for it would hold the connection.
 */
export function prepareRequest(req: IncomingMessage, res: ServerResponse): void {
  (req.socket as HttpSocket)[kLatest] = res
  if (req.headers['transfer-encoding'] !== undefined && (req.method === 'GET' || req.method === 'HEAD')) res.shouldKeepAlive = false
  if (req.url !== undefined && req.url.charCodeAt(0) !== SLASH) fromAbsoluteForm(req)
}

/**
 * Every request, whatever it expects, goes to `handler` after `prepareRequest`. With an
 * `Expect: 100-continue` Node would send the 100 at once; the routes that read a body send it
 * once the checks before the body have passed (a refused partner never sends its body, and
 * Node closes the connection after a final answer sent without a 100). Any other expectation
 * is ignored (RFC 9110 10.1.1 allows it) instead of Node's bare 417.
 */
export function serveEveryRequest(server: Server, handler: (req: IncomingMessage, res: ServerResponse) => void): void {
  const serve = (req: IncomingMessage, res: ServerResponse): void => {
    prepareRequest(req, res)
    handler(req, res)
  }
  server.on('request', serve)
  server.on('checkContinue', serve)
  server.on('checkExpectation', serve)
}

/**
 * A partner that takes none of an answer's bytes for `idleMs` loses its connection: a streamed
 * answer it does not read would otherwise hold the upstream connection and call it comes from
 * for as long as the partner likes. Node's socket timeout fires when nothing was read or
 * written for its period, a write the kernel is still partly taking counting as progress (its
 * first check after a write always finds some). Checking every half of `idleMs` and cutting on
 * the second check in a row that finds the same bytes waiting closes a partner that took
 * nothing for `idleMs`, within half of it more.
 *
 * The server's timeout runs outside answers too. Between requests Node's keep-alive timeout is
 * running, and the socket closes as Node would close it with nobody listening; before a
 * request's headers are in, the header deadline answers 408; while an answer has no bytes
 * waiting it is waiting on a service or on the partner's own request, which have their bounds.
 */
export function closeIdleReaders(server: Server, idleMs: number): void {
  const period = Math.max(1, Math.ceil(idleMs / 2))
  server.timeout = period
  server.on('timeout', (socket: HttpSocket) => {
    const response = socket._httpMessage
    if (response === null || response === undefined) {
      // After an answer: the keep-alive timeout. Before the first request's headers: the header deadline's.
      if (socket[kLatest] !== undefined) socket.destroy()
      return
    }
    if (socket.writableLength === 0) return
    const waiting = socket._handle?.writeQueueSize ?? socket.writableLength
    const last = socket[kStall]
    if (last?.response === response && last.waiting === waiting) {
      socket[kWriteIdle] = true
      socket.destroy()
      return
    }
    socket[kStall] = { response, waiting }
    // The timer fires once per quiet period: a second look needs it again.
    socket.setTimeout(period)
  })
}

/** Whether the server closed this socket because its partner stopped taking bytes. */
export function closedForWriteIdle(socket: Socket | null): boolean {
  return (socket as HttpSocket | null)?.[kWriteIdle] === true
}

const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i

/** Whether the partner waits for a 100 (Continue) before it sends the body (Node's own test). */
export function expectsContinue(req: IncomingMessage): boolean {
  const expect = req.headers.expect
  return expect !== undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1 && CONTINUE.test(expect)
}

/** Runs the end() of this socket's answers that waits for the end of the turn, if any. */
function endHeld(socket: HttpSocket): void {
  for (const response of [socket._httpMessage, socket[kLatest]]) {
    if (response instanceof CoalescedResponse) response.endNow()
  }
}

/** Whether an answer to the request still being received has started. */
function answered(socket: HttpSocket): boolean {
  if (socket._httpMessage?.headersSent === true) return true
  const latest = socket[kLatest]
  return latest !== undefined && latest.headersSent && !latest.req.complete
}

function classify(error: ParserError, requestLine: string | undefined, allow: string): { code: ErrorCode; detail: string } {
  switch (error.code) {
    case 'HPE_INVALID_METHOD':
      return { code: 'METHOD_NOT_ALLOWED', detail: `The request method is not supported; this endpoint supports ${allow}.` }
    case 'HPE_HEADER_OVERFLOW':
      return requestLine === undefined || requestLine.length > MAX_URL_LENGTH
        ? { code: 'URI_TOO_LONG', detail: `The request target is longer than ${MAX_URL_LENGTH} characters.` }
        : { code: 'REQUEST_HEADERS_TOO_LARGE', detail: 'The request headers are larger than 16 KiB.' }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'REQUEST_TIMEOUT', detail: 'The request was not received in time; the connection is closed.' }
    default:
      return { code: 'MALFORMED_REQUEST', detail: 'The request is not valid HTTP/1.1.' }
  }
}

/** The request line, when the packet starts with a whole one. */
function firstLine(packet: unknown): string | undefined {
  if (!Buffer.isBuffer(packet)) return undefined
  const end = packet.indexOf('\r\n')
  return end === -1 ? undefined : packet.subarray(0, end).toString('latin1')
}

/** The path a problem names for a raw request target: '' when it is not a path. */
function instanceOf(target: string): string {
  return target.startsWith('/') && target.length <= MAX_URL_LENGTH ? target.split('?')[0] ?? '' : ''
}

/** Answers on the socket itself, then closes it. */
function answerRaw(socket: Socket, docsUrl: string, method: string, instance: string, code: ErrorCode, detail: string, allow: string): void {
  const requestId = generateRequestId()
  const problem = new ApiError(code, detail)
  const body = method === 'HEAD' ? '' : problemBody(problem, docsUrl, instance, requestId)
  const head = [
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}`,
    `content-type: ${PROBLEM_CONTENT_TYPE}`,
    `content-length: ${Buffer.byteLength(body)}`,
    `${HEADER_REQUEST_ID}: ${requestId}`,
    ...Object.entries(COMMON_HEADERS).map(([name, value]) => `${name}: ${value}`),
    ...(code === 'METHOD_NOT_ALLOWED' ? [`allow: ${allow}`] : []),
    'connection: close',
  ]
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`)
  // A slow client may never read the answer: it gets a moment, then the socket goes.
  socket.setTimeout(1000, () => socket.destroy())
}

export function clientErrorHandler(docsUrl: string, routes: Pick<RouteIndex, 'allowFor'>) {
  return function onClientError(error: ParserError, socket: HttpSocket): void {
    // Once a response has started on this socket, another would corrupt it (docs/security.md,
    // "Slow clients"): the connection just closes.
    if (error.code === 'ECONNRESET' || !socket.writable || answered(socket)) {
      // An answer whose end waits for the end of its turn (http/coalesced-response.ts) leaves
      // first, whole, as it would have without waiting: the bytes after its request are what
      // the parser refused.
      if (error.code !== 'ECONNRESET' && socket.writable) endHeld(socket)
      socket.destroy()
      return
    }
    const requestLine = firstLine(error.rawPacket)
    const [method = '', target = ''] = (requestLine ?? '').split(' ')
    const instance = instanceOf(target)
    const allow = routes.allowFor(instance) ?? 'GET, HEAD'
    const { code, detail } = classify(error, requestLine, allow)
    answerRaw(socket, docsUrl, method, instance, code, detail, allow)
  }
}

/**
 * CONNECT asks for a tunnel; Node hands it over as a raw socket and, with nobody listening,
 * drops the connection without a word. The API tunnels nothing: 405 as for any method a
 * path does not take.
 */
export function connectHandler(docsUrl: string, routes: Pick<RouteIndex, 'allowFor'>) {
  return function onConnect(req: IncomingMessage, socket: Socket): void {
    socket.on('error', () => socket.destroy())
    const instance = instanceOf(req.url ?? '')
    const allow = routes.allowFor(instance) ?? 'GET, HEAD'
    answerRaw(socket, docsUrl, 'CONNECT', instance, 'METHOD_NOT_ALLOWED', `CONNECT is not supported; this API tunnels nothing. Use ${allow} on its paths.`, allow)
  }
}
