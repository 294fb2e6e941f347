import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { Agent, request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { IssuerKeys } from '../../src/oauth/jwks.js'
import { TestGateway } from '../helpers/gateway.js'
import { grantClient, invalidTokenChallenge, keyTool, oauthFor } from '../helpers/oauth.js'
import { expectProblem, TIMESTAMP } from '../helpers/problem.js'
import { eventually, freePort, REDIS_URL } from '../helpers/redis.js'

// Rules of access tokens that mutation testing found undefended (docs/architecture.md,
// "Access tokens"): what the gateway makes of its issuer's JWKS answer (the keys it keeps, the
// error an operator reads in /status and the log, the size it refuses, the Retry-After while it
// has no keys), the counters of /status, and claims at the edge of what JSON can say. Every
// object under test is built inside the test that checks it: a rule broken while a gateway
// starts must fail that test, not the set-up of a file. The JWKS answers come from a server of
// this file (the stand-in identity provider answers only well-formed ones); tokens from the
// stand-in identity provider, over real sockets, with grants in real Redis.

/** The most a JWKS answer may hold (a provider publishes a handful of keys). */
const LIMIT = 256 * 1024
const CLAIMS = { client_id: 'kills-client', scope: 'properties:read' }
const now = (): number => Math.floor(Date.now() / 1000)
const b64 = (text: string): string => Buffer.from(text).toString('base64url')

// Real keys, as a provider publishes them: one RS256 (rs256-1) and one ES256 (es256-2).
const published = new MockIdp().jwks().keys
const [rsKey, esKey] = published as [Record<string, unknown>, Record<string, unknown>]

/** A server answering JWKS requests as the test says; it records each request's Accept. */
class JwksServer {
  answer: (res: ServerResponse) => void = (res) => res.end()
  readonly accepts: (string | undefined)[] = []
  private server: Server | undefined

  async listen(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      this.accepts.push(req.headers.accept)
      req.resume()
      this.answer(res)
    })
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve))
  }

  get uri(): string {
    return `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}/certs`
  }

  async close(): Promise<void> {
    await new Promise((resolve) => this.server?.close(resolve))
  }
}

function json(status: number, body: unknown): (res: ServerResponse) => void {
  return (res) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body)
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
    res.end(text)
  }
}

/** A JWKS of exactly `bytes` bytes (JSON padded with spaces), sent with or without Content-Length. */
function padded(bytes: number, declared: boolean): (res: ServerResponse) => void {
  const text = JSON.stringify({ keys: [rsKey, esKey] })
  const body = text + ' '.repeat(bytes - Buffer.byteLength(text))
  return (res) => {
    res.writeHead(200, declared ? { 'content-type': 'application/json', 'content-length': body.length } : { 'content-type': 'application/json' })
    // Several writes: without a Content-Length the answer is chunked, and read chunk by chunk.
    for (let i = 0; i < body.length; i += 16 * 1024) res.write(body.slice(i, i + 16 * 1024))
    res.end()
  }
}

