import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keyTool } from '../helpers/oauth.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { keysUnder, REDIS_URL } from '../helpers/redis.js'
import {
  admin, cookieOf, dataOf, enter, LINK, makeLink, portal, SESSION_ID, sessionOf, startPortalGateway, type PortalGateway,
} from '../helpers/portal.js'

// Portal sessions (docs/operations.md, "The partner portal") over real sockets and Redis: a
// link made by an operator (the credentials API and the key tool), single use, entered for a
// cookie; the bound of 10; sessions ended by logout, by an operator, and by the credential
// suspended, revoked or expired, on every instance at once; each step audited; and no token or
// cookie in Redis or a log line in clear.

const HOUR_MS = 3_600_000
let p: PortalGateway
const redis = new Redis(REDIS_URL)

beforeAll(async () => {
  p = await startPortalGateway({
    brands: [
      { id: 'acme', chainCode: 'ACME', hosts: ['api.acme-hotels.example', 'localhost', '127.0.0.1'], portalOrigin: 'https://api.acme-hotels.example:8443' },
      { id: 'globex', chainCode: 'GLBX', hosts: ['api.globex-resorts.example'] },
    ],
  })
})
afterAll(async () => {
  await p.t.close()
  redis.disconnect()
})

const tool = (...argv: string[]) => keyTool({ REDIS_URL, REDIS_PREFIX: p.t.prefix }, ...argv)

async function auditOf(id: string): Promise<Record<string, unknown>[]> {
  const answer = await admin(p, 'GET', `/admin/v1/audit?id=${id}&perPage=100`)
  return (dataOf<Record<string, unknown>[]>(answer)).reverse()
}

