import { describe, expect, it, vi } from 'vitest'

// The pool the request, trace and span ids are drawn from, filled by a stand-in that writes a
// known pattern: fill n holds the bytes n, n + 1, n + 2, … (mod 256), so every draw's bytes say
// where in which fill they came from.

let fills = 0
vi.mock('node:crypto', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:crypto')>()),
  randomFillSync: (buffer: Buffer) => {
    for (let i = 0; i < buffer.length; i += 1) buffer[i] = (fills + i) & 0xff
    fills += 1
    return buffer
  },
}))

const { randomHex } = await import('../src/http/random-hex.js')

/** The hex of `count` bytes of fill `fill` from `offset`. */
function expected(fill: number, offset: number, count: number): string {
  return Buffer.from(Array.from({ length: count }, (_, i) => (fill + offset + i) & 0xff)).toString('hex')
}

describe('the pool of random bytes', () => {
  it('hands out each byte of a fill once, in order, and fills again when a draw would pass its end', () => {
    // 255 draws of 16 bytes: 4,080 of the 4,096 bytes of fill 0.
    const first = Array.from({ length: 255 }, () => randomHex(16))
    expect(fills).toBe(1)
    expect(first.filter((hex, i) => hex !== expected(0, i * 16, 16))).toEqual([])
    // 8 more fit (4,088), then 16 do not: a new fill, drawn from its start.
    expect(randomHex(8)).toBe(expected(0, 4080, 8))
    expect(randomHex(16)).toBe(expected(1, 0, 16))
    expect(fills).toBe(2)
    expect(randomHex(8)).toBe(expected(1, 16, 8))
    // A draw that ends exactly at the fill's end takes its last bytes; the next one fills again.
    expect(randomHex(4072)).toBe(expected(1, 24, 4072))
    expect(fills).toBe(2)
    expect(randomHex(1)).toBe(expected(2, 0, 1))
    expect(fills).toBe(3)
  })
})
