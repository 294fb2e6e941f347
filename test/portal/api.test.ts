import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CONTENT_SECURITY_POLICY } from '../../src/portal/http.js'
import { buildDirectory, readBuild } from '../../src/portal/pages.js'
import { expectProblem, TIMESTAMP } from '../helpers/problem.js'
import { keysUnder, REDIS_URL } from '../helpers/redis.js'
import { admin, dataOf, portal, sessionOf, startPortalGateway, type PortalGateway } from '../helpers/portal.js'
import { accepted, hotelChanged, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { createEndpoint } from '../helpers/webhooks.js'

// The portal's JSON API over real sockets and Redis (docs/partners.md, "The portal"): the
// partner routes under the session's credential and no other, the usage of the last 30 days,
// rolling the key with its capability and the CSRF token, the page and its assets from the
// gateway with the portal's headers, and no secret made in the portal kept in the clear.

let p: PortalGateway
const redis = new Redis(REDIS_URL)

beforeAll(async () => {
  p = await startPortalGateway({ usage: { flushSeconds: 3600, retentionDays: 90 } }, PUBLISHER_TOKENS)
})
afterAll(async () => {
  await p.t.close()
  redis.disconnect()
})

const HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
}

describe('a session reaches its credential only', () => {
  it("answers another credential's endpoint, its deliveries and its event 404 as the API does, and lists only its own", async () => {
    const mine = await p.t.keyWithId({ properties: [randomUUID()] })
    const theirs = await p.t.keyWithId()
    const own = await createEndpoint(p.t, mine.key, { url: 'https://hooks.example.com/mine', eventTypes: ['property.updated'] })
    const other = await createEndpoint(p.t, theirs.key, { url: 'https://hooks.example.com/theirs', eventTypes: ['property.updated'] })
    const session = await sessionOf(p, mine.id, { capabilities: ['manage_webhooks', 'replay'] })
    const listed = await portal(p, 'GET', '/portal/api/v1/webhook-endpoints', { cookie: session.cookie })
    expect(listed.statusCode).toBe(200)
    expect(dataOf<{ id: string }[]>(listed).map((e) => e.id)).toEqual([own.id])
    for (const [method, path, body] of [
      ['GET', `/portal/api/v1/webhook-endpoints/${other.id}`, undefined],
      ['GET', `/portal/api/v1/webhook-endpoints/${other.id}/deliveries`, undefined],
      ['PATCH', `/portal/api/v1/webhook-endpoints/${other.id}`, { status: 'disabled' }],
      ['DELETE', `/portal/api/v1/webhook-endpoints/${other.id}`, undefined],
      ['POST', `/portal/api/v1/webhook-endpoints/${other.id}/test`, undefined],
      ['POST', `/portal/api/v1/webhook-endpoints/${other.id}/rotate-secret`, undefined],
    ] as const) {
      expectProblem(await portal(p, method, path, { cookie: session.cookie, csrf: session.csrf, ...(body === undefined ? {} : { body }) }), {
        code: 'WEBHOOK_ENDPOINT_NOT_FOUND', instance: path, detail: new RegExp(other.id),
      })
    }
    // The other credential's endpoint is as it was.
    const still = await p.t.call('GET', `/v1/webhook-endpoints/${other.id}`, { key: theirs.key })
    expect(dataOf<{ status: string }>(still).status).toBe('enabled')
    // An event of a property the other credential may use and this one may not: read there, not here.
    const [published] = accepted(await publish(p.adminUrl, hotelChanged(randomUUID())))
    const eventId = published?.eventId as string
    expect((await p.t.call('GET', `/v1/events/${eventId}`, { key: theirs.key })).statusCode).toBe(200)
    const path = `/portal/api/v1/events/${eventId}`
    expectProblem(await portal(p, 'GET', path, { cookie: session.cookie }), { code: 'EVENT_NOT_FOUND', instance: path })
    const redeliver = `/portal/api/v1/events/${eventId}/redeliver`
    expectProblem(await portal(p, 'POST', redeliver, { cookie: session.cookie, csrf: session.csrf, body: { endpointId: own.id } }), { code: 'EVENT_NOT_FOUND', instance: redeliver })
  })
})

