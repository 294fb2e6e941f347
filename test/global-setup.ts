import { execFileSync } from 'node:child_process'

// The key tool, the stand-in PMS and the demo are tested as users run them: from dist/.
export default function setup(): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
}
