import type { FastifyRequest } from 'fastify'
import { ApiError, type FieldError } from '../contract/errors.js'
import { MAX_FIELD_ERRORS, QuoteBudget, quoteInput } from '../contract/problem.js'
import { rfc3339Millis } from '../contract/timestamp.js'
import { PLAIN_STRING, type ParamsSpec, type PathParamRule, type QueryRule, type QuerySpec } from '../routes/policy.js'

// Step 6 of the order of checks (docs/architecture.md, "Order of checks"), with the rules of
// docs/partners.md, "Parameters and pagination" for every route's own allow-list: integers are
// plain digits within a range, every parameter is given once, unknown names are refused with a
// suggestion; path parameters are UUIDs or plain strings.

const DIGITS = /^[0-9]+$/
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/
/** `.`, `..`, `...`: a path segment a service's URL parser would resolve or that means nothing. */
const DOTS_ONLY = /^\.+$/
/**
 * Control characters (Unicode Cc, after percent-decoding) and lone surrogates: nothing a
 * service should find in a text value. A CR LF or a NUL in it is an injection.
 */
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const UNFIT_TEXT = /[\u0000-\u001f\u007f-\u009f]|\p{Cs}/u

export type QueryValue = number | string | boolean | readonly string[]

/** Validated query values, defaults filled in. */
export type ParsedQuery = Record<string, QueryValue>

function fold(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, '')
}

/**
 * What a route's query rules say of the names they accept, worked out once per rules rather
 * than per request: the names, the first of them by each name's fold (the suggestion for an
 * unknown name that folds the same), and the list a refusal names.
 */
interface KnownNames {
  names: string[]
  byFold: Map<string, string>
  accepted: string
}

const knownNamesBySpec = new WeakMap<QuerySpec, KnownNames>()

function knownNamesOf(spec: QuerySpec): KnownNames {
  let known = knownNamesBySpec.get(spec)
  if (known === undefined) {
    const names = Object.keys(spec)
    const byFold = new Map<string, string>()
    for (const name of names) if (!byFold.has(fold(name))) byFold.set(fold(name), name)
    known = { names, byFold, accepted: names.length === 0 ? 'none' : names.map((k) => `'${k}'`).join(', ') }
    knownNamesBySpec.set(spec, known)
  }
  return known
}

function unknownParameter(name: string, known: KnownNames): FieldError {
  const suggestion = known.byFold.get(fold(name))
  return {
    field: name,
    code: 'UNKNOWN_PARAMETER',
    detail: suggestion === undefined ? `Unknown parameter; this endpoint accepts ${known.accepted}.` : `Did you mean '${suggestion}'?`,
  }
}

/**
 * `'a', 'b'`, naming at most as many as a problem lists field errors, and no more of the names
 * than `budget` allows (they may be the partner's own; docs/security.md, "Big inputs").
 */
function namesOf(errors: FieldError[], budget: QuoteBudget): string {
  const named: string[] = []
  for (const error of errors.slice(0, MAX_FIELD_ERRORS)) {
    if (budget.spent) break
    named.push(`'${budget.take(error.field)}'`)
  }
  const more = errors.length - named.length
  return more > 0 ? `${named.join(', ')} and ${more} more` : named.join(', ')
}

function quoted(values: readonly string[]): string {
  return values.map((v) => `'${v}'`).join(', ')
}

/** The value of one parameter, or the field error that refuses it. */
function checkValue(name: string, value: unknown, rule: QueryRule): FieldError | QueryValue {
  if (Array.isArray(value)) return { field: name, code: 'INVALID_FORMAT', detail: 'Give this parameter once.' }
  const text = typeof value === 'string' ? value : ''
  switch (rule.type) {
    case 'integer': {
      if (!DIGITS.test(text)) return { field: name, code: 'INVALID_FORMAT', detail: 'Must be a whole number written with digits only.' }
      const number = Number(text)
      if (number < rule.min || number > rule.max) return { field: name, code: 'OUT_OF_RANGE', detail: `Must be between ${rule.min} and ${rule.max}.` }
      return number
    }
    case 'string':
      if (text.length === 0 || text.length > rule.maxLength) return { field: name, code: 'INVALID_FORMAT', detail: `Must be 1 to ${rule.maxLength} characters.` }
      if (UNFIT_TEXT.test(text)) return { field: name, code: 'INVALID_FORMAT', detail: 'Must not contain control characters.' }
      return text
    case 'enum':
      if (!rule.values.includes(text)) return { field: name, code: 'INVALID_ENUM_VALUE', detail: `Must be one of ${quoted(rule.values)}.` }
      return text
    case 'list': {
      const items = text.split(',')
      if (items.some((item) => item === '') || new Set(items).size !== items.length) {
        return { field: name, code: 'INVALID_FORMAT', detail: `Give a comma-separated list of ${quoted(rule.values)}, each at most once.` }
      }
      const unknown = items.find((item) => !rule.values.includes(item))
      if (unknown !== undefined) return { field: name, code: 'INVALID_ENUM_VALUE', detail: `'${quoteInput(unknown)}' is not one of ${quoted(rule.values)}.` }
      return items
    }
    case 'boolean':
      if (text !== 'true' && text !== 'false') return { field: name, code: 'INVALID_FORMAT', detail: "Must be 'true' or 'false'." }
      return text === 'true'
    case 'uuid':
      if (!UUID.test(text)) return { field: name, code: 'INVALID_FORMAT', detail: 'Must be a UUID such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10.' }
      return text.toLowerCase()
    case 'timestamp': {
      const millis = rfc3339Millis(text)
      if (millis !== undefined) return millis
      // A `+` a client left unencoded arrives as a space (application/x-www-form-urlencoded).
      const detail = / \d{2}:\d{2}$/.test(text)
        ? "Must be an RFC 3339 date-time; send the '+' of an offset as %2B, as a query string reads a bare '+' as a space."
        : 'Must be an RFC 3339 date-time with an offset, such as 2026-11-26T12:00:00Z or 2026-11-26T13:00:00.250+01:00.'
      return { field: name, code: 'INVALID_FORMAT', detail }
    }
  }
}

