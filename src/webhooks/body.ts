import { ApiError, type FieldError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import { MAX_URL_CHARS, urlProblem } from './addresses.js'
import type { EndpointRecord, EndpointStatus, SealedSecret } from './endpoints.js'

// The body rules of the webhook endpoints API (docs/partners.md, "Webhooks"), apart from HTTP
// so that unit tests check each. The bodies are the gateway's own, so it validates them: 400
// UNKNOWN_BODY_FIELD naming each field an operation does not take (with the known name that
// matches ignoring case); 422 VALIDATION_FAILED with one field error per bad field.

export const DESCRIPTION_MAX = 500
/** The most event types one endpoint may name. */
export const EVENT_TYPES_MAX = 100
/** A secret rotated out keeps signing beside the new one this long. */
export const ROTATION_OVERLAP_MS = 24 * 3_600_000

export type Body = Record<string, unknown>

/** What the URL rules allow (`events.allowHttp`, `events.allowPrivateTargets`). */
export interface UrlFlags {
  allowHttp: boolean
  allowPrivate: boolean
}

/** The body as an object; none is an empty one. 400 for fields the operation does not take. */
export function bodyOf(body: unknown, known: readonly string[]): Body {
  if (body === undefined || body === null) return {}
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError('VALIDATION_FAILED', 'The body must be a JSON object.', { errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }] })
  }
  const errors: FieldError[] = []
  for (const name of Object.keys(body)) {
    if (known.includes(name)) continue
    const near = known.find((k) => k.toLowerCase() === name.toLowerCase())
    errors.push({ field: name, code: 'UNKNOWN_PARAMETER', detail: `Unknown field '${quoteInput(name)}'.${near === undefined ? '' : ` Did you mean '${near}'?`}` })
  }
  if (errors.length > 0) {
    throw new ApiError('UNKNOWN_BODY_FIELD', `The body has ${errors.length === 1 ? 'a field' : 'fields'} this operation does not take: ${errors.map((e) => quoteInput(e.field)).join(', ')}.`, { errors })
  }
  return body as Body
}

/** 422 with every field error. */
export function failed(errors: FieldError[]): ApiError {
  return new ApiError('VALIDATION_FAILED', `The body has ${errors.length === 1 ? 'a field' : 'fields'} with a bad value.`, { errors })
}

/**
 * The URL as the gateway parsed and checked it (the WHATWG URL serialization: what is stored,
 * shown and called), or undefined with a field error.
 */
export function checkUrl(value: unknown, flags: UrlFlags, errors: FieldError[]): string | undefined {
  if (value === undefined) {
    errors.push({ field: 'url', code: 'REQUIRED', detail: 'url is required.' })
    return undefined
  }
  if (typeof value !== 'string') {
    errors.push({ field: 'url', code: 'INVALID_FORMAT', detail: 'url must be a string: an absolute https URL.' })
    return undefined
  }
  const problem = urlProblem(value, flags)
  if (problem !== undefined) {
    errors.push({ field: 'url', code: 'NOT_ALLOWED', detail: `${problem}.` })
    return undefined
  }
  const href = new URL(value).href
  // Percent-encoding may make it longer than it was sent.
  if (href.length > MAX_URL_CHARS) {
    errors.push({ field: 'url', code: 'NOT_ALLOWED', detail: `url must be at most ${MAX_URL_CHARS} characters once normalised (it is ${href.length}).` })
    return undefined
  }
  return href
}

/** The event types, each once, in the order given; or undefined with a field error. */
export function checkTypes(value: unknown, publicTypes: readonly string[], errors: FieldError[]): string[] | undefined {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) {
    errors.push({ field: 'eventTypes', code: 'REQUIRED', detail: 'eventTypes must name at least one event type.' })
    return undefined
  }
  if (!Array.isArray(value) || value.some((t) => typeof t !== 'string') || value.length > EVENT_TYPES_MAX) {
    errors.push({ field: 'eventTypes', code: 'INVALID_FORMAT', detail: `eventTypes must be a list of 1 to ${EVENT_TYPES_MAX} event types.` })
    return undefined
  }
  const unknown = (value as string[]).filter((t) => !publicTypes.includes(t))
  if (unknown.length > 0) {
    errors.push({ field: 'eventTypes', code: 'INVALID_ENUM_VALUE', detail: `Unknown event type${unknown.length > 1 ? 's' : ''}: ${unknown.map((t) => `'${quoteInput(t)}'`).join(', ')}; the types are ${publicTypes.join(', ')}.` })
    return undefined
  }
  return [...new Set(value as string[])]
}