describe('a portal link', () => {
  it('is made on the admin port: 201, a single-use URL at the brand\'s portal origin, the session id, its end; audited', async () => {
    const { id } = await p.t.keyWithId()
    const before = Date.now()
    const answer = await admin(p, 'POST', `/admin/v1/credentials/${id}/portal-sessions`, { capabilities: ['manage_webhooks'], label: 'Ops at Acme' })
    expect(answer.statusCode).toBe(201)
    const body = JSON.parse(answer.body) as { data: { sessionId: string; url: string; expiresAt: string }; meta: unknown }
    expect(body).toEqual({
      data: { sessionId: expect.stringMatching(SESSION_ID) as string, url: expect.stringMatching(LINK) as string, expiresAt: expect.stringMatching(TIMESTAMP) as string },
      meta: { requestId: answer.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP) as string },
    })
    expect(LINK.exec(body.data.url)?.[1]).toBe('https://api.acme-hotels.example:8443')
    const ends = Date.parse(body.data.expiresAt)
    expect(ends).toBeGreaterThanOrEqual(before + 24 * HOUR_MS)
    expect(ends).toBeLessThanOrEqual(Date.now() + 24 * HOUR_MS)
    const [created] = await auditOf(id)
    expect(created).toEqual({
      id: expect.stringMatching(/^aud_/) as string, time: expect.stringMatching(TIMESTAMP) as string, actor: 'admin-api', action: 'portal_session.created', credentialId: id,
      changes: {
        sessionId: { old: null, new: body.data.sessionId }, capabilities: { old: null, new: ['view', 'manage_webhooks'] },
        expiresAt: { old: null, new: body.data.expiresAt }, label: { old: null, new: 'Ops at Acme' },
      },
    })
  })

  it('refuses a life outside 1h to 7d, an unknown capability, an unknown field and an unknown credential', async () => {
    const { id } = await p.t.keyWithId()
    const path = `/admin/v1/credentials/${id}/portal-sessions`
    const rule = 'is a duration such as 30m, 24h or 7d, from 1h to 7d; the session\'s life, counted from now (default 24h)'
    for (const expiresIn of ['30m', '8d', '59m']) {
      expectProblem(await admin(p, 'POST', path, { expiresIn }), {
        code: 'VALIDATION_FAILED', instance: path, errors: [{ field: 'expiresIn', code: 'OUT_OF_RANGE', detail: `expiresIn ${rule}` }],
      })
    }
    expectProblem(await admin(p, 'POST', path, { expiresIn: 'tomorrow', capabilities: ['view', 'admin'] }), {
      code: 'VALIDATION_FAILED', instance: path, errors: [
        { field: 'expiresIn', code: 'INVALID_FORMAT', detail: `expiresIn ${rule}` },
        { field: 'capabilities', code: 'INVALID_ENUM_VALUE', detail: 'capabilities names \'admin\', which is no capability: it is a list of view, manage_webhooks, replay, roll_credential (view is always given)' },
      ],
    })
    expectProblem(await admin(p, 'POST', path, { expiresin: '2h' }), {
      code: 'UNKNOWN_BODY_FIELD', instance: path, errors: [{ field: 'expiresin', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'expiresin\'. Did you mean \'expiresIn\'?' }],
    })
    const unknown = '/admin/v1/credentials/key_0000000000000000000000/portal-sessions'
    expectProblem(await admin(p, 'POST', unknown, {}), { code: 'CREDENTIAL_NOT_FOUND', instance: unknown })
    expectProblem(await admin(p, 'DELETE', unknown), { code: 'CREDENTIAL_NOT_FOUND', instance: unknown })
    // A suspended credential's portal could not be used: no link for it.
    await admin(p, 'POST', `/admin/v1/credentials/${id}/suspend`)
    expectProblem(await admin(p, 'POST', path, {}), {
      code: 'VALIDATION_FAILED', instance: path, errors: [{ field: 'id', code: 'NOT_ALLOWED', detail: `${id} is suspended: its portal could not be used` }],
    })
    // 1h and 7d are in range.
    await admin(p, 'POST', `/admin/v1/credentials/${id}/resume`)
    for (const expiresIn of ['1h', '7d', '90m']) expect((await admin(p, 'POST', path, { expiresIn })).statusCode).toBe(201)
  })

  it('is refused an eleventh live session (links not yet entered count), until DELETE ends them all', async () => {
    const { id } = await p.t.keyWithId()
    const path = `/admin/v1/credentials/${id}/portal-sessions`
    const links = []
    for (let i = 0; i < 10; i += 1) links.push(await makeLink(p, id))
    const entered = await enter(p, (links[0] as { token: string }).token)
    expectProblem(await admin(p, 'POST', path, {}), {
      code: 'PORTAL_SESSION_LIMIT_REACHED', instance: path,
      detail: `${id} has 10 live portal sessions, links not yet entered included; end them (DELETE …/portal-sessions) or wait until one expires.`,
    })
    const ended = await admin(p, 'DELETE', path)
    expect({ status: ended.statusCode, body: ended.body }).toEqual({ status: 204, body: '' })
    expect(ended.headers['service-request-id']).toMatch(REQUEST_ID)
    // The session entered has ended, and the links not entered cannot be entered any more.
    expectProblem(await portal(p, 'GET', '/portal/api/session', { cookie: entered.cookie }), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session' })
    expectProblem(await portal(p, 'POST', '/portal/session', { body: { token: (links[1] as { token: string }).token } }), {
      code: 'PORTAL_SESSION_INVALID', instance: '/portal/session',
      detail: 'This link cannot be used: it was used already, has expired or is not a portal link. Ask your operator for a new link.',
    })
    expect((await admin(p, 'POST', path, {})).statusCode).toBe(201)
    const ends = (await auditOf(id)).filter((e) => e.action === 'portal_session.ended')
    expect(ends).toHaveLength(10)
    expect(ends.every((e) => e.actor === 'admin-api' && (e.changes as { reason: { new: string } }).reason.new === 'ended by an operator')).toBe(true)
  })

  it('is made by the key tool: the URL, or with --json the data object; its errors exit 2', async () => {
    const { id } = await p.t.keyWithId()
    const plain = await tool('portal-link', id, '--capabilities', 'replay,manage_webhooks', '--label', 'night shift', '--actor', 'ops-anna')
    expect({ code: plain.code, err: plain.err.filter((l) => !l.startsWith('{')) }).toEqual({ code: 0, err: [] })
    expect(plain.out).toEqual([expect.stringMatching(LINK)])
    const json = await tool('portal-link', id, '--expires', '2h', '--json')
    expect(json.code).toBe(0)
    const data = JSON.parse(json.out[0] as string) as { sessionId: string; url: string; expiresAt: string }
    expect(data).toEqual({ sessionId: expect.stringMatching(SESSION_ID) as string, url: expect.stringMatching(LINK) as string, expiresAt: expect.stringMatching(TIMESTAMP) as string })
    expect(Date.parse(data.expiresAt) - Date.now()).toBeLessThanOrEqual(2 * HOUR_MS)
    expect(await tool('portal-link', id, '--expires', '30m')).toEqual({
      code: 2, out: [], err: ['--expires is a duration such as 30m, 24h or 7d, from 1h to 7d; the session\'s life, counted from now (default 24h)'],
    })
    expect((await tool('portal-link', id, '--capabilities', 'everything')).code).toBe(2)
    expect((await tool('portal-link', 'key_0000000000000000000000')).code).toBe(2)
    // The session it made works, with the capabilities asked for, and the operator is its creator.
    const session = await enter(p, LINK.exec(plain.out[0] as string)?.[2] as string)
    expect(dataOf(await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie }))).toMatchObject({ capabilities: ['view', 'manage_webhooks', 'replay'], label: 'night shift' })
    expect((await auditOf(id)).find((e) => e.action === 'portal_session.created')).toMatchObject({ actor: 'ops-anna' })
  })
})

