import { ENTRY_FIELDS, type RequestLogEntry } from './entry.js'

// The CSV export of a request log (docs/operations.md, "The request log"): RFC 4180 with CRLF,
// a header row of the entry's fields in their documented order, a list's items joined by `;`,
// null as an empty cell, booleans as `true`/`false`.
//
// A cell a spreadsheet would read as a formula (it starts with =, +, -, @, a tab or a carriage
// return) gets a leading apostrophe: a partner chooses its User-Agent, its Idempotency-Key and
// its parameters' names, and an operator opens the file in a spreadsheet
// (docs/architecture.md §D81).

const CRLF = '\r\n'
const FORMULA_START = /^[=+\-@\t\r]/
const NEEDS_QUOTES = /[",\r\n]/

/** One cell of text: guarded against formulas, quoted when it holds a comma, a quote or a line break. */
export function csvCell(text: string): string {
  const guarded = FORMULA_START.test(text) ? `'${text}` : text
  return NEEDS_QUOTES.test(guarded) ? `"${guarded.replaceAll('"', '""')}"` : guarded
}

function cellOf(value: RequestLogEntry[keyof RequestLogEntry]): string {
  if (value === null) return ''
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  return csvCell(Array.isArray(value) ? value.join(';') : value)
}

/** The header row, with its CRLF. */
export const CSV_HEADER = `${ENTRY_FIELDS.join(',')}${CRLF}`

/** One entry's row, with its CRLF. */
export function csvRow(entry: RequestLogEntry): string {
  return `${ENTRY_FIELDS.map((field) => cellOf(entry[field])).join(',')}${CRLF}`
}