describe('the request log and recoveries through the portal', () => {
  it('lists and finds the credential\'s own requests as the API does; another credential\'s request is not found', async () => {
    const mine = await p.t.keyWithId()
    const theirs = await p.t.keyWithId()
    const failed = await p.t.get('/v1/properties?perPage=1000', mine.key)
    expect(failed.statusCode).toBe(400)
    const other = await p.t.get('/v1/credential', theirs.key)
    await p.t.gateway.requestLog?.writer.flush()
    const session = await sessionOf(p, mine.id)
    const id = String(failed.headers['service-request-id'])
    const path = `/portal/api/v1/request-logs/${id}`
    const found = await portal(p, 'GET', path, { cookie: session.cookie })
    const api = await p.t.get(`/v1/request-logs/${id}`, mine.key)
    expect(found.statusCode).toBe(200)
    expect(dataOf(found)).toEqual(dataOf(api))
    expect(dataOf(found)).toMatchObject({ id, method: 'GET', route: '/v1/properties', path: '/v1/properties', queryParameters: ['perPage'], status: 400, code: 'INVALID_QUERY_PARAMETER' })
    const list = await portal(p, 'GET', '/portal/api/v1/request-logs?status=errors', { cookie: session.cookie })
    expect(list.statusCode).toBe(200)
    expect(dataOf<{ id: string }[]>(list).map((e) => e.id)).toEqual([id])
    const otherId = String(other.headers['service-request-id'])
    const missing = `/portal/api/v1/request-logs/${otherId}`
    expectProblem(await portal(p, 'GET', missing, { cookie: session.cookie }), { code: 'REQUEST_LOG_NOT_FOUND', instance: missing, detail: `No request with id '${otherId}' is in the log of this credential.` })
    const refused = await p.t.get('/v1/request-logs?status=abc', mine.key)
    const bad = await portal(p, 'GET', '/portal/api/v1/request-logs?status=abc', { cookie: session.cookie })
    expectProblem(bad, { code: 'INVALID_QUERY_PARAMETER', instance: '/portal/api/v1/request-logs', errors: (JSON.parse(refused.body) as { errors: NonNullable<Parameters<typeof expectProblem>[1]['errors']> }).errors })
  })

  it('starts, lists and cancels a recovery with replay; without it 403 and nothing starts', async () => {
    const { key, id } = await p.t.keyWithId()
    const endpoint = await createEndpoint(p.t, key, { url: 'https://hooks.example.com/recover', eventTypes: ['property.updated'] })
    const path = `/portal/api/v1/webhook-endpoints/${endpoint.id}/recover`
    const since = new Date(Date.now() - 60_000).toISOString()
    const viewer = await sessionOf(p, id, { capabilities: ['manage_webhooks'] })
    expectProblem(await portal(p, 'POST', path, { cookie: viewer.cookie, csrf: viewer.csrf, body: { since } }), { code: 'PORTAL_CAPABILITY_MISSING', instance: path })
    const list = `/portal/api/v1/webhook-endpoints/${endpoint.id}/recoveries`
    expect(dataOf(await portal(p, 'GET', list, { cookie: viewer.cookie }))).toEqual([])
    const session = await sessionOf(p, id, { capabilities: ['replay'] })
    expectProblem(await portal(p, 'POST', path, { cookie: session.cookie, body: { since } }), { code: 'PORTAL_CSRF_FAILED', instance: path })
    expectProblem(await portal(p, 'POST', path, { cookie: session.cookie, csrf: session.csrf, body: { since: 'yesterday' } }), {
      code: 'VALIDATION_FAILED', instance: path, errors: [{ field: 'since', code: 'INVALID_FORMAT', detail: expect.any(String) }],
    })
    const started = await portal(p, 'POST', path, { cookie: session.cookie, csrf: session.csrf, body: { since, include: 'all' } })
    expect(started.statusCode).toBe(202)
    const recovery = dataOf<{ id: string; status: string }>(started)
    expect(recovery).toMatchObject({ endpointId: endpoint.id, since, include: 'all', queued: 0, delivered: 0, failed: 0 })
    const listed = await portal(p, 'GET', list, { cookie: session.cookie })
    expect(dataOf(listed)).toEqual(dataOf(await p.t.get(`/v1/webhook-endpoints/${endpoint.id}/recoveries`, key)))
    expect(dataOf<{ id: string }[]>(listed).map((r) => r.id)).toEqual([recovery.id])
    const one = `${list}/${recovery.id}`
    expectProblem(await portal(p, 'DELETE', one, { cookie: viewer.cookie, csrf: viewer.csrf }), { code: 'PORTAL_CAPABILITY_MISSING', instance: one })
    const cancelled = await portal(p, 'DELETE', one, { cookie: session.cookie, csrf: session.csrf })
    expect({ status: cancelled.statusCode, body: cancelled.body }).toEqual({ status: 204, body: '' })
  })
})

