import { describe, expect, it } from 'vitest'
import { createLogger } from '../../src/logger.js'
import { Writable } from 'node:stream'
import { ApiError } from '../../src/contract/errors.js'
import { pathOf, queryNamesOf, tenths, type RequestLogRecord } from '../../src/request-log/entry.js'
import { distance, filtersOf, indexLine, matchLine, nearest } from '../../src/request-log/filters.js'
import { BATCH, RequestLogWriter, type RequestLogBatch, type RequestLogSink } from '../../src/request-log/writer.js'

// The request log's rules without a gateway (docs/architecture.md, "The request log"): what an
// entry keeps of a URL, the filters and the index lines they read, and the writer's bounds.

const ROUTES = ['/v1/properties', '/v1/properties/{propertyId}', '/v1/events']

function entry(id: string, fields: Partial<RequestLogRecord> = {}): RequestLogRecord {
  return {
    id, atMs: Date.UTC(2026, 10, 28, 9, 14, 3, 512), credentialId: 'key_a', secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties', path: '/v1/properties',
    queryParameters: [], status: 200, code: null, durationMs: 1, cache: null, idempotencyKey: null, replayed: false, clientIp: '127.0.0.1', userAgent: null, traceId: null, ...fields,
  }
}

/** A batch of the writer's tests: the entries as they were added. */
class Entries implements RequestLogBatch {
  readonly entries: RequestLogRecord[] = []

  get size(): number {
    return this.entries.length
  }

  add(entry: RequestLogRecord): void {
    this.entries.push(entry)
  }
}

/** A sink whose batches are the entries added, each sent to `send`. */
function sinkOf(send: (batch: RequestLogRecord[]) => Promise<void>): RequestLogSink<Entries> {
  return { batch: () => new Entries(), send: async (batch) => send(batch.entries) }
}

function quietLogger() {
  const lines: string[] = []
  const logger = createLogger({ level: 'info', destination: new Writable({ write(chunk: Buffer, _e, done) { lines.push(chunk.toString()); done() } }) })
  return { logger, lines }
}

describe('what an entry keeps of the URL', () => {
  it('keeps the path without its query, cut at 512 characters', () => {
    expect(pathOf('/v1/properties?page=2')).toBe('/v1/properties')
    expect(pathOf('/v1/properties')).toBe('/v1/properties')
    expect(pathOf(`/v1/${'a'.repeat(600)}?x=1`)).toBe(`/v1/${'a'.repeat(508)}`)
    expect(pathOf(`/v1/${'a'.repeat(508)}`)).toHaveLength(512)
  })

  it('keeps the names of the parameters in the order sent, once each, decoded, never a value', () => {
    expect(queryNamesOf('/v1/properties')).toEqual([])
    expect(queryNamesOf('/v1/properties?')).toEqual([])
    expect(queryNamesOf('/v1/properties?perPage=2&page=1&perPage=3&flag&=novalue&a+b=1&c%20d=2&%E0%A4%A=x')).toEqual(['perPage', 'page', 'flag', 'a b', 'c d', '%E0%A4%A'])
    expect(queryNamesOf(`/v1/x?${'n'.repeat(150)}=1`)).toEqual(['n'.repeat(100)])
    const many = Array.from({ length: 60 }, (_, i) => `p${i}=1`).join('&')
    expect(queryNamesOf(`/v1/x?${many}`)).toEqual(Array.from({ length: 50 }, (_, i) => `p${i}`))
  })

  it('rounds a duration to a tenth of a millisecond', () => {
    expect([tenths(3.44), tenths(3.45), tenths(0.04), tenths(12)]).toEqual([3.4, 3.5, 0, 12])
  })
})

