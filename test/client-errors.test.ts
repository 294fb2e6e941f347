import type { FastifyInstance } from 'fastify'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.js'
import { testConfig } from './helpers/config.js'
import { FakeKeys } from './helpers/fake-keys.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource } from './helpers/memory-source.js'
import { expectProblem } from './helpers/problem.js'
import { checkAnswer, contractChecked } from './helpers/contract.js'

// Requests Node's HTTP parser refuses before any route runs (docs/architecture.md, "Order of
// checks", step 1).

let app: FastifyInstance
let port: number

beforeAll(async () => {
  app = await buildApp({ config: testConfig(), logger: captureLogs().logger, keys: new FakeKeys({}), properties: new MemorySource([]) })
  contractChecked(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
  port = (app.server.address() as { port: number }).port
})
afterAll(async () => app.close())

/** Sends raw bytes; resolves with the parsed answer once the server closes. */
function raw(text: string): Promise<{ statusCode: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    const chunks: Buffer[] = []
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', reject)
    socket.on('close', () => {
      const answer = Buffer.concat(chunks).toString('utf8')
      const [head = '', body = ''] = answer.split('\r\n\r\n')
      const [status = '', ...lines] = head.split('\r\n')
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
      const parsed = { statusCode: Number(status.split(' ')[1]), headers, body }
      const [method = '', target = ''] = text.split(' ')
      try {
        checkAnswer(method, target, parsed, app.gatewayConfig)
      } catch (error) {
        reject(error as Error)
        return
      }
      resolve(parsed)
    })
  })
}