describe('usage', () => {
  it('gives the requests of the last 30 days per day and route by status class, its own and not another\'s', async () => {
    const mine = await p.t.keyWithId()
    const theirs = await p.t.keyWithId()
    await p.t.get('/v1/credential', mine.key)
    await p.t.get('/v1/credential', mine.key)
    await p.t.get('/v1/events?perPage=0', mine.key)
    await p.t.get('/v1/credential', theirs.key)
    await p.t.gateway.usage?.flush()
    const session = await sessionOf(p, mine.id)
    const answer = await portal(p, 'GET', '/portal/api/usage', { cookie: session.cookie })
    expect(answer.statusCode).toBe(200)
    const today = new Date().toISOString().slice(0, 10)
    const from = new Date(Date.parse(`${today}T00:00:00Z`) - 29 * 86_400_000).toISOString().slice(0, 10)
    const zero = { '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0 }
    expect(JSON.parse(answer.body)).toEqual({
      data: {
        days: 30, from, to: today,
        rows: [
          { date: today, route: 'GET /v1/credential', ...zero, '2xx': 2, total: 2 },
          { date: today, route: 'GET /v1/events', ...zero, '4xx': 1, total: 1 },
        ],
        totals: { ...zero, '2xx': 2, '4xx': 1, total: 3 },
      },
      meta: { requestId: answer.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP) as string },
    })
  })
})

describe('rolling the key', () => {
  it('needs roll_credential: without it 403 and the key stays', async () => {
    const { key, id } = await p.t.keyWithId()
    const session = await sessionOf(p, id)
    expectProblem(await portal(p, 'POST', '/portal/api/roll', { cookie: session.cookie, csrf: session.csrf }), { code: 'PORTAL_CAPABILITY_MISSING', instance: '/portal/api/roll' })
    expect((await p.t.get('/v1/credential', key)).statusCode).toBe(200)
    expect(dataOf<{ previousSecretExpiresAt: unknown }>(await p.t.get('/v1/credential', key)).previousSecretExpiresAt).toBeNull()
  })

  it('needs the CSRF token: without it 403 and nothing changes', async () => {
    const { key, id } = await p.t.keyWithId()
    const session = await sessionOf(p, id, { capabilities: ['roll_credential'] })
    expectProblem(await portal(p, 'POST', '/portal/api/roll', { cookie: session.cookie }), { code: 'PORTAL_CSRF_FAILED', instance: '/portal/api/roll' })
    expect(dataOf<{ previousSecretExpiresAt: unknown }>(await p.t.get('/v1/credential', key)).previousSecretExpiresAt).toBeNull()
  })

  it('gives the new secret once; the old works through the 24-hour overlap; audited with the session as actor; kept only as a digest', async () => {
    const { key, id } = await p.t.keyWithId()
    const session = await sessionOf(p, id, { capabilities: ['roll_credential'] })
    const before = Date.now()
    const answer = await portal(p, 'POST', '/portal/api/roll', { cookie: session.cookie, csrf: session.csrf })
    expect(answer.statusCode).toBe(201)
    const rolled = dataOf<{ id: string; secret: string; previousSecretExpiresAt: string }>(answer)
    expect(rolled).toEqual({ id, secret: expect.stringMatching(/^[A-Za-z0-9_-]{20,}$/) as string, previousSecretExpiresAt: expect.stringMatching(TIMESTAMP) as string })
    expect(Date.parse(rolled.previousSecretExpiresAt)).toBeGreaterThanOrEqual(before + 86_400_000 - 1000)
    expect(Date.parse(rolled.previousSecretExpiresAt)).toBeLessThanOrEqual(Date.now() + 86_400_000)
    expect(rolled.secret).not.toBe(key)
    expect((await p.t.get('/v1/credential', rolled.secret)).statusCode).toBe(200)
    expect(dataOf<{ previousSecretExpiresAt: string }>(await p.t.get('/v1/credential', key)).previousSecretExpiresAt).toBe(rolled.previousSecretExpiresAt)
    const audit = dataOf<{ actor: string; action: string }[]>(await admin(p, 'GET', `/admin/v1/audit?id=${id}&perPage=100`))
    expect(audit.filter((entry) => entry.action === 'roll').map((entry) => entry.actor)).toEqual([`portal:${session.sessionId}`])
    const values: string[] = []
    for (const name of await keysUnder(redis, p.t.prefix)) {
      const type = await redis.type(name)
      if (type === 'hash') values.push(...Object.values(await redis.hgetall(name)))
      else if (type === 'string') values.push(String(await redis.get(name)))
    }
    expect(values.filter((v) => v.includes(rolled.secret))).toEqual([])
    expect(p.t.logs.lines.filter((l) => l.includes(rolled.secret))).toEqual([])
  })
})

