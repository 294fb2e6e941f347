import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway } from '../src/gateway.js'
import { MemoryKeyStore } from '../src/keys/store.js'
import { testConfig } from './helpers/config.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource } from './helpers/memory-source.js'
import { expectProblem } from './helpers/problem.js'
import { parseResponses, rawExchange } from './helpers/raw.js'

// Slow clients (docs/security.md, "Slow clients"), over real sockets: header and request
// deadlines, idle keep-alive connections, and never a second answer on one request. Small
// deadlines, since they are the subject.

const HEADERS_TIMEOUT_MS = 400
const REQUEST_TIMEOUT_MS = 1200
const KEEP_ALIVE_TIMEOUT_MS = 1000

let app: FastifyInstance
let port: number
let key: string
const keyStore = new MemoryKeyStore()

beforeAll(async () => {
  // A declared route that takes a body, whose service is never reached by these requests.
  const config = testConfig({
    server: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS },
    upstreams: { notes: { url: 'http://127.0.0.1:9' } },
    routes: [{ path: '/v1/notes', methods: ['POST'], scope: 'brand', upstream: 'notes', upstreamPath: '/notes', pathParams: {}, query: {} }],
  } as Parameters<typeof testConfig>[0])
  const gateway = await createGateway({ config, logger: captureLogs().logger, properties: new MemorySource([]), keyStore })
  app = gateway.app
  await app.listen({ port: 0, host: '127.0.0.1' })
  port = (app.server.address() as { port: number }).port
  key = (await keyStore.create({ brand: 'acme', mode: 'live', properties: '*' })).key
})
afterAll(async () => app.close())

const HEAD = 'Host: localhost\r\nUser-Agent: slow-client/1.0\r\n'

describe('slow clients (docs/security.md, "Slow clients")', () => {
  it('cuts a client that sends its headers slowly, with 408 problem+json', async () => {
    // A header line every 100 ms, for 15 s: far longer than the deadline. The server, not the
    // client's end, closes the connection (no duration is asserted: the machine may be busy).
    const lines = ['GET /v1/health HTTP/1.1\r\n', ...Array.from({ length: 150 }, (_, i) => `X-Slow-${i}: x\r\n`)]
    const answer = await rawExchange(port, lines, 100)
    expect(answer.partsSent).toBeLessThan(lines.length)
    const responses = parseResponses(answer.text)
    expect(responses).toHaveLength(1)
    expectProblem(responses[0] as (typeof responses)[number], {
      code: 'REQUEST_TIMEOUT', instance: '', detail: 'The request was not received in time; the connection is closed.', headers: { connection: 'close' },
    })
  })

  it('answers 408 to a request whose body does not arrive within server.requestTimeoutMs', async () => {
    const head = `POST /v1/notes HTTP/1.1\r\n${HEAD}Authorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n`
    // Headers in time, then a byte of body every 100 ms: never the 40.
    const answer = await rawExchange(port, [head, ...Array.from({ length: 30 }, () => ' ')], 100)
    const responses = parseResponses(answer.text)
    expect(responses).toHaveLength(1)
    expectProblem(responses[0] as (typeof responses)[number], { code: 'REQUEST_TIMEOUT', instance: '', headers: { connection: 'close' } })
  })

  it('never writes a second answer: a request answered before its body is in is closed at its deadline', async () => {
    // UNEXPECTED_BODY is answered from the headers; the announced body then trickles in too slowly.
    const head = `GET /v1/properties HTTP/1.1\r\n${HEAD}Content-Length: 40\r\n\r\n`
    const answer = await rawExchange(port, [head, ...Array.from({ length: 30 }, () => 'x')], 100)
    const responses = parseResponses(answer.text)
    expect(responses.map((r) => r.statusCode)).toEqual([400])
    expectProblem(responses[0] as (typeof responses)[number], { code: 'UNEXPECTED_BODY', instance: '/v1/properties' })
  })

  it('answers Transfer-Encoding: identity once and closes the connection', async () => {
    const answer = await rawExchange(port, ['GET /v1/health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: identity\r\n\r\n'])
    const responses = parseResponses(answer.text)
    expect(responses.map((r) => r.statusCode)).toHaveLength(1)
  })

  it('closes an idle keep-alive connection after server.keepAliveTimeoutMs', async () => {
    const answer = await rawExchange(port, ['GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n'])
    const responses = parseResponses(answer.text)
    expect(responses.map((r) => ({ status: r.statusCode, body: r.body, keepAlive: r.headers['keep-alive'] })))
      .toEqual([{ status: 200, body: '{"status":"ok"}', keepAlive: `timeout=${KEEP_ALIVE_TIMEOUT_MS / 1000}` }])
  })
})
