import { TokenError } from './errors.js'
import { NoAnswer, attemptSignal, wholeAnswers } from './transport.js'

export interface OAuthOptions {
  /** The identity provider's token endpoint (the API reference names it). */
  tokenUrl: string
  clientId: string
  clientSecret: string
  /** Scopes to ask for, space-separated or as a list; without it the provider's default for the client. */
  scope?: string | readonly string[]
}

/** A token is used until this long before it expires, so that it never expires on its way. */
export const EXPIRY_MARGIN_MS = 60_000

interface Cached {
  token: string
  /** Until when it is used; undefined when the provider gave no lifetime (used until refused). */
  freshUntil: number | undefined
}

/**
 * Access tokens of the client-credentials grant (RFC 6749 4.4): one token shared by every call
 * until shortly before it expires; concurrent calls that find none wait for the same request.
 */
export class ClientCredentials {
  private cached: Cached | undefined
  private pending: Promise<string> | undefined

  constructor(
    private readonly options: OAuthOptions,
    private readonly fetchImpl: typeof globalThis.fetch,
    private readonly userAgent: string,
    private readonly timeoutMs: number,
  ) {}

  /** A token to send now: the cached one while fresh, else a new one. */
  token(): Promise<string> {
    const cached = this.cached
    if (cached !== undefined && (cached.freshUntil === undefined || Date.now() < cached.freshUntil)) return Promise.resolve(cached.token)
    // Not under one caller's signal: the token is for every call waiting for it.
    this.pending ??= this.fetchToken().finally(() => {
      this.pending = undefined
    })
    return this.pending
  }

  /** The API refused `token`: the next call gets a new one (unless another call already did). */
  invalidate(token: string): void {
    if (this.cached?.token === token) this.cached = undefined
  }

  private async fetchToken(): Promise<string> {
    const { tokenUrl, clientId, clientSecret, scope } = this.options
    // HTTP Basic with the id and secret form-encoded first (RFC 6749 2.3.1).
    const basic = Buffer.from(`${formEncode(clientId)}:${formEncode(clientSecret)}`).toString('base64')
    const form = new URLSearchParams({ grant_type: 'client_credentials' })
    const scopes = typeof scope === 'string' ? scope : scope?.join(' ')
    if (scopes !== undefined && scopes !== '') form.set('scope', scopes)
    const request = new Request(tokenUrl, {
      method: 'POST',
      headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', 'user-agent': this.userAgent },
      body: form.toString(),
      signal: attemptSignal(this.timeoutMs, undefined),
      redirect: 'error',
    })
    const sentAt = Date.now()
    let response: Response
    try {
      response = await wholeAnswers(this.fetchImpl, undefined)(request)
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error
      throw new TokenError(`no answer from the token endpoint (${error.message})`, null, undefined, error.cause)
    }
    const text = await response.text()
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    if (!response.ok) throw new TokenError(`the token endpoint answered ${response.status}`, response.status, body)
    const { access_token: token, token_type: type, expires_in: expiresIn } = (body ?? {}) as Record<string, unknown>
    if (typeof token !== 'string' || token === '') throw new TokenError('the token endpoint answered without an access_token', response.status, body)
    if (typeof type === 'string' && type.toLowerCase() !== 'bearer') throw new TokenError(`the token endpoint issued a ${type} token, not a Bearer token`, response.status, body)
    // Counted from when the request left: the token may have been issued any time after.
    const freshUntil = typeof expiresIn === 'number' && Number.isFinite(expiresIn) ? sentAt + expiresIn * 1000 - EXPIRY_MARGIN_MS : undefined
    this.cached = { token, freshUntil }
    return token
  }
}

function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2)
}