describe('secrets made in the portal', () => {
  it('keeps no endpoint signing secret, cookie or CSRF token in a log line or in Redis in clear', async () => {
    const { id } = await p.t.keyWithId()
    const session = await sessionOf(p, id, { capabilities: ['manage_webhooks'] })
    const made = await portal(p, 'POST', '/portal/api/v1/webhook-endpoints', { cookie: session.cookie, csrf: session.csrf, body: { url: 'https://hooks.example.com/portal', eventTypes: ['property.updated'] } })
    expect(made.statusCode).toBe(201)
    const { id: endpointId, secret } = dataOf<{ id: string; secret: string }>(made)
    const rotated = await portal(p, 'POST', `/portal/api/v1/webhook-endpoints/${endpointId}/rotate-secret`, { cookie: session.cookie, csrf: session.csrf })
    expect(rotated.statusCode).toBe(200)
    const secrets = [secret, dataOf<{ secret: string }>(rotated).secret, session.cookie, session.csrf]
    const values: string[] = []
    for (const name of await keysUnder(redis, p.t.prefix)) {
      const type = await redis.type(name)
      if (type === 'hash') values.push(...Object.values(await redis.hgetall(name)))
      else if (type === 'string') values.push(String(await redis.get(name)))
    }
    for (const value of secrets) {
      expect(values.filter((v) => v.includes(value) || v.includes(value.replace(/^whsec_/, '')))).toEqual([])
      expect(p.t.logs.lines.filter((l) => l.includes(value))).toEqual([])
    }
  })
})

describe('the page', () => {
  const build = readBuild(buildDirectory())

  it.skipIf(build === undefined)('is served at each screen\'s path and its assets from the gateway, with the portal\'s headers and cache rules', async () => {
    for (const path of ['/portal/', '/portal/enter', '/portal/usage', '/portal/request-log', '/portal/webhooks', '/portal/events']) {
      const answer = await portal(p, 'GET', path, { headers: { accept: 'text/html' } })
      expect({ path, status: answer.statusCode, type: answer.headers['content-type'], cache: answer.headers['cache-control'] })
        .toEqual({ path, status: 200, type: 'text/html; charset=utf-8', cache: 'no-cache' })
      expect(answer.headers).toMatchObject(HEADERS)
      expect(answer.body).toBe(build?.index.body.toString('utf8'))
    }
    const assets = [...(build?.assets.keys() ?? [])]
    expect(assets.some((name) => name.endsWith('.js'))).toBe(true)
    for (const name of assets) {
      const answer = await portal(p, 'GET', `/portal/assets/${name}`, { headers: { accept: '*/*' } })
      expect({ name, status: answer.statusCode, cache: answer.headers['cache-control'] }).toEqual({ name, status: 200, cache: 'public, max-age=31536000, immutable' })
      expect(answer.headers).toMatchObject(HEADERS)
      expect(answer.body).toBe(build?.assets.get(name)?.body.toString('utf8'))
      const again = await portal(p, 'GET', `/portal/assets/${name}`, { headers: { 'if-none-match': String(answer.headers.etag) } })
      expect({ status: again.statusCode, body: again.body }).toEqual({ status: 304, body: '' })
    }
    // The page names only its own assets: nothing from another origin.
    expect([...(build?.index.body.toString('utf8') ?? '').matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((url) => !url?.startsWith('/portal/assets/'))).toEqual([])
  })

  it('answers an unknown path under /portal as not found, with the portal\'s headers', async () => {
    const answer = await portal(p, 'GET', '/portal/assets/nothing.js')
    expectProblem(answer, { code: 'ROUTE_NOT_FOUND', instance: '/portal/assets/nothing.js' })
    expect(answer.headers).toMatchObject(HEADERS)
  })
})
