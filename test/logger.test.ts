import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { LineBatch, type LineStream } from '../src/logger.js'

// The gateway's log destination: lines gathered and written in batches, none lost at exit.

class RecordingStream implements LineStream {
  readonly writes: string[] = []
  flushes = 0

  write(bytes: Buffer): boolean {
    this.writes.push(bytes.toString('utf8'))
    return true
  }

  flush(callback?: (error?: Error) => void): void {
    this.flushes++
    callback?.()
  }
}

describe('LineBatch', () => {
  it('holds lines until they reach its size, then hands them on in one write, in order', () => {
    const stream = new RecordingStream()
    const batch = new LineBatch(stream, 32)
    batch.write('{"a":1}\n')
    batch.write('{"b":2}\n')
    batch.write('{"c":3}\n')
    expect(stream.writes).toEqual([])
    // 32 characters: the size reached.
    batch.write('{"d":4}\n')
    expect(stream.writes).toEqual(['{"a":1}\n{"b":2}\n{"c":3}\n{"d":4}\n'])
    batch.write('{"e":5}\n')
    expect(stream.writes).toEqual(['{"a":1}\n{"b":2}\n{"c":3}\n{"d":4}\n'])
  })

  it('hands its lines on as their UTF-8 bytes, whatever they hold', () => {
    const stream = new RecordingStream()
    const bytes: Buffer[] = []
    const batch = new LineBatch({ write: (b: Buffer) => { bytes.push(b); return stream.write(b) }, flush: (callback) => stream.flush(callback) }, 8)
    batch.write('{"name":"Opéra 東京 🌋"}\n')
    expect(stream.writes).toEqual(['{"name":"Opéra 東京 🌋"}\n'])
    expect(bytes[0]?.length).toBe(Buffer.byteLength('{"name":"Opéra 東京 🌋"}\n'))
  })

  it('hands on what it holds when flushed, then flushes the stream, once each', () => {
    const stream = new RecordingStream()
    const batch = new LineBatch(stream, 1000)
    batch.write('{"a":1}\n')
    let called = 0
    batch.flush(() => called++)
    expect({ writes: stream.writes, flushes: stream.flushes, called }).toEqual({ writes: ['{"a":1}\n'], flushes: 1, called: 1 })
    // Nothing held: the stream is flushed, nothing written.
    batch.flush()
    expect({ writes: stream.writes, flushes: stream.flushes }).toEqual({ writes: ['{"a":1}\n'], flushes: 2 })
  })
})

/** Runs a process that logs `lines` lines with the gateway's logger, then ends as `end` says; its stdout. */
async function logThenEnd(lines: number, end: 'exit' | 'throw' | 'return'): Promise<{ code: number | null; stdout: string }> {
  const script = `
    const { createLogger } = await import(${JSON.stringify(new URL('../dist/src/logger.js', import.meta.url).href)})
    const logger = createLogger({ level: 'info' })
    for (let i = 0; i < ${lines}; i++) logger.info({ i }, 'line')
    ${end === 'exit' ? 'process.exit(3)' : end === 'throw' ? "throw new Error('ended by a throw')" : ''}
  `
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'ignore'] })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  return { code, stdout }
}

/** The `i` of each line, in the order written. */
function order(stdout: string): number[] {
  return stdout.split('\n').filter((line) => line !== '').map((line) => (JSON.parse(line) as { i: number; msg: string }).i)
}

describe('the logger of the process', () => {
  const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i)

  it.each([
    ['process.exit()', 'exit', 3],
    ['an uncaught exception', 'throw', 1],
    ['the event loop running out', 'return', 0],
  ] as const)('writes every line it held, in order, when the process ends by %s', async (_name, end, code) => {
    // 20 lines are less than one write's worth: all of them are held when the process ends.
    expect(await logThenEnd(20, end).then((r) => ({ code: r.code, order: order(r.stdout) }))).toEqual({ code, order: range(20) })
  })

  it('writes many batches whole and in order', async () => {
    // Ended by its event loop running out, not by exit(): a batch that SonicBoom is writing on
    // the thread pool when exit() comes may land after those written at the exit (SonicBoom's
    // own behaviour, src/logger.ts, `writeHeldSync`); this test is of the batches, not of that.
    expect(await logThenEnd(3000, 'return').then((r) => ({ code: r.code, order: order(r.stdout) }))).toEqual({ code: 0, order: range(3000) })
  })
})
