import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { generateSigningKey, compactJws } from '../../mocks/idp/jws.js'
import type { Hotel } from '../../mocks/pms/data.js'
import { ACME_HOST, GLOBEX_HOST } from '../helpers/config.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { grantClient, invalidTokenChallenge, keyTool, oauthFor } from '../helpers/oauth.js'
import { expectProblem, REQUEST_ID } from '../helpers/problem.js'
import { eventually, keysUnder, REDIS_URL } from '../helpers/redis.js'

// OAuth 2.0 access tokens beside API keys (docs/architecture.md, "Access tokens";
// docs/partners.md, "Access tokens (OAuth 2.0)"): a gateway on a real socket, the stand-in
// identity provider over HTTP, grants in real Redis through the key tool.

const idp = new MockIdp({ clients: [{ clientId: 'channel-sync', secret: 'channel-sync-secret' }] })
let t: TestGateway
let env: Record<string, string>
const redis = new Redis(REDIS_URL)

const now = (): number => Math.floor(Date.now() / 1000)

/** A route of the gateway's admin port, over its socket. */
async function admin(g: TestGateway, path: string): Promise<string> {
  if (!g.gateway.admin.server.listening) await g.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  const port = (g.gateway.admin.server.address() as { port: number }).port
  return (await request(`http://127.0.0.1:${port}${path}`)).body.text()
}

/** A token of the token endpoint, for `clientId`, asking for `scopes`. */
function tokenOf(clientId: string, scopes = ['properties:read']): string {
  return idp.issue(clientId, scopes)
}

function expectList(res: Answer): { id: string }[] {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status: 200 })
  const body = JSON.parse(res.body) as { data: { id: string }[] }
  return body.data
}

