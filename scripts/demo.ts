import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { MockIdp } from '../mocks/idp/server.js'
import { MockWebhookReceiver } from '../mocks/webhook-receiver/server.js'
import { MockPms } from '../mocks/pms/server.js'
import { generateGuests } from '../mocks/service/data.js'
import { MockService } from '../mocks/service/server.js'
import { loadConfig } from '../src/config.js'
import { createGateway } from '../src/gateway.js'
import { createLogger, flushLogger } from '../src/logger.js'
import { GrantExistsError } from '../src/keys/grants.js'
import { MemoryKeyStore, type KeyStore } from '../src/keys/store.js'
import { redactUrl } from '../src/credentials/tool.js'
import { redisAnswers } from '../src/redis.js'
import { DEVELOPMENT_KEY } from '../src/webhooks/secrets.js'
import { serveDocs } from './docs-server.js'

// `npm run demo`: the stand-in PMS and its sandbox, the stand-in service behind the declared
// routes of config/default.json (guests, rooms) and its sandbox, the stand-in identity
// provider with a registered demo client, the gateway and a demo key, in one process, for a
// newcomer with only Node and npm. The stand-ins publish what changes to the gateway's ingest
// endpoint, each as the publisher config/default.json names, so a change becomes an event. It uses Redis at REDIS_URL when one answers; otherwise it
// says so and keeps keys and grants in memory (the demo only: `npm start` never falls back).

const DEMO_TOKEN = 'demo-pms-token'
const SERVICE_TOKEN = 'demo-service-token'
const SANDBOX_SEED = 99
// The demo key lives in a namespace of its own and expires: a demo killed without its
// Ctrl-C cleanup leaves no key a real gateway would take, and none that stays valid.
const DEMO_KEY_LIFETIME_MS = 8 * 60 * 60 * 1000
const DEMO_CLIENT = 'demo-partner'
// A fresh secret each run: only this demo's client can get tokens from its identity provider.
const DEMO_CLIENT_SECRET = randomBytes(12).toString('hex')
// The publishers' tokens (config/default.json, events.publishers), fresh each run too.
const PUBLISHERS = {
  pms: { variable: 'EVENTS_PMS_TOKEN', token: randomBytes(16).toString('hex') },
  'pms-sandbox': { variable: 'EVENTS_PMS_SANDBOX_TOKEN', token: randomBytes(16).toString('hex') },
  bookings: { variable: 'EVENTS_BOOKINGS_TOKEN', token: randomBytes(16).toString('hex') },
  'bookings-sandbox': { variable: 'EVENTS_BOOKINGS_SANDBOX_TOKEN', token: randomBytes(16).toString('hex') },
} as const

/** Listens on `port`, or on any free port when it is taken (another demo?). */
async function listenOn<T extends { listen(port: number): Promise<T> }>(make: () => T, port: number): Promise<T> {
  try {
    return await make().listen(port)
  } catch {
    return make().listen(0)
  }
}

const pms = await listenOn(() => new MockPms({ token: DEMO_TOKEN, baseLatencyMs: 5 }), Number(process.env.MOCK_PMS_PORT ?? 4010))
const pmsSandbox = await listenOn(() => new MockPms({ token: DEMO_TOKEN, seed: SANDBOX_SEED, baseLatencyMs: 5 }), 0)
const servicePort = Number(process.env.MOCK_SERVICE_PORT ?? 4020)
const service = await listenOn(() => new MockService({ token: SERVICE_TOKEN, baseLatencyMs: 5 }), servicePort)
const serviceSandbox = await listenOn(() => new MockService({ token: SERVICE_TOKEN, seed: SANDBOX_SEED, baseLatencyMs: 5 }), servicePort === 0 ? 0 : servicePort + 1)
const idp = await listenOn(() => new MockIdp({ clients: [{ clientId: DEMO_CLIENT, secret: DEMO_CLIENT_SECRET }] }), Number(process.env.MOCK_IDP_PORT ?? 4030))
const env = {
  ...process.env,
  OAUTH_ISSUER: idp.issuer, OAUTH_JWKS_URI: idp.jwksUri, OAUTH_AUDIENCE: 'partner-api', OAUTH_TOKEN_URL: idp.tokenUrl,
  PMS_URL: pms.url, PMS_TOKEN: DEMO_TOKEN, PMS_SANDBOX_URL: pmsSandbox.url, PMS_SANDBOX_TOKEN: DEMO_TOKEN,
  UPSTREAM_BOOKINGS_URL: service.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN,
  UPSTREAM_BOOKINGS_SANDBOX_URL: serviceSandbox.url, UPSTREAM_BOOKINGS_SANDBOX_TOKEN: SERVICE_TOKEN,
  REDIS_PREFIX: `${process.env.REDIS_PREFIX ?? 'gw:'}demo:`,
  // The demo's own key, fixed so that a demo endpoint still signs after a restart; `npm start` needs one of yours.
  WEBHOOKS_SECRET_KEY: process.env.WEBHOOKS_SECRET_KEY ?? DEVELOPMENT_KEY,
  ...Object.fromEntries(Object.values(PUBLISHERS).map((p) => [p.variable, p.token])),
}
const config = loadConfig(env, { requireTokens: true })
// The demo's partner endpoint is the stand-in receiver on this machine, over http: flags for
// tests and the demo only (docs/operations.md, "Webhooks").
config.events = { ...config.events, allowHttp: true, allowPrivateTargets: true }
const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'warn' })
// The documentation site, so that every problem's `type` link opens in a browser.
const docs = await serveDocs(config, { port: Number(process.env.DOCS_PORT ?? 4080) })
config.docsUrl = docs.url

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
// Each stand-in publishes as its publisher, to the admin port's ingest endpoint.
const ingest = `http://${config.adminHost === '0.0.0.0' ? '127.0.0.1' : config.adminHost}:${adminPort}/events`
for (const [stand, source] of [[pms, 'pms'], [pmsSandbox, 'pms-sandbox'], [service, 'bookings'], [serviceSandbox, 'bookings-sandbox']] as const) {
  stand.events.publishTo({ url: ingest, token: PUBLISHERS[source].token, source })
}

