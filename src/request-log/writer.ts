import type { Logger } from 'pino'
import type { EntryBatch } from './batch.js'
import type { RequestLogRecord } from './entry.js'

// The buffered writer of one instance (docs/architecture.md, "The request log"): `add` runs
// after an answer and puts the entry into the batch being filled (batch.ts: its line written
// into the batch's bytes); writes go to Redis in batches, on a timer and every BATCH entries,
// and at graceful shutdown. The request never waits on it. When the buffer is
// full, or Redis is away (the client refuses the write, or the health probe says so), entries
// are dropped and counted: nothing else changes for the partner, and nothing is thrown.

/** Entries per write: a batch is written as soon as this many wait. */
export const BATCH = 500

export type DropReason = 'buffer_full' | 'redis'

/** Entries as one write takes them. */
export interface RequestLogBatch {
  readonly size: number
  add(entry: RequestLogRecord): void
}

export interface RequestLogSink<Batch extends RequestLogBatch> {
  /** An empty batch. */
  batch(): Batch
  /** Writes a batch, which is not used again. */
  send(batch: Batch): Promise<void>
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

export class RequestLogWriter<Batch extends RequestLogBatch = EntryBatch> {
  /** The batch being filled. */
  private filling: Batch
  /** Full batches, and one a flush took, waiting for their write, oldest first. */
  private readonly waiting: Batch[] = []
  /** Entries in `filling` and `waiting`. */
  private held = 0
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> | undefined
  private failing = false
  /** Epoch ms of the last flush that wrote, for /status; null before the first. */
  lastFlushAt: number | null = null
  written = 0
  readonly dropped: Record<DropReason, number> = { buffer_full: 0, redis: 0 }

  constructor(private readonly sink: RequestLogSink<Batch>, private readonly options: RequestLogWriterOptions) {
    this.filling = sink.batch()
  }

  start(): void {
    if (this.timer !== undefined) return
    this.timer = setInterval(() => void this.flush(), this.options.flushMs)
    this.timer.unref()
  }

  /** Entries waiting to be written. */
  get size(): number {
    return this.held
  }

  /** The most entries the buffer holds. */
  get bufferMax(): number {
    return this.options.bufferMax
  }

  /** Keeps one entry for the next write; never throws, never waits. */
  add(entry: RequestLogRecord): void {
    if (this.options.available !== undefined && !this.options.available()) return this.drop('redis', 1)
    if (this.held >= this.options.bufferMax) return this.drop('buffer_full', 1)
    this.keep(entry)
    if (this.waiting.length > 0 && this.flushing === undefined) void this.write(false)
  }

  /** Puts an entry into the batch being filled, and a full batch in line for its write. */
  private keep(entry: RequestLogRecord): void {
    this.filling.add(entry)
    this.held += 1
    if (this.filling.size >= BATCH) this.takeFilling()
  }

  private takeFilling(): void {
    this.waiting.push(this.filling)
    this.filling = this.sink.batch()
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
    if (this.held === 0) return
    await this.write(true)
  }

  private write(all: boolean): Promise<void> {
    this.flushing = this.writeAll(all).finally(() => { this.flushing = undefined })
    return this.flushing
  }

  /**
   * Writes the batches waiting (full ones, and one a flush took that a failure left), and with
   * `all` the batch being filled too. Entries that came during a write and make no full batch
   * wait for the next batch or the timer: written at once, a busy instance sent a write of a
   * few entries after every write, each a script call (docs/performance.md, "The request log").
   */
  private async writeAll(all: boolean): Promise<void> {
    const started = performance.now()
    if (all && this.filling.size > 0) this.takeFilling()
    for (let batch = this.waiting.shift(); batch !== undefined; batch = this.waiting.shift()) {
      this.held -= batch.size
      try {
        await this.sink.send(batch)
        this.written += batch.size
        this.options.onWritten?.(batch.size)
        this.lastFlushAt = Date.now()
        if (this.failing) this.options.logger.info('request log entries are written to Redis again')
        this.failing = false
      } catch (error) {
        // Not kept for later: the buffer stays bounded, and a Redis that is away would only fill it.
        this.drop('redis', batch.size)
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
    } while (this.held > 0 && !this.failing)
    if (this.held > 0) {
      this.drop('redis', this.held)
      this.waiting.length = 0
      this.filling = this.sink.batch()
      this.held = 0
    }
  }
}
