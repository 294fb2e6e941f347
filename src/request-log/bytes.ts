import { quoted } from '../json-string.js'

// The bytes of a batch of the request log (batch.ts), and the writes an entry's line is made of
// (entry.ts, `writeStoredEntry`). Each piece goes straight into the buffer: a line made as a
// string first cost ~1.5 KB of young garbage per entry (its template's parts, its flattening)
// for ~180 bytes kept, a twentieth of what an answer allocates, and the side with the log on
// collected that much more often (docs/performance.md,
// "2026-12-01 (morning): an entry written without its text").

/**
 * Bytes a batch's buffer starts with: 500 entries of ~300 bytes (~150 KiB) fit, with room to
 * spare for a text that goes through the encoder (3 bytes a character reserved).
 */
export const BATCH_BYTES = 512 * 1024

const QUOTE = 0x22
const BACKSLASH = 0x5c
const ZERO = 0x30

/** Where a line is written: text as UTF-8, or JSON's strings and numbers, without a string made for any of them. */
export interface LineSink {
  /** `text` as it is. */
  text(text: string): void
  /** `text` as a JSON string, quotes included. */
  json(text: string): void
  /** A whole number ≥ 0 as JavaScript writes it; any other number as String writes it. */
  integer(value: number): void
  byte(value: number): void
}

/** Text written as UTF-8 into one buffer, grown when a text might not fit; its slices are what is sent. */
export class BatchBytes implements LineSink {
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

  /**
   * `text` at `at`, a character at a time while each is ASCII; false at the first that is not,
   * the length left as it was. A short string copied so costs less than a call into the
   * encoder, and makes nothing.
   */
  private copiedAscii(text: string, at: number): boolean {
    const buffer = this.buffer
    for (let i = 0; i < text.length; i += 1) {
      const code = text.charCodeAt(i)
      if (code >= 0x80) return false
      buffer[at + i] = code
    }
    return true
  }

  /** As `copiedAscii`, for characters JSON writes as they are (printable ASCII but the quote and the backslash). */
  private copiedPlainJson(text: string, at: number): boolean {
    const buffer = this.buffer
    for (let i = 0; i < text.length; i += 1) {
      const code = text.charCodeAt(i)
      if (code < 0x20 || code >= 0x80 || code === QUOTE || code === BACKSLASH) return false
      buffer[at + i] = code
    }
    return true
  }

  text(text: string): void {
    this.reserve(text.length)
    if (this.copiedAscii(text, this.length)) this.length += text.length
    else this.append(text)
  }

  json(text: string): void {
    this.reserve(text.length + 2)
    if (this.copiedPlainJson(text, this.length + 1)) {
      const buffer = this.buffer
      buffer[this.length] = QUOTE
      buffer[this.length + text.length + 1] = QUOTE
      this.length += text.length + 2
    } else {
      this.append(quoted(text))
    }
  }

  integer(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) return this.append(`${value}`)
    let digits = 1
    for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits += 1
    this.reserve(digits)
    const buffer = this.buffer
    let rest = value
    for (let i = this.length + digits - 1; i >= this.length; i -= 1) {
      buffer[i] = ZERO + (rest % 10)
      rest = Math.floor(rest / 10)
    }
    this.length += digits
  }

  byte(value: number): void {
    this.reserve(1)
    this.buffer[this.length] = value
    this.length += 1
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
