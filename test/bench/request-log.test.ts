import { describe, expect, it } from 'vitest'
import { REQUEST_LOG_ROWS, requestLogLines } from '../../bench/request-log.js'

// The request log's lines under the bench's table: the on side's CPU per answer against the
// same process with the log off, judged against the 5 % target as the figure is printed.

const row = (gatewayCpuUs: number, offCpuUs: number, paired?: { cpuRatio: number; ratios: number }) => ({
  scenario: REQUEST_LOG_ROWS.cached,
  gateway: { cpuUs: gatewayCpuUs, rps: 9000, p99Us: 12_000 },
  references: [{ measure: { cpuUs: offCpuUs, rps: 10_000 } }],
  ...(paired === undefined ? {} : { paired }),
})

describe('requestLogLines', () => {
  it('reads a paired row by its paired figure, not by the medians of each side', () => {
    // The medians say +50 %; the loads read one against the other say 0.9 (the on side 11.1 % dearer).
    expect(requestLogLines([row(150, 100, { cpuRatio: 0.9, ratios: 24 })], undefined)).toEqual([
      `Request log, ${REQUEST_LOG_ROWS.cached}: CPU per answer +11.1 % with it on (the median of 24 ratios of loads run one after the other, `
        + 'each against the mean of the two loads of the other side on either side of it; target at most 5 % more: missed); '
        + 'medians 150.0 µs on, 100.0 µs off; 9000 req/s on, 10000 off (-10.0 %).',
      '',
    ])
  })

  it('holds a paired figure within 5 %, and one that prints as +5.0 %', () => {
    expect(requestLogLines([row(100, 100, { cpuRatio: 0.96, ratios: 12 })], undefined)[0]).toContain('CPU per answer +4.2 % with it on')
    expect(requestLogLines([row(100, 100, { cpuRatio: 0.96, ratios: 12 })], undefined)[0]).toContain('target at most 5 % more: held')
    // 1 / 0.9524 - 1 = 4.998 %; 1 / 0.952 - 1 = 5.04 %, printed +5.0 %: both held.
    expect(requestLogLines([row(100, 100, { cpuRatio: 0.952, ratios: 12 })], undefined)[0]).toContain('+5.0 % with it on (the median of 12 ratios')
    expect(requestLogLines([row(100, 100, { cpuRatio: 0.952, ratios: 12 })], undefined)[0]).toContain('target at most 5 % more: held')
    // A cheaper on side reads as a negative figure, and holds.
    expect(requestLogLines([row(100, 100, { cpuRatio: 1.25, ratios: 12 })], undefined)[0]).toContain('CPU per answer -20.0 % with it on')
  })

  it('reads a row without a paired figure by the medians of each side', () => {
    expect(requestLogLines([row(110, 100)], undefined)[0]).toBe(
      `Request log, ${REQUEST_LOG_ROWS.cached}: CPU per answer +10.0 % with it on (the medians of each side; target at most 5 % more: missed); `
        + 'medians 110.0 µs on, 100.0 µs off; 9000 req/s on, 10000 off (-10.0 %).',
    )
  })

  it("prints the writer's rate, its CPU and Redis's per entry, and Redis's memory per entry", () => {
    const writes = { entries: 50_000, credentials: 100, perSecond: 71_943, cpuUsPerEntry: 12.5, bytesPerEntry: 708, redisCpuUsPerEntry: 6.3 }
    expect(requestLogLines([], writes)).toEqual([
      "Request log, one instance's writer (a Redis of its own, 50000 entries of 100 credentials, batches of 500): 71943 entries written per second, "
        + "12.5 µs of the instance's CPU per entry, 6.3 µs of Redis's own (`INFO cpu` before and after); Redis memory 708 bytes per entry kept "
        + "(the entry and its share of the minutes' sets of logs; `used_memory` before and after).",
      '',
    ])
  })

  it('prints nothing for a run without the request log’s rows', () => {
    expect(requestLogLines([], undefined)).toEqual([])
  })
})
