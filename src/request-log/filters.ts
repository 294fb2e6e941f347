import { ApiError, errorCatalog, type FieldError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import type { RequestLogEntry } from './entry.js'

// The filters of a request log's page (docs/partners.md, "The request log"). Step 6 checks
// what a rule of a policy can say (integers, the method, times, lengths); the values a rule
// cannot describe are checked here: `status` (a code, a class or `errors`), `route` (a
// template of the route table, with the nearest suggested) and `code` (one of the catalog).
//
// Each entry begins with a line of its filterable fields (`indexLine`): a page is found by these
// lines where the entries are kept, never by parsing an entry's JSON; `matchLine` is their rule.

export interface RequestLogFilters {
  status?: { kind: 'exact'; status: number } | { kind: 'class'; first: number } | { kind: 'errors' }
  method?: string
  route?: string
  code?: string
  idempotencyKey?: string
  /** Epoch ms, exclusive. */
  createdAfter?: number
  createdBefore?: number
}

/** The query as step 6 parsed it (every value checked for its type and length). */
export interface ListQuery {
  page: number
  perPage: number
  status?: string
  method?: string
  route?: string
  code?: string
  idempotencyKey?: string
  createdAfter?: number
  createdBefore?: number
}

const STATUS = /^[1-5][0-9]{2}$/
const STATUS_CLASS = /^[1-5]xx$/

/** Edit distance between two short strings (the route suggestion). */
export function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i += 1) {
    const row = [i]
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      row.push(Math.min((previous[j] as number) + 1, (row[j - 1] as number) + 1, (previous[j - 1] as number) + cost))
    }
    previous = row
  }
  return previous[b.length] as number
}

/** The template of `routes` nearest to `route`. */
export function nearest(route: string, routes: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of routes) {
    const d = distance(route, candidate)
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  return best
}

/**
 * `value` when `known` takes it; otherwise a field error for `field`, whose detail
 * `refusal` writes from the value. Undefined, and no error, when the filter was not sent.
 */
function oneOf(field: string, value: string | undefined, known: (value: string) => boolean, code: FieldError['code'], refusal: (value: string) => string, errors: FieldError[]): string | undefined {
  if (value === undefined) return undefined
  if (known(value)) return value
  errors.push({ field, code, detail: refusal(value) })
  return undefined
}

/** The filters of a parsed query, or 400 INVALID_QUERY_PARAMETER naming each bad one. `routes`: the route table's templates. */
export function filtersOf(query: ListQuery, routes: readonly string[]): RequestLogFilters {
  const errors: FieldError[] = []
  const filters: RequestLogFilters = {}
  if (query.status !== undefined) {
    const status = query.status
    if (STATUS.test(status)) filters.status = { kind: 'exact', status: Number(status) }
    else if (STATUS_CLASS.test(status)) filters.status = { kind: 'class', first: Number(status[0]) }
    else if (status === 'errors') filters.status = { kind: 'errors' }
    else errors.push({ field: 'status', code: 'INVALID_FORMAT', detail: "Must be a status such as 404, a class such as 4xx, or 'errors' (every 4xx and 5xx)." })
  }
  const route = oneOf('route', query.route, (value) => routes.includes(value), 'INVALID_ENUM_VALUE', (value) => {
    const suggestion = nearest(value, routes)
    return `Must be a route template as the API reference writes it, such as '/v1/properties/{propertyId}'${suggestion === undefined ? '' : `; did you mean '${suggestion}'?`}`
  }, errors)
  const code = oneOf('code', query.code, (value) => Object.hasOwn(errorCatalog, value), 'INVALID_ENUM_VALUE',
    (value) => `'${quoteInput(value)}' is not a code of the API's errors, such as PROPERTY_NOT_FOUND; the API reference lists them.`, errors)
  if (errors.length > 0) {
    throw new ApiError('INVALID_QUERY_PARAMETER', `Invalid query parameter${errors.length > 1 ? 's' : ''} ${errors.map((e) => `'${e.field}'`).join(', ')}.`, { errors })
  }
  if (route !== undefined) filters.route = route
  if (code !== undefined) filters.code = code
  if (query.method !== undefined) filters.method = query.method
  if (query.idempotencyKey !== undefined) filters.idempotencyKey = query.idempotencyKey
  if (query.createdAfter !== undefined) filters.createdAfter = query.createdAfter
  if (query.createdBefore !== undefined) filters.createdBefore = query.createdBefore
  return filters
}

/**
 * The index line of an entry: its id and the fields the filters read, separated by spaces
 * (none of them can hold one: an id, a status, a method, a code, a template, and an
 * Idempotency-Key, visible ASCII only). `-` stands for a null code or route, nothing for no key.
 */
export function indexLine(entry: IndexedFields): string {
  return `${entry.id} ${entry.status} ${entry.method} ${entry.code ?? '-'} ${entry.route ?? '-'} ${entry.idempotencyKey ?? ''}`
}

type IndexedFields = Pick<RequestLogEntry, 'id' | 'status' | 'method' | 'code' | 'route' | 'idempotencyKey'>

/** The fields of an index line, as `indexLine` wrote them (`-` a null code or route, nothing no key). */
export function indexFields(line: string): IndexedFields {
  const [id, status, method, code, route, idempotencyKey] = line.split(' ') as [string, string, string, string, string, string]
  return { id, status: Number(status), method, code: code === '-' ? null : code, route: route === '-' ? null : route, idempotencyKey: idempotencyKey === '' ? null : idempotencyKey }
}

/** Whether the filters read from index lines, beyond the time window. */
export function filtersFields(filters: RequestLogFilters): boolean {
  return filters.status !== undefined || filters.method !== undefined || filters.route !== undefined || filters.code !== undefined || filters.idempotencyKey !== undefined
}

/**
 * The id of an index line when it passes the filters; undefined otherwise. The rule stated in
 * TypeScript: the gateway matches a page inside Redis (store.ts, PAGE_SCRIPT), and the tests
 * hold that script to this function, line by line and page by page.
 */
export function matchLine(line: string, filters: RequestLogFilters): string | undefined {
  const parts = line.split(' ')
  if (parts.length !== 6) return undefined
  const [id, statusText, method, code, route, idempotencyKey] = parts as [string, string, string, string, string, string]
  const status = Number(statusText)
  const wanted = filters.status
  if (wanted !== undefined) {
    if (wanted.kind === 'exact' && status !== wanted.status) return undefined
    if (wanted.kind === 'class' && Math.floor(status / 100) !== wanted.first) return undefined
    if (wanted.kind === 'errors' && status < 400) return undefined
  }
  if (filters.method !== undefined && method !== filters.method) return undefined
  if (filters.code !== undefined && code !== filters.code) return undefined
  if (filters.route !== undefined && route !== filters.route) return undefined
  if (filters.idempotencyKey !== undefined && idempotencyKey !== filters.idempotencyKey) return undefined
  return id
}
