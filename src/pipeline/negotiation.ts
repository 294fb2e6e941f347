import type { FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'

// Step 2 of the order of checks (docs/architecture.md, "Order of checks"): does the Accept
// header admit application/json? RFC 9110 12.5.1: the most specific media range that matches
// decides the q-value; q=0 means "not acceptable". Parameters other than q do not narrow a
// match here, since we produce application/json in one form only.

const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/

interface Range { type: string; subtype: string; q: number }

function parseRange(part: string): Range | undefined {
  const [mediaRange = '', ...params] = part.split(';')
  const slash = mediaRange.indexOf('/')
  if (slash === -1) return undefined
  const type = mediaRange.slice(0, slash).trim().toLowerCase()
  const subtype = mediaRange.slice(slash + 1).trim().toLowerCase()
  if (type === '' || subtype === '' || (type === '*' && subtype !== '*')) return undefined
  let q = 1
  for (const param of params) {
    const eq = param.indexOf('=')
    if (eq === -1) continue
    if (param.slice(0, eq).trim().toLowerCase() !== 'q') continue
    const value = param.slice(eq + 1).trim()
    if (!QVALUE.test(value)) return undefined
    q = Number(value)
  }
  return { type, subtype, q }
}

/** The q-value that `accept` gives application/json (0 when it admits none). */
export function jsonQuality(accept: string): number {
  let best = -1
  let quality = 0
  for (const part of accept.split(',')) {
    if (part.trim() === '') continue
    const range = parseRange(part)
    if (range === undefined) continue
    const specificity = range.type === 'application' && range.subtype === 'json' ? 2
      : range.type === 'application' && range.subtype === '*' ? 1
        : range.type === '*' ? 0 : -1
    if (specificity > best) {
      best = specificity
      quality = range.q
    } else if (specificity === best && specificity >= 0) {
      quality = Math.max(quality, range.q)
    }
  }
  return quality
}

// Clients send the same few Accept values over and over; remember the verdicts.
const verdicts = new Map<string, boolean>()
const MAX_VERDICTS = 256

export function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined) return true
  let verdict = verdicts.get(accept)
  if (verdict === undefined) {
    verdict = jsonQuality(accept) > 0
    if (verdicts.size < MAX_VERDICTS) verdicts.set(accept, verdict)
  }
  return verdict
}

export function negotiationStage(request: FastifyRequest): void {
  if (acceptsJson(request.headers.accept)) return
  throw new ApiError('NOT_ACCEPTABLE', `This API produces application/json only; the Accept header '${quoteInput(request.headers.accept ?? '')}' does not admit it.`)
}
