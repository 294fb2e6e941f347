import { describe, expect, it } from 'vitest'
import { maybeQuoted, maybeQuotedPlain, quoted, quotedList, roundedText } from '../src/json-string.js'

// The JSON text written by hand for the log line and the request log's entries must be what
// JSON.stringify writes, or a reader fails to parse a line or an entry.

describe('a duration written from its whole units', () => {
  it('is the text String and JSON.stringify write, for every tenth of a ms up to 20 s and every thousandth up to 200 ms', () => {
    for (let units = 0; units <= 200_000; units += 1) {
      const tenths = Math.round((units / 10) * 10) / 10
      const thousandths = Math.round((units / 1000) * 1000) / 1000
      if (roundedText(tenths, 1) !== JSON.stringify(tenths)) expect(roundedText(tenths, 1)).toBe(JSON.stringify(tenths))
      if (roundedText(thousandths, 3) !== JSON.stringify(thousandths)) expect(roundedText(thousandths, 3)).toBe(JSON.stringify(thousandths))
    }
  })

  it('is that text for durations rounded as the gateway rounds them, of up to three hours', () => {
    // A fixed sequence, not Math.random: a failure names the value and fails again.
    let seed = 12_345
    for (let i = 0; i < 50_000; i += 1) {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
      const ms = (seed / 2_147_483_648) * 10 ** (i % 8)
      for (const [places, scale] of [[1, 10], [3, 1000]] as const) {
        const value = Math.round(ms * scale) / scale
        if (roundedText(value, places) !== String(value)) expect([ms, roundedText(value, places)]).toEqual([ms, String(value)])
      }
    }
  })

  it('writes any other number as String does', () => {
    const others = [0.1 + 0.2, 1.23456, -1.5, -0, 1e21, 2 ** 31 / 10, 107_374_182.4, 107_374_182.5, Number.MAX_SAFE_INTEGER, 5e-324, Number.NaN, Number.POSITIVE_INFINITY]
    for (const value of others) for (const places of [1, 3] as const) expect([value, places, roundedText(value, places)]).toEqual([value, places, String(value)])
    expect([roundedText(0.5, 1), roundedText(1.005, 3), roundedText(1.05, 3), roundedText(12, 3), roundedText(0.001, 3), roundedText(1234.5, 1)])
      .toEqual(['0.5', '1.005', '1.05', '12', '0.001', '1234.5'])
  })
})

describe('strings as JSON', () => {
  it('quotes what needs no escape as it is and the rest as JSON.stringify does', () => {
    for (const value of ['plain', '', 'say "hi"', 'back\\slash', 'line\nbreak', '\u0000', 'Zürich 東京 🚀', 'lone \ud800']) {
      expect(quoted(value)).toBe(JSON.stringify(value))
      expect(maybeQuoted(value)).toBe(JSON.stringify(value))
    }
    expect([maybeQuoted(null), quotedList(['a', 'b"c']), quotedList([])]).toEqual(['null', '["a","b\\"c"]'.slice(1, -1), ''])
  })

  it('quotes a word or hex digits without a test, and null as null', () => {
    for (const value of ['current', 'hit', '4bf92f3577b34da6a3ce929d0e0e4736']) expect(maybeQuotedPlain(value)).toBe(JSON.stringify(value))
    expect(maybeQuotedPlain(null)).toBe('null')
  })
})
