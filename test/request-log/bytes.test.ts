import { describe, expect, it } from 'vitest'
import { EntryBatch } from '../../src/request-log/batch.js'
import { BATCH_BYTES, BatchBytes } from '../../src/request-log/bytes.js'
import { storedEntry, type RequestLogRecord } from '../../src/request-log/entry.js'

// A batch's bytes (src/request-log/bytes.ts) and the batch that appends each entry's line to
// them (batch.ts), without a gateway.

/** What `write` puts into a fresh buffer of `size` bytes, as text. */
function written(write: (bytes: BatchBytes) => void, size = 64): string {
  const bytes = new BatchBytes(size)
  write(bytes)
  return bytes.slice(0, bytes.length).toString('utf8')
}

describe('a batch\'s bytes', () => {
  it('takes text as UTF-8, ASCII or not', () => {
    expect(written((b) => b.append('GET /v1/x'))).toBe('GET /v1/x')
    expect(written((b) => b.append(''))).toBe('')
    expect(written((b) => { b.append('caf\u00e9 \u4e2d \ud83d\ude00'); b.append('!') })).toBe('caf\u00e9 \u4e2d \ud83d\ude00!')
    expect(written((b) => b.append('\u007f'))).toBe('\u007f')
  })

  it('grows to fit what is written, keeping what was there, and gives back a buffer grown far when cleared', () => {
    const long = 'x'.repeat(40)
    expect(written((b) => { b.append('start:'); b.append(long); b.append('\u00e9'.repeat(20)) }, 8)).toBe(`start:${long}${'\u00e9'.repeat(20)}`)
    // Room for a text's longest UTF-8 form: two bytes for each of these characters.
    expect(written((b) => b.append('\u00e9'.repeat(10)), 4)).toBe('\u00e9'.repeat(10))
    const bytes = new BatchBytes(4)
    bytes.append('abcde')
    const other = new BatchBytes(2)
    other.appendFrom(bytes, 1, 4)
    expect(other.slice(0, other.length).toString()).toBe('bcd')

    const grown = new BatchBytes(BATCH_BYTES)
    grown.append('y'.repeat(2 * BATCH_BYTES))
    grown.clear()
    expect(grown.length).toBe(0)
    grown.append('z')
    // A fresh buffer of BATCH_BYTES.
    expect((grown as unknown as { buffer: Buffer }).buffer.length).toBe(BATCH_BYTES)
    const kept = new BatchBytes(4 * BATCH_BYTES)
    kept.append('y'.repeat(BATCH_BYTES))
    kept.clear()
    expect((kept as unknown as { buffer: Buffer }).buffer.length).toBe(4 * BATCH_BYTES)
    expect(kept.length).toBe(0)
  })
})

describe('a batch of entries', () => {
  const record: RequestLogRecord = {
    id: 'req_1', atMs: Date.UTC(2026, 11, 1, 7), credentialId: 'key_a', secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties', path: '/v1/properties',
    queryParameters: [], status: 200, code: null, durationMs: 1.5, cache: 'hit', idempotencyKey: null, replayed: false, clientIp: '127.0.0.1', userAgent: null, traceId: null,
  }

  it('leaves nothing of an entry whose line could not be written, and writes the next one whole', () => {
    const batch = new EntryBatch(new BatchBytes(BATCH_BYTES))
    batch.add(record)
    // A field the types rule out, as a bug elsewhere might hand it: the line cannot be made.
    expect(() => batch.add({ ...record, id: 'req_2', queryParameters: undefined as unknown as string[] })).toThrow(TypeError)
    batch.add({ ...record, id: 'req_3' })
    expect(batch.size).toBe(2)
    expect(batch.bytes.slice(0, batch.bytes.length).toString()).toBe(`${storedEntry(record)}\n${storedEntry({ ...record, id: 'req_3' })}\n`)
    expect(batch.logs().map((log) => [log.credentialId, log.starts.length, log.ends.length])).toEqual([['key_a', 2, 2]])
  })
})
