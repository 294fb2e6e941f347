import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { DocumentSource } from '../../src/docs/openapi.js'
import { checkAnswer } from '../helpers/contract.js'

// What the client tests share: the real fetch, watched (every request the client sends, and
// each answer checked against the gateway's OpenAPI document as TestGateway.call does), and a
// small HTTP server on a real socket that answers from a script, for the failures a gateway
// on its own does not produce on cue.

export interface Sent {
  method: string
  url: URL
  headers: Headers
  body: string
  status: number
}

/**
 * The global fetch, recording what it sends to `gateway` and checking every answer of it
 * against the document of its config (requests elsewhere, to a token endpoint, pass unwatched).
 */
export function watchedFetch(gateway: { url: string; source: DocumentSource }): { fetch: typeof globalThis.fetch; sent: Sent[] } {
  const sent: Sent[] = []
  const watched = async (input: Parameters<typeof globalThis.fetch>[0], init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init)
    if (new URL(request.url).origin !== new URL(gateway.url).origin) return globalThis.fetch(request)
    const body = await request.clone().text()
    const response = await globalThis.fetch(request)
    const text = await response.clone().text()
    const url = new URL(request.url)
    sent.push({ method: request.method, url, headers: request.headers, body, status: response.status })
    checkAnswer(request.method, `${url.pathname}${url.search}`, { statusCode: response.status, headers: Object.fromEntries(response.headers), body: text }, gateway.source)
    return response
  }
  return { fetch: watched, sent }
}

/** A request as a scripted fetch got it. */
export interface Fetched {
  method: string
  url: string
  headers: Record<string, string>
  body: string
}

/**
 * A fetch answering the n-th request with the n-th answer (a function: made when asked, from the
 * request), recording each: the client's edge, for answers no server gives on cue.
 */
export function scriptedFetch(...answers: (Response | ((request: Request) => Promise<Response>))[]): { fetch: typeof globalThis.fetch; seen: Fetched[] } {
  const seen: Fetched[] = []
  const fetch = async (input: Parameters<typeof globalThis.fetch>[0], init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init)
    seen.push({ method: request.method, url: request.url, headers: Object.fromEntries(request.headers), body: await request.clone().text() })
    const answer = answers.shift()
    if (answer === undefined) throw new Error(`no answer scripted for ${request.method} ${request.url}`)
    return typeof answer === 'function' ? answer(request) : answer
  }
  return { fetch, seen }
}

export interface Received {
  method: string
  path: string
  headers: IncomingMessage['headers']
  body: string
  /** When it arrived (performance.now()). */
  at: number
}

export type Reply = (res: ServerResponse, req: IncomingMessage) => void

/** A server that answers the n-th request with the n-th reply of its script (500 once the script is spent). */
export class ScriptedServer {
  readonly received: Received[] = []
  private server: Server | undefined
  private readonly replies: Reply[] = []

  script(...replies: Reply[]): this {
    this.replies.length = 0
    this.replies.push(...replies)
    this.received.length = 0
    return this
  }

  async listen(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        this.received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: performance.now() })
        const reply = this.replies.shift() ?? problem(500, 'INTERNAL_ERROR', { detail: 'The script of the test server is spent.' })
        reply(res, req)
      })
    })
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve))
    return this
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}`
  }

  /** The gaps between the arrivals of the requests, in ms. */
  gaps(): number[] {
    return this.received.slice(1).map((r, i) => r.at - (this.received[i] as Received).at)
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections()
    await new Promise<void>((resolve) => this.server?.close(() => resolve()))
  }
}

let replyCount = 0

/** A problem+json answer as the gateway writes it. */
export function problem(status: number, code: string, options: { retryAfter?: string; detail?: string; title?: string } = {}): Reply {
  return (res, req) => {
    replyCount += 1
    const requestId = `req_test_${replyCount}`
    const body = {
      type: `https://developer.example.com/errors/${code.toLowerCase().replaceAll('_', '-')}`, title: options.title ?? code, status,
      detail: options.detail ?? `detail of ${code}`, moreInfo: '', instance: (req.url ?? '/').split('?')[0], code, errors: [], requestId,
      timestamp: '2026-11-26T12:00:00.000Z',
    }
    res.writeHead(status, {
      'content-type': 'application/problem+json; charset=utf-8', 'service-request-id': requestId,
      ...(options.retryAfter === undefined ? {} : { 'retry-after': options.retryAfter }),
    })
    res.end(JSON.stringify(body))
  }
}

/** A success envelope. */
export function envelope(status: number, data: unknown, meta: Record<string, unknown> = {}): Reply {
  return (res) => {
    replyCount += 1
    const requestId = `req_test_${replyCount}`
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'service-request-id': requestId })
    res.end(JSON.stringify({ data, meta: { requestId, timestamp: '2026-11-26T12:00:00.000Z', ...meta } }))
  }
}

/** Any status with a body that is not JSON, as a load balancer in front of the API answers. */
export function page(status: number, html: string): Reply {
  return (res) => {
    res.writeHead(status, { 'content-type': 'text/html' })
    res.end(html)
  }
}

/** The connection closed with no answer. */
export const reset: Reply = (_res, req) => {
  req.socket.destroy()
}

/** Headers of an answer that then never ends. */
export const stall: Reply = (res) => {
  res.writeHead(200, { 'content-type': 'application/json' })
  res.write('{"data":')
}

/** A JSON answer of the token endpoint (RFC 6749 5.1 and 5.2). */
export function tokenAnswer(status: number, body: Record<string, unknown>): Reply {
  return (res) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
    res.end(JSON.stringify(body))
  }
}

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
