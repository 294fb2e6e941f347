import closeWithGrace from 'close-with-grace'
import { readFileSync } from 'node:fs'
import { ConfigError, isLoopbackOrTls, loadConfig } from './config.js'
import { createGateway } from './gateway.js'
import { createLogger, flushLogger } from './logger.js'

// The process: read the config, build the gateway, listen on the public and admin ports,
// and shut down gracefully (docs/operations.md, "Shutdown").

const read = (): ReturnType<typeof loadConfig> => loadConfig(process.env, { requirePms: true, requireTokens: true })
let config
let text = ''
try {
  config = read()
  // What the hash in force is taken of (docs/operations.md, "Changing the configuration").
  text = readFileSync(config.configFile, 'utf8')
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : String(error)}\n`)
  process.exit(1)
}

const logger = createLogger({ level: config.logLevel })
for (const [variable, target] of [['PMS_URL', config.pms], ['PMS_SANDBOX_URL', config.pmsSandbox]] as const) {
  if (target !== undefined && !isLoopbackOrTls(target.url)) {
    // The PMS token would cross the network in clear.
    logger.warn({ variable, host: new URL(target.url).hostname }, `${variable} uses plain http: to a host that is not loopback; the PMS token travels unencrypted`)
  }
}
for (const issuer of config.oauth.issuers) {
  if (new URL(issuer.jwksUri).protocol === 'http:') {
    // Whoever can change the keys on the way can sign tokens this gateway accepts.
    logger.warn({ issuer: issuer.issuer, jwksUri: issuer.jwksUri }, 'the JWKS of a token issuer is fetched over plain http:; anyone on the path could swap its keys')
  }
}
for (const publisher of config.eventPublishers) {
  // Not a start error: a publisher may be declared before its service is deployed.
  if (publisher.token === undefined) {
    logger.warn({ publisher: publisher.name, variable: publisher.tokenEnv }, `${publisher.tokenEnv} is unset: every event publisher '${publisher.name}' sends is refused 401`)
  }
}
// Flags for tests and the demo only (docs/operations.md, "Webhooks"): say so at every start.
if (config.events.allowPrivateTargets) logger.warn('events.allowPrivateTargets is set: webhooks may be delivered to loopback and internal addresses; for tests and the demo only')
if (config.events.allowHttp) logger.warn('events.allowHttp is set: webhook endpoints may use plain http:; for tests and the demo only')
if (config.tracing !== undefined) {
  // The collector's host only: its URL or headers may hold a credential.
  const { url, protocol, sampler, ratio } = config.tracing
  logger.info({ collector: new URL(url).host, protocol, sampler, ratio }, 'exporting traces')
}
const gateway = await createGateway({ config, logger, reload: { load: read, text } })
const { app, admin, health } = gateway
const { drainMs, timeoutMs } = config.shutdown

// On SIGTERM or SIGINT: health turns unhealthy at once; requests are still served for
// drainMs while load balancers take the instance out; then the listener closes, in-flight
// requests finish, Redis and the PMS pools close, and the process exits 0. Past timeoutMs,
// or on a second signal, it exits at once (with 1).
// SIGHUP reloads the config file (docs/operations.md, "Changing the configuration"); it never stops the process.
process.on('SIGHUP', () => void gateway.reloader.reload('SIGHUP'))
closeWithGrace({ delay: timeoutMs, skip: ['SIGHUP'] }, async ({ signal, err }) => {
  health.draining = true
  if (err !== undefined) logger.error({ err }, 'shutting down after an error')
  else logger.info({ signal, drainMs }, 'draining')
  if (err === undefined) await new Promise((resolve) => setTimeout(resolve, drainMs))
  await app.close()
  logger.info('stopped')
  flushLogger(logger)
})

await admin.listen({ port: config.adminPort, host: config.adminHost })
// EVENTS_WORKER=only: a delivery instance, no public port.
if (config.eventsWorker === 'only') {
  logger.info({ admin: `http://${config.adminHost}:${config.adminPort}` }, 'delivering webhooks only (EVENTS_WORKER=only): no public port')
} else {
  await app.listen({ port: config.port, host: config.host })
  logger.info({ url: `http://${config.host}:${config.port}`, admin: `http://${config.adminHost}:${config.adminPort}` }, 'gateway listening')
}
