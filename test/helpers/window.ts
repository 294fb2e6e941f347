// The seconds a partner is told to wait, worked out from the test's own clock: quota windows
// are fixed, aligned on multiples of their length since the epoch (docs/architecture.md,
// "Quotas"), so a test that reads the clock before and after a request knows the range the
// answer must fall in, however long the request took on a busy machine.

/** Whole seconds from `atMs` to the end of its window of `windowSeconds` (at least 1). */
export function secondsLeftAt(windowSeconds: number, atMs: number): number {
  const windowMs = windowSeconds * 1000
  const end = (Math.floor(atMs / windowMs) + 1) * windowMs
  return Math.max(1, Math.ceil((end - atMs) / 1000))
}

export interface Timed<T> {
  answer: T
  /** Every value the seconds left may have had while the request was answered, fewest first. */
  secondsLeft: number[]
}

/** Runs `call` and gives the seconds left in the window at some instant while it ran. */
export async function timed<T>(windowSeconds: number, call: () => Promise<T>): Promise<Timed<T>> {
  const before = Date.now()
  const answer = await call()
  const after = Date.now()
  const sameWindow = Math.floor(before / (windowSeconds * 1000)) === Math.floor(after / (windowSeconds * 1000))
  // Across a window's end (rare with long windows) any value of either window may be right.
  const [low, high] = sameWindow ? [secondsLeftAt(windowSeconds, after), secondsLeftAt(windowSeconds, before)] : [1, windowSeconds]
  return { answer, secondsLeft: Array.from({ length: high - low + 1 }, (_, i) => low + i) }
}

/** A header value that is one of `values`. */
export function oneOf(values: number[]): RegExp {
  return new RegExp(`^(?:${values.join('|')})$`)
}

/**
 * Every whole number of seconds (at least 1) a wait may round up to when the test knows only
 * that it was between `fewestMs` and `mostMs` long.
 */
export function secondsBetween(fewestMs: number, mostMs: number): number[] {
  const low = Math.max(1, Math.ceil(fewestMs / 1000))
  const high = Math.max(1, Math.ceil(mostMs / 1000))
  return Array.from({ length: high - low + 1 }, (_, i) => low + i)
}