function acmeLive(pmsHotels: Hotel[]): string[] {
  return pmsHotels.filter((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')
    .sort((a, b) => Number(a.created_epoch_ms) - Number(b.created_epoch_ms) || String(a.hotel_uuid).localeCompare(String(b.hotel_uuid)))
    .map((h) => String(h.hotel_uuid))
}

beforeAll(async () => {
  await idp.listen()
  // A long key cache: a grant change seen within a second is the publication, not expiry.
  t = await TestGateway.start({ config: { oauth: oauthFor(idp), keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } } })
  env = { REDIS_URL, REDIS_PREFIX: t.prefix }
  expect(await t.gateway.tokens.ready(5000)).toBe(true)
  await grantClient(env, idp, 'channel-sync', '--name', 'Channel sync')
})

afterAll(async () => {
  await t.close()
  await idp.close()
  redis.disconnect()
})

describe('a valid access token', () => {
  it('is served as an API key is, with the quota headers of its grant', async () => {
    const res = await t.get('/v1/properties?perPage=100', tokenOf('channel-sync'))
    expect(expectList(res).map((p) => p.id)).toEqual(acmeLive(t.pms.hotels).slice(0, 100))
    expect(res.headers['ratelimit-limit']).toBe('1000')
    expect(res.headers['ratelimit-policy']).toBe('"default";q=1000;w=60')
    expect(res.headers.ratelimit).toBe(`"default";r=${String(res.headers['ratelimit-remaining'])};t=${String(res.headers['ratelimit-reset'])}`)
  })

  it('logs the grant id where a key id goes, and never the token', async () => {
    const { id } = await grantClient(env, idp, 'log-client')
    const token = tokenOf('log-client')
    const res = await t.get('/v1/properties', token)
    expect(res.statusCode).toBe(200)
    const line = t.logs.records().find((r) => r.reqId === res.headers['service-request-id'])
    expect(line).toMatchObject({ keyId: id, brand: 'acme', status: 200, route: '/v1/properties' })
    expect(t.logs.lines.join('\n')).not.toContain(token.split('.')[2])
  })

  it('takes an ES256 token, and Keycloak\'s: typ JWT, the client in azp, junk scopes beside ours', async () => {
    expect((await t.get('/v1/properties', idp.mint({ signature: 'ES256', claims: { client_id: 'channel-sync', scope: 'properties:read' } }))).statusCode).toBe(200)
    idp.settings = { ...idp.settings, profile: 'keycloak' }
    try {
      const token = tokenOf('channel-sync')
      const [header, payload] = token.split('.').slice(0, 2).map((p) => JSON.parse(Buffer.from(p as string, 'base64url').toString()) as Record<string, unknown>)
      expect({ typ: header?.typ, azp: payload?.azp, clientId: payload?.client_id, scope: payload?.scope })
        .toEqual({ typ: 'JWT', azp: 'channel-sync', clientId: undefined, scope: 'profile email properties:read' })
      expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    } finally {
      idp.settings = { ...idp.settings, profile: 'rfc9068' }
    }
  })

  it('names its client by client_id, else azp, else sub', async () => {
    await grantClient(env, idp, 'by-sub')
    const token = idp.mint({ claims: { sub: 'by-sub', scope: 'properties:read' }, omit: ['client_id'] })
    expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    // client_id wins over a registered sub.
    const other = idp.mint({ claims: { sub: 'by-sub', client_id: 'nobody-registered', scope: 'properties:read' } })
    expectProblem(await t.get('/v1/properties', other), {
      code: 'CLIENT_NOT_REGISTERED', instance: '/v1/properties', detail: 'The client of this access token is not registered for this API.',
    })
  })

  it('accepts typ in any case and with the application/ prefix', async () => {
    for (const typ of ['AT+JWT', 'application/at+jwt', 'jwt']) {
      expect((await t.get('/v1/properties', idp.mint({ header: { typ }, claims: { client_id: 'channel-sync', scope: 'properties:read' } }))).statusCode, typ).toBe(200)
    }
  })

  it('allows a minute of clock skew on exp, iat and nbf', async () => {
    const claims = { client_id: 'channel-sync', scope: 'properties:read' }
    expect((await t.get('/v1/properties', idp.mint({ claims: { ...claims, exp: now() - 50 } }))).statusCode).toBe(200)
    expect((await t.get('/v1/properties', idp.mint({ claims: { ...claims, iat: now() + 50 } }))).statusCode).toBe(200)
    expect((await t.get('/v1/properties', idp.mint({ claims: { ...claims, nbf: now() + 50 } }))).statusCode).toBe(200)
  })

  it('is remembered by a digest: the second use is a cache hit, and the token is nowhere in Redis', async () => {
    const token = idp.mint({ claims: { client_id: 'channel-sync', scope: 'properties:read', jti: 'remembered-once' } })
    const before = t.gateway.tokens.status().verifiedTokens.entries
    expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    expect(t.gateway.tokens.status().verifiedTokens.entries).toBe(before + 1)
    expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    expect(t.gateway.tokens.status().verifiedTokens.entries).toBe(before + 1)
    const [, , signature] = token.split('.')
    for (const name of await keysUnder(redis, t.prefix)) {
      expect(name).not.toContain(signature)
      const type = await redis.type(name)
      const content = type === 'hash' ? JSON.stringify(await redis.hgetall(name))
        : type === 'set' ? JSON.stringify(await redis.smembers(name)) : type === 'string' ? String(await redis.get(name)) : ''
      expect(content).not.toContain(signature as string)
    }
  })
})

describe('a token refused with 401 INVALID_ACCESS_TOKEN and RFC 6750\'s invalid_token', () => {
  const claims = { client_id: 'channel-sync', scope: 'properties:read' }
  const otherKey = generateSigningKey('RS256', 'rs256-1')
  const cases: [string, () => string, string][] = [
    ['alg: none, unsigned', () => idp.mint({ signature: 'none', claims }),
      'The access token is signed with an algorithm this API does not accept (alg); it accepts RS256, ES256.'],
    ['HS256 "signed" with the public key', () => idp.mint({ signature: 'HS256-with-public-key', claims, kid: 'rs256-1' }),
      'The access token is signed with an algorithm this API does not accept (alg); it accepts RS256, ES256.'],
    ['another issuer', () => idp.mint({ claims: { ...claims, iss: 'https://id.example.org/realms/other' } }),
      'The access token is not from an issuer this API trusts (iss).'],
    ['no issuer', () => idp.mint({ claims, omit: ['iss'] }), 'The access token is not from an issuer this API trusts (iss).'],
    ['another audience', () => idp.mint({ claims: { ...claims, aud: 'billing-api' } }),
      "The access token is not for this API: its audience (aud) must include 'partner-api'."],
    ['an audience list without ours', () => idp.mint({ claims: { ...claims, aud: ['billing-api', 'account'] } }),
      "The access token is not for this API: its audience (aud) must include 'partner-api'."],
    ['typ JOSE', () => idp.mint({ claims, header: { typ: 'JOSE' } }), 'The access token is not of an accepted type (typ); this API accepts at+jwt, JWT.'],
    ['no typ', () => idp.mint({ claims, omit: ['typ'] }), 'The access token is not of an accepted type (typ); this API accepts at+jwt, JWT.'],
    ['no sub', () => idp.mint({ claims, omit: ['sub'] }), 'The access token lacks the claim sub.'],
    ['no exp', () => idp.mint({ claims, omit: ['exp'] }), 'The access token lacks the claim exp.'],
    ['no iat', () => idp.mint({ claims, omit: ['iat'] }), 'The access token lacks the claim iat.'],
    ['iat two minutes ahead', () => idp.mint({ claims: { ...claims, iat: now() + 120 } }),
      'The access token is issued in the future (iat); the clocks of the identity provider and the API disagree.'],
    ['nbf two minutes ahead', () => idp.mint({ claims: { ...claims, nbf: now() + 120 } }), 'The access token is not valid yet (nbf).'],
    ['a payload changed after signing', () => {
      const [header, , signature] = idp.mint({ claims }).split('.')
      const payload = Buffer.from(JSON.stringify({ ...claims, iss: idp.issuer, sub: 'x', aud: 'partner-api', exp: now() + 300, iat: now(), scope: 'properties:read guests:write' })).toString('base64url')
      return `${header}.${payload}.${signature}`
    }, 'The signature of the access token is not valid.'],
    ['a key of the issuer\'s kid that the issuer never had', () => compactJws({ alg: 'RS256', typ: 'at+jwt', kid: 'rs256-1' },
      { ...claims, iss: idp.issuer, sub: 'x', aud: 'partner-api', exp: now() + 300, iat: now() }, otherKey, 'RS256'),
    'The signature of the access token is not valid.'],
    ['a payload that is not a JSON object', () => idp.mint({ rawPayload: '["not", "an", "object"]' }),
      'The access token is not a well-formed JWT: its payload is not a JSON object.'],
    ['a header that is not JSON', () => `bm90IGpzb24.${idp.mint({ claims }).split('.').slice(1).join('.')}`,
      'The access token is not a well-formed JWT: its header is not a JSON object.'],
  ]

  it.each(cases)('%s', async (_name, make, detail) => {
    expectProblem(await t.get('/v1/properties', make()), {
      code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) },
    })
  })

  it('names the check in the challenge exactly', async () => {
    const res = await t.get('/v1/properties', idp.mint({ claims: { ...claims, aud: 'billing-api' } }))
    expect(res.headers['www-authenticate'])
      .toBe('Bearer error="invalid_token", error_description="The access token is not for this API: its audience (aud) must include \'partner-api\'."')
  })

  it('refuses an algorithm jose knows but the issuer does not allow', async () => {
    const strict = await TestGateway.start({ config: { oauth: oauthFor(idp, {}, { algorithms: ['RS256'] }) } })
    try {
      expect(await strict.gateway.tokens.ready(5000)).toBe(true)
      const detail = 'The access token is signed with an algorithm this API does not accept (alg); it accepts RS256.'
      expectProblem(await strict.get('/v1/properties', idp.mint({ signature: 'ES256', claims })), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) },
      })
    } finally {
      await strict.close()
    }
  })

  it('refuses typ JWT where the issuer takes RFC 9068 tokens only', async () => {
    const strict = await TestGateway.start({ config: { oauth: oauthFor(idp, {}, { types: ['at+jwt'] }) } })
    try {
      expect(await strict.gateway.tokens.ready(5000)).toBe(true)
      expectProblem(await strict.get('/v1/properties', idp.mint({ header: { typ: 'JWT' }, claims })), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: 'The access token is not of an accepted type (typ); this API accepts at+jwt.',
      })
    } finally {
      await strict.close()
    }
  })

  it('quotes neither the token nor its claims in the answer', async () => {
    const token = idp.mint({ claims: { ...claims, aud: 'secret-audience-name', sub: 'secret-subject' } })
    const res = await t.get('/v1/properties', token)
    const seen = `${JSON.stringify(res.headers)}${res.body}`
    for (const part of [...token.split('.'), 'secret-audience-name', 'secret-subject']) expect(seen).not.toContain(part)
  })
})

