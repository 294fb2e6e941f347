import type { FastifyRequest } from 'fastify'
import { describe, expect, it } from 'vitest'
import { CSV_HEADER, csvCell, csvRow } from '../../src/request-log/csv.js'
import { entryJson, entryOf, ownerOf, storedEntry, storedEntryJson, storedEntryOf, type RequestLogEntry } from '../../src/request-log/entry.js'

// An entry made from what a request holds, and its row of the CSV export, without a gateway
// (docs/architecture.md, "The request log"): the request is a plain object with the fields the
// pipeline sets, the one edge these functions read.

const NOW = 1_795_000_000_000.9
const UTC = new Date(1_795_000_000_000).toISOString()

interface Fields {
  id?: string
  principal?: Partial<NonNullable<FastifyRequest['principal']>> | null
  refusedCredential?: FastifyRequest['refusedCredential']
  url?: string
  headers?: Record<string, string>
  cacheResult?: string | null
  errorCode?: string | null
  idempotencyKey?: string | null
  idempotency?: string | null
  ip?: string
  trace?: { traceId: string } | null
}

function requestOf(fields: Fields = {}): FastifyRequest {
  const principal = fields.principal === null ? null : { keyId: 'key_a1', kind: 'apiKey', mode: 'live', ...fields.principal }
  return {
    id: fields.id ?? 'req-1', method: 'GET', url: fields.url ?? '/v1/properties?perPage=2', headers: fields.headers ?? { 'user-agent': 'partner/1.0' },
    principal, refusedCredential: fields.refusedCredential ?? null, cacheResult: fields.cacheResult ?? null, errorCode: fields.errorCode ?? null,
    idempotencyKey: fields.idempotencyKey ?? null, idempotency: fields.idempotency ?? null, ip: 'ip' in fields ? fields.ip : '203.0.113.9',
    trace: fields.trace === undefined ? { traceId: '4bf92f3577b34da6a3ce929d0e0e4736' } : fields.trace,
  } as unknown as FastifyRequest
}

/** The ms from the request's arrival to its answer. */
const ELAPSED = 12.34

describe('an entry made from a request', () => {
  it('holds what the request knows: its credential, route, path, parameter names, status, code, time and duration', () => {
    expect(entryOf(requestOf({ errorCode: 'UNKNOWN_QUERY_PARAMETER' }), ELAPSED, 400, '/v1/properties', NOW)).toEqual({
      id: 'req-1', atMs: 1_794_999_999_988, credentialId: 'key_a1', secret: 'current', mode: 'live', method: 'GET', route: '/v1/properties',
      path: '/v1/properties', queryParameters: ['perPage'], status: 400, code: 'UNKNOWN_QUERY_PARAMETER', durationMs: 12.3, cache: null,
      idempotencyKey: null, replayed: false, clientIp: '203.0.113.9', userAgent: 'partner/1.0', traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    })
  })

  it('arrived at the time its request id holds, the gateway\'s ids holding one; else the answer\'s time less its duration', () => {
    // 1,795,000,000,123 ms, 0x01a1ee565e7b: 135 ms after NOW - ELAPSED, so that the two cannot be taken for each other.
    expect(entryOf(requestOf({ id: 'req_01a1ee565e7b0123456789abcdef0123' }), ELAPSED, 200, null, NOW)?.atMs).toBe(1_795_000_000_123)
    expect(entryOf(requestOf({ id: 'req-1' }), ELAPSED, 200, null, NOW)?.atMs).toBe(1_794_999_999_988)
  })

  it('says which secret of a key was sent, and none for an access token', () => {
    const secretOf = (principal: Fields['principal']): unknown => entryOf(requestOf({ principal }), ELAPSED, 200, null, NOW)?.secret
    expect([secretOf({}), secretOf({ previousSecret: true }), secretOf({ kind: 'accessToken', keyId: 'cli_b2' })]).toEqual(['current', 'previous', null])
    expect(ownerOf(requestOf({ principal: { kind: 'accessToken', keyId: 'cli_b2', mode: 'test' } }))).toEqual({ id: 'cli_b2', mode: 'test', secret: null })
  })

  it('belongs to a known credential refused at step 4, and to nobody without one', () => {
    const refused = requestOf({ principal: null, refusedCredential: { id: 'key_c3', mode: 'test', secret: 'previous' } })
    expect(ownerOf(refused)).toEqual({ id: 'key_c3', mode: 'test', secret: 'previous' })
    expect(entryOf(refused, ELAPSED, 401, '/v1/properties', NOW)).toMatchObject({ credentialId: 'key_c3', mode: 'test', secret: 'previous', status: 401 })
    expect(ownerOf(requestOf({ principal: null }))).toBeNull()
    expect(entryOf(requestOf({ principal: null }), ELAPSED, 401, null, NOW)).toBeNull()
  })

  it('keeps a cache outcome it knows, a replay, and null for what the request does not have', () => {
    const entry = (fields: Fields): Partial<RequestLogEntry> | null => entryOf(requestOf(fields), ELAPSED, 200, null, NOW)
    expect(['hit', 'miss', 'stale', 'bypass', null].map((cacheResult) => entry({ cacheResult })?.cache)).toEqual(['hit', 'miss', 'stale', null, null])
    expect(['replayed', 'stored', null].map((idempotency) => entry({ idempotency, idempotencyKey: 'k-1' })?.replayed)).toEqual([true, false, false])
    expect(entry({ idempotencyKey: 'k-1' })?.idempotencyKey).toBe('k-1')
    const bare = entry({ headers: {}, trace: null, ip: undefined })
    expect([bare?.userAgent, bare?.traceId, bare?.clientIp]).toEqual([null, null, null])
    expect(entry({ headers: { 'user-agent': 'u'.repeat(250) } })?.userAgent).toBe('u'.repeat(200))
  })
})

