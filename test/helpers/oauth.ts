import { expect } from 'vitest'
import type { FileConfig } from '../../src/config.js'
import { runKeyTool } from '../../src/credentials/tool.js'
import type { MockIdp } from '../../mocks/idp/server.js'

/** The `oauth` section that trusts the stand-in identity provider `idp`. */
export function oauthFor(idp: MockIdp, overrides: Partial<FileConfig['oauth']> = {}, issuer: Partial<FileConfig['oauth']['issuers'][number]> = {}): FileConfig['oauth'] {
  return {
    issuers: [{
      issuer: idp.issuer, jwksUri: idp.jwksUri, audience: 'partner-api', algorithms: ['RS256', 'ES256'], types: ['at+jwt', 'JWT'], scopes: 'token',
      tokenUrl: idp.tokenUrl, ...issuer,
    }],
    clockToleranceSeconds: 60, jwksRefreshSeconds: 300, jwksCooldownSeconds: 30, jwksTimeoutMs: 2000, verifiedTokens: 1000, maxTokenLifetimeSeconds: 86400,
    ...overrides,
  }
}

/** The environment that makes the key tool know `idp` as the issuer (it reads the shipped config file). */
export function issuerEnv(idp: MockIdp): Record<string, string> {
  return { OAUTH_ISSUER: idp.issuer, OAUTH_JWKS_URI: idp.jwksUri, OAUTH_AUDIENCE: 'partner-api', OAUTH_TOKEN_URL: idp.tokenUrl }
}

export interface ToolRun { code: number; out: string[]; err: string[] }

/**
 * The key tool, as `npm run keys` runs it, against the given Redis namespace and issuer. Its
 * audit lines on stderr are left out unless `env` sets LOG_LEVEL (test/credentials/audit.test.ts
 * reads them).
 */
export async function keyTool(env: Record<string, string>, ...argv: string[]): Promise<ToolRun> {
  const out: string[] = []
  const err: string[] = []
  const code = await runKeyTool(argv, { CONFIG_FILE: 'config/default.json', LOG_LEVEL: 'warn', ...env }, { out: (l) => out.push(l), err: (l) => err.push(l) })
  return { code, out, err }
}

/** The key tool's `--json` answer to `argv`, parsed, after checking that it succeeded and printed no error. */
export async function keyToolJson<T>(env: Record<string, string>, ...argv: string[]): Promise<T> {
  const run = await keyTool(env, ...argv, '--json')
  expect({ code: run.code, err: run.err }).toEqual({ code: 0, err: [] })
  return JSON.parse(run.out[0] as string) as T
}

/** Registers `clientId` at `idp` with the key tool; returns the grant's JSON. */
export async function grantClient(env: Record<string, string>, idp: MockIdp, clientId: string, ...flags: string[]): Promise<{ id: string; scopes: string[] | '*' }> {
  const run = await keyTool({ ...env, ...issuerEnv(idp) }, 'grant-client', '--issuer', idp.issuer, '--client-id', clientId, '--json',
    ...(flags.includes('--brand') ? [] : ['--brand', 'acme']), ...(flags.includes('--mode') ? [] : ['--mode', 'live']),
    ...(flags.includes('--properties') || flags.includes('--all-properties') ? [] : ['--all-properties']), ...flags)
  if (run.code !== 0) throw new Error(`grant-client failed: ${run.err.join(' ')}`)
  return JSON.parse(run.out[0] as string) as { id: string; scopes: string[] | '*' }
}

/** The `WWW-Authenticate` of a refused token with `description`. */
export function invalidTokenChallenge(description: string): string {
  return `Bearer error="invalid_token", error_description="${description}"`
}
