import { writeSync } from 'node:fs'
import pino, { type DestinationStream, type Logger } from 'pino'

// Paths that could hold a secret if anything ever logged a request or a key record.
// Nothing logs them; redaction is the second line of defence. No wildcards: they make pino
// walk every line of every request.
export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'headers["x-pms-service-token"]',
  'authorization',
  'key',
  'apiKey',
  'token',
]

/** Characters of lines gathered before they are written: 16 KiB of request lines, about 45. */
export const WRITE_SIZE = 16384

export interface LoggerOptions {
  level: string
  /** Defaults to stdout, written asynchronously so a log line never blocks a response. */
  destination?: DestinationStream
}

/** The stream a batch of lines is handed to, as UTF-8 bytes (SonicBoom in the process, in its `buffer` mode). */
export interface LineStream {
  write(bytes: Buffer): boolean
  flush(callback?: (error?: Error) => void): void
}

/**
 * Lines gathered into one string and handed on once it holds `size` characters, when flushed,
 * and at the process's exit. SonicBoom can gather them itself (its `minLength`), but then it
 * measures in bytes, on every line, all that it holds: a string grown line by line is copied
 * whole at each measure, about 8 KiB copied and counted per line at 16 KiB (docs/performance.md,
 * "The log's writes"). Here a line costs an append; the batch is encoded once, when handed on,
 * as bytes: given a string, SonicBoom measures it, has it encoded for the write, and encodes it
 * again once written (to find what is left of a partial write).
 */
export class LineBatch implements DestinationStream {
  private pending = ''

  constructor(private readonly stream: LineStream, private readonly size: number) {}

  write(line: string): boolean {
    this.pending += line
    return this.pending.length >= this.size ? this.release() : true
  }

  /** Hands on what is held; the stream writes it at once unless a write is under way. */
  private release(): boolean {
    const text = this.pending
    this.pending = ''
    return text === '' ? true : this.stream.write(Buffer.from(text, 'utf8'))
  }

  flush(callback?: (error?: Error) => void): void {
    this.release()
    this.stream.flush(callback)
  }

  /**
   * What is held, written to `fd` before the process ends: at its 'exit', after pino has had
   * SonicBoom write what it held synchronously (its listener is older than ours), so the
   * lines keep their order, but for a batch SonicBoom was writing on the thread pool at that
   * moment, which may land after them. A pipe that is full is waited on (a second at most);
   * one that is gone is given up.
   */
  writeHeldSync(fd: number): void {
    let bytes = Buffer.from(this.pending)
    this.pending = ''
    for (let waits = 0; bytes.length > 0;) {
      try {
        bytes = bytes.subarray(writeSync(fd, bytes))
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN' || ++waits > 1000) return
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1)
      }
    }
  }
}

export function createLogger(options: LoggerOptions): Logger {
  let destination = options.destination
  if (destination === undefined) {
    // Lines leave in writes of 16 KiB: each write to a pipe is a call into the thread pool and
    // a wake-up of the reader, a few % of a cached answer's CPU at 4 KiB (docs/performance.md).
    // A quiet instance must not sit on its lines: at least every second. A crash loses what
    // the batch holds (docs/operations.md, "Logs").
    const stdout = pino.destination({ dest: 1, sync: false, minLength: 0, maxWrite: 65536, contentMode: 'buffer' })
    // In its `buffer` mode SonicBoom takes Buffers, which its types do not say.
    const lines = new LineBatch(stdout as unknown as LineStream, WRITE_SIZE)
    process.on('exit', () => lines.writeHeldSync(1))
    setInterval(() => lines.flush(), 1000).unref()
    destination = lines
  }
  return pino({
    level: options.level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
  }, destination)
}

/** Writes what the asynchronous destination still holds (before exit). */
export function flushLogger(logger: Logger): void {
  try {
    logger.flush()
  } catch {
    // A synchronous test destination has nothing to flush.
  }
}