describe('the filters', () => {
  const page = { page: 1, perPage: 20 }
  const refusal = (query: Record<string, unknown>, routes: readonly string[] = ROUTES) => {
    try {
      filtersOf({ ...page, ...query }, routes)
    } catch (error) {
      return error instanceof ApiError ? [error.code, error.detail, error.errors] : error
    }
    return undefined
  }

  it('reads a status, a class or errors, a route of the table, a code of the catalog, and passes the rest on', () => {
    expect(filtersOf({ ...page, status: '404' }, ROUTES)).toEqual({ status: { kind: 'exact', status: 404 } })
    expect(filtersOf({ ...page, status: '5xx' }, ROUTES)).toEqual({ status: { kind: 'class', first: 5 } })
    expect(filtersOf({ ...page, status: 'errors' }, ROUTES)).toEqual({ status: { kind: 'errors' } })
    expect(filtersOf({ ...page, route: '/v1/events', code: 'RATE_LIMITED', method: 'POST', idempotencyKey: 'k', createdAfter: 5, createdBefore: 9 }, ROUTES))
      .toEqual({ route: '/v1/events', code: 'RATE_LIMITED', method: 'POST', idempotencyKey: 'k', createdAfter: 5, createdBefore: 9 })
    expect(filtersOf(page, ROUTES)).toEqual({})
  })

  it('refuses every bad value at once, each with its field error', () => {
    const statusError = { field: 'status', code: 'INVALID_FORMAT', detail: "Must be a status such as 404, a class such as 4xx, or 'errors' (every 4xx and 5xx)." }
    for (const status of ['4x', '600', '40', '4XX', 'error', '0xx', '6xx', ' 404']) expect(refusal({ status })).toEqual(['INVALID_QUERY_PARAMETER', "Invalid query parameter 'status'.", [statusError]])
    expect(refusal({ status: 'x', route: '/v1/event', code: 'toString' })).toEqual(['INVALID_QUERY_PARAMETER', "Invalid query parameters 'status', 'route', 'code'.", [
      statusError,
      { field: 'route', code: 'INVALID_ENUM_VALUE', detail: "Must be a route template as the API reference writes it, such as '/v1/properties/{propertyId}'; did you mean '/v1/events'?" },
      { field: 'code', code: 'INVALID_ENUM_VALUE', detail: "'toString' is not a code of the API's errors, such as PROPERTY_NOT_FOUND; the API reference lists them." },
    ]])
    // A table without templates has none to suggest.
    expect(refusal({ route: '/v1/x' }, [])).toEqual(['INVALID_QUERY_PARAMETER', "Invalid query parameter 'route'.", [
      { field: 'route', code: 'INVALID_ENUM_VALUE', detail: "Must be a route template as the API reference writes it, such as '/v1/properties/{propertyId}'" },
    ]])
  })

  it('suggests the nearest template by edit distance', () => {
    expect([distance('', 'abc'), distance('abc', ''), distance('kitten', 'sitting'), distance('same', 'same'), distance('ab', 'ba')]).toEqual([3, 3, 3, 0, 2])
    expect(nearest('/v1/properties/{propertyid}', ROUTES)).toBe('/v1/properties/{propertyId}')
    expect(nearest('/v1/propertie', ROUTES)).toBe('/v1/properties')
    expect(nearest('/v1/x', [])).toBeUndefined()
    // Of templates as near, the first of the table.
    expect([nearest('/v1/c', ['/v1/a', '/v1/b']), nearest('/v1/c', ['/v1/b', '/v1/a'])]).toEqual(['/v1/a', '/v1/b'])
  })

  it('matches index lines by each filter, nulls written as - and no key as nothing', () => {
    const line = indexLine(entry('req_1', { status: 404, method: 'POST', code: 'PROPERTY_NOT_FOUND', route: '/v1/properties', idempotencyKey: 'k-1' }))
    expect(line).toBe('req_1 404 POST PROPERTY_NOT_FOUND /v1/properties k-1')
    const plain = indexLine(entry('req_2'))
    expect(plain).toBe('req_2 200 GET - /v1/properties ')
    expect(indexLine(entry('req_3', { route: null }))).toBe('req_3 200 GET - - ')
    expect(matchLine(line, {})).toBe('req_1')
    expect(matchLine(line, { status: { kind: 'exact', status: 404 } })).toBe('req_1')
    expect(matchLine(line, { status: { kind: 'exact', status: 400 } })).toBeUndefined()
    expect(matchLine(line, { status: { kind: 'class', first: 4 } })).toBe('req_1')
    expect(matchLine(line, { status: { kind: 'class', first: 5 } })).toBeUndefined()
    expect(matchLine(line, { status: { kind: 'errors' } })).toBe('req_1')
    expect(matchLine(plain, { status: { kind: 'errors' } })).toBeUndefined()
    expect(matchLine(indexLine(entry('req_4', { status: 399 })), { status: { kind: 'errors' } })).toBeUndefined()
    expect(matchLine(indexLine(entry('req_5', { status: 400 })), { status: { kind: 'errors' } })).toBe('req_5')
    expect(matchLine(line, { method: 'POST' })).toBe('req_1')
    expect(matchLine(line, { method: 'GET' })).toBeUndefined()
    expect(matchLine(line, { code: 'PROPERTY_NOT_FOUND' })).toBe('req_1')
    expect(matchLine(line, { code: 'RATE_LIMITED' })).toBeUndefined()
    expect(matchLine(line, { route: '/v1/properties' })).toBe('req_1')
    expect(matchLine(line, { route: '/v1/events' })).toBeUndefined()
    expect(matchLine(line, { idempotencyKey: 'k-1' })).toBe('req_1')
    expect(matchLine(line, { idempotencyKey: 'k-2' })).toBeUndefined()
    expect(matchLine(plain, { idempotencyKey: '-' })).toBeUndefined()
    expect(matchLine('req_1 404 POST', {})).toBeUndefined()
  })
})

