// The bytes of a batch of the request log (batch.ts): each entry's line is appended whole, as
// one string, through Node's UTF-8 encoder. Written piece by piece instead (a character at a
// time, no string made), a line cost about 4 µs more CPU per entry for the ~1.4 KB of young
// garbage it spared (docs/performance.md, "2026-12-02 (night): the writer's CPU per entry
// since the line is written as bytes").

/**
 * Bytes a batch's buffer starts with: 500 entries of ~300 bytes (~150 KiB) fit, with room to
 * spare for what an append reserves beyond its text (3 bytes a character).
 */
export const BATCH_BYTES = 512 * 1024

/** Text written as UTF-8 into one buffer, grown when a text might not fit; its slices are what is sent. */
export class BatchBytes {
  private buffer: Buffer
  length = 0

  constructor(size: number) {
    this.buffer = Buffer.allocUnsafeSlow(size)
  }

  /** Room for `more` bytes after what is written, the buffer grown (and copied) if need be. */
  private reserve(more: number): void {
    const most = this.length + more
    if (most > this.buffer.length) {
      const grown = Buffer.allocUnsafeSlow(Math.max(most, this.buffer.length * 2))
      this.buffer.copy(grown, 0, 0, this.length)
      this.buffer = grown
    }
  }

  /** Any text, through Node's UTF-8 encoder. */
  append(text: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit (a pair's 4 bytes are 2 per unit).
    this.reserve(text.length * 3)
    this.length += this.buffer.write(text, this.length)
  }

  /** Appends the bytes `start` to `end` of another buffer's. */
  appendFrom(source: BatchBytes, start: number, end: number): void {
    this.reserve(end - start)
    this.length += source.buffer.copy(this.buffer, this.length, start, end)
  }

  slice(start: number, end: number): Buffer {
    return this.buffer.subarray(start, end)
  }

  /** Empty for the next batch; a buffer grown far by an unusual batch is not kept. */
  clear(): void {
    this.length = 0
    if (this.buffer.length > 4 * BATCH_BYTES) this.buffer = Buffer.allocUnsafeSlow(BATCH_BYTES)
  }
}
