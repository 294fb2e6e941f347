import { runKeyTool } from '../credentials/tool.js'

// `npm run keys -- …`: the key tool's process (src/credentials/tool.ts).
process.exitCode = await runKeyTool(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
})