describe('expiry', () => {
  const claims = { client_id: 'channel-sync', scope: 'properties:read' }

  it('answers a token past exp and its leeway with ACCESS_TOKEN_EXPIRED', async () => {
    const detail = 'The access token has expired; get a new one from the identity provider.'
    expectProblem(await t.get('/v1/properties', idp.mint({ claims: { ...claims, exp: now() - 61, iat: now() - 400 } })), {
      code: 'ACCESS_TOKEN_EXPIRED', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) },
    })
  })

  it('says INVALID_ACCESS_TOKEN when an expired token fails another check too', async () => {
    expectProblem(await t.get('/v1/properties', idp.mint({ claims: { ...claims, exp: now() - 600, aud: 'billing-api' } })), {
      code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: "The access token is not for this API: its audience (aud) must include 'partner-api'.",
    })
  })

  it('stops taking a remembered token once it expires', async () => {
    // Valid for a few more seconds, within the minute of leeway.
    const token = idp.mint({ claims: { ...claims, exp: now() - 55, jti: 'expires-soon' } })
    expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    expect(await eventually(async () => (await t.get('/v1/properties', token)).statusCode === 401, 15_000, 200)).toBe(true)
    expectProblem(await t.get('/v1/properties', token), { code: 'ACCESS_TOKEN_EXPIRED', instance: '/v1/properties' })
  })
})

