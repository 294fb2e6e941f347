import { describe, expect, it } from 'vitest'
import { serializeLine, type RequestLine } from '../src/pipeline/log.js'

// The request's log line is written by hand (src/pipeline/log.ts): an operator's tools must
// read exactly what JSON.stringify would have written, whatever a partner put in the fields it
// controls (the correlation id, the client address through a proxy).

const base: RequestLine = {
  level: 'info', time: 1_764_300_000_123, pid: 4242, hostname: 'gw-1', reqId: 'req_01JDX1', traceId: null, clientIp: '127.0.0.1',
  method: 'GET', route: '/v1/properties/:id', status: 200, code: null, durationMs: 0.413, correlationId: null, keyId: 'key_01JDX',
  brand: 'acme', upstream: null, upstreamStatus: null, upstreamMs: null, upstreamCut: null, cache: 'hit', idempotency: null, msg: 'request',
}

describe('the request log line', () => {
  it('is the JSON of its fields, in their order, one line', () => {
    expect(serializeLine(base)).toBe(`${JSON.stringify(base)}\n`)
  })

  it('escapes what a partner sent as JSON.stringify does, and keeps the line one line', () => {
    for (const correlationId of ['a"b', 'back\\slash', 'new\nline', 'tab\tand\u0000nul', '\u001f', 'é ü 中文', 'pair 😀', 'lone \ud800 high', 'lone \udc00 low', '']) {
      const line = { ...base, correlationId, clientIp: correlationId, traceId: '0af7651916cd43dd8448eb211c80319c', code: 'RATE_LIMITED' }
      const written = serializeLine(line)
      expect(written).toBe(`${JSON.stringify(line)}\n`)
      expect(written.indexOf('\n')).toBe(written.length - 1)
      expect(JSON.parse(written)).toEqual(line)
    }
  })

  it('writes every field a declared service fills, numbers as numbers', () => {
    const line: RequestLine = {
      ...base, method: 'POST', route: '/v1/guests', status: 201, upstream: 'bookings', upstreamStatus: 201, upstreamMs: 12.5,
      upstreamCut: 'timeout', cache: null, idempotency: 'stored', durationMs: 13, correlationId: 'order-7',
    }
    expect(serializeLine(line)).toBe(`${JSON.stringify(line)}\n`)
  })
})
