import { connect } from 'node:net'

export interface RawAnswer {
  /** Everything the server wrote before it closed the connection. */
  text: string
  /** How many of the parts were written before the server closed the connection. */
  partsSent: number
}

/**
 * Opens a connection, sends `parts` with `gapMs` between them (stopping once the server has
 * closed), and resolves with all it answered when the server closes the connection.
 */
export function rawExchange(port: number, parts: string[], gapMs = 0): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let partsSent = 0
    const chunks: Buffer[] = []
    const socket = connect(port, '127.0.0.1', () => {
      void (async () => {
        for (const [i, part] of parts.entries()) {
          if (socket.destroyed || socket.writableEnded) return
          if (part !== '') socket.write(part)
          partsSent += 1
          if (gapMs > 0 && i < parts.length - 1) await new Promise((r) => setTimeout(r, gapMs))
        }
      })()
    })
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', (error: NodeJS.ErrnoException) => { if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error) })
    socket.on('close', () => resolve({ text: Buffer.concat(chunks).toString('utf8'), partsSent }))
  })
}

/** One response of a raw answer: status, lower-cased headers and body. */
export interface RawResponse {
  statusCode: number
  headers: Record<string, string>
  body: string
}

/**
 * Sends `head` (and, once the server answers 100 Continue, `body`) on a connection of its own;
 * resolves with every response the server wrote, interim ones included, when it closes.
 */
export function exchangeAfterContinue(port: number, head: string, body?: string): Promise<RawResponse[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let sentBody = false
    const socket = connect(port, '127.0.0.1', () => socket.write(head))
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (body !== undefined && !sentBody && Buffer.concat(chunks).toString('latin1').startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
        sentBody = true
        socket.write(body)
      }
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(parseResponses(Buffer.concat(chunks).toString('utf8'))))
  })
}

/** The responses in a raw answer. */
export function parseResponses(text: string): RawResponse[] {
  const responses: RawResponse[] = []
  let rest = text
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n')
    const [status = '', ...lines] = rest.slice(0, end).split('\r\n')
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
    const length = Number(headers['content-length'] ?? 0)
    const body = rest.slice(end + 4, end + 4 + length)
    responses.push({ statusCode: Number(status.split(' ')[1]), headers, body })
    rest = rest.slice(end + 4 + length)
  }
  if (rest !== '') responses.push({ statusCode: 0, headers: {}, body: rest })
  return responses
}
