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

export interface LoggerOptions {
  level: string
  /** Defaults to stdout, written asynchronously so a log line never blocks a response. */
  destination?: DestinationStream
}

export function createLogger(options: LoggerOptions): Logger {
  let destination = options.destination
  if (destination === undefined) {
    // Lines leave in writes of 16 KiB (about 45 request lines): each write to a pipe is a call
    // into the thread pool and a wake-up of the reader, a few % of a cached answer's CPU at 4 KiB
    // (docs/performance.md). A quiet instance must not sit on its lines: at least every second.
    // A crash loses what the buffer holds (docs/operations.md, "Logs").
    const stdout = pino.destination({ dest: 1, sync: false, minLength: 16384, maxWrite: 65536 })
    setInterval(() => stdout.flush(), 1000).unref()
    destination = stdout
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