describe('the keys an issuer\'s JWKS answer gives, and the error an operator reads in /status', () => {
  const server = new JwksServer()
  const dispatcher = new Agent({ connections: 4 })
  beforeAll(async () => {
    await server.listen()
  })
  afterAll(async () => {
    await server.close()
    await dispatcher.close()
  })

  function keysOf(uri = server.uri, options: { cooldownMs?: number; onFetch?: (issuer: string, result: 'ok' | 'error') => void; onError?: (issuer: string, message: string) => void } = {}): IssuerKeys {
    return new IssuerKeys({ issuer: 'https://id.example/realms/kills', jwksUri: uri, refreshMs: 3_600_000, cooldownMs: options.cooldownMs ?? 30_000, timeoutMs: 2000, dispatcher, ...options })
  }

  it('keeps the signing keys, leaving out keys for encryption and entries that are no key; it asks for a JWKS', async () => {
    server.answer = json(200, { keys: [rsKey, { ...esKey, kid: 'enc-1', use: 'enc' }, null, 'text', { kid: 'no-kty' }, esKey] })
    const before = Date.now()
    const keys = keysOf()
    try {
      // Nothing fetched yet: the fetch the constructor started cannot have answered.
      expect(keys.ready).toBe(false)
      expect(keys.status()).toEqual({ keys: 0, fetchedAt: null, lastError: null, lastErrorAt: null })
      await keys.refresh()
      const after = Date.now()
      expect(keys.ready).toBe(true)
      expect([...keys.kids]).toEqual(['rs256-1', 'es256-2'])
      const status = keys.status()
      expect(status).toEqual({ keys: 2, fetchedAt: expect.stringMatching(TIMESTAMP), lastError: null, lastErrorAt: null })
      expect(Date.parse(status.fetchedAt as string)).toBeGreaterThanOrEqual(before)
      expect(Date.parse(status.fetchedAt as string)).toBeLessThanOrEqual(after)
      expect(server.accepts.at(-1)).toBe('application/jwk-set+json, application/json')
    } finally {
      keys.close()
    }
  })

  it('reports each fetch to the metric and each failure to the log', async () => {
    const fetches: string[] = []
    const errors: string[] = []
    server.answer = json(200, { keys: [rsKey] })
    const keys = keysOf(server.uri, { onFetch: (issuer, result) => fetches.push(`${issuer} ${result}`), onError: (issuer, message) => errors.push(`${issuer} ${message}`) })
    try {
      await keys.refresh()
      server.answer = json(503, { error: 'down' })
      await keys.refresh()
      expect(fetches).toEqual(['https://id.example/realms/kills ok', 'https://id.example/realms/kills error'])
      expect(errors).toEqual(['https://id.example/realms/kills answered 503'])
      expect(keys.status()).toMatchObject({ keys: 1, lastError: 'answered 503' })
    } finally {
      keys.close()
    }
  })

  it.each([
    ['exactly the limit, with Content-Length', padded(LIMIT, true)],
    ['exactly the limit, chunked', padded(LIMIT, false)],
  ])('takes a JWKS of %s', async (_name, answer) => {
    server.answer = answer
    const keys = keysOf()
    try {
      await keys.refresh()
      expect(keys.status()).toMatchObject({ keys: 2, lastError: null })
    } finally {
      keys.close()
    }
  })

  const refusals: [string, (res: ServerResponse) => void, string][] = [
    ['null', json(200, 'null'), 'the answer is not a JWKS (no "keys" array)'],
    ['an object without keys', json(200, { issuer: 'x' }), 'the answer is not a JWKS (no "keys" array)'],
    ['keys for encryption only', json(200, { keys: [{ ...rsKey, use: 'enc' }] }), 'the JWKS holds no signing key'],
    ['text that is not JSON', json(200, '<html>maintenance</html>'), 'the answer is not JSON'],
    ['204', (res) => {
      res.writeHead(204)
      res.end()
    }, 'answered 204'],
    ['300', json(300, { keys: [rsKey] }), 'answered a redirect (300), which is not followed'],
    ['a redirect (302)', (res) => {
      res.writeHead(302, { location: 'https://elsewhere.example/certs', 'content-length': 0 })
      res.end()
    }, 'answered a redirect (302), which is not followed'],
    ['400', json(400, { error: 'invalid_request' }), 'answered 400'],
    ['503', json(503, '<html>503</html>'), 'answered 503'],
    ['a declared length over the limit', padded(LIMIT + 1, true), `answered ${LIMIT + 1} bytes, more than a JWKS takes`],
    ['more bytes than the limit, chunked', padded(LIMIT + 1, false), 'answered more bytes than a JWKS takes'],
  ]

  it.each(refusals)('keeps no keys from an answer of %s, and says why', async (_name, answer, message) => {
    server.answer = answer
    const before = Date.now()
    const keys = keysOf()
    try {
      await keys.refresh()
      const after = Date.now()
      expect(keys.ready).toBe(false)
      const status = keys.status()
      expect(status).toEqual({ keys: 0, fetchedAt: null, lastError: message, lastErrorAt: expect.stringMatching(TIMESTAMP) })
      expect(Date.parse(status.lastErrorAt as string)).toBeGreaterThanOrEqual(before)
      expect(Date.parse(status.lastErrorAt as string)).toBeLessThanOrEqual(after)
    } finally {
      keys.close()
    }
  })

  it('names the network error of a provider that refuses the connection', async () => {
    const keys = keysOf(`http://127.0.0.1:${await freePort()}/certs`)
    try {
      await keys.refresh()
      expect(keys.status()).toMatchObject({ keys: 0, fetchedAt: null, lastError: 'the fetch failed (ECONNREFUSED)' })
    } finally {
      keys.close()
    }
  })

  it('lets requests that find no key wait for the fetch under way, however many', async () => {
    let release: () => void = () => undefined
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    server.answer = (res) => void held.then(() => json(200, { keys: [rsKey] })(res))
    const keys = keysOf()
    try {
      const waits = [keys.refetch(), keys.refetch(), keys.refetch()].map(async (p) => {
        await p
        return keys.ready
      })
      release()
      expect(await Promise.all(waits)).toEqual([true, true, true])
    } finally {
      keys.close()
    }
  })

  it('fetches again for a request at most once per cooldown, and tells the seconds left in Retry-After', async () => {
    server.answer = json(503, 'down')
    const keys = keysOf(server.uri, { cooldownMs: 30_000 })
    try {
      await keys.refresh()
      const asked = server.accepts.length
      const before = Date.now()
      await keys.refetch()
      expect(server.accepts.length).toBe(asked + 1)
      // The cooldown counts from the request that caused the fetch, made between `before` and now.
      const retryAfter = keys.retryAfterSeconds
      expect(retryAfter).toBeLessThanOrEqual(30)
      expect(retryAfter).toBeGreaterThanOrEqual(Math.ceil((before + 30_000 - Date.now()) / 1000))
      await keys.refetch()
      expect(server.accepts.length).toBe(asked + 1)
    } finally {
      keys.close()
    }
  })
})

