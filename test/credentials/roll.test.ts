import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { digestKey } from '../../src/keys/format.js'
import { ACME_HOST } from '../helpers/config.js'
import { TestGateway } from '../helpers/gateway.js'
import { keyTool, keyToolJson } from '../helpers/oauth.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { checkAnswer } from '../helpers/contract.js'

// Rolling a key without an outage (docs/architecture.md, "Rolling a key"): the same key id, a
// new secret, the previous one working until its overlap ends, then 401 API_KEY_EXPIRED saying
// the key was rolled and when; on every instance within a second. Two gateways over real
// sockets, one Redis namespace, key records cached for a minute: what changes within a second
// is the publication, not a cache lifetime.

let t: TestGateway
let twin: Awaited<ReturnType<TestGateway['twin']>>
const redis = new Redis(REDIS_URL)
const CHALLENGE = { 'www-authenticate': 'Bearer' }
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

beforeAll(async () => {
  t = await TestGateway.start({ config: { keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } } })
  twin = await t.twin()
  expect(await eventually(async () => (await redis.pubsub('NUMSUB', `${t.prefix}keys:changed`))[1] === 2, 5000)).toBe(true)
})

afterAll(async () => {
  await twin.close()
  await t.close()
  redis.disconnect()
})

const tool = (...argv: string[]) => keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix }, ...argv)

const json = <T>(...argv: string[]) => keyToolJson<T>({ REDIS_URL, REDIS_PREFIX: t.prefix }, ...argv)

