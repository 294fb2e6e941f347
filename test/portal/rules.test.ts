import type { FastifyRequest } from 'fastify'
import { describe, expect, it } from 'vitest'
import { CredentialInputError } from '../../src/credentials/service.js'
import { portalCapabilityOf, PORTAL_API_ROUTES } from '../../src/portal/api.js'
import { portalOrigins } from '../../src/portal/config.js'
import { cookieValue, isPortalPath, sessionCookie } from '../../src/portal/http.js'
import { csrfMatches, csrfTokenOf, digestSecret, linkInput, newSecret } from '../../src/portal/sessions.js'
import { builtInRoutes, requestLogRoutes, webhookRoutes } from '../../src/routes/policy.js'

// The portal's rules without a gateway: a link's input, the CSRF token, the cookie, which
// paths are the portal's and which partner routes it serves with which capability.

const HOUR_MS = 3_600_000
const label = (field: string): string => `<${field}>`

function fieldErrors(input: Record<string, unknown>): unknown {
  try {
    linkInput(input, label)
  } catch (error) {
    if (error instanceof CredentialInputError) return error.errors
    throw error
  }
  return []
}

describe('a link\'s input', () => {
  it('defaults to 24 hours, view alone and no label', () => {
    expect(linkInput({}, label)).toEqual({ lifetimeMs: 24 * HOUR_MS, capabilities: ['view'], label: null })
  })

  it('takes lives from 1h to 7d in seconds, minutes, hours or days', () => {
    for (const [text, ms] of [['1h', HOUR_MS], ['60m', HOUR_MS], ['3600s', HOUR_MS], ['7d', 168 * HOUR_MS], ['168h', 168 * HOUR_MS], ['90m', 1.5 * HOUR_MS]] as const) {
      expect(linkInput({ expiresIn: text }, label).lifetimeMs, text).toBe(ms)
    }
    const rule = 'is a duration such as 30m, 24h or 7d, from 1h to 7d; the session\'s life, counted from now (default 24h)'
    for (const text of ['59m', '3599s', '169h', '8d', '10081m']) {
      expect(fieldErrors({ expiresIn: text }), text).toEqual([{ field: 'expiresIn', code: 'OUT_OF_RANGE', detail: `<expiresIn> ${rule}` }])
    }
    // Whole text only, and a string: an array whose text would read as a duration is none.
    for (const value of ['', '0', '1', 'h', '01h', '1.5h', '1 h', '1H', '1w', '1hx', '2h ', 24, null, ['2h'], '99999999d']) {
      expect(fieldErrors({ expiresIn: value }), String(value)).toEqual([{ field: 'expiresIn', code: 'INVALID_FORMAT', detail: `<expiresIn> ${rule}` }])
    }
  })

  it('gives view always, then the capabilities named, each once, in their order', () => {
    expect(linkInput({ capabilities: ['roll_credential', 'replay', 'replay'] }, label).capabilities).toEqual(['view', 'replay', 'roll_credential'])
    expect(linkInput({ capabilities: ['manage_webhooks', 'view'] }, label).capabilities).toEqual(['view', 'manage_webhooks'])
    expect(linkInput({ capabilities: [] }, label).capabilities).toEqual(['view'])
    const rule = 'is a list of view, manage_webhooks, replay, roll_credential (view is always given)'
    expect(fieldErrors({ capabilities: ['view', 'Replay'] })).toEqual([{ field: 'capabilities', code: 'INVALID_ENUM_VALUE', detail: `<capabilities> names 'Replay', which is no capability: it ${rule}` }])
    for (const value of ['replay', [1], {}, null]) {
      expect(fieldErrors({ capabilities: value }), JSON.stringify(value)).toEqual([{ field: 'capabilities', code: 'INVALID_FORMAT', detail: `<capabilities> ${rule}` }])
    }
  })

  it('takes a label of at most 200 characters, an empty one or null as none', () => {
    expect(linkInput({ label: 'x'.repeat(200) }, label).label).toBe('x'.repeat(200))
    expect(linkInput({ label: '' }, label).label).toBeNull()
    expect(linkInput({ label: null }, label).label).toBeNull()
    const rule = 'is a text of at most 200 characters, or null for none'
    expect(fieldErrors({ label: 'x'.repeat(201) })).toEqual([{ field: 'label', code: 'OUT_OF_RANGE', detail: `<label> ${rule}` }])
    expect(fieldErrors({ label: 7 })).toEqual([{ field: 'label', code: 'INVALID_FORMAT', detail: `<label> ${rule}` }])
  })

  it('names every bad field at once', () => {
    expect((fieldErrors({ expiresIn: '8d', capabilities: 'all', label: 1 }) as { field: string }[]).map((e) => e.field)).toEqual(['expiresIn', 'capabilities', 'label'])
  })
})

