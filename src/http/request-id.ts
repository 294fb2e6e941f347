import { randomHex } from './random-hex.js'

// A request's id (the Service-Request-Id header and meta.requestId): `req_`, the epoch ms it
// was made at as 12 hex digits, and 20 random hex digits (80 bits: unique across instances and
// restarts within a millisecond). Opaque to partners. The time in it is the request's arrival:
// the request log keeps the entry under it and finds the entry of an id by it, without an index
// of every id (docs/architecture.md, "The request log").

const OUR_ID = /^req_[0-9a-f]{32}$/

/** A time's 12 hex digits, as an id holds them. */
function timeDigits(ms: number): string {
  return ms.toString(16).padStart(12, '0')
}

/** The millisecond of the last id made, and its digits: an instance makes many ids a millisecond. */
let lastMs = -1
let lastMsDigits = ''

/** A new request id. Fastify's ids are counters; ours are unique across instances and restarts. */
export function generateRequestId(): string {
  const now = Date.now()
  if (now !== lastMs) {
    lastMs = now
    lastMsDigits = timeDigits(now)
  }
  return `req_${lastMsDigits}${randomHex(10)}`
}

/** The request id made at `ms` whose random part is `random` (20 hex digits): what generateRequestId makes, for tests and benches. */
export function requestIdAt(ms: number, random: string): string {
  return `req_${timeDigits(ms)}${random}`
}

/**
 * The epoch ms `id` was made at; null when it is not an id of ours. An id made before the
 * time was in it (before December 2026: 32 random hex digits) reads as a time at random, at
 * which no entry of it is kept.
 */
export function arrivalOfRequestId(id: string): number | null {
  return OUR_ID.test(id) ? Number.parseInt(id.slice(4, 16), 16) : null
}
