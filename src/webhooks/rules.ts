import type { Viewer } from '../events/types.js'
import type { GrantRecord } from '../keys/grants.js'
import type { KeyRecord } from '../keys/store.js'
import type { AttemptOutcome, EndpointRecord } from './endpoints.js'

// The rules of deliveries (docs/architecture.md, "Webhooks"), apart from Redis and sockets so
// that unit tests check each: the retry schedule, what an answer makes of an attempt, who
// receives, what an attempt's bookkeeping may change, how long a delivery may sleep and live,
// and the worker timings that bound the time a dead instance's attempt waits.

/** The delay before retry `attemptsMade` (1 after the first failure): the schedule's entry, ±10 %. */
export function retryDelayMs(schedule: readonly number[], attemptsMade: number, random: () => number = Math.random): number {
  const seconds = schedule[Math.min(attemptsMade, schedule.length) - 1] ?? 0
  return Math.round(seconds * 1000 * (0.9 + random() * 0.2))
}

/** Attempts a delivery may have: the first and one per entry of the schedule. */
export const attemptsOf = (schedule: readonly number[]): number => schedule.length + 1

/** What an endpoint's answer makes of an attempt: a 2xx delivered, 410 gone, anything else (a 3xx too) failed. */
export function outcomeOfStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return 'delivered'
  return status === 410 ? 'gone' : 'failed'
}

/**
 * BullMQ's lock of an attempt and its stalled-job check, from `events.deliveryLockSeconds`. A
 * live worker renews its lock every half lock; once its instance dies the lock lapses within
 * one lock, and the next check but one of another instance takes the job: the attempt is made
 * again within 1.5 locks of the death (30 s with the default 20 s, within the
 * `deliveryTimeoutMs` + 30 s that docs/partners.md promises).
 */
export function workerTimings(lockSeconds: number): { lockDuration: number; stalledInterval: number } {
  const lockDuration = Math.round(lockSeconds * 1000)
  return { lockDuration, stalledInterval: Math.max(1, Math.round(lockDuration / 2)) }
}

/** A lease outlives its attempt's timeout by this much, so that only a dead instance's lease lapses. */
export const LEASE_GRACE_MS = 30_000

/**
 * How long a delivery parked behind a busy endpoint sleeps before it wakes by itself. It is
 * woken as soon as a lease is handed to it; this is the safety net for a wake-up lost with the
 * instance that should have sent it. Long, so that 1,000 sleeping deliveries cost Redis a few
 * commands a second (docs/performance.md, "Webhooks"); spread, so that they do not wake together.
 */
export const PARK_SLEEP_MS = 10 * 60_000

export function parkSleepMs(random: () => number = Math.random): number {
  return Math.round(PARK_SLEEP_MS * (1 + random() * 0.5))
}

/** The longest a delivery stays in the queue: every retry at its longest, every attempt timing out, and a day more. */
export function deliveryLifetimeMs(schedule: readonly number[], timeoutMs: number): number {
  const retries = schedule.reduce((sum, seconds) => sum + seconds * 1100, 0)
  return Math.round(retries + attemptsOf(schedule) * (timeoutMs + LEASE_GRACE_MS) + 86_400_000)
}

/** Whether the attempt that just failed was the delivery's last (no retry follows). */
export function isLastAttempt(attemptsMade: number, attempts: number): boolean {
  return attemptsMade + 1 >= attempts
}

/**
 * What the credential that owns an endpoint sees now (docs/architecture.md §D36): nothing
 * (undefined) when it is gone (revoked), suspended, or expired; else its brand, mode,
 * properties and scopes.
 */
export function viewerOfCredential(record: KeyRecord | GrantRecord | null, now: number): Viewer | undefined {
  if (record === null || record.status !== 'active') return undefined
  if ('expiresAt' in record && record.expiresAt !== null && Date.parse(record.expiresAt) <= now) return undefined
  return {
    brand: record.brand, mode: record.mode,
    properties: record.properties === '*' ? 'all' : new Set(record.properties),
    scopes: record.scopes === '*' ? 'all' : new Set(record.scopes),
  }
}

/** The attempt whose bookkeeping is made: to which URL, when it began, when it ended. */
export interface AttemptFacts {
  url: string
  started: number
  ended: number
}

/**
 * Whether the endpoint is still the one the attempt was made to: enabled, at the same URL, and
 * not changed by its partner since the attempt began. An attempt's verdict applies to nothing
 * else: a partner's change made meanwhile is never undone (docs/architecture.md §D38).
 */
export function unchangedSince(record: EndpointRecord, attempt: AttemptFacts): boolean {
  return record.status === 'enabled' && record.url === attempt.url && Date.parse(record.updatedAt) <= attempt.started
}

/** The bookkeeping of a success: failing no more. Undefined: nothing to write. */
export function afterSuccess(record: EndpointRecord): EndpointRecord | undefined {
  return record.failingSince === null ? undefined : { ...record, failingSince: null }
}

/** The bookkeeping of a 410: the endpoint disabled (`gone`), if it is still the one answered. */
export function afterGone(record: EndpointRecord, attempt: AttemptFacts): EndpointRecord | undefined {
  if (!unchangedSince(record, attempt)) return undefined
  return { ...record, status: 'disabled', disabledReason: 'gone', updatedAt: new Date(attempt.ended).toISOString() }
}

/**
 * The bookkeeping of a failed attempt: failing since the first failure after the last success;
 * disabled (`failing`) once that is `disableAfterMs` before this attempt began. Nothing when the
 * endpoint changed meanwhile.
 */
export function afterFailure(record: EndpointRecord, attempt: AttemptFacts, disableAfterMs: number): EndpointRecord | undefined {
  if (!unchangedSince(record, attempt)) return undefined
  const failingSince = record.failingSince ?? attempt.started
  if (attempt.started - failingSince >= disableAfterMs) {
    return { ...record, failingSince, status: 'disabled', disabledReason: 'failing', updatedAt: new Date(attempt.ended).toISOString() }
  }
  return record.failingSince === null ? { ...record, failingSince } : undefined
}
