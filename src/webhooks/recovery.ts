import { ApiError, type FieldError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import { rfc3339Millis } from '../contract/timestamp.js'
import { RECOVERY_ID_PREFIX } from '../routes/policy.js'
import { bodyOf, failed } from './body.js'

// The rules of a recovery (docs/partners.md, "After an outage: recover"; docs/architecture.md
// §D62-§D66), apart from Redis and sockets so that unit tests check each: what a request may
// ask for, what a recovery looks like to its partner, the ids of its deliveries, how many of
// them wait in the queue at once, and what a finished delivery counts as.

export { RECOVERY_ID_PREFIX }

export type RecoveryInclude = 'failed' | 'all'
export type RecoveryStatus = 'running' | 'done' | 'cancelled'

export const RECOVERY_INCLUDES: readonly RecoveryInclude[] = ['failed', 'all']
/** Recoveries are listed, and kept once ended, this long. */
export const RECOVERIES_SHOWN_MS = 7 * 86_400_000

/** What a partner asked for, checked: the time range (epoch ms, both ends included) and which events. */
export interface RecoveryInput {
  since: number
  until: number
  include: RecoveryInclude
}

/** A recovery as its partner sees it. */
export interface RecoveryView {
  id: string
  endpointId: string
  since: string
  until: string
  include: RecoveryInclude
  status: RecoveryStatus
  queued: number
  delivered: number
  failed: number
  createdAt: string
}

/** A time field of the body: epoch ms, or undefined with its field error. */
function timeOf(field: 'since' | 'until', value: unknown, errors: FieldError[]): number | undefined {
  const millis = typeof value === 'string' ? rfc3339Millis(value) : undefined
  if (millis === undefined) {
    errors.push({ field, code: 'INVALID_FORMAT', detail: `${field} must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.` })
  }
  return millis
}

/**
 * The body of `POST …/recover`, checked at `now`: 400 for a field it does not take; 422 with
 * one field error per bad field. `since` must lie within the events' retention (older events
 * are gone), `until` must not be in the future and not before `since`. A time between two
 * milliseconds covers the milliseconds within the range only.
 */
export function recoveryInput(body: unknown, now: number, retentionMs: number): RecoveryInput {
  const fields = bodyOf(body, ['since', 'until', 'include'])
  const errors: FieldError[] = []
  let since: number | undefined
  if (fields.since === undefined) errors.push({ field: 'since', code: 'REQUIRED', detail: 'since is required: the start of the time range to recover.' })
  else since = timeOf('since', fields.since, errors)
  let until: number | undefined = now
  if (fields.until !== undefined) until = timeOf('until', fields.until, errors)
  let include: RecoveryInclude = 'failed'
  if (fields.include !== undefined) {
    if (RECOVERY_INCLUDES.includes(fields.include as RecoveryInclude)) include = fields.include as RecoveryInclude
    else errors.push({ field: 'include', code: 'INVALID_ENUM_VALUE', detail: `include must be one of ${RECOVERY_INCLUDES.map((v) => `'${v}'`).join(', ')}${typeof fields.include === 'string' ? `, not '${quoteInput(fields.include)}'` : ''}.` })
  }
  if (since !== undefined) {
    since = Math.ceil(since)
    if (since < now - retentionMs) {
      errors.push({ field: 'since', code: 'OUT_OF_RANGE', detail: `since must be within the events' retention of ${Math.round(retentionMs / 86_400_000)} days: no earlier than ${new Date(now - retentionMs).toISOString()}.` })
    }
  }
  if (until !== undefined) {
    until = Math.floor(until)
    if (until > now) errors.push({ field: 'until', code: 'OUT_OF_RANGE', detail: 'until must not be in the future.' })
    else if (since !== undefined && until < since) errors.push({ field: 'until', code: 'OUT_OF_RANGE', detail: 'until must not be before since.' })
  }
  if (errors.length > 0) throw failed(errors)
  return { since: since as number, until: until as number, include }
}

/** 422 for a time range holding more events than one recovery may send. */
export function tooManyEvents(max: number): ApiError {
  return failed([{ field: 'since', code: 'OUT_OF_RANGE', detail: `The time range holds more than ${max} events to send, as many as one recovery may; choose a later since (or an earlier until), and recover the rest in another recovery once this one is done.` }])
}

/** 422 for a recovery asked of a disabled endpoint: it would not receive what it asks for. */
export function endpointDisabled(endpointId: string): ApiError {
  return new ApiError('VALIDATION_FAILED', `Webhook endpoint '${endpointId}' is disabled; enable it (PATCH with status 'enabled') before recovering events to it.`, {
    errors: [{ field: 'endpointId', code: 'NOT_ALLOWED', detail: 'A recovery needs an enabled endpoint.' }],
  })
}

/** 409 while another recovery of the endpoint runs. */
export function recoveryInProgress(endpointId: string, runningId: string): ApiError {
  return new ApiError('WEBHOOK_RECOVERY_IN_PROGRESS', `Webhook endpoint '${endpointId}' is running recovery '${runningId}'; wait until it is done, or cancel it, before asking for another.`)
}

export function recoveryNotFound(recoveryId: string): ApiError {
  return new ApiError('WEBHOOK_RECOVERY_NOT_FOUND', `No recovery with id '${recoveryId}' exists for this webhook endpoint.`)
}

/** An id as a path names it, in the form ids are kept in (the ULID upper-cased). */
export const canonicalId = (id: string): string => `${id.slice(0, 3)}${id.slice(3).toUpperCase()}`

/** The id of the delivery of event `ulid` by recovery `recoveryId`: the same on every instance, so queuing it twice queues it once. */
export function recoveryJobId(recoveryId: string, ulid: string): string {
  return `r.${recoveryId.slice(RECOVERY_ID_PREFIX.length)}.${ulid}`
}

/** The event's ULID in a recovery delivery's id. */
export function ulidOfRecoveryJob(jobId: string): string {
  return jobId.slice(jobId.lastIndexOf('.') + 1)
}

/**
 * How many of a recovery's deliveries are queued at once: one per lease of the endpoint. Each
 * that finishes queues the next, so they start oldest first (more would race for the leases,
 * from every instance's workers at once), and the queue's other endpoints never wait behind
 * a recovery.
 */
export function feedWindow(endpointConcurrency: number): number {
  return endpointConcurrency
}

/** What a finished recovery delivery counts as: `delivered` only when its attempt was. */
export function countedAs(result: string | undefined): 'delivered' | 'failed' {
  return result === 'delivered' ? 'delivered' : 'failed'
}

/** A recovery's stored fields (a Redis hash) as its partner sees them. */
export function recoveryView(fields: Readonly<Record<string, string>>): RecoveryView {
  const count = (name: string): number => Number(fields[name] ?? 0)
  return {
    id: fields.id as string,
    endpointId: fields.endpointId as string,
    since: new Date(count('since')).toISOString(),
    until: new Date(count('until')).toISOString(),
    include: fields.include as RecoveryInclude,
    status: fields.status as RecoveryStatus,
    queued: count('queued'),
    delivered: count('delivered'),
    failed: count('failed'),
    createdAt: new Date(count('createdAt')).toISOString(),
  }
}
