import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { once } from 'node:events'
import type { Socket } from 'node:net'
import { afterEach } from 'vitest'

// A partner's webhook endpoint on loopback: keeps every request it gets and answers as the
// test says (a status, or never).

export interface Received {
  /** The request's method: a delivery is a POST. */
  method: string
  path: string
  headers: IncomingMessage['headers']
  body: string
  /** The port the request came from: the same for two requests on one connection kept alive. */
  remotePort: number | undefined
}

/** What to answer to the n-th request (1 for the first): a status, or `hang` (never answer). */
export type Behaviour = (n: number, request: Received) => number | 'hang'

export class Receiver {
  readonly received: Received[] = []
  private readonly server: Server
  private readonly hanging = new Set<ServerResponse>()
  /** The ports of the connections open now. */
  readonly open = new Set<number | undefined>()
  url = ''

  /**
   * `keepAliveMs`: how long the server keeps an idle connection (and says so in `Keep-Alive`);
   * Node's 5 s when not given. A test that must see a client close a connection itself gives a
   * long one, so that the server closing it cannot pass for the client doing so.
   */
  constructor(public behaviour: Behaviour = () => 200, options: { keepAliveMs?: number } = {}) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        const received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), remotePort: req.socket.remotePort }
        this.received.push(received)
        const answer = this.behaviour(this.received.length, received)
        if (answer === 'hang') {
          this.hanging.add(res)
          return
        }
        if (answer >= 300 && answer < 400) res.setHeader('location', `${this.url}/redirected`)
        res.writeHead(answer).end()
      })
    })
    if (options.keepAliveMs !== undefined) this.server.keepAliveTimeout = options.keepAliveMs
    this.server.on('connection', (socket: Socket) => {
      const port = socket.remotePort
      this.open.add(port)
      socket.on('close', () => this.open.delete(port))
    })
  }

  async listen(): Promise<this> {
    this.server.listen(0, '127.0.0.1')
    await once(this.server, 'listening')
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`
    return this
  }

  /** The requests carrying `webhook-id` `eventId`. */
  of(eventId: string): Received[] {
    return this.received.filter((r) => r.headers['webhook-id'] === eventId)
  }

  /** Answers every request held so far (`hang`) with `status`; how many it answered. */
  answerHeld(status: number): number {
    const held = [...this.hanging]
    this.hanging.clear()
    for (const res of held) res.writeHead(status).end()
    return held.length
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy()
    this.server.closeAllConnections()
    this.server.close()
  }
}

/**
 * Receivers for the tests of the block this is called in: the function it returns starts one on
 * loopback, and each is closed after its test, whatever the test's outcome.
 */
export function receiversClosedAfterEach(): (behaviour?: Behaviour, options?: { keepAliveMs?: number }) => Promise<Receiver> {
  const open: Receiver[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((r) => r.close()))
  })
  return async (behaviour, options) => {
    const r = await new Receiver(behaviour, options).listen()
    open.push(r)
    return r
  }
}
