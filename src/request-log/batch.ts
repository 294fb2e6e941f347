import type { BatchBytes } from './bytes.js'
import { storedEntry, type RequestLogRecord } from './entry.js'

// A batch of the request log as the writer fills it (docs/architecture.md, "The request log"):
// each entry's stored line is written as UTF-8 into the batch's bytes when the entry is added,
// just after its answer, and the batch keeps only where each line is, by log. Held as objects
// until their batch was written, the entries and the strings they kept alive outlived the
// young collections that copied them, and their text was made from memory long cold
// (docs/performance.md, "2026-11-30 (evening): an entry held as bytes").

export const DAY_MS = 86_400_000
/** The request log's logs that took entries are noted by the minute (store.ts). */
export const MINUTE_MS = 60_000

/** One log's entries in a batch: where each one's line is in the batch's bytes, and the minutes (epoch ms / MINUTE_MS) they arrived in. */
export class LogLines {
  readonly starts: number[] = []
  readonly ends: number[] = []
  /** Each once, in the order first seen: a batch's entries arrive in a minute or two, so the look-up is of one or two. */
  readonly minutes: number[]

  constructor(readonly credentialId: string, readonly mode: RequestLogRecord['mode'], minute: number) {
    this.minutes = [minute]
  }

  /** Notes the minute of an entry. */
  arrivedIn(minute: number): void {
    if (!this.minutes.includes(minute)) this.minutes.push(minute)
  }
}

/** Entries of any credentials', each a line in `bytes`, found by log. */
export class EntryBatch {
  size = 0
  // By mode, then by the credential's id as the entry holds it (the principal's own string,
  // whose hash V8 keeps), not by a name made per entry, which every look-up had to flatten and
  // hash anew (docs/performance.md, "2026-11-30 (afternoon): a batch's text made for less").
  private readonly live = new Map<string, LogLines>()
  private readonly test = new Map<string, LogLines>()

  constructor(readonly bytes: BatchBytes) {}

  add(record: RequestLogRecord): void {
    // Made whole before anything is written: a field that cannot be written leaves the bytes as they were.
    const line = `${storedEntry(record)}\n`
    const start = this.bytes.length
    this.bytes.append(line)
    const minute = Math.floor(record.atMs / MINUTE_MS)
    const logs = record.mode === 'test' ? this.test : this.live
    let log = logs.get(record.credentialId)
    if (log === undefined) logs.set(record.credentialId, log = new LogLines(record.credentialId, record.mode, minute))
    else log.arrivedIn(minute)
    log.starts.push(start)
    log.ends.push(this.bytes.length)
    this.size += 1
  }

  /** The batch's logs, those of live credentials first. */
  logs(): LogLines[] {
    return [...this.live.values(), ...this.test.values()]
  }
}
