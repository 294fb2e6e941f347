import type { FastifyContextConfig, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, type FieldError } from '../contract/errors.js'

// Step 6 of decisions 1, with the rules of decisions 3: query parameters are plain digits
// within a range, given once; unknown names are refused with a suggestion; path ids are UUIDs.

export interface IntegerRule {
  min: number
  max: number
  default: number
}

export type QuerySpec = Record<string, IntegerRule>

export type ParamsSpec = Record<string, 'uuid'>

const DIGITS = /^[0-9]+$/
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

function fold(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, '')
}

function unknownParameter(name: string, known: string[]): FieldError {
  const suggestion = known.find((k) => fold(k) === fold(name))
  return {
    field: name,
    code: 'UNKNOWN_PARAMETER',
    detail: suggestion === undefined
      ? `Unknown parameter; this endpoint accepts ${known.length === 0 ? 'none' : known.map((k) => `'${k}'`).join(', ')}.`
      : `Did you mean '${suggestion}'?`,
  }
}

function checkInteger(name: string, value: unknown, rule: IntegerRule): FieldError | number {
  if (Array.isArray(value)) return { field: name, code: 'INVALID_FORMAT', detail: 'Give this parameter once.' }
  if (typeof value !== 'string' || !DIGITS.test(value)) {
    return { field: name, code: 'INVALID_FORMAT', detail: 'Must be a whole number written with digits only.' }
  }
  const number = Number(value)
  if (number < rule.min || number > rule.max) {
    return { field: name, code: 'OUT_OF_RANGE', detail: `Must be between ${rule.min} and ${rule.max}.` }
  }
  return number
}

/** Validated query values, defaults filled in. */
export type ParsedQuery = Record<string, number>

/** Step 6 for a route, with its query and path rules. */
export function parametersStage(config: FastifyContextConfig) {
  const query = config.query ?? {}
  const params = config.params ?? {}
  return function checkParameters(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
    try {
      request.parsedQuery = parseQuery(request.query as Record<string, unknown>, query)
      checkParams(request.params as Record<string, string>, params)
    } catch (error) {
      return done(error as Error)
    }
    done()
  }
}

export function parseQuery(query: Record<string, unknown>, spec: QuerySpec): ParsedQuery {
  const known = Object.keys(spec)
  const names = Object.keys(query)
  const unknown = names.filter((name) => !Object.hasOwn(spec, name))
  if (unknown.length > 0) {
    const errors = unknown.map((name) => unknownParameter(name, known))
    const hints = errors.filter((e) => e.detail.startsWith('Did you mean')).map((e) => `'${e.field}': ${e.detail}`)
    throw new ApiError('UNKNOWN_QUERY_PARAMETER',
      `Unknown query parameter${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n}'`).join(', ')}.${hints.length > 0 ? ` ${hints.join(' ')}` : ''}`,
      { errors })
  }
  const parsed: ParsedQuery = {}
  const errors: FieldError[] = []
  for (const name of known) {
    const rule = spec[name] as IntegerRule
    const value = query[name]
    if (value === undefined) {
      parsed[name] = rule.default
      continue
    }
    const result = checkInteger(name, value, rule)
    if (typeof result === 'number') parsed[name] = result
    else errors.push(result)
  }
  if (errors.length > 0) {
    throw new ApiError('INVALID_QUERY_PARAMETER', `Invalid query parameter${errors.length > 1 ? 's' : ''} ${errors.map((e) => `'${e.field}'`).join(', ')}.`, { errors })
  }
  return parsed
}

function checkParams(params: Record<string, string>, spec: ParamsSpec): void {
  for (const [name, kind] of Object.entries(spec)) {
    if (kind === 'uuid' && !UUID.test(params[name] ?? '')) {
      throw new ApiError('INVALID_PATH_PARAMETER', `'${name}' must be a UUID.`, {
        errors: [{ field: name, code: 'INVALID_FORMAT', detail: 'Must be a UUID such as 3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10.' }],
      })
    }
  }
}
