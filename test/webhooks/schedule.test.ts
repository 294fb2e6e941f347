import { describe, expect, it } from 'vitest'
import { retryDelayMs } from '../../src/webhooks/deliveries.js'

// The retry schedule (docs/partners.md, "Retries, duplicates, order and disabling"): each
// entry ±10 %, in order, the last one for any later retry.

describe('retryDelayMs', () => {
  const schedule = [5, 300, 1800, 7200, 18000, 36000, 36000]

  it('waits each entry of the schedule, within 10 % either way', () => {
    for (let attemptsMade = 1; attemptsMade <= schedule.length; attemptsMade += 1) {
      const seconds = schedule[attemptsMade - 1] as number
      for (let i = 0; i < 200; i += 1) {
        const ms = retryDelayMs(schedule, attemptsMade)
        expect(ms, `retry ${attemptsMade}`).toBeGreaterThanOrEqual(Math.floor(seconds * 900))
        expect(ms, `retry ${attemptsMade}`).toBeLessThanOrEqual(Math.ceil(seconds * 1100))
      }
    }
  })

  it('spreads the retries (jitter), so endpoints that failed together do not retry together', () => {
    const delays = new Set(Array.from({ length: 50 }, () => retryDelayMs(schedule, 2)))
    expect(delays.size).toBeGreaterThan(10)
  })

  it('keeps the last entry for a retry past the schedule', () => {
    const ms = retryDelayMs([1, 2], 5)
    expect(ms).toBeGreaterThanOrEqual(1800)
    expect(ms).toBeLessThanOrEqual(2200)
  })
})
