import { request } from 'undici'
import { expect } from 'vitest'
import type { FileConfigInput } from '../../src/config.js'
import { checkAdminAnswer } from './admin-contract.js'
import { ACME_HOST } from './config.js'
import { TestGateway, type Answer } from './gateway.js'
import { webhookConfig } from './webhooks.js'

// The partner portal in tests (docs/partners.md, "The portal"): a gateway with the admin port
// and the webhooks, links made as an operator makes them, and a person's requests: the
// session cookie, and on a change the CSRF token, as the portal's own page sends them.

export const ADMIN_TOKEN = 'portal-admin-token-0123456789'
/** A link: the portal's origin, /portal/enter, and the token in the fragment. */
export const LINK = /^(https?:\/\/[^/]+)\/portal\/enter#([A-Za-z0-9_-]{43})$/
export const SESSION_ID = /^ps_[0-7][0-9A-HJKMNP-TV-Z]{25}$/

export interface PortalGateway {
  t: TestGateway
  adminUrl: string
}

export async function startPortalGateway(config: Partial<FileConfigInput> = {}, env: NodeJS.ProcessEnv = {}): Promise<PortalGateway> {
  const t = await TestGateway.start({ env: { ADMIN_TOKEN, ...env }, config: { ...webhookConfig(), ...config } })
  await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  return { t, adminUrl: `http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}` }
}

/** A request to the admin port with the token, its answer checked against the admin document. */
export async function admin(p: PortalGateway, method: string, path: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await request(`${p.adminUrl}${path}`, { method: method as 'GET', headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
  checkAdminAnswer(method, path, answer)
  return answer
}

/** A link for the credential, as an operator makes it: its token and session id. */
export async function makeLink(p: PortalGateway, credentialId: string, body: Record<string, unknown> = {}): Promise<{ url: string; token: string; sessionId: string; expiresAt: string }> {
  const answer = await admin(p, 'POST', `/admin/v1/credentials/${credentialId}/portal-sessions`, body)
  expect({ status: answer.statusCode, body: answer.body }).toMatchObject({ status: 201 })
  const data = (JSON.parse(answer.body) as { data: { sessionId: string; url: string; expiresAt: string } }).data
  const match = LINK.exec(data.url)
  if (match === null) throw new Error(`not a portal link: ${data.url}`)
  return { ...data, token: match[2] as string }
}

/** What a person's browser sends: the cookie, and on a change the CSRF token. */
export interface Visit {
  cookie?: string
  csrf?: string
  host?: string
  headers?: Record<string, string>
  body?: unknown
}

export async function portal(p: PortalGateway, method: string, path: string, visit: Visit = {}): Promise<Answer> {
  const headers: Record<string, string> = { host: visit.host ?? ACME_HOST, 'user-agent': 'Mozilla/5.0 (portal test)', accept: 'application/json', ...visit.headers }
  if (visit.cookie !== undefined) headers.cookie = `portal_session=${visit.cookie}`
  if (visit.csrf !== undefined) headers['x-csrf-token'] = visit.csrf
  if (visit.body !== undefined) headers['content-type'] = 'application/json'
  const res = await request(`${p.t.url}${path}`, { method: method as 'GET', headers, body: visit.body === undefined ? undefined : JSON.stringify(visit.body) })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

/** The session cookie's value in a Set-Cookie header. */
export function cookieOf(answer: Answer): string {
  const header = answer.headers['set-cookie']
  const match = /^portal_session=([^;]*);/.exec(String(header))
  if (match === null) throw new Error(`no session cookie in ${String(header)}`)
  return match[1] as string
}

export interface Session {
  cookie: string
  csrf: string
  sessionId: string
}

/** Enters a link as the portal's page does: its token posted, the cookie and the CSRF token kept. */
export async function enter(p: PortalGateway, token: string): Promise<Session> {
  const answer = await portal(p, 'POST', '/portal/session', { body: { token } })
  expect({ status: answer.statusCode, body: answer.body }).toMatchObject({ status: 201 })
  const data = (JSON.parse(answer.body) as { data: { csrfToken: string; sessionId: string } }).data
  return { cookie: cookieOf(answer), csrf: data.csrfToken, sessionId: data.sessionId }
}

/** A session of a new link of the credential. */
export async function sessionOf(p: PortalGateway, credentialId: string, body: Record<string, unknown> = {}): Promise<Session> {
  return enter(p, (await makeLink(p, credentialId, body)).token)
}

export function dataOf<T = Record<string, unknown>>(answer: Answer): T {
  return (JSON.parse(answer.body) as { data: T }).data
}
