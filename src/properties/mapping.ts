import type { Property } from '../contract/property.js'
import { ContractError } from '../upstream/errors.js'
import type { PmsHotel } from '../upstream/pms-record.js'

// PMS hotel record -> public Property (docs/architecture.md, "The PMS"). A pure allow-list:
// each public field names the one PMS field it comes from; nothing else of the record can reach
// a partner, whatever the PMS adds tomorrow.

const RFC3339_PARTS = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/

/** RFC 3339 with any offset and 0-9 fraction digits -> UTC with exactly milliseconds. */
export function toUtcMillis(value: string): string | undefined {
  const m = RFC3339_PARTS.exec(value)
  if (m === null) return undefined
  const [, y, mo, d, h, mi, s, fraction = '', , sign, oh = '0', om = '0'] = m
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number]
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59 || Number(oh) > 23 || Number(om) > 59) return undefined
  const local = Date.UTC(year, month - 1, day, hour, minute, second, Number(fraction.padEnd(3, '0').slice(0, 3)))
  // Date.UTC rolls 31 February over into March; the PMS saying so is a broken record.
  if (new Date(local).getUTCDate() !== day) return undefined
  const offsetMinutes = sign === undefined ? 0 : (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om))
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
