import { shipped, startWithService } from '../helpers/declared.js'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { MockService } from '../../mocks/service/server.js'
import { generateGuests, type Guest } from '../../mocks/service/data.js'
import { loadConfig, type FileConfigInput } from '../../src/config.js'
import { digestKey } from '../../src/keys/format.js'
import { ACME_HOST } from '../helpers/config.js'
import { checkAnswer } from '../helpers/contract.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { grantClient, issuerEnv, keyTool, oauthFor } from '../helpers/oauth.js'
import { expectProblem } from '../helpers/problem.js'
import { REDIS_URL } from '../helpers/redis.js'

// Scopes on every route (docs/architecture.md, "Scopes"): the key tool's --scopes, the check at
// step 4 on built-in and declared routes (the config's own scopes and the defaults), the quota
// it spares, and X-Service-Scopes sent to services, for keys and for access tokens.

const SERVICE_TOKEN = 'scopes-service-token'
const idp = new MockIdp({})
const redis = new Redis(REDIS_URL)
let service: MockService
let t: TestGateway
let env: Record<string, string>

async function createKey(...flags: string[]): Promise<{ id: string; key: string; scopes: string[] | '*' }> {
  const run = await keyTool(env, 'create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json', ...flags)
  expect(run.err).toEqual([])
  return JSON.parse(run.out[0] as string) as { id: string; key: string; scopes: string[] | '*' }
}