/** A description (null clears it); undefined when absent or bad (with a field error). */
export function checkDescription(value: unknown, errors: FieldError[]): string | null | undefined {
  if (value === undefined || value === null) return value as undefined | null
  if (typeof value !== 'string') errors.push({ field: 'description', code: 'INVALID_FORMAT', detail: 'description must be a text, or null.' })
  else if (value.length > DESCRIPTION_MAX) errors.push({ field: 'description', code: 'OUT_OF_RANGE', detail: `description must be at most ${DESCRIPTION_MAX} characters.` })
  else return value
  return undefined
}

export function checkStatus(value: unknown, errors: FieldError[]): EndpointStatus | undefined {
  if (value === undefined || value === 'enabled' || value === 'disabled') return value
  errors.push({ field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is "enabled" or "disabled".' })
  return undefined
}

/** A new endpoint's fields, from a `POST /v1/webhook-endpoints` body. */
export interface EndpointInput {
  url: string
  eventTypes: string[]
  description: string | null
}

export function endpointInput(body: unknown, publicTypes: readonly string[], flags: UrlFlags): EndpointInput {
  const fields = bodyOf(body, ['url', 'eventTypes', 'description'])
  const errors: FieldError[] = []
  const url = checkUrl(fields.url, flags, errors)
  const eventTypes = checkTypes(fields.eventTypes, publicTypes, errors)
  const description = checkDescription(fields.description, errors)
  if (errors.length > 0) throw failed(errors)
  return { url: url as string, eventTypes: eventTypes as string[], description: description ?? null }
}

/** What a `PATCH` changes; a field absent is left as it is. */
export interface EndpointChanges {
  url?: string
  eventTypes?: string[]
  description?: string | null
  status?: EndpointStatus
}

export function endpointChanges(body: unknown, publicTypes: readonly string[], flags: UrlFlags): EndpointChanges {
  const fields = bodyOf(body, ['url', 'eventTypes', 'description', 'status'])
  const errors: FieldError[] = []
  const url = fields.url === undefined ? undefined : checkUrl(fields.url, flags, errors)
  const eventTypes = fields.eventTypes === undefined ? undefined : checkTypes(fields.eventTypes, publicTypes, errors)
  const description = checkDescription(fields.description, errors)
  const status = checkStatus(fields.status, errors)
  if (errors.length > 0) throw failed(errors)
  return {
    ...(url === undefined ? {} : { url }), ...(eventTypes === undefined ? {} : { eventTypes }),
    ...(description === undefined ? {} : { description }), ...(status === undefined ? {} : { status }),
  }
}

/**
 * The endpoint with a partner's changes. Enabling it again clears the reason and the failures
 * counted so far; disabling an enabled endpoint says the partner did it (an endpoint disabled
 * already keeps its reason).
 */
export function applyChanges(record: EndpointRecord, changes: EndpointChanges, now: number): EndpointRecord {
  return {
    ...record,
    ...(changes.url === undefined ? {} : { url: changes.url }),
    ...(changes.eventTypes === undefined ? {} : { eventTypes: changes.eventTypes }),
    ...(changes.description === undefined ? {} : { description: changes.description }),
    ...(changes.status === 'enabled' ? { status: 'enabled', disabledReason: null, failingSince: null } : {}),
    ...(changes.status === 'disabled' && record.status === 'enabled' ? { status: 'disabled', disabledReason: 'partner' } : {}),
    updatedAt: new Date(now).toISOString(),
  }
}

/**
 * The endpoint with a new current secret: the current one keeps signing beside it for the
 * overlap (unless `signs` says it cannot: sealed under a key no longer configured); older ones
 * end now.
 */
export function rotated(record: EndpointRecord, sealed: string, now: number, signs: (secret: SealedSecret) => boolean = () => true): EndpointRecord {
  const current = record.secrets.find((s) => s.expiresAt === null)
  const previous = current !== undefined && signs(current) ? current : undefined
  return {
    ...record,
    secrets: [{ sealed, expiresAt: null }, ...(previous === undefined ? [] : [{ ...previous, expiresAt: now + ROTATION_OVERLAP_MS }])],
    updatedAt: new Date(now).toISOString(),
  }
}
