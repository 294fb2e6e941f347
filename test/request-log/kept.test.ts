import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { grantClient, oauthFor } from '../helpers/oauth.js'
import { eventually, keysUnder, textsOf, REDIS_URL } from '../helpers/redis.js'

// What the request log keeps, and what it never does (docs/security.md, "The request log"):
// a run with API keys (one rolled), access tokens, request bodies and query values, after
// which no entry in Redis, no row of the admin port's CSV export, no answer of its routes and
// no log line holds any of them; and the answers of §1 not covered elsewhere (an access
// token's, an expired token of a known client, an address refused, an upstream failing).

const TOKEN = 'admin-token-0123456789'
const idp = new MockIdp({ clients: [{ clientId: 'log-sync', secret: 'log-sync-secret' }] })
const redis = new Redis(REDIS_URL)
let t: TestGateway
let adminUrl: string

interface Entry { id: string; status: number; code: string | null; secret: string | null; credentialId: string; [field: string]: unknown }

beforeAll(async () => {
  await idp.listen()
  t = await TestGateway.start({ env: { ADMIN_TOKEN: TOKEN }, config: { oauth: oauthFor(idp), requestLog: { flushMs: 100 } } })
  expect(await t.gateway.tokens.ready(10_000)).toBe(true)
  await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  adminUrl = `http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}`
})

afterAll(async () => {
  await t.close()
  await idp.close()
  redis.disconnect()
})

