import { compactVerify, errors as jose } from 'jose'
import { LRUCache } from 'lru-cache'
import { hash } from 'node:crypto'
import { Agent } from 'undici'
import type { IssuerConfig, OAuthConfig } from './config.js'
import { ApiError, invalidToken, type RefusedCredential } from '../contract/errors.js'
import type { AddressMatcher } from '../keys/addresses.js'
import { allowedFromOf, scopesOf, type KeyVerifier, type VerifyHooks } from '../keys/authenticator.js'
import { grantDigest, type GrantRecord } from '../keys/grants.js'
import type { Principal, Scopes } from '../keys/principal.js'
import { RecordCache, UNKNOWN, type RecordCacheOptions } from '../keys/record-cache.js'
import type { KeyStore } from '../keys/store.js'
import { IssuerKeys, type JwksStatus } from './jwks.js'

// OAuth 2.0 access tokens (RFC 9068 JWTs, checked per RFC 8725), the gateway as resource
// server: a token is verified against its issuer's published keys, never by calling the
// identity provider per request; its client's grant (registered with the key tool) says what
// it may do (docs/architecture.md, "Access tokens").
//
// A verified token is remembered by its digest (never the token) until its `exp`: a partner
// that reuses a token pays one signature check per instance, and every later request is
// answered synchronously, as a cached API key is (docs/architecture.md §D15). Forged tokens
// are never remembered: each costs a parse and, with a key id the issuer publishes, one
// signature check, and counts as a 401 against its client address (docs/security.md, "Forged
// access tokens").

interface Issuer {
  config: IssuerConfig
  algorithms: ReadonlySet<string>
  /** Accepted `typ` values, lower-cased, without `application/`. */
  types: ReadonlySet<string>
  keys: IssuerKeys
}

interface CachedGrant {
  record: GrantRecord
  properties: ReadonlySet<string> | 'all'
  scopes: Scopes
  /** The grant's allowed addresses, compiled once per read (docs/architecture.md, "Allowed addresses"). */
  allowedFrom: { allowedFrom?: AddressMatcher }
  loadedAt: number
}

/** What a verified token proved, kept until its `exp` (plus the leeway). */
interface VerifiedToken {
  issuer: Issuer
  /** The key it was verified with: its `kid`, or, for a token that names none, the version of the issuer's keys then. */
  kid: string | undefined
  keysVersion: number
  grantDigest: string
  /** The token's `scope`/`scp`; null when the issuer counts the grant's scopes alone. */
  tokenScopes: ReadonlySet<string> | null
  expiresAtMs: number
  /** The grant the principal below was made from; another grant (a change) makes another. */
  grant: CachedGrant | undefined
  principal: Principal | undefined
}

export interface TokenAuthenticatorOptions {
  oauth: OAuthConfig
  /** Where the grants are cached, as key records are. */
  grantCache: Omit<RecordCacheOptions, 'unavailableDetail'>
  onJwksFetch?: (issuer: string, result: 'ok' | 'error') => void
  onJwksError?: (issuer: string, message: string) => void
}

export interface OAuthStatus {
  issuers: Record<string, JwksStatus>
  verifiedTokens: { entries: number; hitRatio: number }
  grants: { entries: number; unknownEntries: number; hitRatio: number }
}

function invalid(detail: string): ApiError {
  return invalidToken('INVALID_ACCESS_TOKEN', detail)
}

const EXPIRED = 'The access token has expired; get a new one from the identity provider.'

/** RFC 9068 2.1 / RFC 8725 3.11: `typ` compared case-insensitively, `application/` implied. */
function normaliseType(typ: string): string {
  const lower = typ.toLowerCase()
  return lower.startsWith('application/') ? lower.slice('application/'.length) : lower
}

function decodePart(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value)
const isTime = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value)
const isText = (value: unknown): value is string => typeof value === 'string' && value !== ''

/** `scope` (space-separated, RFC 8693 4.2), else `scp` (an array, or a string as Entra ID sends it). */
function scopesClaim(payload: Record<string, unknown>): ReadonlySet<string> {
  const { scope, scp } = payload
  if (typeof scope === 'string') return new Set(scope.split(' ').filter((s) => s !== ''))
  if (typeof scp === 'string') return new Set(scp.split(' ').filter((s) => s !== ''))
  if (Array.isArray(scp)) return new Set(scp.filter((s): s is string => typeof s === 'string'))
  return new Set()
}