describe('what is a token and what is a key', () => {
  it('takes a value of three base64url parts as a token, anything else as a key', async () => {
    expectProblem(await t.get('/v1/properties', 'abc.def'), { code: 'INVALID_API_KEY', instance: '/v1/properties', headers: { 'www-authenticate': 'Bearer' } })
    expectProblem(await t.get('/v1/properties', 'a.b.c.d'), { code: 'INVALID_API_KEY', instance: '/v1/properties' })
    expectProblem(await t.get('/v1/properties', 'svc_live_x.y.z'), { code: 'INVALID_API_KEY', instance: '/v1/properties' })
    expectProblem(await t.get('/v1/properties', 'abc.def.ghi'), { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties' })
  })

  it('refuses every token where no issuer is configured, saying the API takes API keys', async () => {
    const keysOnly = await TestGateway.start()
    try {
      const detail = 'This API takes API keys; it accepts no access tokens.'
      expectProblem(await keysOnly.get('/v1/properties', tokenOf('channel-sync')), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) },
      })
    } finally {
      await keysOnly.close()
    }
  })
})

describe('grants', () => {
  it('answers a valid token of an unregistered client with CLIENT_NOT_REGISTERED, and serves it once registered', async () => {
    const token = tokenOf('late-client')
    expectProblem(await t.get('/v1/properties', token), {
      code: 'CLIENT_NOT_REGISTERED', instance: '/v1/properties', detail: 'The client of this access token is not registered for this API.',
    })
    await grantClient(env, idp, 'late-client')
    // The registration is published: the remembered miss goes at once, not after the cache lifetime.
    expect(await eventually(async () => (await t.get('/v1/properties', token)).statusCode === 200, 1000)).toBe(true)
  })

  it('suspends, resumes and revokes a grant on every running instance within a second', async () => {
    const { id } = await grantClient(env, idp, 'suspended-client')
    const token = tokenOf('suspended-client')
    const other = await t.twin()
    const callOther = async (): Promise<Answer> => {
      const res = await request(`${other.url}/v1/properties`, { headers: { host: ACME_HOST, 'user-agent': 'tokens-test/1.0', authorization: `Bearer ${token}` } })
      return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
    }
    try {
      expect(await t.gateway.tokens.ready(5000)).toBe(true)
      expect(await other.gateway.tokens.ready(5000)).toBe(true)
      expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
      expect((await callOther()).statusCode).toBe(200)

      expect(await keyTool(env, 'suspend', id)).toEqual({ code: 0, out: [`suspended ${id}`], err: [] })
      expect(await eventually(async () => (await callOther()).statusCode === 403, 1000)).toBe(true)
      expectProblem(await callOther(), { code: 'CLIENT_SUSPENDED', instance: '/v1/properties', detail: 'The client of this access token is suspended.' })
      expectProblem(await t.get('/v1/properties', token), { code: 'CLIENT_SUSPENDED', instance: '/v1/properties' })

      expect(await keyTool(env, 'resume', id)).toEqual({ code: 0, out: [`resumed ${id}`], err: [] })
      expect(await eventually(async () => (await callOther()).statusCode === 200, 1000)).toBe(true)

      expect(await keyTool(env, 'revoke', id)).toEqual({ code: 0, out: [`revoked ${id}`], err: [] })
      expect(await eventually(async () => (await callOther()).statusCode === 403, 1000)).toBe(true)
      expectProblem(await callOther(), { code: 'CLIENT_NOT_REGISTERED', instance: '/v1/properties' })
      expectProblem(await t.get('/v1/properties', token), { code: 'CLIENT_NOT_REGISTERED', instance: '/v1/properties' })
    } finally {
      await other.close()
    }
  })

  it('answers a client of another brand with BRAND_ACCESS_DENIED', async () => {
    await grantClient(env, idp, 'globex-client', '--brand', 'globex')
    const token = tokenOf('globex-client')
    expectProblem(await t.get('/v1/properties', token), {
      code: 'BRAND_ACCESS_DENIED', instance: '/v1/properties',
      detail: `The client of this access token is registered for another brand; it cannot be used at host '${ACME_HOST}'.`,
    })
    expect((await t.get('/v1/properties', token, { host: GLOBEX_HOST })).statusCode).toBe(200)
  })

  it('limits a client to its properties', async () => {
    const [allowed, other] = acmeLive(t.pms.hotels)
    await grantClient(env, idp, 'one-property', '--properties', allowed as string)
    const token = tokenOf('one-property')
    expect(expectList(await t.get('/v1/properties', token)).map((p) => p.id)).toEqual([allowed])
    expectProblem(await t.get(`/v1/properties/${other as string}`, token), {
      code: 'PROPERTY_ACCESS_DENIED', instance: `/v1/properties/${other as string}`, detail: `Your client is not authorised for property '${other as string}'.`,
    })
  })

  it('sends a test grant\'s client to the sandbox only', async () => {
    await grantClient(env, idp, 'test-client', '--mode', 'test')
    expectProblem(await t.get('/v1/properties', tokenOf('test-client')), { code: 'TEST_MODE_UNAVAILABLE', instance: '/v1/properties' })
  })

  it('counts the quota per grant, whichever of its tokens is used', async () => {
    await grantClient(env, idp, 'limited-client', '--rate-limit', '2')
    const first = await t.get('/v1/properties', tokenOf('limited-client'))
    expect({ limit: first.headers['ratelimit-limit'], remaining: first.headers['ratelimit-remaining'], policy: first.headers['ratelimit-policy'] })
      .toEqual({ limit: '2', remaining: '1', policy: '"default";q=2;w=60' })
    expect((await t.get('/v1/properties', tokenOf('limited-client'))).statusCode).toBe(200)
    const refused = await t.get('/v1/properties', tokenOf('limited-client'))
    expectProblem(refused, {
      code: 'RATE_LIMITED', instance: '/v1/properties',
      detail: new RegExp(`^The client of this access token may make 2 requests per 60 seconds; the quota resets in ${String(refused.headers['retry-after'])} seconds\\.$`),
      headers: { 'ratelimit-remaining': '0', ratelimit: `"default";r=0;t=${String(refused.headers['ratelimit-reset'])}` },
    })
  })
})

