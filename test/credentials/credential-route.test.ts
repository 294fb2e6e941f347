import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { TestGateway } from '../helpers/gateway.js'
import { grantClient, keyToolJson, oauthFor } from '../helpers/oauth.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { REDIS_URL } from '../helpers/redis.js'

// GET /v1/credential (docs/partners.md, "Who am I: GET /v1/credential"): any valid credential
// asks who it is, with no scope, under every other rule of the contract (headers, quota,
// parameters). Every answer is checked against the OpenAPI document (TestGateway.call).

const idp = new MockIdp()
let t: TestGateway

beforeAll(async () => {
  await idp.listen()
  t = await TestGateway.start({ config: { oauth: oauthFor(idp), keys: { expiryWarningDays: 14 } } })
  expect(await t.gateway.tokens.ready(5000)).toBe(true)
})

afterAll(async () => {
  await t.close()
  await idp.close()
})


const json = <T>(...argv: string[]) => keyToolJson<T>({ REDIS_URL, REDIS_PREFIX: t.prefix }, ...argv)

describe('GET /v1/credential', () => {
  it('shows an API key to itself, with no scope needed and never a secret', async () => {
    const expiresAt = new Date(Date.now() + 30 * 86_400_000).toISOString()
    const { id, key } = await json<{ id: string; key: string }>('create', '--brand', 'acme', '--mode', 'test', '--properties', 'c0ffee00-0000-4000-8000-00000000000a',
      '--scopes', 'rooms:read', '--name', 'Channel sync', '--rate-limit', '300', '--expires-at', expiresAt, '--allow-ips', '127.0.0.0/8')
    const answer = await t.call('GET', '/v1/credential', { key })
    expect(expectEnvelope(answer)).toEqual({
      id, type: 'api_key', name: 'Channel sync', brand: 'acme', mode: 'test', scopes: ['rooms:read'], properties: ['c0ffee00-0000-4000-8000-00000000000a'],
      rateLimit: { limit: 300, windowSeconds: 60 }, expiresAt, allowedIps: ['127.0.0.0/8'], previousSecretExpiresAt: null, lastUsedAt: null,
    })
    // Its quota applies; the expiry is further off than the warning.
    expect(answer.headers['ratelimit-limit']).toBe('300')
    expect(answer.headers['service-credential-expires']).toBeUndefined()
    expect(answer.body).not.toContain(key)
    const head = await t.call('HEAD', '/v1/credential', { key })
    expect({ status: head.statusCode, body: head.body }).toEqual({ status: 200, body: '' })
  })

  it('shows a client\'s grant to its access token', async () => {
    const grant = await grantClient({ REDIS_URL, REDIS_PREFIX: t.prefix }, idp, 'who-am-i', '--scopes', 'properties:read')
    const token = idp.issue('who-am-i', ['properties:read'])
    expect(expectEnvelope(await t.call('GET', '/v1/credential', { key: token }))).toEqual({
      id: grant.id, type: 'oauth_client', name: null, brand: 'acme', mode: 'live', scopes: ['properties:read'], properties: '*',
      rateLimit: { limit: 1000, windowSeconds: 60 }, expiresAt: null, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null,
    })
  })

  it('names the end of the overlap to a rolled key\'s previous secret, and warns of it', async () => {
    const { id, key } = await json<{ id: string; key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    const rolled = await json<{ secret: string; previousSecretExpiresAt: string }>('roll', id, '--overlap', '2h')
    for (const secret of [key, rolled.secret]) {
      expect(expectEnvelope(await t.call('GET', '/v1/credential', { key: secret }))).toMatchObject({ id, previousSecretExpiresAt: rolled.previousSecretExpiresAt })
    }
    expect((await t.call('GET', '/v1/credential', { key })).headers['service-credential-expires']).toBe(rolled.previousSecretExpiresAt)
    expect((await t.call('GET', '/v1/credential', { key: rolled.secret })).headers['service-credential-expires']).toBeUndefined()
  })

  it('is under every other rule of the contract: headers, credential, parameters, quota', async () => {
    const { key } = await json<{ key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--rate-limit', '1')
    expectProblem(await t.call('GET', '/v1/credential', {}), { code: 'MISSING_AUTH_HEADER', instance: '/v1/credential', headers: { 'www-authenticate': 'Bearer' } })
    expectProblem(await t.call('GET', '/v1/credential', { key, headers: { 'service-property-id': 'c0ffee00-0000-4000-8000-00000000000a' } }), {
      code: 'HEADER_NOT_ALLOWED', instance: '/v1/credential',
      detail: 'This endpoint takes no Service-Property-Id header.',
      errors: [{ field: 'Service-Property-Id', code: 'NOT_ALLOWED', detail: 'Remove this header; brand-wide endpoints do not take it.' }],
    })
    expect((await t.call('GET', '/v1/credential', { key })).statusCode).toBe(200)
    expectProblem(await t.call('GET', '/v1/credential?verbose=1', { key }), { code: 'RATE_LIMITED', instance: '/v1/credential' })
    const other = await json<{ key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties')
    expectProblem(await t.call('GET', '/v1/credential?verbose=1', { key: other.key }), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/credential', detail: "Unknown query parameter 'verbose'.",
      errors: [{ field: 'verbose', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter; this endpoint accepts none.' }],
    })
    const globex = await json<{ key: string }>('create', '--brand', 'globex', '--mode', 'live', '--all-properties')
    expectProblem(await t.call('GET', '/v1/credential', { key: globex.key }), { code: 'BRAND_ACCESS_DENIED', instance: '/v1/credential' })
  })
})

describe('the expiry warning (keys.expiryWarningDays)', () => {
  it('is on every answer to a credential that expires within it, errors after step 4 included', async () => {
    const expiresAt = new Date(Date.now() + 13 * 86_400_000).toISOString()
    const { key } = await json<{ key: string }>('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--scopes', 'rooms:read', '--expires-at', expiresAt)
    expect((await t.call('GET', '/v1/credential', { key })).headers['service-credential-expires']).toBe(expiresAt)
    const refused = await t.call('GET', '/v1/properties', { key })
    expectProblem(refused, { code: 'INSUFFICIENT_SCOPE', instance: '/v1/properties', headers: { 'service-credential-expires': expiresAt } })
  })
})