describe('entering', () => {
  it('spends the token once: a cookie (HttpOnly, SameSite=Strict, /portal; not Secure over http to loopback) and the session; audited', async () => {
    const { id } = await p.t.keyWithId({ name: 'Channel sync', mode: 'test' })
    const link = await makeLink(p, id, { capabilities: ['replay'] })
    const answer = await portal(p, 'POST', '/portal/session', { body: { token: link.token } })
    expect(answer.statusCode).toBe(201)
    const cookie = cookieOf(answer)
    expect(cookie).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const maxAge = Number(/Max-Age=(\d+)/.exec(String(answer.headers['set-cookie']))?.[1])
    expect(answer.headers['set-cookie']).toBe(`portal_session=${cookie}; Path=/portal; Max-Age=${maxAge}; HttpOnly; SameSite=Strict`)
    expect(maxAge).toBeGreaterThan(24 * 3600 - 60)
    expect(maxAge).toBeLessThanOrEqual(24 * 3600)
    const data = dataOf<{ csrfToken: string }>(answer)
    expect(data).toEqual({
      sessionId: link.sessionId, credentialId: id, brand: 'acme', mode: 'test', capabilities: ['view', 'replay'], label: null, expiresAt: link.expiresAt,
      csrfToken: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) as string, eventTypes: ['guest.created', 'guest.updated', 'property.updated'],
    })
    // The session, as the page learns it again after a reload.
    const again = await portal(p, 'GET', '/portal/api/session', { cookie })
    expect(again.statusCode).toBe(200)
    expect(dataOf(again)).toEqual(data)
    // The token is spent.
    expectProblem(await portal(p, 'POST', '/portal/session', { body: { token: link.token } }), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/session' })
    const entered = (await auditOf(id)).find((e) => e.action === 'portal_session.entered')
    expect(entered).toMatchObject({ actor: `portal:${link.sessionId}`, changes: { sessionId: { old: link.sessionId, new: link.sessionId }, enteredAt: { old: null, new: expect.stringMatching(TIMESTAMP) } } })
  })

  it('refuses a token unknown, malformed or missing, a request from another site, and a session without its cookie', async () => {
    for (const body of [{ token: 'A'.repeat(43) }, { token: 'short' }, { token: 42 }, {}]) {
      expectProblem(await portal(p, 'POST', '/portal/session', { body }), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/session' })
    }
    expectProblem(await portal(p, 'POST', '/portal/session', { body: { token: 'x', extra: 1 } }), {
      code: 'UNKNOWN_BODY_FIELD', instance: '/portal/session', errors: [{ field: 'extra', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'extra\'.' }],
    })
    const { id } = await p.t.keyWithId()
    const link = await makeLink(p, id)
    expectProblem(await portal(p, 'POST', '/portal/session', { body: { token: link.token }, headers: { origin: 'https://evil.example' } }), {
      code: 'PORTAL_CSRF_FAILED', instance: '/portal/session', detail: 'A portal link is entered from the portal\'s own page; this request came from another site.',
    })
    // Refused so, the link is not spent.
    const session = await enter(p, link.token)
    expect(session.sessionId).toBe(link.sessionId)
    for (const cookie of [undefined, 'B'.repeat(43), 'not a cookie']) {
      expectProblem(await portal(p, 'GET', '/portal/api/session', { ...(cookie === undefined ? {} : { cookie }) }), {
        code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session', detail: 'There is no portal session, or it has ended. Open a new portal link from your operator.',
      })
    }
  })

  it('serves the portal on its brand\'s hosts only', async () => {
    const { id } = await p.t.keyWithId()
    const session = await sessionOf(p, id)
    expectProblem(await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie, host: 'api.globex-resorts.example' }), {
      code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session', detail: 'This portal session belongs to another brand\'s portal.',
    })
    expectProblem(await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie, host: 'unknown.example' }), {
      code: 'ROUTE_NOT_FOUND', instance: '/portal/api/session', detail: 'No API is served at host \'unknown.example\'.',
    })
  })
})

