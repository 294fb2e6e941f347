import type { Logger } from 'pino'
import type { RequestLogRecord } from './entry.js'

// The buffered writer of one instance (docs/architecture.md, "The request log"): `add` runs
// after an answer and costs an array push; writes go to Redis in batches, on a timer and every
// BATCH entries, and at graceful shutdown. The request never waits on it. When the buffer is
// full, or Redis is away (the client refuses the write, or the health probe says so), entries
// are dropped and counted: nothing else changes for the partner, and nothing is thrown.

/** Entries per write: a batch is written as soon as this many wait. */
export const BATCH = 500

export type DropReason = 'buffer_full' | 'redis'

export interface RequestLogSink {
  write(entries: readonly RequestLogRecord[]): Promise<void>
}

export interface RequestLogWriterOptions {
  flushMs: number
  bufferMax: number
  logger: Logger
  /** Whether Redis answers now (the health probe); while not, entries are dropped at once. */
  available?: () => boolean
  onWritten?: (entries: number) => void
  onDropped?: (reason: DropReason, entries: number) => void
  onFlush?: (seconds: number) => void
}

export class RequestLogWriter {
  private buffer: RequestLogRecord[] = []
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> | undefined
  private failing = false
  /** Epoch ms of the last flush that wrote, for /status; null before the first. */
  lastFlushAt: number | null = null
  written = 0
  readonly dropped: Record<DropReason, number> = { buffer_full: 0, redis: 0 }

  constructor(private readonly sink: RequestLogSink, private readonly options: RequestLogWriterOptions) {}

  start(): void {
    if (this.timer !== undefined) return
    this.timer = setInterval(() => void this.flush(), this.options.flushMs)
    this.timer.unref()
  }

  /** Entries waiting to be written. */
  get size(): number {
    return this.buffer.length
  }

  /** The most entries the buffer holds. */
  get bufferMax(): number {
    return this.options.bufferMax
  }

  /** Keeps one entry for the next write; never throws, never waits. */
  add(entry: RequestLogRecord): void {
    if (this.options.available !== undefined && !this.options.available()) return this.drop('redis', 1)
    if (this.buffer.length >= this.options.bufferMax) return this.drop('buffer_full', 1)
    this.buffer.push(entry)
    if (this.buffer.length >= BATCH && this.flushing === undefined) void this.write(0)
  }

  private drop(reason: DropReason, entries: number): void {
    this.dropped[reason] += entries
    this.options.onDropped?.(reason, entries)
  }

  /**
   * After the write under way, writes the entries held then, a batch at a time, and every full
   * batch that waits as it ends; one write at a time.
   */
  async flush(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing
    if (this.buffer.length === 0) return
    await this.write(this.buffer.length)
  }

  private write(held: number): Promise<void> {
    this.flushing = this.writeAll(held).finally(() => { this.flushing = undefined })
    return this.flushing
  }

  /**
   * Writes the `held` oldest entries, then full batches while any waits. Entries that came
   * during a write and make no full batch wait for the next batch or the timer: written at
   * once, a busy instance sent a write of a few entries after every write, each costing a
   * script call (docs/performance.md, "The request log").
   */
  private async writeAll(held: number): Promise<void> {
    const started = performance.now()
    let left = held
    // Only this loop takes from the buffer, so it holds entries while `left` is above 0; the
    // first test keeps a broken count from becoming a loop of empty writes.
    while (this.buffer.length > 0 && (left > 0 || this.buffer.length >= BATCH)) {
      const batch = this.buffer.length <= BATCH ? this.buffer : this.buffer.slice(0, BATCH)
      this.buffer = this.buffer.length <= BATCH ? [] : this.buffer.slice(BATCH)
      left -= batch.length
      try {
        await this.sink.write(batch)
        this.written += batch.length
        this.options.onWritten?.(batch.length)
        this.lastFlushAt = Date.now()
        if (this.failing) this.options.logger.info('request log entries are written to Redis again')
        this.failing = false
      } catch (error) {
        // Not kept for later: the buffer stays bounded, and a Redis that is away would only fill it.
        this.drop('redis', batch.length)
        // The message only: a client's error may carry the command's arguments, the entries.
        if (!this.failing) this.options.logger.warn({ error: error instanceof Error ? error.message : String(error) }, 'request log entries could not be written to Redis; they are dropped (gateway_request_log_dropped_total) until it answers')
        this.failing = true
        break
      }
    }
    this.options.onFlush?.((performance.now() - started) / 1000)
  }

  /**
   * Stops the timer, waits for the write under way and writes what is left (the app's onClose:
   * a graceful shutdown loses nothing while Redis answers). Once a write fails, what is still
   * held is dropped and counted: with Redis hanging, each batch would wait out the command
   * timeout, and the shutdown's deadline would pass before the buffer was through.
   */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    do {
      await this.flush()
    } while (this.buffer.length > 0 && !this.failing)
    if (this.buffer.length > 0) {
      this.drop('redis', this.buffer.length)
      this.buffer = []
    }
  }
}
