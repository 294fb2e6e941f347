import { once } from 'node:events'
import { MockPms } from '../mocks/pms/server.js'
import { loadConfig } from '../src/config.js'
import { createGateway } from '../src/gateway.js'
import { createLogger, flushLogger } from '../src/logger.js'
import { MemoryKeyStore, type KeyStore } from '../src/keys/store.js'
import { redactUrl } from '../src/keys/tool.js'
import { redisAnswers } from '../src/redis.js'

// `npm run demo`: the stand-in PMS, the gateway and a demo key in one process, for a
// newcomer with only Node and npm. It uses Redis at REDIS_URL when one answers; otherwise
// it says so and keeps keys in memory (the demo only: `npm start` never falls back).

const DEMO_TOKEN = 'demo-pms-token'

async function startPms(): Promise<MockPms> {
  const pms = new MockPms({ token: DEMO_TOKEN, baseLatencyMs: 5 })
  try {
    return await pms.listen(Number(process.env.MOCK_PMS_PORT ?? 4010))
  } catch {
    // The usual port is taken (another demo?): any free one will do.
    return new MockPms({ token: DEMO_TOKEN, baseLatencyMs: 5 }).listen(0)
  }
}

const pms = await startPms()
const env = { ...process.env, PMS_URL: pms.url, PMS_TOKEN: DEMO_TOKEN, PMS_SANDBOX_URL: undefined, PMS_SANDBOX_TOKEN: undefined }
const config = loadConfig(env)
const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'warn' })

let keyStore: KeyStore | undefined
const say = (line = ''): void => void process.stdout.write(`${line}\n`)
if (await redisAnswers(config.redisUrl)) {
  say(`Redis at ${redactUrl(config.redisUrl)} answers: keys and rate limits live there.`)
} else {
  say(`No Redis answers at ${redactUrl(config.redisUrl)}: this demo keeps its key and rate limits in memory.`)
  say('(Only the demo does that; `npm start` needs Redis.)')
  keyStore = new MemoryKeyStore()
}

const gateway = await createGateway({ config, logger, ...(keyStore === undefined ? {} : { keyStore }) })
// The gateway's Redis commands fail fast while disconnected; the demo key needs it up.
if (gateway.redis !== undefined && gateway.redis.status !== 'ready') await once(gateway.redis, 'ready')
await gateway.admin.listen({ port: config.adminPort, host: config.adminHost })
await gateway.app.listen({ port: config.port, host: config.host })
const port = (gateway.app.server.address() as { port: number }).port
const adminPort = (gateway.admin.server.address() as { port: number }).port

const { key, record } = await gateway.keyStore.create({ brand: 'acme', mode: 'live', properties: '*', name: 'npm run demo' })
const someId = String(pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)
const base = `http://localhost:${port}`
const auth = `-H 'Authorization: Bearer ${key}' -H 'User-Agent: demo-client/1.0'`

say()
say(`Partner API:  ${base}   (brand "acme"; its hosts include localhost)`)
say(`Admin:        http://${config.adminHost}:${adminPort}/status and /metrics`)
say(`Stand-in PMS: ${pms.url}`)
say(`Demo key:     ${record.id}, all properties of acme`)
say()
say('Try:')
say(`curl -s ${auth} '${base}/v1/properties?perPage=3'`)
say(`curl -s ${auth} '${base}/v1/properties/${someId}'`)
say(`curl -s ${auth} '${base}/v1/properties?per_page=3'`)
say(`curl -s '${base}/v1/health'`)
say(`curl -s 'http://${config.adminHost}:${adminPort}/status'`)
say()
say('Ctrl-C stops it.')

const stop = async (): Promise<void> => {
  // The demo key is the demo's alone: it goes with it.
  await gateway.keyStore.revoke(record.id).catch(() => undefined)
  await gateway.app.close()
  await pms.close()
  flushLogger(logger)
  process.exit(0)
}
process.once('SIGINT', () => void stop())
process.once('SIGTERM', () => void stop())
