import { runWebhookTool } from './tool.js'

// `npm run webhooks -- …`: the webhook tool's process (src/webhooks/tool.ts).
process.exitCode = await runWebhookTool(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
})
