import { Server, ServerResponse } from 'node:http'

// The answers of one turn of the event loop leave together (config `server.coalesceAnswers`,
// docs/performance.md, "Answers end together"). A response's end() is held until the end of
// the turn it was called in (a setImmediate, which runs once the turn's I/O callbacks and their
// promises are done), and then every held end() runs in the order it was called. Its head is
// written as it would be: only the last write of an answer waits.
//
// Why: under load one turn reads many requests, and each answer written the moment it is ready
// wakes the partner's side for that answer alone; ended together, one wake-up serves all of
// them, on both sides. What it costs: an answer waits for the rest of its turn's work (nothing
// when the turn holds one request; under load, the few hundred µs the turn's other requests
// take), and one setImmediate per turn that ends something.
//
// For everything else the response behaves as ended from the call on: `writableEnded` is true
// (Fastify then treats the reply as sent), and a second end(), a write() or a destroy() first
// lets the held end() run, so that they meet the ended response Node's own ServerResponse would.
// Only an answer whose head is written waits (Fastify and the declared routes always write it
// first): one ended without it keeps Node's behaviour whole.
//
// What is not covered: an end() called during the check phase itself (from another
// setImmediate, or a 'finish' listener of a held answer) waits for the next turn, in which a
// partner that half-closed its connection is cut off before it (Node closes a connection whose
// partner sent FIN, answer or not, as it does for any answer still being worked on). Held ends
// run in the async context of the setImmediate, not of their requests; nothing of ours keeps
// per-request async context.

const held: CoalescedResponse[] = []
let scheduled = false

/** Runs every held end() now (a server about to close its idle connections needs them ended). */
export function endHeldAnswers(): void {
  scheduled = false
  // An end() called while these run (a 'finish' listener answering another request) is held
  // for the next turn.
  const batch = held.splice(0, held.length)
  for (const response of batch) response.endNow()
}

type EndCallback = () => void

export class CoalescedResponse extends ServerResponse {
  private ending = false
  private heldChunk: unknown = undefined
  private heldEncoding: unknown = undefined
  private heldCallback: unknown = undefined

  override end(chunkOrCallback?: unknown, encodingOrCallback?: unknown, callback?: unknown): this {
    // A second end(), or one on a response already ended or destroyed: Node's own answer to it.
    this.endNow()
    if (this.finished || this.destroyed || !this.headersSent) return super.end(chunkOrCallback as string, encodingOrCallback as BufferEncoding, callback as EndCallback)
    this.ending = true
    this.heldChunk = chunkOrCallback
    this.heldEncoding = encodingOrCallback
    this.heldCallback = callback
    held.push(this)
    if (!scheduled) {
      scheduled = true
      setImmediate(endHeldAnswers)
    }
    return this
  }

  /** Runs the held end(), if any: at the end of the turn, or before a write or destroy that follows it. */
  endNow(): void {
    if (!this.ending) return
    this.ending = false
    const chunk = this.heldChunk
    const encoding = this.heldEncoding
    const callback = this.heldCallback
    this.heldChunk = undefined
    this.heldEncoding = undefined
    this.heldCallback = undefined
    try {
      super.end(chunk as string, encoding as BufferEncoding, callback as EndCallback)
    } catch (error) {
      // What Node would have thrown at the caller (a chunk of a type it cannot write) has no
      // caller left here. It is reported (stderr, and to whoever listens for the response's
      // errors: Fastify then finishes the request, its log line included) and the partner
      // is cut off, as for any failed answer.
      process.emitWarning(error as Error)
      if (this.listenerCount('error') > 0) this.emit('error', error)
      this.destroy()
    }
  }

  override write(chunk: unknown, encodingOrCallback?: unknown, callback?: unknown): boolean {
    this.endNow()
    return super.write(chunk, encodingOrCallback as BufferEncoding, callback as EndCallback)
  }

  override destroy(error?: Error): this {
    this.endNow()
    return super.destroy(error)
  }
}

// Node defines writableEnded as an accessor of OutgoingMessage (true once end() was called);
// TypeScript knows it as a property, which a class may not override with an accessor.
Object.defineProperty(CoalescedResponse.prototype, 'writableEnded', {
  configurable: true,
  get(this: ServerResponse): boolean {
    return (this as unknown as { ending: boolean }).ending || this.finished
  },
})

/**
 * Node's server, but for one thing: closeIdleConnections(), which close() runs, first ends the
 * held answers. Node takes a connection whose answer has not ended for busy, and after close()
 * never looks at it again: a keep-alive connection whose answer was held when the server began
 * to close would stay open, idle, until its keep-alive timeout.
 */
export class CoalescingServer extends Server {
  override closeIdleConnections(): void {
    endHeldAnswers()
    super.closeIdleConnections()
  }
}
