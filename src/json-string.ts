// A string as JSON text, written by hand where a line or an entry is made per request: the
// generic serialiser walks every field and escapes every string, and nearly every string of
// ours holds nothing to escape (docs/performance.md).

/** A character JSON must escape, or half of a surrogate pair (JSON.stringify escapes a lone one). */
// eslint-disable-next-line no-control-regex -- the control characters are what JSON must escape
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/

/** A string as JSON: quoted as it is when nothing in it needs escaping (nearly always), else as JSON.stringify writes it. */
export function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`
}

/** A string or null as JSON. */
export function maybeQuoted(value: string | null): string {
  return value === null ? 'null' : quoted(value)
}

/** Strings as the items of a JSON array (without its brackets). */
export function quotedList(values: readonly string[]): string {
  let items = ''
  for (const value of values) items += items === '' ? quoted(value) : `,${quoted(value)}`
  return items
}

/**
 * A string or null as JSON when what made it leaves nothing to escape (a fixed word of a union,
 * hex digits): quoted without the test, which was a tenth of an entry's text.
 */
export function maybeQuotedPlain(value: string | null): string {
  return value === null ? 'null' : `"${value}"`
}

const ZEROS = ['', '0', '00'] as const

/**
 * The text JavaScript and JSON write for `value`, a number of whole tenths (`places` 1) or
 * thousandths (3) as `Math.round(x * 10 ** places) / 10 ** places` makes a duration: made from
 * its whole units, whose text V8 keeps in a cache, where a fraction's took the shortest-digits
 * conversion, ~0.15 µs a time. Any other number as String writes it.
 */
export function roundedText(value: number, places: 1 | 3): string {
  const scale = places === 1 ? 10 : 1000
  const units = Math.round(value * scale)
  if (!(units >= 0 && units <= 0x3fffffff) || units / scale !== value) return `${value}`
  const whole = Math.trunc(units / scale)
  let fraction = units - whole * scale
  if (fraction === 0) return `${whole}`
  let digits = places
  while (fraction % 10 === 0) {
    fraction /= 10
    digits -= 1
  }
  const text = `${fraction}`
  return `${whole}.${ZEROS[digits - text.length] as string}${text}`
}