/** The registered client a refused token was of, when known (docs/architecture.md §D57). */
function refusedClient(grant: CachedGrant | undefined): RefusedCredential | undefined {
  return grant === undefined ? undefined : { id: grant.record.id, mode: grant.record.mode, secret: null }
}

function intersect(token: ReadonlySet<string>, grant: Scopes): Scopes {
  if (grant === 'all') return token
  const both = new Set<string>()
  for (const scope of token) if (grant.has(scope)) both.add(scope)
  return both
}

export class TokenAuthenticator implements KeyVerifier {
  /** The issuers in force, by `iss`: a reload replaces the map whole (`useIssuers`). */
  private issuers = new Map<string, Issuer>()
  private readonly verified: LRUCache<string, VerifiedToken>
  private readonly grants: RecordCache<CachedGrant>
  private readonly dispatcher: Agent
  private readonly toleranceMs: number
  private hits = 0
  private lookups = 0

  constructor(store: KeyStore, private readonly options: TokenAuthenticatorOptions) {
    const { oauth } = options
    this.toleranceMs = oauth.clockToleranceSeconds * 1000
    this.verified = new LRUCache<string, VerifiedToken>({ max: oauth.verifiedTokens })
    this.grants = new RecordCache<CachedGrant>(store, async (digest) => {
      const record = await store.findGrant(digest)
      if (record === null) return undefined
      return {
        record,
        properties: record.properties === '*' ? 'all' : new Set(record.properties.map((p) => p.toLowerCase())),
        scopes: scopesOf(record.scopes),
        allowedFrom: allowedFromOf(record.allowedIps),
        loadedAt: Date.now(),
      }
    }, { ...options.grantCache, unavailableDetail: 'Access tokens cannot be checked right now; retry shortly.' })
    this.dispatcher = new Agent({ connections: 4, keepAliveTimeout: 4000 })
    for (const config of oauth.issuers) this.issuers.set(config.issuer, this.issuerOf(config))
  }

  private issuerOf(config: IssuerConfig): Issuer {
    const { oauth, onJwksFetch, onJwksError } = this.options
    return {
      config,
      algorithms: new Set(config.algorithms),
      types: new Set(config.types.map(normaliseType)),
      keys: new IssuerKeys({
        issuer: config.issuer,
        jwksUri: config.jwksUri,
        refreshMs: oauth.jwksRefreshSeconds * 1000,
        cooldownMs: oauth.jwksCooldownSeconds * 1000,
        timeoutMs: oauth.jwksTimeoutMs,
        dispatcher: this.dispatcher,
        ...(onJwksFetch === undefined ? {} : { onFetch: onJwksFetch }),
        ...(onJwksError === undefined ? {} : { onError: onJwksError }),
      }),
    }
  }

  /**
   * The issuers of a reloaded configuration, in force from the next token: one unchanged keeps
   * its keys; an added or changed one gets its keys fetched anew; a removed or replaced one's
   * keys are no longer fetched, and the tokens it was remembered to have signed are refused.
   */
  useIssuers(issuers: readonly IssuerConfig[]): void {
    const next = new Map<string, Issuer>()
    for (const config of issuers) {
      const kept = this.issuers.get(config.issuer)
      next.set(config.issuer, kept !== undefined && JSON.stringify(kept.config) === JSON.stringify(config) ? kept : this.issuerOf(config))
    }
    const replaced = [...this.issuers.values()].filter((issuer) => next.get(issuer.config.issuer) !== issuer)
    this.issuers = next
    for (const issuer of replaced) issuer.keys.close()
  }

