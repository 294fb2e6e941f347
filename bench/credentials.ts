import pino from 'pino'
import { MemoryUsageStore, UsageRecorder } from '../src/credentials/usage.js'
import { compileAllowList } from '../src/keys/addresses.js'
import type { Principal } from '../src/keys/principal.js'

// What credentials over their life add to a request, in process, below what the end-to-end
// rows can tell apart: counting an answer's usage, and checking the client address against an
// allow-list of 32 entries, when the address is the one asked about last (a partner calls from
// one address, or a few) and when it is a new one every time (the worst case: a parse and a
// comparison with each entry).

export interface CredentialsBenchResult {
  countUsageNs: number
  allowListSameNs: number
  allowListChangingNs: number
}

function timePerOp(iterations: number, op: (i: number) => unknown): number {
  for (let i = 0; i < 10_000; i += 1) op(i) // warm up
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i += 1) op(i)
  return Number(process.hrtime.bigint() - start) / iterations
}

export function benchCredentials(iterations = 1_000_000): CredentialsBenchResult {
  const recorder = new UsageRecorder(new MemoryUsageStore(), { flushMs: 3_600_000, retentionMs: 86_400_000, logger: pino({ level: 'silent' }) })
  const principal: Principal = { keyId: 'key_bench000000000000', kind: 'apiKey', brand: 'acme', mode: 'live', properties: 'all', rateLimit: null, scopes: 'all' }
  const entries = [...Array.from({ length: 16 }, (_, i) => `10.${i}.0.0/16`), ...Array.from({ length: 15 }, (_, i) => `2001:db8:${i.toString(16)}::/48`), '127.0.0.1']
  const allowed = compileAllowList(entries)
  // More addresses than a matcher remembers, in turn: each one asked about anew.
  const addresses = Array.from({ length: 1024 }, (_, i) => `192.0.${i >> 8}.${i & 255}`)
  const rounds: CredentialsBenchResult[] = []
  for (let round = 0; round < 3; round += 1) {
    rounds.push({
      countUsageNs: timePerOp(iterations, () => recorder.count(principal, 'GET /v1/properties/{propertyId}', 200)),
      allowListSameNs: timePerOp(iterations, () => allowed('127.0.0.1')),
      allowListChangingNs: timePerOp(iterations, (i) => allowed(addresses[i & 1023] as string)),
    })
  }
  const median = (pick: (r: CredentialsBenchResult) => number) => rounds.map(pick).sort((x, y) => x - y)[1] as number
  return { countUsageNs: median((r) => r.countUsageNs), allowListSameNs: median((r) => r.allowListSameNs), allowListChangingNs: median((r) => r.allowListChangingNs) }
}