const { key, record } = await gateway.keyStore.create({
  brand: 'acme', mode: 'live', properties: '*', name: 'npm run demo', expiresAt: new Date(Date.now() + DEMO_KEY_LIFETIME_MS).toISOString(),
})
// A test key beside it: the same calls, answered by the sandboxes (docs/architecture.md, "Test
// mode").
const test = await gateway.keyStore.create({
  brand: 'acme', mode: 'test', properties: '*', name: 'npm run demo (test)', expiresAt: new Date(Date.now() + DEMO_KEY_LIFETIME_MS).toISOString(),
})
// The demo client's grant: every scope of acme's properties; a token asks for the ones it needs.
const registerClient = async (): Promise<string> => {
  const grant = { issuer: idp.issuer, clientId: DEMO_CLIENT, brand: 'acme', mode: 'live', properties: '*', scopes: '*', name: 'npm run demo' } as const
  try {
    return (await gateway.keyStore.createGrant(grant)).id
  } catch (error) {
    // A demo stopped without its Ctrl-C cleanup left its grant behind: replaced.
    if (!(error instanceof GrantExistsError) || error.existingId === null) throw error
    await gateway.keyStore.revokeGrant(error.existingId)
    return (await gateway.keyStore.createGrant(grant)).id
  }
}
const grantId = await registerClient()
await gateway.tokens.ready(5000)
// Webhooks (with Redis: the queue lives there): an endpoint of the demo key at the stand-in
// receiver, which verifies each delivery's signature and prints it.
let receiver: MockWebhookReceiver | undefined
let endpointId: string | undefined
if (gateway.deliveries !== undefined) {
  receiver = await listenOn(() => new MockWebhookReceiver([], (line) => say(`[receiver] ${line}`)), Number(process.env.MOCK_WEBHOOK_PORT ?? 4040))
  const created = await fetch(`http://127.0.0.1:${port}/v1/webhook-endpoints`, {
    method: 'POST',
    headers: { host: 'localhost', authorization: `Bearer ${key}`, 'user-agent': 'demo-client/1.0', 'content-type': 'application/json' },
    body: JSON.stringify({ url: `${receiver.url}/webhooks`, eventTypes: ['property.updated', 'guest.created'], description: 'npm run demo' }),
  })
  const endpoint = (await created.json() as { data: { id: string; secret: string } }).data
  receiver.addSecret(endpoint.secret)
  endpointId = endpoint.id
}
// The demo key's portal (with Redis: its sessions live there): a link with every capability,
// at this demo's own address rather than the brand's portal origin, which the demo does not serve.
let portalLink: string | undefined
if (gateway.portal !== undefined) {
  const link = await gateway.portal.createLink(record.id, { capabilities: ['manage_webhooks', 'replay', 'roll_credential'], label: 'npm run demo' }, 'npm run demo')
  portalLink = `http://localhost:${port}/portal/enter${new URL(link.url).hash}`
}
const someId = String(pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)
const someGuest = generateGuests('acme')[0]?.id as string
const base = `http://localhost:${port}`
const auth = `-H 'Authorization: Bearer ${key}' -H 'User-Agent: demo-client/1.0'`
const testAuth = `-H 'Authorization: Bearer ${test.key}' -H 'User-Agent: demo-client/1.0'`
const someSandboxId = String(pmsSandbox.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)

