import pino from 'pino'
import { ConfigError, loadConfig } from '../config.js'
import { createRedis, redisTarget } from '../redis.js'
import { EndpointStore } from './endpoints.js'
import { resealAll } from './reseal.js'
import { SecretBox } from './secrets.js'

// `npm run webhooks -- reseal`: seals every webhook endpoint's signing secret under
// WEBHOOKS_SECRET_KEY, opening those sealed under WEBHOOKS_SECRET_KEY_PREVIOUS; the last step
// of a key change before the previous key is dropped (docs/operations.md, "Changing
// WEBHOOKS_SECRET_KEY"). Exit 0 when every secret is sealed under the current key, 1 when
// some no key opens (listed) or Redis failed, 2 for a wrong command or configuration.

export interface ToolOutput {
  out: (line: string) => void
  err: (line: string) => void
}

const USAGE = 'usage: npm run webhooks -- reseal'

export async function runWebhookTool(argv: readonly string[], env: NodeJS.ProcessEnv, io: ToolOutput): Promise<number> {
  if (argv.length !== 1 || argv[0] !== 'reseal') {
    io.err(USAGE)
    return 2
  }
  let config
  try {
    config = loadConfig(env)
  } catch (error) {
    io.err(error instanceof ConfigError ? error.message : String(error))
    return 2
  }
  if (config.webhooksSecretKey === undefined) {
    io.err('environment WEBHOOKS_SECRET_KEY: required (the key to seal under), with WEBHOOKS_SECRET_KEY_PREVIOUS naming the keys to open with')
    return 2
  }
  const redis = createRedis({ ...redisTarget(config), name: 'webhooks-tool', logger: pino({ level: 'silent' }), role: 'tool' })
  try {
    await redis.connect()
    const report = await resealAll(new EndpointStore(redis, config.redisPrefix), new SecretBox(config.webhooksSecretKey, config.webhooksPreviousKeys))
    io.out(`sealed again under WEBHOOKS_SECRET_KEY: ${report.resealed} endpoint(s); already under it: ${report.current}`)
    if (report.unreadable.length === 0) return 0
    io.err(`no configured key opens a signing secret of ${report.unreadable.length} endpoint(s): ${report.unreadable.join(', ')}; add the key they were sealed under to WEBHOOKS_SECRET_KEY_PREVIOUS, or have their partners rotate their secrets`)
    return 1
  } catch (error) {
    io.err(`Redis failed: ${(error as Error).message}`)
    return 1
  } finally {
    redis.disconnect()
  }
}
