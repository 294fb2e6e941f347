import { describe, expect, it } from 'vitest'
import { rfc3339Millis } from '../../src/contract/timestamp.js'

// The time filters of /v1/events (docs/partners.md, "Events") read RFC 3339 date-times, section
// 5.6: an offset is required, and a time between two milliseconds is their midpoint, so a
// strict comparison with an event's whole milliseconds stays exact.

describe('RFC 3339 date-times', () => {
  it.each([
    ['2026-11-26T12:00:00Z', Date.UTC(2026, 10, 26, 12)],
    ['2026-11-26t12:00:00z', Date.UTC(2026, 10, 26, 12)],
    ['2026-11-26T12:00:00.250Z', Date.UTC(2026, 10, 26, 12) + 250],
    ['2026-11-26T12:00:00.2Z', Date.UTC(2026, 10, 26, 12) + 200],
    ['2026-11-26T12:00:00.250000001Z', Date.UTC(2026, 10, 26, 12) + 250.5],
    ['2026-11-26T12:00:00.2500Z', Date.UTC(2026, 10, 26, 12) + 250],
    ['2026-11-26T13:30:00+01:30', Date.UTC(2026, 10, 26, 12)],
    ['2026-11-26T10:00:00-02:00', Date.UTC(2026, 10, 26, 12)],
    ['2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
    // Not 1999: Date.UTC reads years 0 to 99 as 1900 to 1999, the ISO parser does not.
    ['0099-01-01T00:00:00Z', Date.parse('0099-01-01T00:00:00.000Z')],
    // Year 0 is a leap year (1900, which Date.UTC would read, is not).
    ['0000-02-29T00:00:00Z', Date.parse('0000-02-29T00:00:00.000Z')],
  ])('reads %s', (text, millis) => {
    expect(rfc3339Millis(text)).toBe(millis)
  })

  it.each([
    '2026-11-26T12:00:00', '2026-11-26 12:00:00Z', '2026-11-26', '2026-11-26T12:00Z', '2026-13-01T00:00:00Z', '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z', '2026-11-00T00:00:00Z', '2026-11-26T24:00:00Z', '2026-11-26T12:60:00Z', '2026-11-26T12:00:60Z',
    '2026-11-26T12:00:00+24:00', '2026-11-26T12:00:00+01:60', '2026-11-26T12:00:00.Z', '2026-11-26T12:00:00.1234567890Z', '2026-11-26T12:00:00 01:00', '',
  ])('refuses %j', (text) => {
    expect(rfc3339Millis(text)).toBeUndefined()
  })
})