  /**
   * The principal of a token's client, or the 401/403/503 ApiError. Synchronous when the
   * token was verified before and its grant is cached (most requests).
   */
  verify(token: string, hooks: VerifyHooks = {}): Principal | Promise<Principal> {
    if (this.issuers.size === 0) throw invalid('This API takes API keys; it accepts no access tokens.')
    const digest = hash('sha256', token, 'base64url')
    this.lookups += 1
    let known = this.verified.get(digest)
    // Remembered only while its signing key is published: a key its issuer retired takes
    // with it the tokens it signed (docs/architecture.md §D15); so does an issuer a reload
    // removed or changed.
    if (known !== undefined && (!stillPublished(known) || this.issuers.get(known.issuer.config.issuer) !== known.issuer)) {
      this.verified.delete(digest)
      known = undefined
    }
    if (known !== undefined) {
      if (known.expiresAtMs <= Date.now()) {
        this.verified.delete(digest)
        throw invalidToken('ACCESS_TOKEN_EXPIRED', EXPIRED, refusedClient(known.grant))
      }
      this.hits += 1
      // A token whose verification is remembered is known to be valid: no look-up of its grant
      // is refused by the per-address bound (docs/security.md, "Invented keys").
      return this.admit(known, {})
    }
    // A signature check, then perhaps a JWKS fetch and a grant look-up: each look-up counts
    // against the client address while it runs (docs/security.md, "Invented keys"); the stage
    // gives it back if the token is good.
    return this.check(token, digest, hooks).then((verified) => this.admit(verified, hooks))
  }

  /** The grant of a verified token's client, and what it makes of the token. */
  private admit(token: VerifiedToken, hooks: VerifyHooks): Principal | Promise<Principal> {
    const grant = this.grants.lookup(token.grantDigest)
    if (grant === UNKNOWN) throw notRegistered()
    if (grant !== undefined) return this.principalOf(token, grant)
    if (!this.grants.holds(token.grantDigest)) hooks.beforeLookup?.()
    return this.grants.load(token.grantDigest).then((loaded) => {
      if (loaded === undefined) throw notRegistered()
      return this.principalOf(token, loaded)
    })
  }

  private principalOf(token: VerifiedToken, grant: CachedGrant): Principal {
    if (grant.record.status === 'suspended') throw new ApiError('CLIENT_SUSPENDED', 'The client of this access token is suspended.', { credential: { id: grant.record.id, mode: grant.record.mode, secret: null } })
    if (token.grant === grant && token.principal !== undefined) return token.principal
    const { record } = grant
    const principal: Principal = {
      keyId: record.id,
      kind: 'accessToken',
      brand: record.brand,
      mode: record.mode,
      properties: grant.properties,
      rateLimit: record.rateLimit,
      // The grant's scopes are the most a token of it may do (docs/architecture.md, "Scopes").
      scopes: token.tokenScopes === null ? grant.scopes : intersect(token.tokenScopes, grant.scopes),
      ...grant.allowedFrom,
    }
    token.grant = grant
    token.principal = principal
    return principal
  }

  /** Every check of a token not seen before; remembers it when it passes. */
  private async check(token: string, digest: string, hooks: VerifyHooks): Promise<VerifiedToken> {
    const [headerPart = '', payloadPart = ''] = token.split('.')
    const header = decodePart(headerPart)
    const payload = decodePart(payloadPart)
    if (!isObject(header)) throw invalid('The access token is not a well-formed JWT: its header is not a JSON object.')
    if (!isObject(payload)) throw invalid('The access token is not a well-formed JWT: its payload is not a JSON object.')
    const issuer = typeof payload.iss === 'string' ? this.issuers.get(payload.iss) : undefined
    if (issuer === undefined) throw invalid('The access token is not from an issuer this API trusts (iss).')
    const { alg, typ, kid } = header
    if (typeof alg !== 'string' || !issuer.algorithms.has(alg)) {
      throw invalid(`The access token is signed with an algorithm this API does not accept (alg); it accepts ${issuer.config.algorithms.join(', ')}.`)
    }
    if (typeof typ !== 'string' || !issuer.types.has(normaliseType(typ))) {
      throw invalid(`The access token is not of an accepted type (typ); this API accepts ${issuer.config.types.join(', ')}.`)
    }
    await this.verifySignature(token, issuer, kid, hooks)
    const keysVersion = issuer.keys.version

    const now = Date.now()
    const { audience } = issuer.config
    const aud = payload.aud
    if (!(aud === audience || (Array.isArray(aud) && aud.includes(audience)))) throw invalid(`The access token is not for this API: its audience (aud) must include '${audience}'.`)
    if (!isText(payload.sub)) throw invalid('The access token lacks the claim sub.')
    if (!isTime(payload.exp)) throw invalid('The access token lacks the claim exp.')
    if (!isTime(payload.iat)) throw invalid('The access token lacks the claim iat.')
    if (payload.iat * 1000 > now + this.toleranceMs) throw invalid('The access token is issued in the future (iat); the clocks of the identity provider and the API disagree.')
    if (payload.nbf !== undefined && (!isTime(payload.nbf) || payload.nbf * 1000 > now + this.toleranceMs)) throw invalid('The access token is not valid yet (nbf).')
    // A token without a useful end would outlive any revocation by its issuer.
    if (payload.exp - payload.iat > this.options.oauth.maxTokenLifetimeSeconds) {
      throw invalid(`The access token is valid for longer than this API accepts: its exp is more than ${this.options.oauth.maxTokenLifetimeSeconds} seconds after its iat.`)
    }
    const expiresAtMs = payload.exp * 1000 + this.toleranceMs
    // RFC 9068 2.2 names the client in client_id; Keycloak and others in azp; else the subject.
    const client = isText(payload.client_id) ? payload.client_id : isText(payload.azp) ? payload.azp : payload.sub
    if (expiresAtMs <= now) {
      // A client this instance holds is known without a look-up: its request log gets the refusal.
      const held = this.grants.lookup(grantDigest(issuer.config.issuer, client))
      throw invalidToken('ACCESS_TOKEN_EXPIRED', EXPIRED, refusedClient(held === UNKNOWN ? undefined : held))
    }

    const verified: VerifiedToken = {
      issuer,
      kid: typeof kid === 'string' ? kid : undefined,
      keysVersion,
      grantDigest: grantDigest(issuer.config.issuer, client),
      tokenScopes: issuer.config.scopes === 'grant' ? null : scopesClaim(payload),
      expiresAtMs,
      grant: undefined,
      principal: undefined,
    }
    this.verified.set(digest, verified, { ttl: expiresAtMs - now })
    return verified
  }

