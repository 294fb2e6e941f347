import { spawn } from 'node:child_process'
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose'
import { request } from 'undici'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { freePort } from '../helpers/redis.js'

// The stand-in identity provider over real sockets, as the demo, the bench and the tests use
// it. Its tokens are checked here with jose against its own published JWKS, not with the
// gateway's code.

const SECRET = 'partner-secret'
let idp: MockIdp

interface Answer { statusCode: number; headers: Record<string, string | string[] | undefined>; body: string }

async function http(method: string, url: string, options: { headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  const res = await request(url, { method: method as 'GET', headers: options.headers, body: options.body })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

function tokenRequest(form: Record<string, string>, basic?: string): Promise<Answer> {
  return http('POST', idp.tokenUrl, {
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(basic === undefined ? {} : { authorization: `Basic ${Buffer.from(basic).toString('base64')}` }) },
    body: new URLSearchParams(form).toString(),
  })
}

async function jwks(): Promise<JSONWebKeySet> {
  return JSON.parse((await http('GET', idp.jwksUri)).body) as JSONWebKeySet
}

beforeAll(async () => {
  idp = await new MockIdp({ clients: [{ clientId: 'partner', secret: SECRET, scopes: ['properties:read', 'guests:read'] }] }).listen()
})
afterAll(async () => {
  await idp.close()
})
afterEach(() => {
  idp.setFailure(undefined)
  idp.settings = { ...idp.settings, profile: 'rfc9068', alg: 'RS256' }
})

describe('the token endpoint (client credentials)', () => {
  it('issues an RFC 9068 access token to a client with its secret (HTTP Basic)', async () => {
    const res = await tokenRequest({ grant_type: 'client_credentials', scope: 'properties:read' }, `partner:${SECRET}`)
    expect({ status: res.statusCode, type: res.headers['content-type'], cache: res.headers['cache-control'] })
      .toEqual({ status: 200, type: 'application/json', cache: 'no-store' })
    const body = JSON.parse(res.body) as { access_token: string }
    expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 300, scope: 'properties:read' })
    const { payload, protectedHeader } = await jwtVerify(body.access_token, createLocalJWKSet(await jwks()), {
      issuer: idp.issuer, audience: 'partner-api', typ: 'at+jwt', algorithms: ['RS256'],
    })
    expect(protectedHeader).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: expect.stringMatching(/^rs256-\d+$/) })
    expect(payload).toEqual({
      iss: idp.issuer, sub: 'partner', aud: 'partner-api', exp: (payload.iat as number) + 300, iat: expect.any(Number), jti: expect.any(String),
      client_id: 'partner', scope: 'properties:read',
    })
  })

  it('takes the client in the form too, gives every allowed scope when none is asked, and an audience when one is', async () => {
    const res = await tokenRequest({ grant_type: 'client_credentials', client_id: 'partner', client_secret: SECRET, audience: 'other-api' })
    const body = JSON.parse(res.body) as { access_token: string; scope: string }
    expect(body.scope).toBe('properties:read guests:read')
    const { payload } = await jwtVerify(body.access_token, createLocalJWKSet(await jwks()), { audience: 'other-api' })
    expect(payload.scope).toBe('properties:read guests:read')
  })

  it('signs with ES256 and sends Keycloak\'s shape with the keycloak profile', async () => {
    idp.settings = { ...idp.settings, alg: 'ES256', profile: 'keycloak' }
    const body = JSON.parse((await tokenRequest({ grant_type: 'client_credentials', scope: 'guests:read' }, `partner:${SECRET}`)).body) as { access_token: string }
    const { payload, protectedHeader } = await jwtVerify(body.access_token, createLocalJWKSet(await jwks()), { algorithms: ['ES256'], typ: 'JWT' })
    expect(protectedHeader.kid).toMatch(/^es256-\d+$/)
    expect(payload).toMatchObject({ sub: 'service-account-partner', azp: 'partner', typ: 'Bearer', scope: 'profile email guests:read' })
    expect(payload.client_id).toBeUndefined()
  })

  it.each([
    ['a wrong secret', { grant_type: 'client_credentials' }, 'partner:wrong', 401, { error: 'invalid_client', error_description: 'unknown client or wrong secret' }],
    ['an unknown client', { grant_type: 'client_credentials' }, `stranger:${SECRET}`, 401, { error: 'invalid_client', error_description: 'unknown client or wrong secret' }],
    ['another grant type', { grant_type: 'password' }, `partner:${SECRET}`, 400, { error: 'unsupported_grant_type', error_description: 'only client_credentials' }],
    ['a scope the client may not have', { grant_type: 'client_credentials', scope: 'guests:write' }, `partner:${SECRET}`, 400,
      { error: 'invalid_scope', error_description: "scope 'guests:write' is not allowed for this client" }],
  ])('refuses %s as RFC 6749 5.2 says', async (_name, form, basic, status, error) => {
    const res = await tokenRequest(form, basic)
    expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown }).toEqual({ status, body: error })
    if (status === 401) expect(res.headers['www-authenticate']).toBe('Basic realm="partners"')
  })
})