describe('the writer', () => {
  it('writes on the timer and at close, and drops what comes beyond bufferMax', async () => {
    const written: string[][] = []
    const dropped: [string, number][] = []
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => { written.push(batch.map((e) => e.id)) }), { flushMs: 60_000, bufferMax: 2, logger, onDropped: (reason, n) => dropped.push([reason, n]) })
    for (const id of ['a', 'b', 'c']) writer.add(entry(id))
    expect([writer.size, dropped, writer.dropped]).toEqual([2, [['buffer_full', 1]], { buffer_full: 1, redis: 0 }])
    await writer.close()
    expect([written, writer.size, writer.written, writer.lastFlushAt !== null]).toEqual([[['a', 'b']], 0, 2, true])
    await writer.flush()
    expect(written).toEqual([['a', 'b']])
  })

  it('writes as soon as a batch waits, in batches of 500', async () => {
    const sizes: number[] = []
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => { sizes.push(batch.length) }), { flushMs: 60_000, bufferMax: 10_000, logger })
    for (let i = 0; i < BATCH - 1; i += 1) writer.add(entry(`r${i}`))
    expect(sizes).toEqual([])
    // The batch's write starts within the add that fills it, before anything asks for a flush.
    writer.add(entry('last'))
    expect(sizes).toEqual([500])
    await writer.flush()
    expect(sizes).toEqual([500])
    for (let i = 0; i < 1200; i += 1) (writer as unknown as { keep(entry: RequestLogRecord): void }).keep(entry(`s${i}`))
    await writer.flush()
    expect(sizes).toEqual([500, 500, 500, 200])
  })

  it('leaves the entries that came during a write for the next full batch or flush, and writes them all at close', async () => {
    const sizes: number[] = []
    const gates: (() => void)[] = []
    let writing = 0
    let mostAtOnce = 0
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => {
        writing += 1
        mostAtOnce = Math.max(mostAtOnce, writing)
        await new Promise<void>((resolve) => gates.push(resolve))
        writing -= 1
        sizes.push(batch.length)
      }), { flushMs: 60_000, bufferMax: 10_000, logger })
    const settled = async (): Promise<void> => {
      // Every write asked for is let through, until none waits.
      for (let turn = 0; turn < 20; turn += 1) {
        gates.splice(0).forEach((open) => open())
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
    for (let i = 0; i < BATCH; i += 1) writer.add(entry(`r${i}`))
    // Answers that end while the batch is written: not a batch of their own once it is.
    for (let i = 0; i < 10; i += 1) writer.add(entry(`during${i}`))
    await settled()
    expect([sizes, writer.size]).toEqual([[500], 10])
    // More than a batch waiting by the end of a write: the full batches go, the rest waits.
    for (let i = 0; i < BATCH; i += 1) writer.add(entry(`s${i}`))
    for (let i = 0; i < 2 * BATCH; i += 1) writer.add(entry(`t${i}`))
    await settled()
    expect([sizes, writer.size]).toEqual([[500, 500, 500, 500], 10])
    // A flush (the timer's) writes the 10 it held; the 5 that come meanwhile wait.
    const flushed = writer.flush()
    for (let i = 0; i < 5; i += 1) writer.add(entry(`u${i}`))
    await settled()
    await flushed
    expect([sizes, writer.size]).toEqual([[500, 500, 500, 500, 10], 5])
    const closed = writer.close()
    await settled()
    await closed
    // One write at a time throughout.
    expect([sizes, writer.size, writer.written, mostAtOnce]).toEqual([[500, 500, 500, 500, 10, 5], 0, 2015, 1])
  })

  it('closes only once the write under way has ended, though the buffer it emptied holds nothing, and writes what came meanwhile', async () => {
    const gates: (() => void)[] = []
    const written: number[] = []
    const dropped: [string, number][] = []
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => {
        await new Promise<void>((resolve) => gates.push(resolve))
        written.push(batch.length)
      }), { flushMs: 60_000, bufferMax: 1000, logger, onDropped: (reason, n) => dropped.push([reason, n]) })
    const turns = async (): Promise<void> => {
      for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve))
    }
    for (let i = 0; i < BATCH; i += 1) writer.add(entry(`r${i}`))
    expect(writer.size).toBe(0)
    let closed = false
    const closing = writer.close().then(() => { closed = true })
    await turns()
    expect([closed, written, gates.length]).toEqual([false, [], 1])
    // Answers that end while the shutdown waits, and while its own write is under way, are written after it, not dropped.
    for (let i = 0; i < 5; i += 1) writer.add(entry(`late${i}`))
    gates[0]?.()
    await turns()
    expect([closed, written, gates.length]).toEqual([false, [500], 2])
    for (let i = 0; i < 3; i += 1) writer.add(entry(`later${i}`))
    gates[1]?.()
    await turns()
    gates[2]?.()
    await closing
    expect([closed, written, writer.written, writer.size, dropped]).toEqual([true, [500, 5, 3], 508, 0, []])
  })

  it('stops at a batch Redis refuses, and at close drops and counts what is still held rather than trying each batch', async () => {
    const calls: string[][] = []
    let failFrom = 2
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => {
        calls.push([batch[0]?.id ?? '', String(batch.length)])
        if (calls.length >= failFrom) throw new Error('Command timed out')
      }), { flushMs: 60_000, bufferMax: 10_000, logger })
    const hold = (prefix: string, count: number): void => {
      for (let i = 0; i < count; i += 1) (writer as unknown as { keep(entry: RequestLogRecord): void }).keep(entry(`${prefix}${i}`))
    }
    hold('a', 1200)
    await writer.flush()
    // The first batch written, the second refused and dropped, the rest kept for the next write.
    expect([calls, writer.written, writer.dropped, writer.size]).toEqual([[['a0', '500'], ['a500', '500']], 500, { buffer_full: 0, redis: 500 }, 200])
    hold('b', 1000)
    failFrom = 3
    await writer.close()
    // One more write (the batch a flush took, as it was), refused; the 1000 after it are dropped
    // at once, not each tried against a Redis that hangs.
    expect([calls.slice(2), writer.written, writer.dropped, writer.size]).toEqual([[['a1000', '200']], 500, { buffer_full: 0, redis: 1700 }, 0])
  })

  it('after a refused write, writes the batch left at the next add, and not the entries being gathered', async () => {
    const sizes: number[] = []
    let fail = true
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => {
      sizes.push(batch.length)
      if (fail) throw new Error('Command timed out')
    }), { flushMs: 60_000, bufferMax: 10_000, logger })
    for (let i = 0; i < 2 * BATCH; i += 1) (writer as unknown as { keep(entry: RequestLogRecord): void }).keep(entry(`a${i}`))
    await writer.flush()
    expect([sizes, writer.size]).toEqual([[500], 500])
    fail = false
    writer.add(entry('b0'))
    for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve))
    expect([sizes, writer.size, writer.written]).toEqual([[500, 500], 1, 500])
  })

  it('drops and counts a batch Redis refuses, and entries while Redis is away; says so once, then again when it writes', async () => {
    let fail = true
    let up = true
    const dropped: [string, number][] = []
    const { logger, lines } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async () => { if (fail) throw Object.assign(new Error('Connection is closed.'), { command: { args: ['SECRET-ARGS'] } }) }), { flushMs: 60_000, bufferMax: 100, logger, available: () => up, onDropped: (reason, n) => dropped.push([reason, n]) })
    writer.add(entry('a'))
    writer.add(entry('b'))
    await writer.flush()
    writer.add(entry('c'))
    await writer.flush()
    up = false
    writer.add(entry('d'))
    expect(dropped).toEqual([['redis', 2], ['redis', 1], ['redis', 1]])
    expect(writer.size).toBe(0)
    up = true
    fail = false
    writer.add(entry('e'))
    await writer.flush()
    const said = lines.map((l) => JSON.parse(l) as { msg: string; error?: string })
    expect(said.map((l) => [l.msg, l.error])).toEqual([
      ['request log entries could not be written to Redis; they are dropped (gateway_request_log_dropped_total) until it answers', 'Connection is closed.'],
      ['request log entries are written to Redis again', undefined],
    ])
    expect(lines.join('')).not.toContain('SECRET-ARGS')
  })

  it('warns at a failure once until a write succeeds, then says so once; says nothing while writes succeed', async () => {
    let fail = false
    const { logger, lines } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async () => { if (fail) throw new Error('READONLY You can\'t write against a read only replica.') }), { flushMs: 60_000, bufferMax: 100, logger })
    const said = (): string[] => lines.map((l) => (JSON.parse(l) as { msg: string }).msg)
    const failed = 'request log entries could not be written to Redis; they are dropped (gateway_request_log_dropped_total) until it answers'
    const again = 'request log entries are written to Redis again'
    const writeOne = async (id: string): Promise<void> => {
      writer.add(entry(id))
      await writer.flush()
    }
    await writeOne('a')
    expect(said()).toEqual([])
    fail = true
    await writeOne('b')
    expect(said()).toEqual([failed])
    await writeOne('c')
    fail = false
    await writeOne('d')
    await writeOne('e')
    fail = true
    await writeOne('f')
    expect(said()).toEqual([failed, again, failed])
    expect([writer.written, writer.dropped]).toEqual([3, { buffer_full: 0, redis: 3 }])
  })

  it('says its bound and, per flush that wrote, how many seconds it took; drops without a listener of drops', async () => {
    const seconds: number[] = []
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async () => { await new Promise((r) => setTimeout(r, 5)) }), { flushMs: 60_000, bufferMax: 1, logger, onFlush: (s) => seconds.push(s) })
    expect(writer.bufferMax).toBe(1)
    await writer.flush()
    expect(seconds).toEqual([])
    writer.add(entry('a'))
    writer.add(entry('b'))
    expect(writer.dropped).toEqual({ buffer_full: 1, redis: 0 })
    const before = performance.now()
    await writer.flush()
    const took = (performance.now() - before) / 1000
    // In seconds, and no more than the call took: a flush that waited 5 ms on its sink took more than nothing.
    expect(seconds).toHaveLength(1)
    expect(seconds[0]).toBeGreaterThan(0)
    expect(seconds[0]).toBeLessThanOrEqual(took)
  })

  it('ends a flush asked for while one runs only after that one', async () => {
    let open!: () => void
    const gate = new Promise<void>((resolve) => { open = resolve })
    const written: string[] = []
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => { await gate; written.push(...batch.map((e) => e.id)) }), { flushMs: 60_000, bufferMax: 100, logger })
    writer.add(entry('a'))
    const first = writer.flush()
    const second = writer.flush()
    expect(await Promise.race([second.then(() => 'ended'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 50))])).toBe('waiting')
    open()
    await second
    expect(written).toEqual(['a'])
    await first
  })

  it('writes on its timer once started, however often started, and not after it is closed', async () => {
    const written: string[] = []
    let wrote!: () => void
    const first = new Promise<void>((resolve) => { wrote = resolve })
    const { logger } = quietLogger()
    const writer = new RequestLogWriter(sinkOf(async (batch) => { written.push(...batch.map((e) => e.id)); wrote() }), { flushMs: 50, bufferMax: 100, logger })
    writer.add(entry('a'))
    writer.start()
    writer.start()
    await first
    expect(written).toEqual(['a'])
    await writer.close()
    writer.add(entry('b'))
    // Four periods of the timer: a timer left running would have written it (and a slow machine only hides that).
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect([written, writer.size]).toEqual([['a'], 1])
  })
})
