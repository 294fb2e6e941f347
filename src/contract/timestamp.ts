// The `timestamp` of every answer: now, in UTC with milliseconds. Formatting a date costs
// ten times reading the clock, and a busy instance answers many requests within one
// millisecond, so the text is made once per millisecond.

let lastMillis = -1
let lastText = ''

export function isoNow(): string {
  const now = Date.now()
  if (now !== lastMillis) {
    lastMillis = now
    lastText = new Date(now).toISOString()
  }
  return lastText
}

// The times partners send (the filters of /v1/events), and publishers (a CloudEvent's `time`).
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/

/**
 * An RFC 3339 date-time (section 5.6, with an offset; a leap second is not accepted) as epoch
 * milliseconds; a time between two milliseconds is their midpoint (`n + 0.5`), which a double
 * holds exactly, so comparing it with whole milliseconds stays exact whatever its digits.
 * Undefined when it is not one, or names no real day and time.
 */
export function rfc3339Millis(text: string): number | undefined {
  const match = RFC3339.exec(text)
  if (match === null) return undefined
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined
  // The day must exist in its month (Date.UTC would roll 31 April over to 1 May); years 400
  // apart have the same leap days, and 2000 + (year mod 400) is one Date.UTC reads as written.
  if (day > new Date(Date.UTC(2000 + (year % 400), month, 0)).getUTCDate()) return undefined
  let offsetMinutes = 0
  if (match[8] === undefined) {
    const hours = Number(match[10])
    const minutes = Number(match[11])
    if (hours > 23 || minutes > 59) return undefined
    offsetMinutes = (match[9] === '-' ? -1 : 1) * (hours * 60 + minutes)
  }
  // Not Date.UTC, which reads years 0 to 99 as 1900 to 1999.
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  const whole = date.setUTCHours(hour, minute, second, 0)
  const digits = (match[7] ?? '.').slice(1)
  const millis = Number(digits.slice(0, 3).padEnd(3, '0'))
  const between = /[1-9]/.test(digits.slice(3)) ? 0.5 : 0
  return whole - offsetMinutes * 60_000 + millis + between
}
