import closeWithGrace from 'close-with-grace'
import { ConfigError, loadConfig } from './config.js'
import { createGateway } from './gateway.js'
import { createLogger, flushLogger } from './logger.js'

// The process: read the config, build the gateway, listen, shut down gracefully.

let config
try {
  config = loadConfig(process.env, { requirePms: true })
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`)
  process.exit(1)
}

const logger = createLogger({ level: config.logLevel })
const gateway = await createGateway({ config, logger })
const { app } = gateway

closeWithGrace({ delay: config.shutdown.timeoutMs }, async ({ signal, err }) => {
  if (err !== undefined) logger.error({ err }, 'shutting down after an error')
  else logger.info({ signal }, 'shutting down')
  await app.close()
  flushLogger(logger)
})

await app.listen({ port: config.port, host: config.host })
logger.info({ url: `http://${config.host}:${config.port}` }, 'gateway listening')
