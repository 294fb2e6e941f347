import { Writable } from 'node:stream'
import { createLogger } from '../../src/logger.js'

/** A logger whose lines the test can read. */
export function captureLogs(level = 'info') {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''))
      callback()
    },
  })
  const logger = createLogger({ level, destination: stream })
  return {
    logger,
    lines,
    records: (): Record<string, unknown>[] => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  }
}
