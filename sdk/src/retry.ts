// When the client tries again, and after how long. The answers it retries are those the API
// documents as temporary: 408, 429, 5xx but 501, and 409 IDEMPOTENCY_KEY_IN_USE (the first
// request with the key is still being processed); a connection that failed or timed out too.

/** A `Retry-After` longer than this is not waited for: the error goes to the caller. */
export const MAX_RETRY_AFTER_SECONDS = 60

/** The backoff without `Retry-After` never waits longer than this. */
export const MAX_BACKOFF_MS = 8_000

export function isRetryable(status: number, code: string | null): boolean {
  switch (status) {
    case 408: case 429: case 500: case 502: case 503: case 504:
      return true
    case 409:
      return code === 'IDEMPOTENCY_KEY_IN_USE'
    default:
      return false
  }
}

/**
 * The wait before retry number `retry` (0 for the first), in ms, or undefined when the client
 * must not wait that long. `Retry-After` is followed as given; without it, `baseMs` × 2^retry
 * with ±25 % jitter, so that clients refused together do not come back together.
 */
export function retryDelayMs(retry: number, retryAfter: number | null, baseMs: number, random: () => number = Math.random): number | undefined {
  if (retryAfter !== null) return retryAfter > MAX_RETRY_AFTER_SECONDS ? undefined : retryAfter * 1000
  return Math.min(baseMs * 2 ** retry, MAX_BACKOFF_MS) * (0.75 + 0.5 * random())
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason as Error)
      return
    }
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(signal?.reason as Error)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