describe('requests the HTTP parser refuses', () => {
  it('answers an unknown method token with 405 problem+json', async () => {
    const res = await raw('FROB /v1/properties HTTP/1.1\r\nHost: localhost\r\n\r\n')
    expectProblem(res, { code: 'METHOD_NOT_ALLOWED', instance: '/v1/properties', headers: { allow: 'GET, HEAD' } })
  })

  it('answers a target over the header limit with 414', async () => {
    const res = await raw(`GET /v1/properties?page=${'1'.repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`)
    expectProblem(res, { code: 'URI_TOO_LONG', instance: '' })
  })

  it('answers oversize headers with 431', async () => {
    const res = await raw(`GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
    expectProblem(res, { code: 'REQUEST_HEADERS_TOO_LARGE', instance: '/v1/health' })
  })

  it('answers broken framing with 400 MALFORMED_REQUEST', async () => {
    const res = await raw('GET /v1/health HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n')
    expectProblem(res, { code: 'MALFORMED_REQUEST', instance: '/v1/health', detail: 'The request is not valid HTTP/1.1.' })
  })

  it('sends no body to a HEAD it cannot parse', async () => {
    const res = await raw('HEAD /v1/health HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n')
    expect(res.statusCode).toBe(400)
    expect(res.headers['service-request-id']).toMatch(/^req_[0-9a-f]{32}$/)
    expect(res.headers['content-length']).toBe('0')
    expect(res.body).toBe('')
  })

  // Refused at once (docs/security.md, "Slow clients"), from its headers, without waiting for a
  // body that may never end.
  it('refuses a chunked GET at once, before any chunk is sent, and closes the connection', async () => {
    const res = await raw('GET /v1/properties HTTP/1.1\r\nHost: localhost\r\nUser-Agent: raw/1.0\r\nTransfer-Encoding: chunked\r\n\r\n')
    expectProblem(res, { code: 'UNEXPECTED_BODY', instance: '/v1/properties', headers: { connection: 'close' } })
  })

  it('refuses a chunked GET even when its body is empty', async () => {
    const res = await raw('GET /v1/properties HTTP/1.1\r\nHost: localhost\r\nUser-Agent: raw/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')
    expectProblem(res, { code: 'UNEXPECTED_BODY', instance: '/v1/properties', headers: { connection: 'close' } })
  })

  it('refuses a chunked HEAD at once, with no body', async () => {
    const res = await raw('HEAD /v1/properties HTTP/1.1\r\nHost: localhost\r\nUser-Agent: raw/1.0\r\nTransfer-Encoding: chunked\r\n\r\n')
    expect({ status: res.statusCode, connection: res.headers.connection, body: res.body }).toEqual({ status: 400, connection: 'close', body: '' })
  })

  it('ignores a body on health, which takes no header step (docs/architecture.md, "Order of checks")', async () => {
    const res = await raw('GET /v1/health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc')
    expect(res.statusCode).toBe(200)
    expect(res.body).toBe('{"status":"ok"}')
  })
})

describe('a request whose Host or Authorization is missing or sent twice (docs/security.md, "Findings of the review of wave 3", 7)', () => {
  const oneHost = { field: 'Host', code: 'INVALID_FORMAT', detail: 'Send one Host header.' } as const

  it('answers an HTTP/1.1 request without Host 400 MISSING_REQUIRED_HEADER, on every route, health included', async () => {
    for (const path of ['/v1/health', '/v1/properties', '/v1/nowhere']) {
      const res = await raw(`GET ${path} HTTP/1.1\r\nUser-Agent: raw/1.0\r\nConnection: close\r\n\r\n`)
      expectProblem(res, {
        code: 'MISSING_REQUIRED_HEADER', instance: path, detail: 'The Host header is required.',
        errors: [{ field: 'Host', code: 'REQUIRED', detail: 'Send the host name of the API you call, e.g. api.acme-hotels.example.' }],
      })
    }
  })

  it('answers an HTTP/1.0 request without Host, which needs none', async () => {
    const res = await raw('GET /v1/health HTTP/1.0\r\n\r\n')
    expect({ status: res.statusCode, body: res.body }).toEqual({ status: 200, body: '{"status":"ok"}' })
  })

  it('answers two Host lines 400 INVALID_HEADER, whichever comes first', async () => {
    for (const hosts of ['Host: api.acme-hotels.example\r\nHost: api.globex-resorts.example', 'Host: localhost\r\nHost: localhost']) {
      const res = await raw(`GET /v1/health HTTP/1.1\r\n${hosts}\r\nConnection: close\r\n\r\n`)
      expectProblem(res, { code: 'INVALID_HEADER', instance: '/v1/health', detail: 'Invalid Host header.', errors: [oneHost] })
    }
  })

  it('answers two Authorization lines 400 INVALID_HEADER before any credential is read', async () => {
    const res = await raw('GET /v1/properties HTTP/1.1\r\nHost: localhost\r\nUser-Agent: raw/1.0\r\nAuthorization: Bearer svc_live_a\r\nAuthorization: Bearer svc_live_b\r\nConnection: close\r\n\r\n')
    expectProblem(res, {
      code: 'INVALID_HEADER', instance: '/v1/properties', detail: 'Invalid Authorization header.',
      errors: [{ field: 'Authorization', code: 'INVALID_FORMAT', detail: 'Send one Authorization header.' }],
    })
  })
})

describe('requests Node would answer or drop by itself', () => {
  it('answers CONNECT with 405 problem+json instead of dropping the connection', async () => {
    const res = await raw('CONNECT api.acme-hotels.example:443 HTTP/1.1\r\nHost: api.acme-hotels.example:443\r\n\r\n')
    expectProblem(res, {
      code: 'METHOD_NOT_ALLOWED', instance: '', headers: { allow: 'GET, HEAD', connection: 'close' },
      detail: 'CONNECT is not supported; this API tunnels nothing. Use GET, HEAD on its paths.',
    })
  })

  it('ignores an expectation it does not know instead of a bare 417', async () => {
    const res = await raw('GET /v1/health HTTP/1.1\r\nHost: localhost\r\nExpect: foo\r\nConnection: close\r\n\r\n')
    expect({ status: res.statusCode, body: res.body }).toEqual({ status: 200, body: '{"status":"ok"}' })
  })

  it('sends no 100 (Continue) to a request whose route reads no body, and closes after the answer', async () => {
    const res = await raw('GET /v1/health HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\r\n')
    expect({ status: res.statusCode, connection: res.headers.connection, body: res.body }).toEqual({ status: 200, connection: 'close', body: '{"status":"ok"}' })
  })

  it("routes an absolute-form target by its path, with its authority as the host (RFC 9112 3.2.2)", async () => {
    const known = await raw('GET http://api.acme-hotels.example/v1/properties?perPage=1 HTTP/1.1\r\nHost: elsewhere.example\r\nUser-Agent: raw/1.0\r\nConnection: close\r\n\r\n')
    expectProblem(known, { code: 'MISSING_AUTH_HEADER', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' } })
    const unknown = await raw('GET https://elsewhere.example:8443/v1/properties HTTP/1.1\r\nHost: api.acme-hotels.example\r\nUser-Agent: raw/1.0\r\nConnection: close\r\n\r\n')
    expectProblem(unknown, { code: 'ROUTE_NOT_FOUND', instance: '/v1/properties', detail: "No API is served at host 'elsewhere.example'." })
    const bare = await raw('GET http://user@localhost HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    expectProblem(bare, { code: 'ROUTE_NOT_FOUND', instance: '/', detail: 'There is no endpoint at /.' })
  })
})
