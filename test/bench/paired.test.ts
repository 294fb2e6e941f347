import { describe, expect, it } from 'vitest'
import { pairedRatio, unsteadyRounds } from '../../bench/paired.js'

// A row with splits runs, per round, the gateway's load then its reference's, `splits` times:
// g0 r0 g1 r1 … Each load but a round's first and last is read against the mean of its two
// neighbours, which are the other side's.

describe('pairedRatio', () => {
  it('reads each inner load of a round against its two neighbours, never across rounds', () => {
    // Round 1: g 100, r 110, g 120, r 150 → 110 / 110 = 1.00; (110 + 150) / 2 / 120 = 1.0833.
    // Round 2: g 200, r 300, g 200, r 300 → 300 / 200 = 1.5; 300 / 200 = 1.5. Across the rounds (150 then 200) nothing.
    // The median of the four: (1.0833 + 1.5) / 2 = 31 / 24.
    const result = pairedRatio([100, 120, 200, 200], [110, 150, 300, 300], 2)
    expect(result?.ratios).toBe(4)
    expect(result?.cpuRatio).toBeCloseTo(31 / 24, 12)
  })

  it('moves no ratio when the machine slows at a steady pace through a round: sides that cost the same read 1.00', () => {
    // Each load 5 µs more than the one before: g 100, r 105, g 110, r 115, g 120, r 125.
    expect(pairedRatio([100, 110, 120], [105, 115, 125], 3)).toEqual({ cpuRatio: 1, ratios: 4 })
    // The reference 10 % cheaper at every moment of the same drift: 0.9 whatever the pace.
    const at = (t: number): number => 100 + 5 * t
    expect(pairedRatio([at(0), at(2), at(4)], [0.9 * at(1), 0.9 * at(3), 0.9 * at(5)], 3)).toEqual({ cpuRatio: 0.9, ratios: 4 })
  })

  it('with one split per round is each round’s reference against its gateway', () => {
    expect(pairedRatio([100, 100, 100], [90, 95, 120], 1)).toEqual({ cpuRatio: 0.95, ratios: 3 })
  })

  it('reads only whole rounds, and has no figure without one', () => {
    // The third round is cut short: its one gateway load has no reference load after it.
    expect(pairedRatio([100, 100, 100], [110, 110], 1)).toEqual({ cpuRatio: 1.1, ratios: 2 })
    expect(pairedRatio([100], [], 2)).toBeUndefined()
    expect(pairedRatio([], [], 1)).toBeUndefined()
  })

  it('refuses a number of splits that is not a whole number of at least one', () => {
    expect(() => pairedRatio([100], [100], 0)).toThrow('splits must be a whole number of at least 1, not 0')
    expect(() => pairedRatio([100], [100], 1.5)).toThrow('splits must be a whole number of at least 1, not 1.5')
  })
})

describe('unsteadyRounds', () => {
  it('gives each round\'s reference ÷ gateway when one strays more than 15 % from their median', () => {
    // The 32-address row of the afternoon run of 2026-12-02: 1.05, 0.98, 1.22.
    expect(unsteadyRounds([104.4, 64.4, 72.4], [109.9, 63.2, 88])?.map((x) => Number(x.toFixed(2)))).toEqual([1.05, 0.98, 1.22])
    expect(unsteadyRounds([100, 100, 100], [60, 60, 40])).toEqual([0.6, 0.6, 0.4])
  })

  it('is undefined when every round is within 15 % of their median, or there are fewer than two', () => {
    expect(unsteadyRounds([100, 100, 100], [60, 65, 52])).toBeUndefined()
    expect(unsteadyRounds([100, 100, 100], [60, 68.9, 51.1])).toBeUndefined()
    expect(unsteadyRounds([100], [30])).toBeUndefined()
    expect(unsteadyRounds([], [])).toBeUndefined()
  })

  it('reads only the rounds both sides ran', () => {
    expect(unsteadyRounds([100, 100, 100], [60, 90])).toEqual([0.6, 0.9])
  })
})
