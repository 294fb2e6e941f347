import { describe, expect, it, vi } from 'vitest'
import { newSpanId, newTraceId } from '../src/http/trace.js'
import { arrivalOfRequestId, generateRequestId } from '../src/http/request-id.js'

// The ids drawn for every request: random hex from a pool, never the all-zero ids W3C Trace
// Context forbids. The trace's rules see the pool through a stand-in that draws what a test says.

const draws: string[] = []
vi.mock('../src/http/random-hex.js', async (importActual) => {
  const actual = await importActual<typeof import('../src/http/random-hex.js')>()
  return { randomHex: (bytes: number) => draws.shift() ?? actual.randomHex(bytes) }
})

describe('randomHex', () => {
  it('gives twice as many lowercase hex characters as bytes, each draw new, across the pool\'s refills', async () => {
    const { randomHex } = await vi.importActual<typeof import('../src/http/random-hex.js')>('../src/http/random-hex.js')
    // 4 KiB a pool: 1,000 draws of 16 bytes refill it three times.
    const ids = Array.from({ length: 1000 }, () => randomHex(16))
    expect(ids.filter((id) => !/^[0-9a-f]{32}$/.test(id))).toEqual([])
    expect(new Set(ids).size).toBe(1000)
    expect(randomHex(8)).toMatch(/^[0-9a-f]{16}$/)
  })
})

describe('the ids of a request', () => {
  it('a request id: req_, the time it was made at as 12 hex digits, and 20 random ones; the time read back from it', () => {
    vi.useFakeTimers({ now: 1_795_000_000_123, toFake: ['Date'] })
    try {
      draws.push('0123456789abcdef0123', 'fedcba9876543210fedc')
      const first = generateRequestId()
      vi.setSystemTime(1_795_000_000_124)
      const second = generateRequestId()
      expect([first, second]).toEqual(['req_01a1ee565e7b0123456789abcdef0123', 'req_01a1ee565e7cfedcba9876543210fedc'])
      expect([arrivalOfRequestId(first), arrivalOfRequestId(second)]).toEqual([1_795_000_000_123, 1_795_000_000_124])
    } finally {
      vi.useRealTimers()
    }
    // Not an id of ours: no time. An id of the form before (all random) reads as a time at random.
    expect(['req-1', 'req_0123', 'req_0123456789ABCDEF0123456789abcdef', 'xreq_0123456789abcdef0123456789abcdef', 'req_0123456789abcdef0123456789abcdef0'].map(arrivalOfRequestId))
      .toEqual([null, null, null, null, null])
    expect(arrivalOfRequestId('req_0123456789abcdef0123456789abcdef')).toBe(0x0123456789ab)
  })

  it('a trace id is never all zero: drawn again', () => {
    draws.push('0'.repeat(32), '0'.repeat(32), '4bf92f3577b34da6a3ce929d0e0e4736')
    expect(newTraceId()).toBe('4bf92f3577b34da6a3ce929d0e0e4736')
    expect(draws).toEqual([])
  })

  it('a span id is never all zero: drawn again', () => {
    draws.push('0'.repeat(16), '00f067aa0ba902b7')
    expect(newSpanId()).toBe('00f067aa0ba902b7')
    expect(draws).toEqual([])
  })
})