async function call(method: string, path: string, credential: string, body?: string): Promise<Answer> {
  const headers: Record<string, string> = { host: ACME_HOST, 'user-agent': 'scopes-test/1.0', authorization: `Bearer ${credential}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await request(`${t.url}${path}`, { method: method as 'GET', headers, body })
  const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
  checkAnswer(method, path, answer, t.gateway.app.gatewayConfig)
  return answer
}

const KNOWN = ['events:read', 'guests:read', 'guests:write', 'housekeeping:read', 'properties:read', 'request-logs:read', 'webhooks:read', 'webhooks:write']
const guest = generateGuests('acme')[0] as Guest

beforeAll(async () => {
  await idp.listen()
  service = await new MockService({ token: SERVICE_TOKEN }).listen()
  // The shipped routes, the rooms route with a scope of its own.
  const routes = shipped.routes.map((r) => (r.path === '/v1/rooms' ? { ...r, scopes: { GET: 'housekeeping:read' } } : r))
  t = await TestGateway.start({
    config: { upstreams: { bookings: { url: service.url, tokenHeader: 'X-Service-Token' } } as FileConfigInput['upstreams'], routes, oauth: oauthFor(idp) },
    env: { UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN },
  })
  // The key tool reads the config file: one that declares the same routes.
  const dir = mkdtempSync(join(tmpdir(), 'gw-scopes-'))
  const file = join(dir, 'config.json')
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync('config/default.json', 'utf8')) as object, routes }))
  env = { REDIS_URL, REDIS_PREFIX: t.prefix, CONFIG_FILE: file, ...issuerEnv(idp) }
  expect(await t.gateway.tokens.ready(5000)).toBe(true)
})

afterAll(async () => {
  await t.close()
  await service.close()
  await idp.close()
  redis.disconnect()
})

beforeEach(() => {
  service.received.length = 0
})

describe('the key tool\'s --scopes', () => {
  it('stores the scopes given and shows them in create, show and list', async () => {
    const { id, key, scopes } = await createKey('--scopes', 'properties:read,guests:read', '--name', 'Reader')
    expect(scopes).toEqual(['properties:read', 'guests:read'])
    const shown = await keyTool(env, 'show', id, '--json')
    expect(JSON.parse(shown.out[0] as string)).toEqual({
      id, type: 'api_key', brand: 'acme', mode: 'live', properties: '*', scopes: ['properties:read', 'guests:read'], status: 'active', name: 'Reader',
      expiresAt: null, rateLimit: null, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null,
      createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    })
    const text = await keyTool(env, 'show', id)
    expect(text.out[0]).toMatch(new RegExp(`^${id}  acme  live  active  all properties  expires never  rate limit default  scopes properties:read,guests:read  created `))
    const listed = JSON.parse((await keyTool(env, 'list', '--json')).out[0] as string) as { id: string; scopes: unknown }[]
    expect(listed.find((k) => k.id === id)?.scopes).toEqual(['properties:read', 'guests:read'])
    expect(JSON.stringify([shown, text, listed])).not.toContain(key)
  })

  it('gives a key without --scopes every scope, shown as "*"', async () => {
    const { id, scopes } = await createKey()
    expect(scopes).toBe('*')
    expect(JSON.parse((await keyTool(env, 'show', id, '--json')).out[0] as string)).toMatchObject({ scopes: '*' })
  })

  it('refuses an unknown scope with exit 2, naming the known ones', async () => {
    expect(await keyTool(env, 'create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--scopes', 'properties:read,bookings:read')).toEqual({
      code: 2, out: [], err: [`unknown scope 'bookings:read' (known: ${KNOWN.join(', ')})`],
    })
  })

  it('treats a key stored before scopes existed as one with every scope', async () => {
    const { id, key } = await createKey('--scopes', 'guests:read')
    await redis.hdel(`${t.prefix}key:${digestKey(key)}`, 'scopes')
    expect(JSON.parse((await keyTool(env, 'show', id, '--json')).out[0] as string)).toMatchObject({ scopes: '*' })
    expect((await call('GET', '/v1/properties', key)).statusCode).toBe(200)
    expect((await call('POST', '/v1/guests', key, JSON.stringify({ firstName: 'Ada', lastName: 'Lovelace', email: 'ada@example.com' }))).statusCode).toBe(201)
  })
})

describe('the scope check (step 4, after the brand, before the quota)', () => {
  it('refuses a key without properties:read on the properties endpoints', async () => {
    const { key } = await createKey('--scopes', 'guests:read')
    for (const path of ['/v1/properties', '/v1/properties/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10']) {
      expectProblem(await call('GET', path, key), {
        code: 'INSUFFICIENT_SCOPE', instance: path, detail: "This API key lacks the scope 'properties:read' that this request needs.",
        headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="properties:read"' },
      })
    }
  })

  it('needs <resource>:read for GET and HEAD and <resource>:write for writes on a declared route without scopes', async () => {
    const { key: reader } = await createKey('--scopes', 'guests:read')
    expect((await call('GET', '/v1/guests?perPage=1', reader)).statusCode).toBe(200)
    expect((await call('HEAD', `/v1/guests/${guest.id}`, reader)).statusCode).toBe(200)
    expectProblem(await call('POST', '/v1/guests', reader, '{}'), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/guests', detail: "This API key lacks the scope 'guests:write' that this request needs.",
      headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="guests:write"' },
    })
    expectProblem(await call('PATCH', `/v1/guests/${guest.id}`, reader, '{}'), { code: 'INSUFFICIENT_SCOPE', instance: `/v1/guests/${guest.id}` })
    const { key: writer } = await createKey('--scopes', 'guests:write')
    expectProblem(await call('GET', '/v1/guests', writer), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/guests', headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="guests:read"' },
    })
    // The refusal comes before the body is read: the service never hears of it.
    expect(service.received.filter((r) => r.method !== 'GET' && r.method !== 'HEAD')).toEqual([])
  })

  it('never takes one resource\'s write scope for another\'s read: a key with guests:write alone reads no properties, rooms or guests', async () => {
    // The shipped routes as they are: the rooms need rooms:read.
    const s = await startWithService()
    try {
      const writer = await s.t.key({ scopes: ['guests:write'] })
      const id = String(s.t.pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid)
      const refusals: [string, string, Record<string, string>][] = [
        ['/v1/properties', 'properties:read', {}],
        [`/v1/properties/${id}`, 'properties:read', {}],
        ['/v1/rooms', 'rooms:read', { 'service-property-id': id }],
        ['/v1/guests', 'guests:read', {}],
        [`/v1/guests/${guest.id}`, 'guests:read', {}],
      ]
      for (const [path, scope, headers] of refusals) {
        expectProblem(await s.t.call('GET', path, { key: writer, headers }), {
          code: 'INSUFFICIENT_SCOPE', instance: path, detail: `This API key lacks the scope '${scope}' that this request needs.`,
          headers: { 'www-authenticate': `Bearer error="insufficient_scope", scope="${scope}"` },
        })
      }
      // What it may do, it does.
      expect((await s.t.call('POST', '/v1/guests', { key: writer, body: JSON.stringify({ firstName: 'Ann', lastName: 'Lee', email: 'ann@example.com' }) })).statusCode).toBe(201)
      expect(s.service.received.map((r) => r.method)).toEqual(['POST'])
    } finally {
      await s.close()
    }
  })

  it('needs the scope a declared route names in the config file', async () => {
    const id = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
    const { key: rooms } = await createKey('--scopes', 'properties:read')
    const refused = await request(`${t.url}/v1/rooms`, { headers: { host: ACME_HOST, 'user-agent': 'scopes-test/1.0', authorization: `Bearer ${rooms}`, 'service-property-id': id } })
    const answer = { statusCode: refused.statusCode, headers: refused.headers as Answer['headers'], body: await refused.body.text() }
    expectProblem(answer, {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/rooms', headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="housekeeping:read"' },
    })
    const { key: housekeeping } = await createKey('--scopes', 'housekeeping:read')
    const served = await request(`${t.url}/v1/rooms?perPage=1`, { headers: { host: ACME_HOST, 'user-agent': 'scopes-test/1.0', authorization: `Bearer ${housekeeping}`, 'service-property-id': id } })
    await served.body.dump()
    expect(served.statusCode).toBe(200)
  })

  it('spends no quota on a request refused for its scope', async () => {
    const { key } = await createKey('--scopes', 'guests:read', '--rate-limit', '2')
    for (let i = 0; i < 4; i += 1) {
      const refused = await call('POST', '/v1/guests', key, '{}')
      expect({ status: refused.statusCode, remaining: refused.headers['ratelimit-remaining'] }).toEqual({ status: 403, remaining: undefined })
    }
    const served = await call('GET', '/v1/guests?perPage=1', key)
    expect({ status: served.statusCode, remaining: served.headers['ratelimit-remaining'] }).toEqual({ status: 200, remaining: '1' })
  })

  it('still refuses a key of another brand first', async () => {
    const run = await keyTool(env, 'create', '--brand', 'globex', '--mode', 'live', '--all-properties', '--scopes', 'guests:read', '--json')
    const { key } = JSON.parse(run.out[0] as string) as { key: string }
    expectProblem(await call('GET', '/v1/properties', key), { code: 'BRAND_ACCESS_DENIED', instance: '/v1/properties' })
  })
})

describe('X-Service-Scopes and X-Service-Key-Id', () => {
  it('sends every known scope for a key with every scope', async () => {
    const { id, key } = await createKey()
    expect((await call('GET', '/v1/guests?perPage=1', key)).statusCode).toBe(200)
    expect(service.received[0]?.headers).toMatchObject({ 'x-service-key-id': id, 'x-service-scopes': KNOWN.join(' ') })
  })

  it('sends the key\'s own scopes, sorted', async () => {
    const { key } = await createKey('--scopes', 'guests:write,guests:read')
    expect((await call('GET', '/v1/guests?perPage=1', key)).statusCode).toBe(200)
    expect(service.received[0]?.headers['x-service-scopes']).toBe('guests:read guests:write')
  })

  it('sends the grant id and the token\'s effective scopes: asked for, granted and known', async () => {
    const { id } = await grantClient(env, idp, 'scoped-client', '--scopes', 'guests:read,properties:read')
    idp.addClient({ clientId: 'scoped-client', secret: 's3cret-of-the-client' })
    const token = await tokenFromEndpoint('scoped-client', 's3cret-of-the-client', 'guests:read guests:write openid')
    expect((await call('GET', '/v1/guests?perPage=1', token)).statusCode).toBe(200)
    expect(service.received[0]?.headers).toMatchObject({ 'x-service-key-id': id, 'x-service-scopes': 'guests:read' })
    for (const header of Object.values(service.received[0]?.headers ?? {})) expect(header).not.toContain(token.split('.')[2])
    expectProblem(await call('POST', '/v1/guests', token, '{}'), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/guests', detail: "This access token lacks the scope 'guests:write' that this request needs.",
    })
  })
})

describe('config', () => {
  const base = { docsUrl: 'https://developer.example.com', brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['localhost'] }], upstreams: { svc: { url: 'http://127.0.0.1:9' } } }
  const problems = (routes: unknown[]): string[] => {
    const file = join(mkdtempSync(join(tmpdir(), 'gw-scopes-config-')), 'config.json')
    writeFileSync(file, JSON.stringify({ ...base, routes }))
    try {
      loadConfig({ CONFIG_FILE: file })
      return []
    } catch (error) {
      return (error as { problems: string[] }).problems.map((p) => p.replace(`${file} `, ''))
    }
  }
  const route = { path: '/v1/notes', scope: 'brand', upstream: 'svc', upstreamPath: '/notes' }

  it('takes scopes per method and fills the others with the default', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'gw-scopes-config-')), 'config.json')
    writeFileSync(file, JSON.stringify({ ...base, routes: [{ ...route, methods: ['GET', 'POST', 'DELETE'], scopes: { POST: 'notes:create' } }] }))
    expect(loadConfig({ CONFIG_FILE: file }).routes[0]?.scopes).toEqual({ GET: 'notes:read', POST: 'notes:create', DELETE: 'notes:write' })
  })

  it('refuses a scope for a method the route does not take, and a malformed scope', () => {
    expect(problems([{ ...route, scopes: { POST: 'notes:write' } }])).toEqual(["routes[0].scopes.POST: POST is not one of the route's methods"])
    expect(problems([{ ...route, scopes: { GET: 'Notes' } }])).toEqual(['routes[0].scopes.GET: must be <resource>:<action> (lower-case letters, digits and dashes)'])
  })

  it('refuses a route whose default scope is not a scope name, asking for one', () => {
    expect(problems([{ ...route, path: '/v1/2fa' }])).toEqual(["routes[0]: scope '2fa:read' of GET is not <resource>:<action> (lower-case letters, digits and dashes)"])
  })
})

async function tokenFromEndpoint(clientId: string, secret: string, scope: string): Promise<string> {
  const res = await request(idp.tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
  })
  const body = await res.body.json() as { access_token: string }
  expect(res.statusCode).toBe(200)
  return body.access_token
}
