import type { FastifyReply, FastifyRequest } from 'fastify'
import { isIP } from 'node:net'
import type { PortalSession } from './store.js'

// What the partner portal adds to HTTP (docs/security.md, "The partner portal"): its session
// cookie, and the security headers of every answer under /portal.

export const PORTAL_PREFIX = '/portal'
export const PORTAL_API_PREFIX = '/portal/api'
export const SESSION_COOKIE = 'portal_session'
export const CSRF_HEADER = 'x-csrf-token'

/** Whether a request path is the portal's (`/portal` or below it), whatever its query. */
export function isPortalPath(url: string): boolean {
  return url === PORTAL_PREFIX || url.startsWith(`${PORTAL_PREFIX}/`) || url.startsWith(`${PORTAL_PREFIX}?`)
}

/**
 * The portal's pages run only the gateway's own script and style, load nothing from
 * elsewhere, cannot be framed, and send no Referer (a link's token is in the fragment, which
 * no Referer carries anyway). Images may be data: and blob: URLs (the usage chart's export).
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "object-src 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ')

export const PORTAL_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
  'x-content-type-options': 'nosniff',
} as const

/** HSTS where the portal is served over TLS (as the gateway sees it, through the proxies it trusts). */
const HSTS = 'max-age=31536000'

/** The onSend hook: every answer under /portal carries the portal's headers, errors and unknown paths included. */
export function portalHeaders(request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void): void {
  if (isPortalPath(request.url)) {
    reply.headers(PORTAL_HEADERS)
    if (request.protocol === 'https') reply.header('strict-transport-security', HSTS)
  }
  done(null, payload)
}

/** The value of the cookie `name` of a Cookie header; undefined when it is not there, or there twice. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined
  let found: string | undefined
  for (const part of header.split(';')) {
    const at = part.indexOf('=')
    if (at === -1 || part.slice(0, at).trim() !== name) continue
    // Two cookies of one name (another path's, or a planted one): which is ours is not ours to guess.
    if (found !== undefined) return undefined
    found = part.slice(at + 1).trim()
  }
  return found
}

function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false
  const plain = address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address
  return plain === '::1' || (isIP(plain) === 4 && plain.startsWith('127.'))
}

/**
 * The session cookie: HttpOnly, SameSite=Strict, for /portal only, and Secure unless the
 * request came over plain http to a loopback address (a local run, where a Secure cookie
 * would never be sent back).
 */
export function sessionCookie(request: FastifyRequest, value: string, session: Pick<PortalSession, 'expiresAtMs'> | null, now = Date.now()): string {
  const local = request.protocol === 'http' && isLoopback(request.socket.localAddress)
  const maxAge = session === null ? 0 : Math.max(0, Math.floor((session.expiresAtMs - now) / 1000))
  return [`${SESSION_COOKIE}=${value}`, `Path=${PORTAL_PREFIX}`, `Max-Age=${maxAge}`, 'HttpOnly', 'SameSite=Strict', ...(local ? [] : ['Secure'])].join('; ')
}
