import type { ParsedQuery } from '../pipeline/parameters.js'

// The path and query a service is called on (docs/architecture.md, "What the service receives";
// docs/architecture.md §D14): built from what passed validation, never copied from the
// partner's request target. A `;` the service's parser might split on, a `%00`, a second
// encoding, a dot segment: none reaches the service as the partner wrote it.

/** RFC 3986 2.3 unreserved characters stay as they are; everything else is percent-encoded. */
export function encodeComponent(text: string): string {
  // encodeURIComponent also leaves ! ' ( ) * as they are: sub-delims, not unreserved.
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
}

/** `template` with its `{name}` placeholders filled, each value percent-encoded. */
export function fillPath(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(/\{([A-Za-z][A-Za-z0-9]*)\}/g, (_m, name: string) => encodeComponent(values[name] ?? ''))
}

function textOf(value: ParsedQuery[string]): string {
  return Array.isArray(value) ? value.join(',') : String(value)
}

/**
 * `?name=value&…` of the validated parameters, in the order the partner sent them (`sent` is
 * the parsed query, whose names keep that order); '' when there are none.
 */
export function queryOf(sent: object, parsed: ParsedQuery): string {
  let query = ''
  for (const name of Object.keys(sent)) {
    const value = parsed[name]
    if (value === undefined) continue
    query += `${query === '' ? '?' : '&'}${encodeComponent(name)}=${encodeComponent(textOf(value))}`
  }
  return query
}