describe('the JWKS and its switches', () => {
  it('publishes an RS256 and an ES256 key, and its discovery document names them all', async () => {
    const keys = (await jwks()).keys
    expect(keys.map((k) => ({ kty: k.kty, alg: k.alg, use: k.use }))).toEqual([{ kty: 'RSA', alg: 'RS256', use: 'sig' }, { kty: 'EC', alg: 'ES256', use: 'sig' }])
    for (const key of keys) expect(key.d).toBeUndefined()
    const discovery = JSON.parse((await http('GET', `${idp.realmUrl}/.well-known/openid-configuration`)).body) as Record<string, unknown>
    expect(discovery).toMatchObject({ issuer: idp.issuer, token_endpoint: idp.tokenUrl, jwks_uri: idp.jwksUri })
  })

  it('rotates a key: the new one signs, the old one stays published until retired', async () => {
    const before = (await jwks()).keys.map((k) => k.kid)
    const rotated = JSON.parse((await http('POST', `${idp.url}/__mock/rotate`, { body: JSON.stringify({ alg: 'RS256' }) })).body) as { kid: string; keys: string[] }
    expect(rotated.keys).toEqual([...before, rotated.kid])
    const body = JSON.parse((await tokenRequest({ grant_type: 'client_credentials' }, `partner:${SECRET}`)).body) as { access_token: string }
    expect(decodeProtectedHeader(body.access_token).kid).toBe(rotated.kid)
    const retired = JSON.parse((await http('POST', `${idp.url}/__mock/rotate`, { body: JSON.stringify({ alg: 'RS256', retire: true }) })).body) as { kid: string; keys: string[] }
    expect(retired.keys.filter((k) => k.startsWith('rs256-'))).toEqual([retired.kid])
  })

  it('answers the JWKS with 503 while down, the given number of times', async () => {
    await http('PUT', `${idp.url}/__mock/failure`, { body: JSON.stringify({ mode: 'jwks-down', times: 2 }) })
    expect((await http('GET', idp.jwksUri)).statusCode).toBe(503)
    expect((await http('GET', idp.jwksUri)).statusCode).toBe(503)
    expect((await http('GET', idp.jwksUri)).statusCode).toBe(200)
  })

  it('answers the JWKS late while slow', async () => {
    await http('PUT', `${idp.url}/__mock/failure`, { body: JSON.stringify({ mode: 'jwks-slow', latencyMs: 3000 }) })
    const late = await request(idp.jwksUri, { headersTimeout: 200 }).then(() => 'answered', (e: Error & { code?: string }) => e.code)
    expect(late).toBe('UND_ERR_HEADERS_TIMEOUT')
    await http('DELETE', `${idp.url}/__mock/failure`)
    expect((await http('GET', idp.jwksUri)).statusCode).toBe(200)
  })

  it('logs every request, to count JWKS fetches', async () => {
    await http('DELETE', `${idp.url}/__mock/requests`)
    await http('GET', idp.jwksUri)
    await http('GET', idp.jwksUri)
    const log = JSON.parse((await http('GET', `${idp.url}/__mock/requests`)).body) as { method: string; path: string }[]
    expect(log.map((r) => `${r.method} ${r.path}`)).toEqual([`GET /realms/partners/protocol/openid-connect/certs`, 'GET /realms/partners/protocol/openid-connect/certs'])
    expect(idp.jwksFetches).toBe(2)
  })
})

describe('minting tokens that are wrong in a chosen way', () => {
  it('mints unsigned and HS256-with-the-public-key tokens, and any claims', async () => {
    const none = JSON.parse((await http('POST', `${idp.url}/__mock/mint`, { body: JSON.stringify({ signature: 'none', claims: { aud: 'elsewhere' }, omit: ['exp'] }) })).body) as { token: string }
    const [header, payload, signature] = none.token.split('.')
    expect(JSON.parse(Buffer.from(header as string, 'base64url').toString())).toMatchObject({ alg: 'none' })
    expect(JSON.parse(Buffer.from(payload as string, 'base64url').toString())).toMatchObject({ aud: 'elsewhere' })
    expect(JSON.parse(Buffer.from(payload as string, 'base64url').toString()).exp).toBeUndefined()
    expect(signature).toBe('')
    const hs = idp.mint({ signature: 'HS256-with-public-key' })
    expect(decodeProtectedHeader(hs).alg).toBe('HS256')
    await expect(jwtVerify(hs, createLocalJWKSet(await jwks()))).rejects.toThrow()
  })

  it('mints many at once over HTTP, each distinct', async () => {
    const { tokens } = JSON.parse((await http('POST', `${idp.url}/__mock/mint`, { body: JSON.stringify({ count: 3, signature: 'ES256' }) })).body) as { tokens: string[] }
    expect(new Set(tokens).size).toBe(3)
    for (const token of tokens) await jwtVerify(token, createLocalJWKSet(await jwks()), { algorithms: ['ES256'] })
  })
})

describe('npm run mock-idp', () => {
  it('listens on MOCK_IDP_PORT and issues tokens to its one client', async () => {
    const port = await freePort()
    // Its own process group, signalled whole (npm does not pass a signal on to its script).
    const child = spawn('npm', ['run', '--silent', 'mock-idp'], { env: { ...process.env, MOCK_IDP_PORT: String(port) }, stdio: ['ignore', 'pipe', 'inherit'], detached: true })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    let printed = ''
    child.stdout.on('data', (c: Buffer) => { printed += c.toString() })
    try {
      const deadline = Date.now() + 15_000
      while (!printed.includes('stand-in identity provider') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
      expect(printed.trim()).toBe(`stand-in identity provider: issuer http://127.0.0.1:${port}/realms/partners, JWKS http://127.0.0.1:${port}/realms/partners/protocol/openid-connect/certs, tokens http://127.0.0.1:${port}/realms/partners/protocol/openid-connect/token (client 'dev-client')`)
      const res = await request(`http://127.0.0.1:${port}/realms/partners/protocol/openid-connect/token`, {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from('dev-client:dev-secret').toString('base64')}` },
        body: 'grant_type=client_credentials&scope=properties%3Aread',
      })
      expect(res.statusCode).toBe(200)
      expect(await res.body.json()).toMatchObject({ token_type: 'Bearer', scope: 'properties:read' })
    } finally {
      process.kill(-(child.pid as number), 'SIGTERM')
      await exited
    }
  })
})