describe('secrets', () => {
  it('are 32 random bytes in base64url, kept as their SHA-256', () => {
    const secret = newSecret()
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(newSecret()).not.toBe(secret)
    expect(digestSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  })

  it('a CSRF token is the session\'s own: stable for its cookie, another for another cookie, and checked whole', () => {
    const cookie = newSecret()
    const token = csrfTokenOf(cookie)
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(csrfTokenOf(cookie)).toBe(token)
    // HMAC-SHA256 of 'portal csrf token' keyed by the cookie: a page's token outlives a deploy.
    expect(csrfTokenOf('x'.repeat(43))).toBe('dfXfhwpZQ8pdtNp3z38bJPsrsKk9z2xp_koH6h9dff4')
    expect(csrfTokenOf(newSecret())).not.toBe(token)
    expect(csrfMatches(cookie, token)).toBe(true)
    expect(csrfMatches(cookie, undefined)).toBe(false)
    expect(csrfMatches(cookie, '')).toBe(false)
    expect(csrfMatches(cookie, token.slice(0, -1))).toBe(false)
    expect(csrfMatches(cookie, `${token}x`)).toBe(false)
    expect(csrfMatches(cookie, `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`)).toBe(false)
  })
})

describe('the cookie', () => {
  it('is read by its name alone, and not when it is there twice', () => {
    expect(cookieValue(undefined, 'portal_session')).toBeUndefined()
    expect(cookieValue('portal_session=abc', 'portal_session')).toBe('abc')
    expect(cookieValue('a=1; portal_session=abc ; b=2', 'portal_session')).toBe('abc')
    expect(cookieValue('a=1;portal_session=abc=def', 'portal_session')).toBe('abc=def')
    expect(cookieValue('xportal_session=abc; portal_sessionx=def', 'portal_session')).toBeUndefined()
    expect(cookieValue('portal_session=abc; portal_session=def', 'portal_session')).toBeUndefined()
    expect(cookieValue('portal_session', 'portal_session')).toBeUndefined()
    expect(cookieValue('portal_sessionx', 'portal_session')).toBeUndefined()
    expect(cookieValue('portal_session=', 'portal_session')).toBe('')
  })

  it('is Secure unless the request came over plain http to a loopback address', () => {
    const request = (protocol: string, localAddress: string): FastifyRequest => ({ protocol, socket: { localAddress } }) as unknown as FastifyRequest
    const session = { expiresAtMs: 10_000_500 }
    const secure = (protocol: string, address: string): boolean => sessionCookie(request(protocol, address), 'v', session, 10_000_000).includes('Secure')
    expect(sessionCookie(request('http', '127.0.0.1'), 'v', session, 10_000_000)).toBe('portal_session=v; Path=/portal; Max-Age=0; HttpOnly; SameSite=Strict')
    for (const address of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) expect(secure('http', address), address).toBe(false)
    // An IPv6 address that embeds 127.0.0.1 elsewhere than after ::ffff: is not loopback.
    for (const address of ['10.0.0.1', '192.0.2.1', '::ffff:10.0.0.1', '2001:db8::1', '128.0.0.1', '::abcd:127.0.0.1']) expect(secure('http', address), address).toBe(true)
    expect(secure('https', '127.0.0.1')).toBe(true)
    expect(sessionCookie(request('https', '10.0.0.1'), 'v', { expiresAtMs: 10_000_000 + 3_600_999 }, 10_000_000)).toBe('portal_session=v; Path=/portal; Max-Age=3600; HttpOnly; SameSite=Strict; Secure')
    expect(sessionCookie(request('https', '10.0.0.1'), '', null)).toBe('portal_session=; Path=/portal; Max-Age=0; HttpOnly; SameSite=Strict; Secure')
    expect(sessionCookie(request('https', '10.0.0.1'), 'v', { expiresAtMs: 5 }, 10)).toContain('Max-Age=0;')
  })
})

describe('the portal\'s paths and routes', () => {
  it('are /portal and below it', () => {
    for (const path of ['/portal', '/portal/', '/portal/api/session', '/portal?x=1']) expect(isPortalPath(path), path).toBe(true)
    for (const path of ['/portals', '/v1/portal', '/', '/portalx/']) expect(isPortalPath(path), path).toBe(false)
  })

  it('serve the partner routes it needs, reads with view and changes with their capability', () => {
    expect(portalCapabilityOf(builtInRoutes.getCredential, 'GET')).toBe('view')
    expect(portalCapabilityOf(builtInRoutes.listEvents, 'GET')).toBe('view')
    expect(portalCapabilityOf(webhookRoutes.webhookEndpoints, 'GET')).toBe('view')
    expect(portalCapabilityOf(webhookRoutes.webhookEndpoints, 'POST')).toBe('manage_webhooks')
    expect(portalCapabilityOf(webhookRoutes.webhookEndpoint, 'PATCH')).toBe('manage_webhooks')
    expect(portalCapabilityOf(webhookRoutes.webhookEndpoint, 'DELETE')).toBe('manage_webhooks')
    expect(portalCapabilityOf(webhookRoutes.redeliverEvent, 'POST')).toBe('replay')
    expect(portalCapabilityOf(webhookRoutes.recoverWebhookEndpoint, 'POST')).toBe('replay')
    expect(portalCapabilityOf(webhookRoutes.webhookRecovery, 'DELETE')).toBe('replay')
    expect(portalCapabilityOf(webhookRoutes.listWebhookRecoveries, 'GET')).toBe('view')
    expect(portalCapabilityOf(requestLogRoutes.listRequestLogs, 'GET')).toBe('view')
    expect(portalCapabilityOf(requestLogRoutes.getRequestLog, 'GET')).toBe('view')
    expect(portalCapabilityOf(webhookRoutes.webhookEndpoint, 'PUT')).toBeUndefined()
    expect(portalCapabilityOf(builtInRoutes.listProperties, 'GET')).toBeUndefined()
    expect(portalCapabilityOf(builtInRoutes.health, 'GET')).toBeUndefined()
    expect(portalCapabilityOf({ ...webhookRoutes.webhookEndpoints, kind: 'proxy' }, 'GET')).toBeUndefined()
    // Every read is view: a link gives reading whatever its capabilities.
    for (const [path, methods] of PORTAL_API_ROUTES) if (methods.GET !== undefined) expect(methods.GET, path).toBe('view')
  })

  it('lead links to each brand\'s portal origin, else https and its first host', () => {
    expect(portalOrigins([
      { id: 'a', hosts: ['api.a.example', 'localhost'] },
      { id: 'b', hosts: ['api.b.example'], portalOrigin: 'http://localhost:3000' },
      { id: 'c', hosts: ['c.example'], portalOrigin: 'https://c.example:443/' },
    ])).toEqual(new Map([['a', 'https://api.a.example'], ['b', 'http://localhost:3000'], ['c', 'https://c.example']]))
  })
})
