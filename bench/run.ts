import { cpus } from 'node:os'
import { benchAuth } from './auth.js'

// `npm run bench [-- auth]`: the benchmarks. Figures are ratios against references measured
// in the same run, never absolute promises: these machines are shared.

const only = process.argv[2]

console.log(`node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}`)

if (only === undefined || only === 'auth') {
  const r = await benchAuth()
  console.log('\nAuthentication on a key-cache hit (median of 3 alternating rounds):')
  console.log(`  verify(key), cache hit   ${(r.verifyHitNs / 1000).toFixed(2)} µs/op`)
  console.log(`  sha256(key) alone        ${(r.sha256Ns / 1000).toFixed(2)} µs/op`)
  console.log(`  empty async call         ${(r.emptyAsyncNs / 1000).toFixed(2)} µs/op`)
  console.log(`  verify / sha256          ${(r.verifyHitNs / r.sha256Ns).toFixed(2)}×`)
}