  private async verifySignature(token: string, issuer: Issuer, kid: unknown, hooks: VerifyHooks): Promise<void> {
    const { keys } = issuer
    // No keys yet (the provider unreachable since start), or a key id not among them (a
    // rotation): one fetch, at most once per cooldown, shared by whoever waits.
    if (!keys.ready || (typeof kid === 'string' && !keys.kids.has(kid))) {
      hooks.beforeLookup?.()
      await keys.refetch()
    }
    if (keys.keySet === undefined) {
      throw new ApiError('SERVICE_UNAVAILABLE', 'The signing keys of the token\'s issuer cannot be fetched right now; retry shortly.', { retryAfter: keys.retryAfterSeconds })
    }
    if (typeof kid === 'string' && !keys.kids.has(kid)) throw invalid('The access token is signed with a key its issuer does not publish (kid).')
    try {
      await compactVerify(token, keys.keySet, { algorithms: issuer.config.algorithms })
    } catch (error) {
      if (error instanceof jose.JWKSMultipleMatchingKeys) throw invalid('The access token names no key (kid) and its issuer publishes several that could have signed it.')
      if (error instanceof jose.JWKSNoMatchingKey) throw invalid('The access token is signed with a key its issuer does not publish (kid).')
      if (error instanceof jose.JWSSignatureVerificationFailed) throw invalid('The signature of the access token is not valid.')
      throw invalid('The access token is not a well-formed JWS.')
    }
  }

  status(): OAuthStatus {
    const issuers: Record<string, JwksStatus> = {}
    for (const [name, issuer] of this.issuers) issuers[name] = issuer.keys.status()
    return {
      issuers,
      verifiedTokens: { entries: this.verified.size, hitRatio: this.lookups === 0 ? 0 : Math.round((this.hits / this.lookups) * 1000) / 1000 },
      grants: { entries: this.grants.size, unknownEntries: this.grants.unknownSize, hitRatio: this.grants.hitRatio },
    }
  }

  /** Waits until every issuer's keys were fetched once (tests, the demo); false if not within `ms`. */
  async ready(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      if ([...this.issuers.values()].every((i) => i.keys.ready)) return true
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return [...this.issuers.values()].every((i) => i.keys.ready)
  }

  async close(): Promise<void> {
    for (const issuer of this.issuers.values()) issuer.keys.close()
    await this.dispatcher.close()
  }
}

/** Whether the key a remembered token was verified with is still among its issuer's. */
function stillPublished(token: VerifiedToken): boolean {
  const keys = token.issuer.keys
  return token.kid === undefined ? token.keysVersion === keys.version : keys.kids.has(token.kid)
}

function notRegistered(): ApiError {
  return new ApiError('CLIENT_NOT_REGISTERED', 'The client of this access token is not registered for this API.')
}