describe('a session ends', () => {
  it('at logout, which needs the CSRF token: without it 403 and nothing ends', async () => {
    const { id } = await p.t.keyWithId()
    const session = await sessionOf(p, id)
    for (const csrf of [undefined, 'C'.repeat(43)]) {
      expectProblem(await portal(p, 'POST', '/portal/logout', { cookie: session.cookie, ...(csrf === undefined ? {} : { csrf }) }), {
        code: 'PORTAL_CSRF_FAILED', instance: '/portal/logout',
        detail: 'A change in the portal needs the session\'s CSRF token in the x-csrf-token header; nothing was changed. Reload the portal and try again.',
      })
    }
    expect((await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie })).statusCode).toBe(200)
    const out = await portal(p, 'POST', '/portal/logout', { cookie: session.cookie, csrf: session.csrf })
    expect({ status: out.statusCode, body: out.body, cookie: out.headers['set-cookie'] }).toEqual({
      status: 204, body: '', cookie: 'portal_session=; Path=/portal; Max-Age=0; HttpOnly; SameSite=Strict',
    })
    expectProblem(await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie }), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session' })
    const ended = (await auditOf(id)).find((e) => e.action === 'portal_session.ended')
    expect(ended).toMatchObject({ actor: `portal:${session.sessionId}`, changes: { sessionId: { old: session.sessionId, new: null }, reason: { old: null, new: 'logout' } } })
  })

  it('when its credential is suspended, revoked or expired, on every instance at once; a resumed credential\'s sessions stay ended', async () => {
    const twin = await p.t.twin()
    try {
      const visitTwin = (cookie: string) => portal({ ...p, t: { ...p.t, url: twin.url } as typeof p.t }, 'GET', '/portal/api/session', { cookie })
      for (const [change, reason] of [['suspend', 'credential suspended'], ['revoke', 'credential revoked'], ['expire', 'credential expired']] as const) {
        const { id } = await p.t.keyWithId()
        const session = await sessionOf(p, id)
        expect((await visitTwin(session.cookie)).statusCode).toBe(200)
        if (change === 'expire') await admin(p, 'PATCH', `/admin/v1/credentials/${id}`, { expiresAt: new Date(Date.now() - 1000).toISOString() })
        else expect((await tool(change, id, '--actor', 'ops-bob')).code).toBe(0)
        // At once, on the instance that did not make the change.
        expectProblem(await visitTwin(session.cookie), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session' })
        if (change === 'suspend') {
          await tool('resume', id)
          expectProblem(await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie }), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session' })
        }
        const audit = await auditOf(id)
        const ended = audit.find((e) => e.action === 'portal_session.ended')
        expect(ended, change).toMatchObject({ actor: change === 'expire' ? `portal:${session.sessionId}` : 'ops-bob', changes: { reason: { old: null, new: reason } } })
      }
    } finally {
      await twin.close()
    }
  })

  it('when it expires', async () => {
    const { id } = await p.t.keyWithId()
    const session = await sessionOf(p, id, { expiresIn: '1h' })
    const key = `${p.t.prefix}portal:{${id}}:session:${session.sessionId}`
    await redis.hset(key, 'expiresAtMs', String(Date.now() - 1))
    expectProblem(await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie }), { code: 'PORTAL_SESSION_INVALID', instance: '/portal/api/session' })
  })
})

describe('its secrets', () => {
  it('keeps no token, cookie or CSRF token in Redis or a log line, only digests', async () => {
    const { id } = await p.t.keyWithId()
    const link = await makeLink(p, id)
    const session = await enter(p, link.token)
    await portal(p, 'GET', '/portal/api/session', { cookie: session.cookie })
    const secrets = [link.token, session.cookie, session.csrf]
    const values: string[] = []
    for (const name of await keysUnder(redis, p.t.prefix)) {
      values.push(name)
      const type = await redis.type(name)
      if (type === 'hash') values.push(...Object.entries(await redis.hgetall(name)).flat())
      else if (type === 'string') values.push(String(await redis.get(name)))
      else if (type === 'zset') values.push(...await redis.zrange(name, '0', '-1'))
    }
    expect(values.some((v) => v.includes(session.sessionId))).toBe(true)
    for (const secret of secrets) {
      expect(values.filter((v) => v.includes(secret))).toEqual([])
      expect(p.t.logs.lines.filter((l) => l.includes(secret))).toEqual([])
    }
  })
})
