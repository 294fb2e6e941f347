import type { Property } from '../contract/property.js'
import { ContractError } from '../upstream/errors.js'
import type { PmsHotel } from '../upstream/pms-record.js'

// PMS hotel record -> public Property (docs/architecture.md, "The PMS"). A pure allow-list:
// each public field names the one PMS field it comes from; nothing else of the record can reach
// a partner, whatever the PMS adds tomorrow.

/** The number the `count` ASCII digits of `value` at `from` spell, or -1 when one is not a digit. */
function digits(value: string, from: number, count: number): number {
  let n = 0
  for (let i = from; i < from + count; i += 1) {
    const d = value.charCodeAt(i) - 48
    if (d < 0 || d > 9) return -1
    n = n * 10 + d
  }
  return n
}

/**
 * RFC 3339 with any offset and 0-9 fraction digits -> UTC with exactly milliseconds. Read
 * character by character (every PMS record's date goes through here): YYYY-MM-DD, T or t,
 * hh:mm:ss, an optional fraction, then Z, z or an offset ±hh:mm, and nothing else.
 */
export function toUtcMillis(value: string): string | undefined {
  const length = value.length
  if (length < 20) return undefined
  const year = digits(value, 0, 4)
  const month = digits(value, 5, 2)
  const day = digits(value, 8, 2)
  const hour = digits(value, 11, 2)
  const minute = digits(value, 14, 2)
  const second = digits(value, 17, 2)
  const t = value.charCodeAt(10)
  if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 || value.charCodeAt(4) !== 45 || value.charCodeAt(7) !== 45
    || (t !== 84 && t !== 116) || value.charCodeAt(13) !== 58 || value.charCodeAt(16) !== 58) return undefined
  let at = 19
  let millis = 0
  if (value.charCodeAt(at) === 46) {
    // 1 to 9 digits; the first three are the milliseconds, the rest is cut.
    at += 1
    const from = at
    while (at < length && at - from < 10) {
      const d = value.charCodeAt(at) - 48
      if (d < 0 || d > 9) break
      if (at - from < 3) millis += d * (at === from ? 100 : at === from + 1 ? 10 : 1)
      at += 1
    }
    if (at === from || at - from > 9) return undefined
  }
  let offsetMinutes = 0
  const zone = value.charCodeAt(at)
  if (zone === 90 || zone === 122) {
    if (at + 1 !== length) return undefined
  } else if (zone === 43 || zone === 45) {
    const oh = digits(value, at + 1, 2)
    const om = digits(value, at + 4, 2)
    if (at + 6 !== length || oh < 0 || om < 0 || value.charCodeAt(at + 3) !== 58) return undefined
    if (oh > 23 || om > 59) return undefined
    offsetMinutes = (zone === 45 ? -1 : 1) * (oh * 60 + om)
  } else {
    return undefined
  }
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined
  const local = Date.UTC(year, month - 1, day, hour, minute, second, millis)
  // Date.UTC rolls 31 February over into March; the PMS saying so is a broken record.
  if (new Date(local).getUTCDate() !== day) return undefined
  const utc = new Date(local - offsetMinutes * 60_000)
  return Number.isNaN(utc.getTime()) ? undefined : utc.toISOString()
}

export function toProperty(hotel: PmsHotel, upstream = 'pms'): Property {
  const updatedAt = toUtcMillis(hotel.last_modified)
  if (updatedAt === undefined) throw new ContractError(upstream, hotel.hotel_uuid, 'last_modified', 'is not a valid date-time')
  return {
    object: 'property',
    id: hotel.hotel_uuid,
    name: hotel.display_name,
    code: hotel.short_code === undefined || hotel.short_code === null || hotel.short_code === '' ? null : hotel.short_code,
    // Only LIVE is active; every other lifecycle, known or new, is inactive.
    status: hotel.lifecycle === 'LIVE' ? 'active' : 'inactive',
    timezone: hotel.tz_name,
    createdAt: new Date(hotel.created_epoch_ms).toISOString(),
    updatedAt,
  }
}