describe('a gateway\'s verdicts on tokens, built in each test', () => {
  const idp = new MockIdp()
  const redis = new Redis(REDIS_URL)
  beforeAll(async () => {
    await idp.listen()
  })
  afterAll(async () => {
    await idp.close()
    redis.disconnect()
  })

  async function started(): Promise<TestGateway> {
    const t = await TestGateway.start({ config: { oauth: oauthFor(idp) } })
    expect(await t.gateway.tokens.ready(5000)).toBe(true)
    await grantClient({ REDIS_URL, REDIS_PREFIX: t.prefix }, idp, 'kills-client')
    return t
  }

  async function status(t: TestGateway): Promise<unknown> {
    if (!t.gateway.admin.server.listening) await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
    const port = (t.gateway.admin.server.address() as { port: number }).port
    return (JSON.parse(await (await request(`http://127.0.0.1:${port}/status`)).body.text()) as { oauth: unknown }).oauth
  }

  it('counts remembered tokens and their hit ratio in /status', async () => {
    const t = await started()
    try {
      const issuer = { keys: 2, fetchedAt: expect.stringMatching(TIMESTAMP), lastError: null, lastErrorAt: null }
      expect(await status(t)).toEqual({
        issuers: { [idp.issuer]: issuer }, verifiedTokens: { entries: 0, hitRatio: 0 }, grants: { entries: 0, unknownEntries: 0, hitRatio: 0 },
      })
      const token = idp.mint({ claims: CLAIMS })
      for (let i = 0; i < 3; i += 1) expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
      // Three uses: one check, two hits; the grant looked up once, then found twice.
      expect(await status(t)).toEqual({
        issuers: { [idp.issuer]: issuer }, verifiedTokens: { entries: 1, hitRatio: 0.667 }, grants: { entries: 1, unknownEntries: 0, hitRatio: 0.667 },
      })
    } finally {
      await t.close()
    }
  })

  it('allows the clock skew of the config on exp, and takes an audience list that names this API', async () => {
    const t = await started()
    try {
      expect((await t.get('/v1/properties', idp.mint({ claims: { ...CLAIMS, exp: now() - 50 } }))).statusCode).toBe(200)
      expect((await t.get('/v1/properties', idp.mint({ claims: { ...CLAIMS, aud: ['account', 'partner-api'] } }))).statusCode).toBe(200)
    } finally {
      await t.close()
    }
  })

  it('refuses a header or payload of JSON null, an empty sub and an exp too large for a number', async () => {
    const t = await started()
    try {
      const [header, payload, signature] = idp.mint({ claims: CLAIMS }).split('.') as [string, string, string]
      const cases: [string, string][] = [
        [`${b64('null')}.${payload}.${signature}`, 'The access token is not a well-formed JWT: its header is not a JSON object.'],
        [`${header}.${b64('null')}.${signature}`, 'The access token is not a well-formed JWT: its payload is not a JSON object.'],
        [idp.mint({ claims: { ...CLAIMS, sub: '' } }), 'The access token lacks the claim sub.'],
        [idp.mint({ claims: { ...CLAIMS, nbf: now() + 120 } }), 'The access token is not valid yet (nbf).'],
        // JSON's 1e400 is Infinity: no time.
        [idp.mint({ rawPayload: `{"iss":${JSON.stringify(idp.issuer)},"sub":"kills-client","aud":"partner-api","client_id":"kills-client","scope":"properties:read","iat":${now()},"exp":1e400}` }),
          'The access token lacks the claim exp.'],
      ]
      for (const [token, detail] of cases) {
        expectProblem(await t.get('/v1/properties', token), {
          code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail, headers: { 'www-authenticate': invalidTokenChallenge(detail) },
        })
      }
    } finally {
      await t.close()
    }
  })

  it('names the failed check of a token signed by another key, or by none the issuer publishes', async () => {
    const t = await started()
    try {
      const [header, payload] = idp.mint({ claims: CLAIMS }).split('.') as [string, string]
      const forged = `${header}.${payload}.${b64('forged signature')}`
      expectProblem(await t.get('/v1/properties', forged), { code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: 'The signature of the access token is not valid.' })
      // The kid of the RS256 key in a token that says ES256: no key of that kid has that type.
      expectProblem(await t.get('/v1/properties', idp.mint({ claims: CLAIMS, kid: 'rs256-1', header: { alg: 'ES256' } })), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: 'The access token is signed with a key its issuer does not publish (kid).',
      })
      // A critical header extension no one here knows (RFC 7515 4.1.11).
      expectProblem(await t.get('/v1/properties', idp.mint({ claims: CLAIMS, header: { crit: ['urn:example:unknown'], 'urn:example:unknown': true } })), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: 'The access token is not a well-formed JWS.',
      })
      // A second RS256 key, seen through a token naming it: a token naming none has two candidates.
      const next = idp.rotate('RS256')
      expect((await t.get('/v1/properties', idp.mint({ claims: CLAIMS, kid: next.kid }))).statusCode).toBe(200)
      expectProblem(await t.get('/v1/properties', idp.mint({ claims: CLAIMS, omit: ['kid'] })), {
        code: 'INVALID_ACCESS_TOKEN', instance: '/v1/properties', detail: 'The access token names no key (kid) and its issuer publishes several that could have signed it.',
      })
    } finally {
      await t.close()
    }
  })

  it('gives a remembered token the grant its client has now, after a revocation and a new registration', async () => {
    const t = await TestGateway.start({ config: { oauth: oauthFor(idp) } })
    const env = { REDIS_URL, REDIS_PREFIX: t.prefix }
    try {
      expect(await t.gateway.tokens.ready(5000)).toBe(true)
      const { id } = await grantClient(env, idp, 'regranted-client', '--scopes', 'properties:read')
      const token = idp.mint({ claims: { client_id: 'regranted-client', scope: 'properties:read guests:read' } })
      expect((await t.get('/v1/properties', token)).statusCode).toBe(200)
      expect(await keyTool(env, 'revoke', id)).toEqual({ code: 0, out: [`revoked ${id}`], err: [] })
      const code = async (): Promise<string | undefined> => (JSON.parse((await t.get('/v1/properties', token)).body) as { code?: string }).code
      expect(await eventually(async () => (await code()) === 'CLIENT_NOT_REGISTERED', 1000)).toBe(true)
      await grantClient(env, idp, 'regranted-client', '--scopes', 'guests:read')
      // The same token, remembered: its scopes are now those of the new grant.
      expect(await eventually(async () => (await code()) !== 'CLIENT_NOT_REGISTERED', 1000)).toBe(true)
      expectProblem(await t.get('/v1/properties', token), {
        code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties', detail: "This access token lacks the scope 'properties:read' that this request needs.",
        headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="properties:read"' },
      })
    } finally {
      await t.close()
    }
  })

  it('answers 503 when the grants cannot be read, saying so', async () => {
    const t = await TestGateway.start({
      config: { oauth: oauthFor(idp) },
      keyStore: (prefix) => {
        const store = new RedisKeyStore(redis, prefix)
        store.findGrant = async () => Promise.reject(new Error('the store is unreachable'))
        return store
      },
    })
    try {
      expect(await t.gateway.tokens.ready(5000)).toBe(true)
      expectProblem(await t.get('/v1/properties', idp.mint({ claims: CLAIMS })), {
        code: 'SERVICE_UNAVAILABLE', instance: '/v1/properties', detail: 'Access tokens cannot be checked right now; retry shortly.',
      })
    } finally {
      await t.close()
    }
  })

  it('logs a failed JWKS fetch, once per failure', async () => {
    idp.setFailure({ mode: 'jwks-down' })
    const t = await TestGateway.start({ config: { oauth: oauthFor(idp) } })
    try {
      expect(await eventually(async () => t.logs.records().some((r) => r.msg === 'JWKS fetch failed; the last keys fetched stay in use'), 5000)).toBe(true)
      expect(t.logs.records().filter((r) => r.msg === 'JWKS fetch failed; the last keys fetched stay in use'))
        .toEqual([{
          level: 'warn', time: expect.any(Number), pid: process.pid, hostname: expect.any(String),
          issuer: idp.issuer, error: 'answered 503', msg: 'JWKS fetch failed; the last keys fetched stay in use',
        }])
    } finally {
      idp.setFailure(undefined)
      await t.close()
    }
  })
})