describe('scopes of tokens', () => {
  it('refuses a token without the route\'s scope with INSUFFICIENT_SCOPE and RFC 6750\'s insufficient_scope', async () => {
    expectProblem(await t.get('/v1/properties', tokenOf('channel-sync', ['guests:read'])), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties', detail: "This access token lacks the scope 'properties:read' that this request needs.",
      headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="properties:read"' },
    })
  })

  it('gives a token no scope that its grant lacks', async () => {
    await grantClient(env, idp, 'guests-only', '--scopes', 'guests:read')
    expectProblem(await t.get('/v1/properties', tokenOf('guests-only', ['properties:read', 'guests:read'])), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties',
    })
  })

  it('reads scp when there is no scope claim: an array, or a string as Entra ID sends it', async () => {
    for (const scp of [['properties:read'], 'properties:read guests:read']) {
      const token = idp.mint({ claims: { client_id: 'channel-sync', scp }, omit: ['scope'] })
      expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    }
    expectProblem(await t.get('/v1/properties', idp.mint({ claims: { client_id: 'channel-sync' }, omit: ['scope'] })), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties',
    })
  })

  it('counts the grant\'s scopes alone where the issuer says `scopes: grant`', async () => {
    const byGrant = await TestGateway.start({ config: { oauth: oauthFor(idp, {}, { scopes: 'grant' }) } })
    const grantEnv = { REDIS_URL, REDIS_PREFIX: byGrant.prefix }
    try {
      expect(await byGrant.gateway.tokens.ready(5000)).toBe(true)
      await grantClient(grantEnv, idp, 'reader', '--scopes', 'properties:read')
      await grantClient(grantEnv, idp, 'guest-reader', '--scopes', 'guests:read')
      expect((await byGrant.get('/v1/properties', tokenOf('reader', []))).statusCode).toBe(200)
      expectProblem(await byGrant.get('/v1/properties', tokenOf('guest-reader', ['properties:read'])), { code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties' })
    } finally {
      await byGrant.close()
    }
  })

  it('spends no quota on a request refused for its scope', async () => {
    await grantClient(env, idp, 'scoped-limited', '--rate-limit', '3')
    for (let i = 0; i < 5; i += 1) {
      const refused = await t.get('/v1/properties', tokenOf('scoped-limited', ['guests:read']))
      expect(refused.statusCode).toBe(403)
      expect(refused.headers['ratelimit-remaining']).toBeUndefined()
    }
    const served = await t.get('/v1/properties', tokenOf('scoped-limited'))
    expect({ status: served.statusCode, remaining: served.headers['ratelimit-remaining'] }).toEqual({ status: 200, remaining: '2' })
  })
})