/** The query's values by its rules; throws the 400 that names what is wrong. */
export function parseQuery(query: Record<string, unknown>, spec: QuerySpec): ParsedQuery {
  const parsed = readQuery(query, spec)
  if (parsed instanceof ApiError) throw parsed
  return parsed
}

/** The query's values by its rules, or the 400 that names what is wrong (returned: step 6 answers it without a throw). */
function readQuery(query: Record<string, unknown>, spec: QuerySpec): ParsedQuery | ApiError {
  const known = knownNamesOf(spec)
  const names = Object.keys(query)
  const unknown = names.filter((name) => !Object.hasOwn(spec, name))
  if (unknown.length > 0) {
    const errors = unknown.map((name) => unknownParameter(name, known))
    const budget = new QuoteBudget()
    const named = namesOf(errors, budget)
    const hints: string[] = []
    for (const e of errors.slice(0, MAX_FIELD_ERRORS)) {
      if (budget.spent) break
      if (e.detail.startsWith('Did you mean')) hints.push(`'${budget.take(e.field)}': ${e.detail}`)
    }
    return new ApiError('UNKNOWN_QUERY_PARAMETER',
      `Unknown query parameter${unknown.length > 1 ? 's' : ''} ${named}.${hints.length > 0 ? ` ${hints.join(' ')}` : ''}`,
      { errors })
  }
  const parsed: ParsedQuery = {}
  const errors: FieldError[] = []
  for (const name of known.names) {
    const rule = spec[name] as QueryRule
    const value = query[name]
    if (value === undefined) {
      if (rule.type === 'integer' && rule.default !== undefined) parsed[name] = rule.default
      continue
    }
    const result = checkValue(name, value, rule)
    if (typeof result === 'object' && !Array.isArray(result)) errors.push(result as FieldError)
    else parsed[name] = result as QueryValue
  }
  if (errors.length > 0) {
    return new ApiError('INVALID_QUERY_PARAMETER', `Invalid query parameter${errors.length > 1 ? 's' : ''} ${namesOf(errors, new QuoteBudget())}.`, { errors })
  }
  return parsed
}

const ulidPatterns = new Map<string, RegExp>()

/** `prefix` and a ULID: 26 Crockford base32 characters (no I, L, O, U) in any case, the first at most 7 (48 bits of time). */
export function ulidPattern(prefix: string): RegExp {
  let pattern = ulidPatterns.get(prefix)
  if (pattern === undefined) {
    pattern = new RegExp(`^${prefix.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')}[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$`)
    ulidPatterns.set(prefix, pattern)
  }
  return pattern
}

function paramProblem(name: string, rule: PathParamRule, value: string): ApiError | undefined {
  if (rule.type === 'ulid') {
    if (ulidPattern(rule.prefix).test(value)) return undefined
    return new ApiError('INVALID_PATH_PARAMETER', `'${name}' is not an id of this kind.`, {
      errors: [{ field: name, code: 'INVALID_FORMAT', detail: `Must be ${rule.prefix} followed by 26 characters, as in the ids this API returns.` }],
    })
  }
  if (rule.type === 'uuid') {
    if (UUID.test(value)) return undefined
    return new ApiError('INVALID_PATH_PARAMETER', `'${name}' must be a UUID.`, {
      errors: [{ field: name, code: 'INVALID_FORMAT', detail: 'Must be a UUID such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10.' }],
    })
  }
  if (!PLAIN_STRING.test(value)) {
    return new ApiError('INVALID_PATH_PARAMETER', `'${name}' is not a valid identifier.`, {
      errors: [{ field: name, code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ -.' }],
    })
  }
  // However it was encoded (`%2e`), a dot segment would move the service's path.
  if (DOTS_ONLY.test(value)) {
    return new ApiError('INVALID_PATH_PARAMETER', `'${name}' is not a valid identifier.`, {
      errors: [{ field: name, code: 'INVALID_FORMAT', detail: 'Must not be made of dots only.' }],
    })
  }
  return undefined
}

/** Step 6 for a route, with its query and path rules. */
export function parametersStage(query: QuerySpec, params: ParamsSpec) {
  const paramRules = Object.entries(params)
  return function checkParameters(request: FastifyRequest): ApiError | undefined {
    const parsed = readQuery(request.query as Record<string, unknown>, query)
    if (parsed instanceof ApiError) return parsed
    request.parsedQuery = parsed
    const values = request.params as Record<string, string>
    for (const [name, rule] of paramRules) {
      const problem = paramProblem(name, rule, values[name] ?? '')
      if (problem !== undefined) return problem
    }
    return undefined
  }
}
