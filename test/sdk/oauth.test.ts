import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { ApiError, PartnerClient } from '../../sdk/src/index.js'
import { TestGateway } from '../helpers/gateway.js'
import { grantClient, oauthFor } from '../helpers/oauth.js'
import { REDIS_URL } from '../helpers/redis.js'
import { watchedFetch, type Sent } from './helpers.js'

// The client (sdk/) with OAuth 2.0 client credentials: tokens of the stand-in identity
// provider over HTTP, verified by a gateway on a real socket against its published keys, for a
// client registered with the key tool.

const CLIENT_ID = 'sdk-client'
// Characters that HTTP Basic carries only form-encoded (RFC 6749 2.3.1).
const SECRET = 'se/cr+t:%x'
const idp = new MockIdp({ clients: [{ clientId: CLIENT_ID, secret: SECRET }] })
let t: TestGateway

function tokenFetches(): number {
  return idp.received.filter((r) => r.path.endsWith('/protocol/openid-connect/token')).length
}

function client(): { client: PartnerClient; sent: Sent[] } {
  const { fetch, sent } = watchedFetch({ url: t.url, source: t.gateway.app.gatewayConfig })
  const c = new PartnerClient({ baseUrl: t.url, oauth: { tokenUrl: idp.tokenUrl, clientId: CLIENT_ID, clientSecret: SECRET, scope: 'properties:read' }, fetch })
  return { client: c, sent }
}

function bearer(sent: Sent): string | null {
  return sent.headers.get('authorization')
}

beforeAll(async () => {
  await idp.listen()
  // What is tested is the token the client holds: on a loaded machine, a PMS call past the
  // default deadline or a shed request would be a 503 the client retries, which is not.
  t = await TestGateway.start({ config: { oauth: oauthFor(idp), upstream: { timeoutMs: 15_000 }, loadShedding: { maxEventLoopDelayMs: 0 } } })
  expect(await t.gateway.tokens.ready(5000)).toBe(true)
  await grantClient({ REDIS_URL, REDIS_PREFIX: t.prefix }, idp, CLIENT_ID)
})

afterEach(() => {
  idp.settings = { ...idp.settings, lifetimeSeconds: 300, audience: 'partner-api' }
})

afterAll(async () => {
  await t.close()
  await idp.close()
})

describe('access tokens', () => {
  it('one token serves many calls, those made at the same time included', async () => {
    const { client: c, sent } = client()
    const before = tokenFetches()
    const together = await Promise.all([1, 2, 3, 4, 5].map((page) => c.properties.list({ page, perPage: 2 })))
    for (const property of together.flatMap((answer) => answer.data).slice(0, 3)) await c.properties.get(property.id)
    expect(tokenFetches() - before).toBe(1)
    expect(sent.map((r) => r.status)).toEqual(Array(8).fill(200))
    expect(new Set(sent.map(bearer)).size).toBe(1)
    expect(bearer(sent[0] as Sent)).toMatch(/^Bearer [\w-]+\.[\w-]+\.[\w-]+$/)
  })

  it('a new token is fetched once the one held is within a minute of its expiry', async () => {
    idp.settings = { ...idp.settings, lifetimeSeconds: 61 }
    const { client: c, sent } = client()
    const before = tokenFetches()
    await c.properties.list({ perPage: 1 })
    expect(tokenFetches() - before).toBe(1)
    // The token was fresh for one second; waiting is what is tested.
    await new Promise((resolve) => setTimeout(resolve, 1500))
    await c.properties.list({ perPage: 1 })
    expect(tokenFetches() - before).toBe(2)
    expect(sent.map((r) => r.status)).toEqual([200, 200])
    expect(bearer(sent[1] as Sent)).not.toBe(bearer(sent[0] as Sent))
  })

  it('ACCESS_TOKEN_EXPIRED: one new token and one more attempt, then the error', async () => {
    // The provider issues tokens already expired (past the gateway's minute of leeway).
    idp.settings = { ...idp.settings, lifetimeSeconds: -120 }
    const { client: c, sent } = client()
    const before = tokenFetches()
    const error = await c.properties.list().then(() => undefined, (e: unknown) => e) as ApiError
    expect(error).toBeInstanceOf(ApiError)
    expect({ status: error.status, code: error.code }).toEqual({ status: 401, code: 'ACCESS_TOKEN_EXPIRED' })
    expect(tokenFetches() - before).toBe(2)
    expect(sent.map((r) => r.status)).toEqual([401, 401])
    expect(bearer(sent[1] as Sent)).not.toBe(bearer(sent[0] as Sent))

    idp.settings = { ...idp.settings, lifetimeSeconds: 300 }
    expect((await c.properties.list()).status).toBe(200)
    expect(tokenFetches() - before).toBe(3)
  })

  it('INVALID_ACCESS_TOKEN: one new token; a token the gateway refuses later is replaced once and the call succeeds', async () => {
    idp.settings = { ...idp.settings, audience: 'another-api' }
    const { client: c, sent } = client()
    const before = tokenFetches()
    const error = await c.properties.list().then(() => undefined, (e: unknown) => e) as ApiError
    expect({ status: error.status, code: error.code }).toEqual({ status: 401, code: 'INVALID_ACCESS_TOKEN' })
    expect(tokenFetches() - before).toBe(2)

    // The provider is fixed; the client still holds a token it believes fresh.
    idp.settings = { ...idp.settings, audience: 'partner-api' }
    const answer = await c.properties.list()
    expect(answer.status).toBe(200)
    expect(tokenFetches() - before).toBe(3)
    expect(sent.map((r) => r.status)).toEqual([401, 401, 401, 200])
    expect(bearer(sent[2] as Sent)).toBe(bearer(sent[1] as Sent))
  })
})