describe('abuse', () => {
  it('counts forged tokens as 401s of their client address, which then may make no JWKS fetch', async () => {
    const guarded = await TestGateway.start({ config: { oauth: oauthFor(idp), abuse: { authFailuresPerMinute: 3, trackedAddresses: 1000, unknownKeys: 1000 } } })
    try {
      expect(await guarded.gateway.tokens.ready(5000)).toBe(true)
      const forged = (): string => {
        const [header, payload] = idp.mint({ claims: { client_id: 'channel-sync', scope: 'properties:read' } }).split('.')
        return `${header}.${payload}.${Buffer.from('forged signature').toString('base64url')}`
      }
      for (let i = 0; i < 3; i += 1) expect((await guarded.get('/v1/properties', forged())).statusCode).toBe(401)
      // A forged token with a published kid costs a signature check and no look-up: 401 still.
      expect((await guarded.get('/v1/properties', forged())).statusCode).toBe(401)
      // One whose kid would make the gateway fetch the issuer's keys is refused instead.
      const fetches = idp.jwksFetches
      const refused = await guarded.get('/v1/properties', idp.mint({ kid: 'invented-kid', claims: { client_id: 'channel-sync', scope: 'properties:read' } }))
      expectProblem(refused, { code: 'RATE_LIMITED', instance: '/v1/properties', detail: /^Too many requests with a missing or invalid API key from this address/ })
      expect(idp.jwksFetches).toBe(fetches)
    } finally {
      await guarded.close()
    }
  })
})

