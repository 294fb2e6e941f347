import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { ApiError, type ErrorCode } from '../contract/errors.js'
import { COMMON_HEADERS, HEADER_REQUEST_ID } from '../contract/headers.js'
import { buildProblem, PROBLEM_CONTENT_TYPE } from '../contract/problem.js'
import { generateRequestId } from './request-context.js'
import { MAX_URL_LENGTH } from './limits.js'
import type { RouteIndex } from './route-index.js'

// Requests that Node's HTTP parser refuses never reach Fastify's routes or hooks; this
// answers them on the socket itself, still as problem+json with a request id (decisions 1).

interface ParserError extends Error {
  code?: string
  rawPacket?: unknown
}

function classify(error: ParserError, requestLine: string | undefined, allow: string): { code: ErrorCode; detail: string } {
  switch (error.code) {
    case 'HPE_INVALID_METHOD':
      return { code: 'METHOD_NOT_ALLOWED', detail: `The request method is not supported; this endpoint supports ${allow}.` }
    case 'HPE_HEADER_OVERFLOW':
      return requestLine === undefined || requestLine.length > MAX_URL_LENGTH
        ? { code: 'URI_TOO_LONG', detail: `The request target is longer than ${MAX_URL_LENGTH} characters.` }
        : { code: 'REQUEST_HEADERS_TOO_LARGE', detail: 'The request headers are larger than 16 KiB.' }
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
  return function onClientError(error: ParserError, socket: Socket): void {
    if (error.code === 'ECONNRESET' || error.code === 'ERR_HTTP_REQUEST_TIMEOUT' || !socket.writable) {
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
    const body = method === 'HEAD' ? '' : JSON.stringify(buildProblem(problem, docsUrl, instance, requestId))
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
  }
}