describe('an entry as Redis keeps it', () => {
  // An Idempotency-Key is visible ASCII without " or \\ (the headers check), so it goes into the index line unquoted.
  const record = entryOf(requestOf({ cacheResult: 'hit', idempotencyKey: 'k-1', headers: { 'user-agent': 'tab\there "quoted"' } }), ELAPSED, 200, '/v1/properties', NOW)
  if (record === null) throw new Error('the request has a credential')
  const { atMs, ...fields } = record
  const entry = { ...fields, at: new Date(atMs).toISOString() }

  it('is one line: its arrival, its index line, a tab, and the rest of its fields as JSON', () => {
    expect(storedEntry(record)).toBe(`${atMs} req-1 200 GET - /v1/properties k-1\t["current","/v1/properties",["perPage"],12.3,"hit",false,"203.0.113.9","tab\\there \\"quoted\\"","${record.traceId}"]`)
    expect(storedEntry({ ...record, code: 'PROPERTY_NOT_FOUND', route: null, idempotencyKey: null, status: 404 })).toMatch(/^\d+ req-1 404 GET PROPERTY_NOT_FOUND - \t\[/)
  })

  it('is read back whole, and an entry kept in either earlier form as it is', () => {
    expect(storedEntryOf(storedEntry(record), 'key_a1', 'live')).toEqual(entry)
    expect(storedEntryJson(storedEntry(record), 'key_a1', 'live')).toBe(entryJson(record))
    const nulls = { ...record, secret: null, code: 'PROPERTY_NOT_FOUND', route: null, idempotencyKey: null, status: 404, cache: null, clientIp: null, userAgent: null, traceId: null } as const
    expect(storedEntryJson(storedEntry(nulls), 'key_a1', 'live')).toBe(entryJson(nulls))
    // Whole as JSON, the first form.
    expect(storedEntryOf(entryJson(record), 'key_other', 'test')).toEqual(entry)
    expect(storedEntryJson(entryJson(record), 'key_other', 'test')).toBe(entryJson(record))
    // Every field in one JSON array, without credential and mode, the form before this one.
    const array = JSON.stringify([record.id, atMs, record.secret, record.method, record.route, record.path, record.queryParameters, record.status, record.code, record.durationMs,
      record.cache, record.idempotencyKey, record.replayed, record.clientIp, record.userAgent, record.traceId])
    expect(storedEntryOf(array, 'key_a1', 'live')).toEqual(entry)
    expect(storedEntryJson(array, 'key_a1', 'live')).toBe(entryJson(record))
  })
})

describe('the CSV export', () => {
  it('names the fields in their documented order', () => {
    expect(CSV_HEADER).toBe('id,at,credentialId,secret,mode,method,route,path,queryParameters,status,code,durationMs,cache,idempotencyKey,replayed,clientIp,userAgent,traceId\r\n')
  })

  it('writes a row per entry: null empty, numbers and booleans as written, a list joined by ;', () => {
    const entry: RequestLogEntry = {
      id: 'req-1', at: UTC, credentialId: 'key_a1', secret: null, mode: 'live', method: 'GET', route: null, path: '/v1/properties',
      queryParameters: ['perPage', 'page'], status: 200, code: null, durationMs: 1.5, cache: 'hit', idempotencyKey: null, replayed: false,
      clientIp: '203.0.113.9', userAgent: 'partner, "beta"', traceId: null,
    }
    expect(csvRow(entry)).toBe(`req-1,${UTC},key_a1,,live,GET,,/v1/properties,perPage;page,200,,1.5,hit,,false,203.0.113.9,"partner, ""beta""",\r\n`)
  })

  it('guards a cell a spreadsheet would read as a formula, and quotes one holding a comma, a quote or a line break', () => {
    expect(['=SUM(A1)', '+1', '-1', '@cmd', '\tx', '\rx'].map(csvCell)).toEqual(["'=SUM(A1)", "'+1", "'-1", "'@cmd", "'\tx", "\"'\rx\""])
    expect(['plain', 'a=b', 'a,b', 'say "hi"', 'two\nlines', '=1,2'].map(csvCell)).toEqual(['plain', 'a=b', '"a,b"', '"say ""hi"""', '"two\nlines"', "\"'=1,2\""])
  })
})