say()
say(`Partner API:  ${base}   (brand "acme"; its hosts include localhost)`)
say(`Admin:        http://${config.adminHost}:${adminPort}/status and /metrics`)
say(`Stand-in PMS: ${pms.url} (sandbox ${pmsSandbox.url})`)
say(`Stand-in service behind /v1/guests and /v1/rooms: ${service.url} (sandbox ${serviceSandbox.url})`)
say(`API docs:     ${docs.url}/   (the reference; error pages under ${docs.url}/errors/)`)
say(`Demo key:     ${record.id}, all properties of acme, valid until ${String(record.expiresAt)}`)
say(`Test key:     ${test.record.id}, all properties of acme in the sandboxes, valid until ${String(test.record.expiresAt)}`)
say(`Identity provider (stand-in): ${idp.issuer}; client "${DEMO_CLIENT}" registered as ${grantId}, all properties of acme`)
say()
say('Try:')
say(`curl -s ${auth} '${base}/v1/properties?perPage=3'`)
say(`curl -s ${auth} '${base}/v1/properties/${someId}'`)
say(`curl -s ${auth} -H 'Service-Property-Id: ${someId}' '${base}/v1/rooms?perPage=3'`)
say(`curl -s ${auth} '${base}/v1/guests/${someGuest}?with=messages,reservations'`)
say(`curl -s ${auth} '${base}/v1/properties?per_page=3'`)
say(`curl -s '${base}/v1/health'`)
say(`curl -s 'http://${config.adminHost}:${adminPort}/status'`)
say()
say('With the test key, the same calls reach the sandboxes (their own properties, rooms and guests):')
say(`curl -s ${testAuth} '${base}/v1/properties?perPage=2'`)
say(`curl -s ${testAuth} -H 'Service-Property-Id: ${someSandboxId}' '${base}/v1/rooms?perPage=2'`)
say()
say('With an OAuth 2.0 access token instead of the key: get one (client credentials), then call with it:')
const tokenCall = `curl -s -u '${DEMO_CLIENT}:${DEMO_CLIENT_SECRET}' -d grant_type=client_credentials -d scope=properties:read '${idp.tokenUrl}'`
say(tokenCall)
say(`TOKEN=$(${tokenCall} | sed -E 's/.*"access_token":"([^"]+)".*/\\1/')`)
say(`curl -s -H "Authorization: Bearer $TOKEN" -H 'User-Agent: demo-client/1.0' '${base}/v1/properties?perPage=3'`)
say()
say('Events: a change becomes an event a partner reads. Change a hotel in the stand-in PMS (it publishes com.example.pms.hotel.changed to the gateway), then read the events:')
say(`curl -s -X PATCH -H 'Content-Type: application/json' -d '{"display_name":"Acme Demo Renamed"}' '${pms.url}/__mock/hotels/${someId}'`)
say(`curl -s ${auth} '${base}/v1/events?type=property.updated'`)
say('A guest created through the API is an event too (guest.created, from the stand-in service):')
say(`curl -s ${auth} -H 'Content-Type: application/json' -d '{"firstName":"Ann","lastName":"Lee","email":"ann@example.com"}' '${base}/v1/guests'`)
say(`curl -s ${auth} '${base}/v1/events?type=guest.created'`)
say()
if (receiver !== undefined && endpointId !== undefined) {
  say(`Webhooks: the demo key has endpoint ${endpointId} for property.updated and guest.created, delivering to the stand-in receiver at ${receiver.url}/webhooks;`)
  say('it verifies each signature with the standardwebhooks package and prints each delivery here ([receiver] lines). The PATCH above makes one; so does a test event:')
  say(`curl -s ${auth} -X POST '${base}/v1/webhook-endpoints/${endpointId}/test'`)
  say(`curl -s ${auth} '${base}/v1/webhook-endpoints/${endpointId}/deliveries'`)
  say('(events.allowHttp and events.allowPrivateTargets are on in the demo only: a real endpoint is https and outside our network.)')
} else {
  say('Webhooks need Redis (their queue lives there): start one and run the demo again to see deliveries.')
}
say()
if (portalLink !== undefined) {
  say('The partner portal of the demo key (open it once in a browser; the link works a single time, for 24 hours):')
  say(portalLink)
} else {
  say('The partner portal needs Redis (its sessions live there): start one and run the demo again for a portal link.')
}
say()
say('Ctrl-C stops it.')

const stop = async (): Promise<void> => {
  // The demo keys are the demo's alone: they go with it.
  await gateway.keyStore.revoke(record.id).catch(() => undefined)
  await gateway.keyStore.revoke(test.record.id).catch(() => undefined)
  await gateway.keyStore.revokeGrant(grantId).catch(() => undefined)
  await gateway.app.close()
  await receiver?.close()
  await Promise.all([pms.close(), pmsSandbox.close(), service.close(), serviceSandbox.close(), idp.close(), docs.close()])
  flushLogger(logger)
  process.exit(0)
}
process.once('SIGINT', () => void stop())
process.once('SIGTERM', () => void stop())
