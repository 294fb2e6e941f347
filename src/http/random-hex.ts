import { randomFillSync } from 'node:crypto'

// Random hex for the ids every request gets (its request id, a new trace's id, an upstream
// call's span id), drawn from a pool of random bytes filled 4 KiB at a time. randomUUID draws
// on a pool too, but its text then had to lose its dashes: 0.65 µs a request id against 0.21
// (docs/performance.md, "Ids from a pool of random bytes").

const POOL_BYTES = 4096
const pool = Buffer.allocUnsafeSlow(POOL_BYTES)
let offset = POOL_BYTES

/** `bytes` random bytes (at most the pool's 4,096) as lowercase hex, twice as many characters. */
export function randomHex(bytes: number): string {
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool)
    offset = 0
  }
  const hex = pool.toString('hex', offset, offset + bytes)
  offset += bytes
  return hex
}
