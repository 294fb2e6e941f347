import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { ApiError, type ErrorCode } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_REQUEST_ID } from '../contract/headers.js'
import { PROBLEM_CONTENT_TYPE, problemBody } from '../contract/problem.js'
import { generateRequestId } from './request-context.js'
import { MAX_URL_LENGTH } from './limits.js'
import type { RouteIndex } from './route-index.js'

// Requests that Node's HTTP parser refuses never reach Fastify's routes or hooks; this
// answers them on the socket itself, still as problem+json with a request id (decisions 1).

interface ParserError extends Error {
  code?: string
  rawPacket?: unknown
}

const kLatest = Symbol('latestResponse')

/** Node keeps the response in progress on its socket (the same field its own handler reads); we keep the latest one. */
type HttpSocket = Socket & { _httpMessage?: { headersSent?: boolean } | null; [kLatest]?: ServerResponse }

/**
 * Remembers each socket's latest response, so that a parser error or a timeout on a request
 * that was already answered (its body still arriving) closes the socket instead of writing
 * a second answer. A GET or HEAD that announces a chunked body is answered with
 * `Connection: close` whichever step answers it: its unread body could not be told from a
 * next request, and waiting for it would hold the connection.
 */
export function trackResponses(server: Server): void {
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    (req.socket as HttpSocket)[kLatest] = res
    if (req.headers['transfer-encoding'] !== undefined && (req.method === 'GET' || req.method === 'HEAD')) res.shouldKeepAlive = false
  })
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

export function clientErrorHandler(docsUrl: string, routes: RouteIndex) {
  return function onClientError(error: ParserError, socket: HttpSocket): void {
    // Once a response has started on this socket, another would corrupt it (decisions 10):
    // the connection just closes.
    if (error.code === 'ECONNRESET' || !socket.writable || answered(socket)) {
      socket.destroy()
      return
    }
    const requestLine = firstLine(error.rawPacket)
    const [method = '', target = ''] = (requestLine ?? '').split(' ')
    const instance = target.startsWith('/') && target.length <= MAX_URL_LENGTH ? target.split('?')[0] ?? '' : ''
    const allow = routes.allowFor(instance) ?? 'GET, HEAD'
    const { code, detail } = classify(error, requestLine, allow)
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
}
