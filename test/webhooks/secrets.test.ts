import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import { Webhook } from 'standardwebhooks'
import { request } from 'undici'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { secretContext, type EndpointRecord } from '../../src/webhooks/endpoints.js'
import { DEVELOPMENT_KEY, SecretBox, SecretUnreadableError } from '../../src/webhooks/secrets.js'
import { runWebhookTool } from '../../src/webhooks/tool.js'
import { ACME_HOST } from '../helpers/config.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// The key that seals webhook signing secrets (docs/operations.md, "Webhooks" and "Changing
// WEBHOOKS_SECRET_KEY"): `npm start` needs one; secrets sealed under a previous key
// (WEBHOOKS_SECRET_KEY_PREVIOUS) still sign and are sealed again under the current one; a
// secret no key opens fails its attempts visibly; an idempotent replay is never a 500.

const FIRST_KEY = 'the first webhooks key of 32 characters or more'
const SECOND_KEY = 'the second webhooks key of 32 characters or more'
const THIRD_KEY = 'the third webhooks key of 32 characters or more'

interface Reply { status: number; headers: Record<string, unknown>; body: string }

async function call(base: string, method: 'GET' | 'POST', path: string, key: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await request(`${base}${path}`, {
    method, headers: { host: ACME_HOST, 'user-agent': 'secrets-test/1.0', authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
}

const dataOf = (reply: Reply): Record<string, unknown> => (JSON.parse(reply.body) as { data: Record<string, unknown> }).data

describe('npm start and WEBHOOKS_SECRET_KEY', () => {
  /** What `npm start` prints and its exit code, with the environment given. */
  async function start(env: Record<string, string>): Promise<{ code: number | null; printed: string }> {
    const child = spawn(process.execPath, ['dist/src/server.js'], {
      env: { PATH: process.env.PATH, CONFIG_FILE: 'config/default.json', REDIS_URL, PMS_URL: 'http://127.0.0.1:9', PMS_TOKEN: 'start-token', UPSTREAM_BOOKINGS_TOKEN: 'x', UPSTREAM_BOOKINGS_SANDBOX_TOKEN: 'y', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let printed = ''
    child.stderr.on('data', (chunk: Buffer) => { printed += chunk.toString() })
    const [code] = await once(child, 'exit') as [number | null]
    return { code, printed }
  }

  it('refuses to start without it, or with one shorter than 32 characters, naming it', async () => {
    const without = await start({})
    expect(without.code).toBe(1)
    expect(without.printed).toContain('environment WEBHOOKS_SECRET_KEY: required when events.types declares events (webhook signing secrets are sealed with it); at least 32 characters')
    const short = await start({ WEBHOOKS_SECRET_KEY: 'x'.repeat(31) })
    expect(short.code).toBe(1)
    expect(short.printed).toContain('environment WEBHOOKS_SECRET_KEY: must be at least 32 characters')
    const previous = await start({ WEBHOOKS_SECRET_KEY: FIRST_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS: `${SECOND_KEY},too short` })
    expect(previous.code).toBe(1)
    expect(previous.printed).toContain('environment WEBHOOKS_SECRET_KEY_PREVIOUS: must be a comma-separated list of keys of at least 32 characters each')
  })

  it('needs it only where there are webhooks: a config without event types starts the checks clean, and the key tool never needs it', () => {
    const env = { CONFIG_FILE: 'config/default.json', PMS_URL: 'http://127.0.0.1:9', PMS_TOKEN: 't', UPSTREAM_BOOKINGS_TOKEN: 'x', UPSTREAM_BOOKINGS_SANDBOX_TOKEN: 'y' }
    expect(() => loadConfig(env, { requirePms: true, requireTokens: true, overrides: { events: { types: [] } } })).not.toThrow()
    expect(() => loadConfig(env)).not.toThrow()
    const config = loadConfig({ ...env, WEBHOOKS_SECRET_KEY: FIRST_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS: ` ${SECOND_KEY} ,${THIRD_KEY}` }, { requirePms: true, requireTokens: true })
    expect({ key: config.webhooksSecretKey, previous: config.webhooksPreviousKeys }).toEqual({ key: FIRST_KEY, previous: [SECOND_KEY, THIRD_KEY] })
  })
})

describe('signing secrets across a change of WEBHOOKS_SECRET_KEY', () => {
  let t: TestGateway
  let key: string
  let hotel: string
  let admin: string
  const redis = new Redis(REDIS_URL)
  const receivers: Receiver[] = []
  const twins: { close: () => Promise<void> }[] = []

  beforeAll(async () => {
    // Serves only: the twins below, each with its own keys, make the attempts.
    t = await TestGateway.start({ env: { ...PUBLISHER_TOKENS, WEBHOOKS_SECRET_KEY: FIRST_KEY, EVENTS_WORKER: 'off' }, config: webhookConfig() })
    key = await t.key()
    admin = await listenAdmin(t.gateway)
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterEach(async () => {
    await Promise.all(twins.splice(0).map((twin) => twin.close()))
    await Promise.all(receivers.splice(0).map((r) => r.close()))
  })
  afterAll(async () => {
    await t.close()
    redis.disconnect()
  })

  const receiver = async (): Promise<Receiver> => {
    const r = await new Receiver().listen()
    receivers.push(r)
    return r
  }
  const recordOf = async (id: string): Promise<EndpointRecord> => JSON.parse(await redis.hget(`${t.prefix}{webhooks}:ep`, id) as string) as EndpointRecord
  const twin = async (current: string, previous: string[] = []) => {
    const started = await t.twin({ webhooksSecretKey: current, webhooksPreviousKeys: previous, eventsWorker: 'on' })
    twins.push(started)
    return started
  }
  const create = async (url: string, idempotencyKey: string): Promise<{ id: string; secret: string; reply: Reply }> => {
    const reply = await call(t.url, 'POST', '/v1/webhook-endpoints', key, { url, eventTypes: ['property.updated'] }, { 'idempotency-key': idempotencyKey })
    expect(reply.status).toBe(201)
    const { id, secret } = dataOf(reply) as { id: string; secret: string }
    return { id, secret, reply }
  }

  it('seals each secret under the configured key, bound to its endpoint: the key in the source opens none', async () => {
    const r = await receiver()
    const endpoint = await create(r.url, 'sealed-1')
    const [sealed] = (await recordOf(endpoint.id)).secrets
    expect(new SecretBox(FIRST_KEY).open(sealed?.sealed as string, secretContext(endpoint.id)).plain.toString()).toBe(endpoint.secret)
    expect(() => new SecretBox(DEVELOPMENT_KEY).open(sealed?.sealed as string, secretContext(endpoint.id))).toThrow(SecretUnreadableError)
    // Copied to another endpoint's record, it opens for nobody.
    expect(() => new SecretBox(FIRST_KEY).open(sealed?.sealed as string, secretContext('we_01JAAAAAAAAAAAAAAAAAAAAAAA'))).toThrow(SecretUnreadableError)
  })

  it('signs with a secret sealed under WEBHOOKS_SECRET_KEY_PREVIOUS, seals it again under the new key, and replays a create', async () => {
    const r = await receiver()
    const endpoint = await create(r.url, 'previous-1')
    const next = await twin(SECOND_KEY, [FIRST_KEY])
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    const eventId = event?.eventId as string
    expect(await eventually(async () => r.of(eventId).length === 1, WAIT_MS)).toBe(true)
    const [got] = r.of(eventId)
    expect(new Webhook(endpoint.secret).verify(got?.body as string, got?.headers as Record<string, string>)).toMatchObject({ id: eventId })
    // Sealed again under the new key: it opens without the previous one now.
    expect(await eventually(async () => {
      const [secret] = (await recordOf(endpoint.id)).secrets
      try {
        return new SecretBox(SECOND_KEY).open(secret?.sealed as string, secretContext(endpoint.id)).plain.toString() === endpoint.secret
      } catch {
        return false
      }
    }, WAIT_MS)).toBe(true)
    // The create's kept answer, sealed under the first key, is replayed whole by the new instance.
    const replay = await call(next.url, 'POST', '/v1/webhook-endpoints', key, { url: r.url, eventTypes: ['property.updated'] }, { 'idempotency-key': 'previous-1' })
    expect({ status: replay.status, replayed: replay.headers['idempotent-replayed'], data: dataOf(replay) }).toEqual({ status: 201, replayed: 'true', data: dataOf(endpoint.reply) })
  })

  it('fails each attempt of a secret no key opens visibly (outcome failed, an error line, a metric) and replays no 500; a rotation mends it', async () => {
    const r = await receiver()
    const endpoint = await create(r.url, 'unreadable-1')
    const lost = await twin(THIRD_KEY)
    const lostAdmin = await listenAdmin(lost.gateway)
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    const eventId = event?.eventId as string
    const attemptsPath = `/v1/webhook-endpoints/${endpoint.id}/deliveries`
    expect(await eventually(async () => (dataOf(await call(t.url, 'GET', attemptsPath, key)) as unknown as unknown[]).length >= 1, WAIT_MS)).toBe(true)
    expect((dataOf(await call(t.url, 'GET', attemptsPath, key)) as unknown as unknown[])[0]).toEqual({ eventId, attempt: 1, at: expect.any(String), status: null, outcome: 'failed', durationMs: 0 })
    expect(r.received).toEqual([])
    expect(t.logs.records()).toContainEqual(expect.objectContaining({
      level: 'error', endpointId: endpoint.id, eventId, msg: 'webhook signing secret unreadable: no configured key (WEBHOOKS_SECRET_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS) opens it; nothing was sent',
    }))
    const metrics = await (await fetch(`${lostAdmin}/metrics`)).text()
    expect(metrics).toMatch(/^gateway_webhook_secret_unreadable_total [1-9]/m)
    expect(metrics).toMatch(/^gateway_webhook_attempts_total\{outcome="failed"\} [1-9]/m)
    // A replay of the create whose kept answer no key opens: 503 with Retry-After, never a 500.
    const replayPath = '/v1/webhook-endpoints'
    const replay = await call(lost.url, 'POST', replayPath, key, { url: r.url, eventTypes: ['property.updated'] }, { 'idempotency-key': 'unreadable-1' })
    expectProblem({ statusCode: replay.status, headers: replay.headers as Record<string, string>, body: replay.body }, {
      code: 'SERVICE_UNAVAILABLE', instance: replayPath, headers: { 'retry-after': '60' },
      detail: 'The answer kept for this Idempotency-Key cannot be read right now; retry later with the same key, or list the webhook endpoints to find what the first request did.',
    })
    // The partner rotates: the new secret is sealed under the instance's key, and signs alone.
    const rotated = await call(lost.url, 'POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, key)
    expect(rotated.status).toBe(200)
    const secret = dataOf(rotated).secret as string
    const [later] = accepted(await publish(admin, hotelChanged(hotel)))
    expect(await eventually(async () => r.of(later?.eventId as string).length === 1, WAIT_MS)).toBe(true)
    const [got] = r.of(later?.eventId as string)
    expect((got?.headers['webhook-signature'] as string).split(' ')).toHaveLength(1)
    expect(new Webhook(secret).verify(got?.body as string, got?.headers as Record<string, string>)).toMatchObject({ id: later?.eventId })
  })

  it('seals every secret again under the current key with `npm run webhooks -- reseal`, and names the endpoints no key opens', async () => {
    const r = await receiver()
    const first = await create(r.url, 'reseal-1')
    const second = await create(r.url, 'reseal-2')
    const env = { CONFIG_FILE: 'config/default.json', REDIS_URL, REDIS_PREFIX: t.prefix }
    const run = async (extra: Record<string, string>): Promise<{ code: number; out: string[]; err: string[] }> => {
      const out: string[] = []
      const err: string[] = []
      const code = await runWebhookTool(['reseal'], { ...env, ...extra }, { out: (l) => out.push(l), err: (l) => err.push(l) })
      return { code, out, err }
    }
    const all = await redis.hlen(`${t.prefix}{webhooks}:ep`)
    const first_run = await run({ WEBHOOKS_SECRET_KEY: SECOND_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS: `${THIRD_KEY},${FIRST_KEY}` })
    expect(first_run.code).toBe(0)
    expect(first_run.err).toEqual([])
    expect(first_run.out).toEqual([expect.stringMatching(/^sealed again under WEBHOOKS_SECRET_KEY: \d+ endpoint\(s\); already under it: \d+$/)])
    for (const { id, secret } of [first, second]) {
      const [sealed] = (await recordOf(id)).secrets
      expect(new SecretBox(SECOND_KEY).open(sealed?.sealed as string, secretContext(id))).toEqual({ plain: Buffer.from(secret), current: true })
    }
    // Again: nothing left to seal.
    expect((await run({ WEBHOOKS_SECRET_KEY: SECOND_KEY })).out).toEqual([`sealed again under WEBHOOKS_SECRET_KEY: 0 endpoint(s); already under it: ${all}`])
    // Under a key that opens nothing: every endpoint named, exit 1.
    const lost = await run({ WEBHOOKS_SECRET_KEY: 'a key that never sealed anything of 32 or more characters' })
    expect(lost.code).toBe(1)
    expect(lost.err).toEqual([expect.stringContaining(`no configured key opens a signing secret of ${all} endpoint(s): `)])
    expect(lost.err[0]).toContain(first.id)
    expect((await run({})).code).toBe(2)
  })
})