/** GET /v1/properties with `key` on the first instance (`a`) or its twin (`b`), checked against the OpenAPI document. */
async function call(on: 'a' | 'b', key: string) {
  const url = on === 'a' ? t.url : twin.url
  const res = await request(`${url}/v1/properties`, { headers: { host: ACME_HOST, 'user-agent': 'roll-test/1.0', authorization: `Bearer ${key}` } })
  const answer = { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
  checkAnswer('GET', '/v1/properties', answer, t.gateway.app.gatewayConfig)
  return answer
}

const works = async (key: string): Promise<void> => {
  for (const on of ['a', 'b'] as const) expectEnvelope(await call(on, key), { page: 1, perPage: 20, total: expect.any(Number) as unknown as number })
}

async function newKey(): Promise<{ id: string; key: string }> {
  return json<{ id: string; key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
}

function rolledDetail(rolledAt: string, endedAt: string): string {
  return `The API key was rolled at ${rolledAt}; this secret of it stopped working at ${endedAt}. Use its new secret.`
}

describe('keys roll', () => {
  it('gives the same key a new secret, keeps the previous one working through the overlap, and ends it on every instance within a second', async () => {
    const { id, key: first } = await newKey()
    await works(first)
    const rolled = await json<{ id: string; secret: string; previousSecretExpiresAt: string }>('roll', id, '--overlap', '1h')
    expect(rolled).toEqual({ id, secret: expect.stringMatching(/^svc_live_[0-9A-Za-z]{28}$/), previousSecretExpiresAt: expect.stringMatching(ISO) })
    expect(Date.parse(rolled.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(50 * 60_000)
    // Both secrets open the same key, on both instances.
    await works(rolled.secret)
    await works(first)
    // The previous secret's answers name when it stops (within the expiry warning).
    expect((await call('b', first)).headers['service-credential-expires']).toBe(rolled.previousSecretExpiresAt)
    expect((await call('b', rolled.secret)).headers['service-credential-expires']).toBeUndefined()
    // When each secret was last used, to the minute, once the instances have written their counts.
    await Promise.all([t.gateway.usage.flush(), twin.gateway.usage.flush()])
    const shown = await json<Record<string, unknown>>('show', id)
    expect(shown).toMatchObject({
      id, previousSecretExpiresAt: rolled.previousSecretExpiresAt, status: 'active',
      previousSecretLastUsedAt: expect.stringMatching(/:00\.000Z$/), lastUsedAt: expect.stringMatching(/:00\.000Z$/),
    })
    expect(Date.now() - Date.parse(shown.previousSecretLastUsedAt as string)).toBeLessThan(5 * 60_000)

    const ended = await tool('end-overlap', id)
    expect(ended.code).toBe(0)
    const endedAt = /stopped working at (\S+)$/.exec(ended.out[0] as string)?.[1] as string
    expect(ended).toEqual({ code: 0, out: [`ended the overlap of ${id}: its previous secret stopped working at ${endedAt}`], err: [] })
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, first)).statusCode === 401, 1000)).toBe(true)
    const rolledAt = (await json<{ previousSecretExpiresAt: string }>('show', id)).previousSecretExpiresAt
    expect(rolledAt).toBe(endedAt)
    const record = await redis.hgetall(`${t.prefix}key:${digestKey(rolled.secret)}`)
    for (const on of ['a', 'b'] as const) {
      expectProblem(await call(on, first), { code: 'API_KEY_EXPIRED', instance: '/v1/properties', headers: CHALLENGE, detail: rolledDetail(record.rolledAt as string, endedAt) })
    }
    await works(rolled.secret)
    expect(await tool('end-overlap', id)).toEqual({ code: 0, out: [`${id} has no previous secret that still works`], err: [] })
  })

  it('ends the overlap by itself when its time comes, on every instance', async () => {
    const { id, key: first } = await newKey()
    await works(first)
    const rolled = await json<{ secret: string; previousSecretExpiresAt: string }>('roll', id, '--overlap', '4s')
    const until = Date.parse(rolled.previousSecretExpiresAt)
    // Each instance refuses the previous secret once its end has come, never before.
    const refusedOn = new Set<string>()
    expect(await eventually(async () => {
      for (const on of ['a', 'b'] as const) {
        const answer = await call(on, first)
        if (answer.statusCode === 200) continue
        expect({ on, status: answer.statusCode, endCame: Date.now() >= until }).toEqual({ on, status: 401, endCame: true })
        refusedOn.add(on)
      }
      return refusedOn.size === 2
    }, 30_000, 100)).toBe(true)
    const rolledAt = (await redis.hget(`${t.prefix}key:${digestKey(rolled.secret)}`, 'rolledAt')) as string
    for (const on of ['a', 'b'] as const) {
      expectProblem(await call(on, first), { code: 'API_KEY_EXPIRED', instance: '/v1/properties', headers: CHALLENGE, detail: rolledDetail(rolledAt, rolled.previousSecretExpiresAt) })
    }
    await works(rolled.secret)
  })

  it('keeps one previous secret at most: a second roll ends the first previous secret at once', async () => {
    const { id, key: first } = await newKey()
    await works(first)
    const second = await json<{ secret: string; previousSecretExpiresAt: string }>('roll', id, '--overlap', '1h')
    await works(first)
    await works(second.secret)
    const third = await json<{ secret: string; previousSecretExpiresAt: string }>('roll', id, '--overlap', '7d')
    expect(Date.parse(third.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(6.9 * 86_400_000)
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, first)).statusCode === 401, 1000)).toBe(true)
    expect(JSON.parse((await call('a', first)).body)).toMatchObject({ code: 'API_KEY_EXPIRED' })
    await works(second.secret)
    await works(third.secret)
    // The audit trail says the first overlap was ended early, by the second roll.
    const entries = await json<{ action: string; changes: Record<string, { old: unknown; new: unknown }> }[]>('audit', '--id', id)
    expect(entries.map((e) => e.action)).toEqual(['roll', 'end-overlap', 'roll', 'create'])
    expect(entries[1]?.changes).toEqual({ previousSecretExpiresAt: { old: second.previousSecretExpiresAt, new: expect.stringMatching(ISO) } })
  })

  it('with --overlap 0 ends the previous secret at once', async () => {
    const { id, key: first } = await newKey()
    await works(first)
    const rolled = await json<{ secret: string; previousSecretExpiresAt: string }>('roll', id, '--overlap', '0')
    for (const on of ['a', 'b'] as const) expect(await eventually(async () => (await call(on, first)).statusCode === 401, 1000)).toBe(true)
    await works(rolled.secret)
  })

  it.each([
    [['--overlap', '8d'], '--overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once'],
    [['--overlap', '1w'], '--overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once'],
    [['--overlap=-1h'], '--overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once'],
  ])('refuses roll %j with exit 2, one line, and the key unchanged', async (flags, message) => {
    const { id, key } = await newKey()
    expect(await tool('roll', id, ...flags)).toEqual({ code: 2, out: [], err: [message] })
    await works(key)
  })

  it('says in one line what node:util finds wrong with the flags (its wording varies with Node\'s version)', async () => {
    const run = await tool('roll', 'key_00000000000000000', '--overlap', '-1h')
    expect({ code: run.code, out: run.out, lines: run.err.length }).toEqual({ code: 2, out: [], lines: 1 })
    expect(run.err[0]).toMatch(/^Option '--overlap.*argument is ambiguous\./)
  })

  it('rolls no grant (the identity provider rotates a client\'s secret) and no unknown key', async () => {
    const grant = await keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix, OAUTH_ISSUER: 'https://id.example.com', OAUTH_JWKS_URI: 'https://id.example.com/jwks', OAUTH_AUDIENCE: 'partner-api' },
      'grant-client', '--issuer', 'https://id.example.com', '--client-id', 'roller', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json')
    const { id } = JSON.parse(grant.out[0] as string) as { id: string }
    expect(await tool('roll', id)).toEqual({ code: 2, out: [], err: [`${id} is a client's grant: the identity provider rotates a client's secret, the gateway holds none`] })
    expect(await tool('roll', 'key_00000000000000000')).toEqual({ code: 2, out: [], err: ["no key with id 'key_00000000000000000'"] })
    expect(await tool('roll')).toEqual({ code: 2, out: [], err: ['roll needs a key id'] })
  })
})
