import { afterEach, describe, expect, it, vi } from 'vitest'
import { TokenError } from '../../sdk/src/errors.js'
import { ClientCredentials, EXPIRY_MARGIN_MS, type OAuthOptions } from '../../sdk/src/oauth.js'
import { scriptedFetch, type Fetched } from './helpers.js'

// The client-credentials grant of the SDK (sdk/src/oauth.ts) over a fetch that answers from a
// script: the form and headers it sends, the answers of the token endpoint it refuses, and how
// long it keeps a token. The same grant against the stand-in identity provider over HTTP is in
// oauth.test.ts.

const TOKEN_URL = 'https://idp.example/oauth2/token'
const OPTIONS: OAuthOptions = { tokenUrl: TOKEN_URL, clientId: 'client-1', clientSecret: 'secret-1' }

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
}

/** The form a token request sent. */
function formOf(sent: Fetched): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(sent.body))
}

function grant(fetch: typeof globalThis.fetch, options: Partial<OAuthOptions> = {}): ClientCredentials {
  return new ClientCredentials({ ...OPTIONS, ...options }, fetch, 'partner-sdk/test', 30_000)
}

async function refusal(promise: Promise<unknown>): Promise<Record<string, unknown>> {
  const error = await promise.then(() => undefined, (e: unknown) => e)
  expect(error).toBeInstanceOf(TokenError)
  const { message, status, error: code, errorDescription } = error as TokenError
  return { message, status, error: code, errorDescription }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('the token request', () => {
  it('posts the grant with HTTP Basic, JSON accepted, and the scopes given as a list or a string; none when there are none', async () => {
    const { fetch, seen } = scriptedFetch(json({ access_token: 'a' }), json({ access_token: 'b' }), json({ access_token: 'c' }), json({ access_token: 'd' }))
    expect(await grant(fetch, { scope: ['properties:read', 'events:read'] }).token()).toBe('a')
    expect(await grant(fetch, { scope: 'properties:read' }).token()).toBe('b')
    expect(await grant(fetch, { scope: '' }).token()).toBe('c')
    expect(await grant(fetch).token()).toBe('d')
    expect(seen.map(formOf)).toEqual([
      { grant_type: 'client_credentials', scope: 'properties:read events:read' },
      { grant_type: 'client_credentials', scope: 'properties:read' },
      { grant_type: 'client_credentials' },
      { grant_type: 'client_credentials' },
    ])
    expect(seen[0]?.headers).toEqual({
      authorization: `Basic ${Buffer.from('client-1:secret-1').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json', 'user-agent': 'partner-sdk/test',
    })
  })
})

describe('the token endpoint\'s answer', () => {
  it('refuses an error status, a token missing, empty or not a string, and a token type other than Bearer', async () => {
    const invalid = { error: 'invalid_client', error_description: 'Unknown client.' }
    const { fetch } = scriptedFetch(json(invalid, 401), new Response('<html>', { status: 502 }), json({ token_type: 'Bearer' }), json({ access_token: '' }), json({ access_token: 7 }), json({ access_token: 'a', token_type: 'MAC' }))
    expect(await refusal(grant(fetch).token())).toEqual({ message: 'the token endpoint answered 401', status: 401, ...{ error: 'invalid_client', errorDescription: 'Unknown client.' } })
    expect(await refusal(grant(fetch).token())).toEqual({ message: 'the token endpoint answered 502', status: 502, error: null, errorDescription: null })
    for (let i = 0; i < 3; i += 1) {
      expect(await refusal(grant(fetch).token())).toEqual({ message: 'the token endpoint answered without an access_token', status: 200, error: null, errorDescription: null })
    }
    expect(await refusal(grant(fetch).token())).toEqual({ message: 'the token endpoint issued a MAC token, not a Bearer token', status: 200, error: null, errorDescription: null })
  })

  it('takes a Bearer type in any case, and no type at all', async () => {
    const { fetch } = scriptedFetch(json({ access_token: 'a', token_type: 'bearer' }), json({ access_token: 'b', token_type: 'BEARER' }), json({ access_token: 'c' }))
    expect([await grant(fetch).token(), await grant(fetch).token(), await grant(fetch).token()]).toEqual(['a', 'b', 'c'])
  })

  it('no answer: a TokenError without a status, naming why and keeping the cause', async () => {
    const cause = new Error('ECONNREFUSED')
    const { fetch } = scriptedFetch(() => Promise.reject(new TypeError('fetch failed', { cause })))
    const error = await grant(fetch).token().catch((e: unknown) => e) as TokenError
    expect({ name: error.name, message: error.message, status: error.status, cause: (error.cause as Error).cause }).toEqual({
      name: 'TokenError', message: 'no answer from the token endpoint (the connection failed)', status: null, cause,
    })
  })
})

describe('the token kept', () => {
  it('is used until a minute before it expires, counted from when it was asked for', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-02T12:00:00Z') })
    const { fetch, seen } = scriptedFetch(json({ access_token: 'a', expires_in: 300 }), json({ access_token: 'b', expires_in: 300 }))
    const kept = grant(fetch)
    expect(await kept.token()).toBe('a')
    vi.setSystemTime(Date.parse('2026-12-02T12:00:00Z') + 300_000 - EXPIRY_MARGIN_MS - 1)
    expect(await kept.token()).toBe('a')
    vi.setSystemTime(Date.parse('2026-12-02T12:00:00Z') + 300_000 - EXPIRY_MARGIN_MS)
    expect(await kept.token()).toBe('b')
    expect(seen).toHaveLength(2)
  })

  it('without a numeric lifetime, is used until the API refuses it', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-02T12:00:00Z') })
    const { fetch, seen } = scriptedFetch(json({ access_token: 'a', expires_in: '300' }), json({ access_token: 'b' }), json({ access_token: 'c' }))
    const kept = grant(fetch)
    expect(await kept.token()).toBe('a')
    vi.setSystemTime(Date.parse('2026-12-03T12:00:00Z'))
    expect(await kept.token()).toBe('a')
    kept.invalidate('a')
    expect(await kept.token()).toBe('b')
    vi.setSystemTime(Date.parse('2026-12-04T12:00:00Z'))
    expect(await kept.token()).toBe('b')
    expect(seen).toHaveLength(2)
  })

  it('with a lifetime JSON makes infinite (1e999, -1e999), as without one: used until the API refuses it', async () => {
    for (const lifetime of ['1e999', '-1e999']) {
      vi.useFakeTimers({ toFake: ['Date'], now: Date.parse('2026-12-02T12:00:00Z') })
      const raw = new Response(`{"access_token":"a","token_type":"Bearer","expires_in":${lifetime}}`, { status: 200, headers: { 'content-type': 'application/json' } })
      const { fetch, seen } = scriptedFetch(raw, json({ access_token: 'b' }))
      const kept = grant(fetch)
      expect(await kept.token()).toBe('a')
      vi.setSystemTime(Date.parse('2026-12-03T12:00:00Z'))
      expect(await kept.token()).toBe('a')
      expect(seen).toHaveLength(1)
    }
  })

  it('is dropped only when the token refused is the one kept, and nothing breaks before one is kept', async () => {
    const { fetch, seen } = scriptedFetch(json({ access_token: 'a' }), json({ access_token: 'b' }))
    const kept = grant(fetch)
    kept.invalidate('a')
    expect(await kept.token()).toBe('a')
    kept.invalidate('an older one')
    expect(await kept.token()).toBe('a')
    expect(seen).toHaveLength(1)
  })
})