describe('tokens without a useful end (docs/security.md, "Findings of the review of wave 3", 6)', () => {
  it('refuses a token whose exp is more than oauth.maxTokenLifetimeSeconds after its iat', async () => {
    const now = Math.floor(Date.now() / 1000)
    const detail = 'The access token is valid for longer than this API accepts: its exp is more than 86400 seconds after its iat.'
    for (const claims of [{ iat: now, exp: now + 10 * 365 * 86400 }, { iat: 0, exp: 1e20 }, { iat: now - 60, exp: now + 86400 - 59 }]) {
      const res = await t.get('/v1/properties', idp.mint({ claims: { client_id: 'channel-sync', scope: 'properties:read', ...claims } }))
      expectProblem(res, { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) } })
    }
    // A day exactly is accepted.
    const day = await t.get('/v1/properties', idp.mint({ claims: { client_id: 'channel-sync', scope: 'properties:read', iat: now - 60, exp: now + 86400 - 60 } }))
    expect(day.statusCode).toBe(200)
  })

  it('forgets a remembered token once its signing key leaves its issuer\'s keys', async () => {
    const own = await new MockIdp({ clients: [{ clientId: 'rotating', secret: 'rotating-secret' }] }).listen()
    const g = await TestGateway.start({ config: { oauth: oauthFor(own, { jwksRefreshSeconds: 1 }) } })
    try {
      await grantClient({ REDIS_URL, REDIS_PREFIX: g.prefix }, own, 'rotating', '--scopes', 'properties:read')
      expect(await g.gateway.tokens.ready(5000)).toBe(true)
      const token = own.issue('rotating', ['properties:read'])
      expect((await g.get('/v1/properties', token)).statusCode).toBe(200)
      expect((await g.get('/v1/properties', token)).statusCode).toBe(200)
      // The issuer retires the key that signed it; the gateway's next refresh sees it gone.
      const fetches = own.jwksFetches
      own.rotate('RS256', true)
      expect(await eventually(async () => own.jwksFetches > fetches, 10_000)).toBe(true)
      const refused = await g.get('/v1/properties', token)
      const detail = 'The access token is signed with a key its issuer does not publish (kid).'
      expectProblem(refused, { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) } })
      // A token of the new key is served.
      expect((await g.get('/v1/properties', own.issue('rotating', ['properties:read']))).statusCode).toBe(200)
    } finally {
      await g.close()
      await own.close()
    }
  })
})

describe('the keys of the issuer (JWKS)', () => {
  it('takes a token of a rotated key after one refetch', async () => {
    const fetches = idp.jwksFetches
    const key = idp.rotate('RS256')
    const token = idp.mint({ kid: key.kid, claims: { client_id: 'channel-sync', scope: 'properties:read' } })
    expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
    expect(idp.jwksFetches).toBe(fetches + 1)
  })

  it('fetches the JWKS once per cooldown for a flood of invented key ids, one fetch shared by all', async () => {
    const fresh = await TestGateway.start({ config: { oauth: oauthFor(idp) } })
    try {
      expect(await fresh.gateway.tokens.ready(5000)).toBe(true)
      const flood = async (): Promise<number> => {
        const fetches = idp.jwksFetches
        const answers = await Promise.all(Array.from({ length: 40 }, (_, i) =>
          fresh.get('/v1/properties', idp.mint({ kid: `invented-${i}`, claims: { client_id: 'channel-sync', scope: 'properties:read' } }))))
        for (const res of answers) {
          expectProblem(res, { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: 'The access token is signed with a key its issuer does not publish (kid).' })
        }
        return idp.jwksFetches - fetches
      }
      // The first unknown kid starts one fetch; the cooldown (30 s) holds back every other.
      expect(await flood()).toBe(1)
      expect(await flood()).toBe(0)
    } finally {
      await fresh.close()
    }
  })

  it('keeps the last good keys while the identity provider is down, and reports the failure', async () => {
    const down = await TestGateway.start({ config: { oauth: oauthFor(idp, { jwksRefreshSeconds: 1 }) } })
    const downEnv = { REDIS_URL, REDIS_PREFIX: down.prefix }
    try {
      expect(await down.gateway.tokens.ready(5000)).toBe(true)
      await grantClient(downEnv, idp, 'channel-sync')
      idp.setFailure({ mode: 'jwks-down' })
      const issuer = (): { keys: number; lastError: string | null } => down.gateway.tokens.status().issuers[idp.issuer] as { keys: number; lastError: string | null }
      expect(await eventually(async () => issuer().lastError !== null, 5000)).toBe(true)
      expect(issuer()).toMatchObject({ keys: idp.jwks().keys.length, lastError: 'answered 503' })
      // A token never seen before: verified with the keys fetched before the outage.
      expect((await down.get('/v1/properties', tokenOf('channel-sync'))).statusCode).toBe(200)
      const metrics = await admin(down, '/metrics')
      expect(metrics).toMatch(new RegExp(`gateway_jwks_refresh_total\\{issuer="${idp.issuer.replace(/[.]/g, '\\.')}",result="error"\\} [1-9]`))
      expect(metrics).toMatch(new RegExp(`gateway_jwks_refresh_total\\{issuer="${idp.issuer.replace(/[.]/g, '\\.')}",result="ok"\\} [1-9]`))
    } finally {
      idp.setFailure(undefined)
      await down.close()
    }
  })

  it('answers 503 with Retry-After while no keys were ever fetched, then serves once the provider answers', async () => {
    idp.setFailure({ mode: 'jwks-down' })
    const cold = await TestGateway.start({ config: { oauth: oauthFor(idp, { jwksCooldownSeconds: 1 }) } })
    const coldEnv = { REDIS_URL, REDIS_PREFIX: cold.prefix }
    try {
      await grantClient(coldEnv, idp, 'channel-sync')
      const res = await cold.get('/v1/properties', tokenOf('channel-sync'))
      expectProblem(res, {
        code: 'SERVICE_UNAVAILABLE', instance: '/v1/properties', detail: 'The signing keys of the token\'s issuer cannot be fetched right now; retry shortly.',
      })
      expect(res.headers['retry-after']).toMatch(/^[1-9][0-9]*$/)
      expect(res.headers['www-authenticate']).toBeUndefined()
      idp.setFailure(undefined)
      expect(await eventually(async () => (await cold.get('/v1/properties', tokenOf('channel-sync'))).statusCode === 200, 10_000, 200)).toBe(true)
    } finally {
      idp.setFailure(undefined)
      await cold.close()
    }
  })

  it('gives up on a JWKS slower than jwksTimeoutMs, keeping what it had', async () => {
    const slow = await TestGateway.start({ config: { oauth: oauthFor(idp, { jwksRefreshSeconds: 1, jwksTimeoutMs: 200 }) } })
    try {
      expect(await slow.gateway.tokens.ready(5000)).toBe(true)
      idp.setFailure({ mode: 'jwks-slow', latencyMs: 3000 })
      expect(await eventually(async () => slow.gateway.tokens.status().issuers[idp.issuer]?.lastError === 'no answer within 200 ms', 8000)).toBe(true)
      expect(slow.gateway.tokens.status().issuers[idp.issuer]?.keys).toBe(idp.jwks().keys.length)
    } finally {
      idp.setFailure(undefined)
      await slow.close()
    }
  })

  it('shows each issuer in /status: its keys, when they were fetched, the last error', async () => {
    const status = JSON.parse(await admin(t, '/status')) as { oauth: { issuers: Record<string, unknown>; verifiedTokens: { entries: number } } }
    expect(status.oauth.issuers).toEqual({
      [idp.issuer]: { keys: idp.jwks().keys.length, fetchedAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/), lastError: null, lastErrorAt: null },
    })
    expect(status.oauth.verifiedTokens.entries).toBeGreaterThan(0)
  })
})

