// Failures of an upstream call, by what the partner should be told (docs/architecture.md,
// "Upstream failures"). Callers branch on `kind`, never on the message; the message is for the
// log line only.

export type UpstreamFailure =
  /** Timeout, refused or reset connection, 5xx, 429, open circuit, too many calls: 503. */
  | 'unavailable'
  /** A 2xx that is not JSON or breaks the contract, a 401/403 to our token, another 4xx: 500. */
  | 'bad-response'
  /** The call was refused before it left the gateway (the gateway's fault): 500. */
  | 'not-sent'
  /** The caller's credential has its whole share of the upstream's calls in flight: 429. */
  | 'share-full'

export type UpstreamOutcome = 'success' | 'not_found' | 'timeout' | 'connection_error' | 'server_error' | 'throttled'
  | 'bad_response' | 'circuit_open' | 'overloaded'
  /** A declared service answered a problem+json 4xx, passed on to the partner. */
  | 'client_error'
  | 'not_sent'
  | 'share_full'

export class UpstreamError extends Error {
  constructor(
    readonly kind: UpstreamFailure,
    readonly outcome: UpstreamOutcome,
    message: string,
    /** Seconds the caller may wait before retrying, when the upstream or the breaker says. */
    readonly retryAfter?: number,
  ) {
    super(message)
    this.name = 'UpstreamError'
  }
}

/** A PMS record that breaks the PMS contract: never patched up, never passed on. */
export class ContractError extends Error {
  constructor(readonly upstream: string, readonly record: string, readonly field: string, detail: string) {
    super(`${upstream} record ${record}: field ${field} ${detail}`)
    this.name = 'ContractError'
  }
}
