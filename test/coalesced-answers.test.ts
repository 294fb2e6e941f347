import type { FastifyInstance } from 'fastify'
import { createServer, ServerResponse, type Server } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGateway } from '../src/gateway.js'
import { CoalescedResponse, CoalescingServer } from '../src/http/coalesced-response.js'
import { MemoryKeyStore } from '../src/keys/store.js'
import { testConfig } from './helpers/config.js'
import { captureLogs } from './helpers/logs.js'
import { MemorySource } from './helpers/memory-source.js'
import { expectProblem } from './helpers/problem.js'
import { parseResponses, rawExchange, type RawResponse } from './helpers/raw.js'

// The answers of one turn of the event loop end together (src/http/coalesced-response.ts,
// config `server.coalesceAnswers`). Over real sockets: what a partner receives, with the
// response class on and off, and the edges where a held end() must behave as Node's own.

type Handler = (res: ServerResponse, record: (fact: unknown) => void) => void

interface Served { server: Server; port: number; facts: unknown[] }

async function serve(responseClass: typeof ServerResponse | typeof CoalescedResponse, handler: Handler): Promise<Served> {
  const facts: unknown[] = []
  const server = createServer({ ServerResponse: responseClass }, (_req, res) => handler(res, (fact) => facts.push(fact)))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, port: (server.address() as { port: number }).port, facts }
}

async function close(served: Served): Promise<void> {
  served.server.closeAllConnections()
  await new Promise((resolve) => served.server.close(resolve))
}

const REQUEST = 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'

async function exchange(port: number, request = REQUEST): Promise<RawResponse[]> {
  return parseResponses((await rawExchange(port, [request])).text)
}

const CLASSES = [['Node\'s ServerResponse', ServerResponse], ['CoalescedResponse', CoalescedResponse]] as const

describe('CoalescedResponse', () => {
  it('holds an answer\'s end until its turn is over: ended at once for the code, on the wire after, whole', async () => {
    const served = await serve(CoalescedResponse, (res, record) => {
      // The response lets go of its socket once finished.
      const socket = res.socket
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5' })
      res.end('hello')
      record({ writableEnded: res.writableEnded, writableFinished: res.writableFinished, bytesWritten: socket?.bytesWritten })
      setImmediate(() => record({ bytesWritten: (socket?.bytesWritten ?? 0) > 0, writableFinished: res.writableFinished }))
    })
    try {
      const [answer, ...more] = await exchange(served.port)
      expect({ status: answer?.statusCode, type: answer?.headers['content-type'], body: answer?.body, more }).toEqual({ status: 200, type: 'text/plain', body: 'hello', more: [] })
      // The setImmediate of the handler was queued after the one that ends the turn's answers.
      expect(served.facts).toEqual([{ writableEnded: true, writableFinished: false, bytesWritten: 0 }, { bytesWritten: true, writableFinished: true }])
    } finally {
      await close(served)
    }
  })

  it('writes at once with Node\'s own class, which is what `server.coalesceAnswers: false` serves with', async () => {
    const served = await serve(ServerResponse, (res, record) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5' })
      res.end('hello')
      record({ writableEnded: res.writableEnded, written: (res.socket?.bytesWritten ?? 0) > 0 })
    })
    try {
      expect((await exchange(served.port)).map((a) => a.body)).toEqual(['hello'])
      expect(served.facts).toEqual([{ writableEnded: true, written: true }])
    } finally {
      await close(served)
    }
  })

  it('ends the answers held in one turn in the order they were ended', async () => {
    // Three connections whose requests are all in before the server reads them: one turn.
    const order: number[] = []
    let next = 0
    const served = await serve(CoalescedResponse, (res) => {
      const n = next
      next += 1
      res.on('finish', () => order.push(n))
      res.writeHead(200, { 'content-length': String(String(n).length) })
      res.end(String(n))
    })
    try {
      const sockets = await Promise.all([0, 1, 2].map(() => new Promise<ReturnType<typeof connect>>((resolve) => {
        const socket = connect(served.port, '127.0.0.1', () => resolve(socket))
      })))
      const answers = sockets.map((socket) => new Promise<string>((resolve) => {
        let text = ''
        socket.on('data', (chunk: Buffer) => { text += chunk.toString('latin1') })
        socket.on('close', () => resolve(text))
      }))
      for (const socket of sockets) socket.write(REQUEST)
      const bodies = (await Promise.all(answers)).map((text) => parseResponses(text).map((a) => a.body)).flat().sort()
      expect(bodies).toEqual(['0', '1', '2'])
      expect(order).toEqual([0, 1, 2])
    } finally {
      await close(served)
    }
  })

  describe.each(CLASSES)('as %s does', (_name, responseClass) => {
    it('fails a second end() with a chunk with ERR_STREAM_WRITE_AFTER_END, and the partner gets the first answer', async () => {
      const served = await serve(responseClass, (res, record) => {
        res.on('error', (error: NodeJS.ErrnoException) => record({ event: error.code }))
        res.writeHead(200, { 'content-length': '5' })
        res.end('first')
        res.end('other')
        res.end(() => record({ endedAgain: true }))
      })
      try {
        expect((await exchange(served.port)).map((a) => [a.statusCode, a.body])).toEqual([[200, 'first']])
        expect(served.facts).toEqual([{ endedAgain: true }, { event: 'ERR_STREAM_WRITE_AFTER_END' }])
      } finally {
        await close(served)
      }
    })

    it('fails a write after end() with ERR_STREAM_WRITE_AFTER_END, and the partner gets the answer', async () => {
      const served = await serve(responseClass, (res, record) => {
        res.on('error', (error: NodeJS.ErrnoException) => record({ event: error.code }))
        res.writeHead(200, { 'content-length': '5' })
        res.end('first')
        res.write('late', (error) => record({ callback: (error as NodeJS.ErrnoException | null)?.code }))
      })
      try {
        expect((await exchange(served.port)).map((a) => [a.statusCode, a.body])).toEqual([[200, 'first']])
        expect(served.facts).toEqual([{ callback: 'ERR_STREAM_WRITE_AFTER_END' }, { event: 'ERR_STREAM_WRITE_AFTER_END' }])
      } finally {
        await close(served)
      }
    })

    it('delivers an answer destroyed right after its end()', async () => {
      const served = await serve(responseClass, (res) => {
        res.writeHead(200, { 'content-length': '5' })
        res.end('whole')
        res.destroy()
      })
      try {
        expect((await exchange(served.port)).map((a) => [a.statusCode, a.body])).toEqual([[200, 'whole']])
      } finally {
        await close(served)
      }
    })
  })

  it('does not hold an end() whose head was never written: Node\'s own behaviour, whole', async () => {
    const served = await serve(CoalescedResponse, (res, record) => {
      const socket = res.socket
      res.setHeader('content-type', 'text/plain')
      res.end('at once')
      record({ writableEnded: res.writableEnded, headersSent: res.headersSent, written: (socket?.bytesWritten ?? 0) > 0 })
    })
    try {
      expect((await exchange(served.port)).map((a) => [a.statusCode, a.headers['content-type'], a.body])).toEqual([[200, 'text/plain', 'at once']])
      expect(served.facts).toEqual([{ writableEnded: true, headersSent: true, written: true }])
    } finally {
      await close(served)
    }
  })

  it('reports what the held end() could not write, cuts the partner off, and goes on serving', async () => {
    let calls = 0
    const served = await serve(CoalescedResponse, (res, record) => {
      calls += 1
      res.on('error', (error: NodeJS.ErrnoException) => record({ event: error.code }))
      res.writeHead(200, { 'content-length': '2' })
      if (calls === 1) res.end(42 as unknown as string)
      else res.end('ok')
    })
    try {
      expect(await exchange(served.port)).toEqual([])
      expect((await exchange(served.port)).map((a) => [a.statusCode, a.body])).toEqual([[200, 'ok']])
      expect(served.facts).toEqual([{ event: 'ERR_INVALID_ARG_TYPE' }])
    } finally {
      await close(served)
    }
  })
})