describe('a token that names no key (no kid)', () => {
  it('is verified by the one key of its algorithm, and refused when several could have signed it', async () => {
    const own = await new MockIdp().listen()
    const g = await TestGateway.start({ config: { oauth: oauthFor(own) } })
    try {
      expect(await g.gateway.tokens.ready(5000)).toBe(true)
      await grantClient({ REDIS_URL, REDIS_PREFIX: g.prefix }, own, 'no-kid-client')
      const claims = { client_id: 'no-kid-client', scope: 'properties:read' }
      // One RS256 and one ES256 key published: each algorithm has its one key.
      expect((await g.get('/v1/properties', own.mint({ claims, omit: ['kid'] }))).statusCode).toBe(200)
      expect((await g.get('/v1/properties', own.mint({ claims, signature: 'ES256', omit: ['kid'] }))).statusCode).toBe(200)
      // A second RS256 key (a rotation, seen through a token that names it): two candidates.
      const next = own.rotate('RS256')
      expect((await g.get('/v1/properties', own.mint({ claims, kid: next.kid }))).statusCode).toBe(200)
      expectProblem(await g.get('/v1/properties', own.mint({ claims, omit: ['kid'] })), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties',
        detail: 'The access token names no key (kid) and its issuer publishes several that could have signed it.',
      })
    } finally {
      await g.close()
      await own.close()
    }
  })
})

describe('answers', () => {
  it('carry a request id, whatever the refusal', async () => {
    const res = await t.get('/v1/properties', 'abc.def.ghi')
    expect(res.headers['service-request-id']).toMatch(REQUEST_ID)
  })
})
