import { z } from 'zod'
import { httpUrl, optionalUrl, positiveInt } from '../config/fields.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The access tokens' section of the configuration (docs/architecture.md, "Configuration"): the
// issuers trusted and how their keys are fetched. One issuer from the environment replaces the
// file's list.

// The JWS algorithms a published key can verify (RFC 7518, RFC 8037). `none` and the HS*
// family are refused by name: an HMAC secret cannot be published in a JWKS, and accepting
// HS256 is how a token "signed" with the public key gets in (RFC 8725 2.1, 3.1).
export const TOKEN_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const
const tokenAlgorithm = z.string().refine((alg) => alg !== 'none' && !/^HS\d+$/.test(alg), 'none and HS* cannot be verified with published keys (RFC 8725)')
  .pipe(z.enum(TOKEN_ALGORITHMS, { error: `must be one of ${TOKEN_ALGORITHMS.join(', ')}` }))

const issuerSchema = z.strictObject({
  issuer: z.string().min(1).describe('The `iss` of its tokens, exactly as the identity provider writes it'),
  jwksUri: httpUrl.describe('Where its signing keys (JWKS) are published; fetched by the gateway, never per request'),
  audience: z.string().min(1).describe('The `aud` its tokens must name for this API'),
  algorithms: z.array(tokenAlgorithm).min(1).default(['RS256', 'PS256', 'ES256', 'EdDSA']).describe('Signature algorithms accepted; `none` and HS* are refused'),
  types: z.array(z.string().min(1)).min(1).default(['at+jwt', 'JWT'])
    .describe('Accepted JWT header `typ` (case-insensitive, `application/` prefix ignored); `["at+jwt"]` to accept RFC 9068 tokens only'),
  scopes: z.enum(['token', 'grant']).default('token')
    .describe('`token`: the token\'s `scope`/`scp` within the grant\'s scopes; `grant`: the grant\'s scopes alone (for providers that cannot put scopes in tokens)'),
  tokenUrl: httpUrl.optional().describe('Its token endpoint; documentation only (the OpenAPI client-credentials flow, the demo)'),
})

const oauthSchema = z.strictObject({
  issuers: z.array(issuerSchema).default([]).describe('Identity providers whose access tokens are accepted beside API keys; none: tokens are refused'),
  clockToleranceSeconds: z.number().int().min(0).max(300).default(60).describe('Leeway for `exp`, `iat` and `nbf`'),
  jwksRefreshSeconds: positiveInt.default(300).describe('How often each issuer\'s JWKS is fetched again; a failed fetch keeps the last good keys'),
  jwksCooldownSeconds: positiveInt.default(30).describe('At most one extra JWKS fetch per issuer in this time, for a token whose `kid` is unknown'),
  jwksTimeoutMs: positiveInt.default(2000).describe('Deadline of one JWKS fetch'),
  verifiedTokens: positiveInt.default(100000).describe('Verified tokens remembered (by digest, until their `exp`, while their signing key is published), so a reused token costs one signature check per instance'),
  maxTokenLifetimeSeconds: positiveInt.default(86400)
    .describe('Longest lifetime a token may claim (`exp` − `iat`); a longer one is refused 401 INVALID_ACCESS_TOKEN, since it would outlive any revocation by its issuer'),
}).superRefine((oauth, ctx) => {
  const seen = new Set<string>()
  oauth.issuers.forEach((issuer, i) => {
    if (seen.has(issuer.issuer)) ctx.addIssue({ code: 'custom', path: ['issuers', i, 'issuer'], message: `issuer '${issuer.issuer}' is listed twice` })
    seen.add(issuer.issuer)
  })
})

export type OAuthConfig = z.infer<typeof oauthSchema>
export type IssuerConfig = OAuthConfig['issuers'][number]

export const oauthFileFields = {
  oauth: oauthSchema.prefault({}).describe('OAuth 2.0 access tokens (RFC 9068) beside API keys: the issuers trusted and how their keys are fetched'),
}

export const oauthEnvFields = {
  OAUTH_ISSUER: z.string().min(1).optional().describe('One token issuer (`iss`), replacing the file\'s `oauth.issuers`; needs `OAUTH_JWKS_URI` and `OAUTH_AUDIENCE`'),
  OAUTH_JWKS_URI: optionalUrl.describe('Its JWKS (with `OAUTH_ISSUER`)'),
  OAUTH_AUDIENCE: z.string().min(1).optional().describe('The `aud` its tokens must name (with `OAUTH_ISSUER`)'),
  OAUTH_TOKEN_URL: optionalUrl.describe('Its token endpoint, for the documentation (with `OAUTH_ISSUER`)'),
}

// One issuer from the environment is all three or nothing (OAUTH_TOKEN_URL is optional).
// Checked on the raw values, so that they are reported even when another variable is bad.
export function oauthEnvProblems(env: Record<string, string>): string[] {
  const problems: string[] = []
  const issuer = ['OAUTH_ISSUER', 'OAUTH_JWKS_URI', 'OAUTH_AUDIENCE', 'OAUTH_TOKEN_URL']
  const given = issuer.filter((name) => env[name] !== undefined)
  if (given.length > 0) {
    for (const name of issuer.slice(0, 3)) if (env[name] === undefined) problems.push(`environment ${name}: required with ${given.join(', ')}`)
  }
  return problems
}

/** The file's `oauth`, its issuers replaced by one from the environment (a deployment's own provider) when it names one. */
export function oauthWithEnv(oauth: OAuthConfig, e: z.infer<z.ZodObject<typeof oauthEnvFields>>): OAuthConfig {
  if (e.OAUTH_ISSUER === undefined || e.OAUTH_JWKS_URI === undefined || e.OAUTH_AUDIENCE === undefined) return oauth
  return { ...oauth, issuers: [issuerSchema.parse({ issuer: e.OAUTH_ISSUER, jwksUri: e.OAUTH_JWKS_URI, audience: e.OAUTH_AUDIENCE, tokenUrl: e.OAUTH_TOKEN_URL })] }
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const oauthReload: ReloadRules = {
  reloadable: {
    'oauth.issuers': 'the next token: an added issuer\'s keys are fetched, a removed issuer\'s tokens are refused (OAUTH_ISSUER, from the environment, replaces the list until a restart)',
  },
  restartOnly: {
    'oauth.clockToleranceSeconds': 'read by the token verifier made at start',
    'oauth.jwksRefreshSeconds': 'the timers that fetch each issuer\'s keys are set at start',
    'oauth.jwksCooldownSeconds': 'read by the key fetchers made at start',
    'oauth.jwksTimeoutMs': 'read by the key fetchers made at start',
    'oauth.verifiedTokens': 'the cache of verified tokens is sized at start',
    'oauth.maxTokenLifetimeSeconds': 'read by the token verifier made at start',
  },
}