async function admin(path: string): Promise<{ statusCode: number; body: string }> {
  const res = await request(`${adminUrl}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } })
  return { statusCode: res.statusCode, body: await res.body.text() }
}

/** A credential's entries as the admin port shows them, once there are `count`. */
async function entriesOf(id: string, count: number): Promise<Entry[]> {
  let last: Entry[] = []
  await eventually(async () => {
    const answer = await admin(`/admin/v1/credentials/${id}/request-logs?perPage=100`)
    last = answer.statusCode === 200 ? (JSON.parse(answer.body) as { data: Entry[] }).data : []
    return last.length >= count
  }, 10_000, 50)
  expect(last.length).toBe(count)
  return last
}

function requestId(answer: Answer): string {
  return answer.headers['service-request-id'] as string
}

describe('what is never kept', () => {
  it('holds no key, token, body or query value in any entry, CSV row, answer of the log or log line', async () => {
    const env = { REDIS_URL, REDIS_PREFIX: t.prefix }
    const keys = new RedisKeyStore(redis, t.prefix)
    const { key, id } = await t.keyWithId()
    const rolled = await keys.roll(id, new Date(Date.now() + 3600_000))
    const current = rolled?.key as string
    const grant = await grantClient(env, idp, 'log-sync')
    const token = idp.issue('log-sync', ['properties:read', 'webhooks:write', 'request-logs:read'])

    const sent: Answer[] = []
    // The previous secret of the rolled key, its current one, and the token: with a body, a query value, a header value.
    sent.push(await t.call('POST', '/v1/webhook-endpoints', { key, body: '{"url":"https://BODYSECRET1.example/hook","eventTypes":["x"]}', headers: { 'idempotency-key': 'scan-1' } }))
    sent.push(await t.get('/v1/properties?perPage=QVALUE1', current))
    sent.push(await t.get('/v1/properties?perPage=2&include=QVALUE2', current, { 'service-correlation-id': 'corr-scan' }))
    sent.push(await t.call('POST', '/v1/webhook-endpoints', { key: token, body: '{"url":"https://BODYSECRET2.example/hook","eventTypes":["x"]}' }))
    sent.push(await t.get('/v1/properties?page=QVALUE3', token))
    sent.push(await t.get('/v1/properties', token))
    expect(sent.map((a) => a.statusCode)).toEqual([422, 400, 400, 422, 400, 200])

    const ofKey = await entriesOf(id, 3)
    const ofGrant = await entriesOf(grant.id, 3)
    expect(ofKey.map((e) => [e.id, e.secret])).toEqual([[requestId(sent[2] as Answer), 'current'], [requestId(sent[1] as Answer), 'current'], [requestId(sent[0] as Answer), 'previous']])
    // An access token's entries are its grant's, and name no secret.
    expect(ofGrant.map((e) => [e.id, e.secret, e.credentialId])).toEqual(sent.slice(3).reverse().map((a) => [requestId(a), null, grant.id]))

    const texts: string[] = []
    for (const name of (await keysUnder(redis, t.prefix)).filter((k) => k.includes('reqlog:'))) {
      texts.push(...await textsOf(redis, name))
    }
    const csv: string[] = []
    for (const owner of [id, grant.id]) {
      const answer = await admin(`/admin/v1/credentials/${owner}/request-logs.csv`)
      expect(answer.statusCode).toBe(200)
      csv.push(...answer.body.split('\r\n').slice(1, -1))
      texts.push((await admin(`/admin/v1/credentials/${owner}/request-logs`)).body)
    }
    expect(csv).toHaveLength(6)
    for (const made of sent) texts.push((await admin(`/admin/v1/request-logs/${requestId(made)}`)).body)
    texts.push(...csv, ...t.logs.lines)

    const secretOf = (k: string): string => k.slice(k.lastIndexOf('_') + 1)
    const [, payload, signature] = token.split('.') as [string, string, string]
    const forbidden = [
      key, current, secretOf(key).slice(0, 12), secretOf(key).slice(-12), secretOf(current).slice(0, 12), secretOf(current).slice(-12),
      token, payload, signature.slice(0, 24), 'BODYSECRET1', 'BODYSECRET2', 'QVALUE1', 'QVALUE2', 'QVALUE3', 'Bearer ',
    ]
    for (const text of forbidden) expect(texts.filter((t) => t.includes(text)), text).toEqual([])
    // Nor a header value other than User-Agent, Idempotency-Key and the trace id: not in the entries, the rows or the log's answers.
    expect(texts.filter((text) => !t.logs.lines.includes(text) && text.includes('corr-scan'))).toEqual([])
    // What is kept of the query: the names.
    expect(ofKey[0]?.queryParameters).toEqual(['perPage', 'include'])
  }, 60_000)
})

describe('an entry for each kind of answer', () => {
  it('keeps an expired token of a known client, a suspended client\'s token, an address refused and an upstream failing', async () => {
    const env = { REDIS_URL, REDIS_PREFIX: t.prefix }
    const grant = await grantClient(env, idp, 'log-expired')
    const now = Math.floor(Date.now() / 1000)
    const expired = idp.mint({ claims: { client_id: 'log-expired', sub: 'log-expired', scope: 'properties:read', exp: now - 3600, iat: now - 7200 } })
    // The grant is held by this instance once a valid token of it is seen.
    expect((await t.get('/v1/properties', idp.issue('log-expired', ['properties:read']))).statusCode).toBe(200)
    const late = await t.get('/v1/properties', expired)
    expect([late.statusCode, (JSON.parse(late.body) as { code: string }).code]).toEqual([401, 'ACCESS_TOKEN_EXPIRED'])

    // A suspended client's token: refused, and its grant's.
    const suspended = await grantClient(env, idp, 'log-suspended')
    const held = idp.issue('log-suspended', ['properties:read'])
    expect((await t.get('/v1/properties', held)).statusCode).toBe(200)
    await t.gateway.credentials.setStatus(suspended.id, 'suspended', 'test')
    let stopped: Answer | undefined
    expect(await eventually(async () => (stopped = await t.get('/v1/properties', held)).statusCode === 403, 10_000, 50)).toBe(true)
    expect((JSON.parse((stopped as Answer).body) as { code: string }).code).toBe('CLIENT_SUSPENDED')

    const fenced = await t.keyWithId({ allowedIps: ['203.0.113.0/24'] })
    const refused = await t.get('/v1/properties', fenced.key)
    expect([refused.statusCode, (JSON.parse(refused.body) as { code: string }).code]).toEqual([403, 'IP_NOT_ALLOWED'])

    const { key, id } = await t.keyWithId()
    t.pms.setFailure({ mode: 'html-5xx', status: 502 })
    let failed: Answer
    try {
      failed = await t.get('/v1/properties/00000000-0000-4000-8000-0000000000aa', key)
    } finally {
      t.pms.setFailure(undefined)
    }
    expect(failed.statusCode).toBeGreaterThanOrEqual(500)

    const summary = (e: Entry) => [e.id, e.status, e.code]
    expect((await entriesOf(grant.id, 2)).map(summary)[0]).toEqual([requestId(late), 401, 'ACCESS_TOKEN_EXPIRED'])
    // Found by its request id: the polls before the suspension took effect are entries too.
    let found: { data: Entry } | undefined
    expect(await eventually(async () => {
      const answer = await admin(`/admin/v1/request-logs/${requestId(stopped as Answer)}`)
      if (answer.statusCode === 200) found = JSON.parse(answer.body) as { data: Entry }
      return found !== undefined
    }, 10_000, 50)).toBe(true)
    expect([found?.data.credentialId, ...summary(found?.data as Entry)]).toEqual([suspended.id, requestId(stopped as Answer), 403, 'CLIENT_SUSPENDED'])
    expect((await entriesOf(fenced.id, 1)).map(summary)).toEqual([[requestId(refused), 403, 'IP_NOT_ALLOWED']])
    expect((await entriesOf(id, 1)).map(summary)).toEqual([[requestId(failed), failed.statusCode, (JSON.parse(failed.body) as { code: string }).code]])
  }, 60_000)
})
