import { randomBytes } from 'node:crypto'

// Event ids (docs/architecture.md, "Events"): `evt_` and a ULID, 26 Crockford base32
// characters, the first 10 the milliseconds since 1970 and the other 16 random (80 bits). Ids
// sort as their times do; within one millisecond an instance counts the random part up
// (a monotonic ULID), so its ids of one request, and of requests in the same millisecond, keep
// the order they were made in. Ids of two instances in one millisecond are ordered by their
// random parts: unique, in no particular order.

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
const RANDOM_CHARS = 16

/** The 10 base32 characters of a time in milliseconds (most significant first). */
function encodeTime(millis: number): string {
  let out = ''
  let rest = millis
  for (let i = 0; i < 10; i += 1) {
    out = ALPHABET.charAt(rest % 32) + out
    rest = Math.floor(rest / 32)
  }
  return out
}

export interface Ulid {
  /** The 26 characters. */
  text: string
  /** Its milliseconds: the time it names. */
  millis: number
}

export class UlidFactory {
  private lastMillis = -1
  /** The random part as 16 base32 digits, least significant last. */
  private readonly random = new Uint8Array(RANDOM_CHARS)

  /**
   * The next id at `now`. A clock that went back (or an earlier `now`) keeps the last time, so
   * ids never go backwards within this instance; the id's `millis` is the time it names.
   */
  next(now: number): Ulid {
    if (now > this.lastMillis) {
      this.lastMillis = now
      const bytes = randomBytes(RANDOM_CHARS)
      for (let i = 0; i < RANDOM_CHARS; i += 1) this.random[i] = (bytes[i] as number) & 31
    } else {
      this.increment()
    }
    let text = encodeTime(this.lastMillis)
    for (let i = 0; i < RANDOM_CHARS; i += 1) text += ALPHABET.charAt(this.random[i] as number)
    return { text, millis: this.lastMillis }
  }

  /** Adds one to the random part; 2^80 ids in a millisecond would wrap, which cannot happen. */
  private increment(): void {
    for (let i = RANDOM_CHARS - 1; i >= 0; i -= 1) {
      const digit = (this.random[i] as number) + 1
      if (digit < 32) {
        this.random[i] = digit
        return
      }
      this.random[i] = 0
    }
  }
}

/** The milliseconds a ULID names (its first 10 characters, any case). */
export function ulidMillis(text: string): number {
  let millis = 0
  for (let i = 0; i < 10; i += 1) millis = millis * 32 + ALPHABET.indexOf(text.charAt(i).toUpperCase())
  return millis
}
