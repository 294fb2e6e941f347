import type { AddressMatcher } from './addresses.js'

/** `svc_live_` keys reach live data, `svc_test_` keys only sandboxes (docs/architecture.md, "Test mode"). */
export type KeyMode = 'live' | 'test'

/** What a credential may do: every scope (also those of routes added later), or these. */
export type Scopes = ReadonlySet<string> | 'all'

/**
 * `apiKey`: an API key (`svc_…`), whose record is found by its digest. `accessToken`: an
 * OAuth 2.0 access token, whose client's grant (`cli_…`) says what it may do.
 */
export type CredentialKind = 'apiKey' | 'accessToken'

/** Who is calling, as authentication established it; later stages read it. */
export interface Principal {
  /**
   * The credential's id: an API key id `key_…`, or for an access token its client's grant
   * id `cli_…`. Logs, metrics, the quota and `X-Service-Key-Id` use it.
   */
  keyId: string
  kind: CredentialKind
  brand: string
  mode: KeyMode
  /** Property ids the key may use, or every property of its brand. */
  properties: ReadonlySet<string> | 'all'
  /** The key's own quota per window, when it has one. */
  rateLimit: number | null
  /** The scopes this credential may use on this request's routes. */
  scopes: Scopes
  /** Where the credential may be used from; absent: anywhere (docs/architecture.md, "Allowed addresses"). */
  allowedFrom?: AddressMatcher
  /** When the secret presented stops working (epoch ms, and as written); absent: never. */
  expiresAtMs?: number
  expiresAt?: string
  /** Set when the request came with a rolled key's previous secret, during its overlap. */
  previousSecret?: true
}
