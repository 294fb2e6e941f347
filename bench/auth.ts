import { KeyAuthenticator } from '../src/keys/authenticator.js'
import { digestKey } from '../src/keys/format.js'
import { MemoryKeyStore } from '../src/keys/store.js'

// The cost of authenticating a request whose key is in the local cache, next to what it
// cannot avoid (one SHA-256 of the key) and an empty async call, in the same run.

export interface AuthBenchResult {
  verifyHitNs: number
  sha256Ns: number
  emptyAsyncNs: number
}

async function timePerOp(iterations: number, op: () => Promise<unknown> | unknown): Promise<number> {
  for (let i = 0; i < 10_000; i += 1) await op() // warm up
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i += 1) await op()
  return Number(process.hrtime.bigint() - start) / iterations
}

export async function benchAuth(iterations = 500_000): Promise<AuthBenchResult> {
  const store = new MemoryKeyStore()
  const { key } = await store.create({ brand: 'acme', mode: 'live', properties: '*' })
  const authenticator = new KeyAuthenticator(store, { ttlMs: 3_600_000, graceMs: 0, maxEntries: 1000 })
  await authenticator.verify(key)
  const rounds: AuthBenchResult[] = []
  // Alternating rounds, so that a noisy neighbour hits all three alike.
  for (let round = 0; round < 3; round += 1) {
    rounds.push({
      verifyHitNs: await timePerOp(iterations, () => authenticator.verify(key)),
      sha256Ns: await timePerOp(iterations, () => digestKey(key)),
      emptyAsyncNs: await timePerOp(iterations, async () => undefined),
    })
  }
  const median = (pick: (r: AuthBenchResult) => number) => rounds.map(pick).sort((x, y) => x - y)[1] as number
  return { verifyHitNs: median((r) => r.verifyHitNs), sha256Ns: median((r) => r.sha256Ns), emptyAsyncNs: median((r) => r.emptyAsyncNs) }
}
