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
