import { runKeyTool } from './tool.js'

process.exitCode = await runKeyTool(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
})