describe('CoalescingServer', () => {
  it('closes at once when an answer ended in the same turn: the answer leaves whole, then the idle connection closes', async () => {
    // Node counts a connection whose answer has not ended as busy and, once close() has
    // begun, never looks at it again: held, it would stay open for the keep-alive timeout.
    const server = new CoalescingServer({ ServerResponse: CoalescedResponse as typeof ServerResponse, keepAliveTimeout: 600_000 })
    const closed = new Promise<void>((resolve) => {
      server.on('request', (_req, res: ServerResponse) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5' })
        res.end('hello')
        // Once the request is parsed whole (Node counts the connection idle then), still in this turn.
        process.nextTick(() => server.close(() => resolve()))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as { port: number }).port
    // A keep-alive request: the partner keeps its connection open until the server closes it.
    const answer = await rawExchange(port, ['GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'])
    await closed
    expect(parseResponses(answer.text).map((a) => [a.statusCode, a.headers.connection, a.body])).toEqual([[200, 'keep-alive', 'hello']])
  })
})

describe('the gateway\'s answers, ended together and one by one', () => {
  const gateways: { name: string; app: FastifyInstance; port: number; key: string }[] = []

  beforeAll(async () => {
    for (const coalesceAnswers of [true, false]) {
      const keyStore = new MemoryKeyStore()
      const config = testConfig({ server: { coalesceAnswers } } as Parameters<typeof testConfig>[0])
      const { app } = await createGateway({ config, logger: captureLogs().logger, properties: new MemorySource([]), keyStore })
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { key } = await keyStore.create({ brand: 'acme', mode: 'live', properties: '*' })
      gateways.push({ name: String(coalesceAnswers), app, port: (app.server.address() as { port: number }).port, key })
    }
  })
  afterAll(async () => {
    for (const g of gateways) await g.app.close()
  })

  it.each([true, false])('answers each of many requests sent at once, and each of three pipelined ones, whole (coalesceAnswers %s)', async (coalesceAnswers) => {
    const g = gateways.find((x) => x.name === String(coalesceAnswers)) as (typeof gateways)[number]
    const head = (key: string, close: boolean): string => `GET /v1/properties HTTP/1.1\r\nHost: localhost\r\nUser-Agent: burst/1.0\r\nAuthorization: Bearer ${key}\r\n${close ? 'Connection: close\r\n' : ''}\r\n`
    const at = await Promise.all(Array.from({ length: 20 }, (_, i) => exchange(g.port, head(i % 2 === 0 ? g.key : 'svc_live_unknown', true))))
    for (const [i, [answer, ...more]] of at.entries()) {
      expect(more).toEqual([])
      if (i % 2 === 0) {
        expect({ status: answer?.statusCode, body: JSON.parse(answer?.body ?? '{}') as unknown }).toEqual({
          status: 200, body: { data: [], meta: expect.objectContaining({ requestId: answer?.headers['service-request-id'] }) as unknown },
        })
      } else {
        expectProblem(answer as RawResponse, { code: 'INVALID_API_KEY', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer', connection: 'close' } })
      }
    }
    const pipelined = await exchange(g.port, `${head(g.key, false)}${head('svc_live_unknown', false)}${head(g.key, true)}`)
    expect(pipelined.map((a) => a.statusCode)).toEqual([200, 401, 200])
    expect(new Set(pipelined.map((a) => a.headers['service-request-id'])).size).toBe(3)
  })
})
