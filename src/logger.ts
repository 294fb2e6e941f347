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
    const stdout = pino.destination({ dest: 1, sync: false, minLength: 4096 })
    // The buffer writes at 4 KiB; a quiet instance must not sit on its lines.
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
