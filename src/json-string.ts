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
