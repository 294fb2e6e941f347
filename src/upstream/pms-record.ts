import { z } from 'zod'
import { ContractError } from './errors.js'

// The PMS hotel record as the PMS defines it (docs/architecture.md, "The PMS"), checked at the
// boundary. Only the fields the mapping uses are described; the PMS adds fields without notice
// and they are ignored.

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$/
const LOWER_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const validZones = new Map<string, boolean>()

/** An IANA time-zone name the runtime knows (not an offset, not an abbreviation). */
export function isIanaZone(name: string): boolean {
  let valid = validZones.get(name)
  if (valid === undefined) {
    valid = /^(?:[A-Za-z][A-Za-z0-9_+-]*)(?:\/[A-Za-z0-9_+-]+)*$/.test(name) && (() => {
      try {
        new Intl.DateTimeFormat('en', { timeZone: name })
        return true
      } catch {
        return false
      }
    })()
    if (validZones.size < 10_000) validZones.set(name, valid)
  }
  return valid
}

export const pmsHotelSchema = z.object({
  hotel_uuid: z.string().regex(LOWER_UUID),
  chain_code: z.string().min(1),
  display_name: z.string(),
  short_code: z.string().nullable().optional(),
  lifecycle: z.string().min(1),
  tz_name: z.string().refine(isIanaZone, 'is not an IANA time-zone name'),
  created_epoch_ms: z.number().int().min(0).max(8.64e15),
  last_modified: z.string().regex(RFC3339, 'is not an RFC 3339 date-time'),
})

export type PmsHotel = z.infer<typeof pmsHotelSchema>

export const pmsListSchema = z.object({
  results: z.array(z.unknown()),
  total_count: z.number().int().min(0),
})

/** Validates one record; the error names the record and the first bad field. */
export function parseHotel(upstream: string, value: unknown): PmsHotel {
  const result = pmsHotelSchema.safeParse(value)
  if (result.success) return result.data
  const issue = result.error.issues[0]
  const id = typeof value === 'object' && value !== null && typeof (value as { hotel_uuid?: unknown }).hotel_uuid === 'string'
    ? (value as { hotel_uuid: string }).hotel_uuid : '(no hotel_uuid)'
  throw new ContractError(upstream, id, issue?.path.join('.') || '(record)', issue?.message ?? 'is invalid')
}
