import { execFileSync } from 'node:child_process'

// The key tool, the stand-in PMS and the demo are tested as users run them: from dist/.
// A mutation run over a module's unit tests only (scripts/mutation.ts) sets GATEWAY_TESTS_SKIP_BUILD:
// none of those reads dist/, and Stryker starts its test process again after each mutant that
// timed out, so building there would cost a compilation per such mutant.
export default function setup(): void {
  if (process.env.GATEWAY_TESTS_SKIP_BUILD === '1') return
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
}
