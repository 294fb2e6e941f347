import { hash } from 'node:crypto'
import { MockIdp } from '../mocks/idp/server.js'
import { KeyAuthenticator } from '../src/keys/authenticator.js'
import { digestKey } from '../src/keys/format.js'
import { MemoryKeyStore } from '../src/keys/store.js'
import { TokenAuthenticator } from '../src/oauth/tokens.js'

// The cost of authenticating a request whose key is in the local cache, next to what it
// cannot avoid (one SHA-256 of the key) and an empty async call; and the same for an access
// token whose verification is remembered (one SHA-256 of the token, a few hundred bytes), in
// the same run.

export interface AuthBenchResult {
  verifyHitNs: number
  sha256Ns: number
  tokenHitNs: number
  tokenSha256Ns: number
  emptyAsyncNs: number
}

async function timePerOp(iterations: number, op: () => Promise<unknown> | unknown): Promise<number> {
  for (let i = 0; i < 10_000; i += 1) await op() // warm up
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i += 1) await op()
  return Number(process.hrtime.bigint() - start) / iterations
}

export async function benchAuth(iterations = 500_000): Promise<AuthBenchResult> {
  const store = new MemoryKeyStore()
  const { key } = await store.create({ brand: 'acme', mode: 'live', properties: '*' })
  const authenticator = new KeyAuthenticator(store, { ttlMs: 3_600_000, graceMs: 0, maxEntries: 1000 })
  await authenticator.verify(key)

  const idp = await new MockIdp().listen()
  const tokens = new TokenAuthenticator(store, {
    oauth: {
      issuers: [{ issuer: idp.issuer, jwksUri: idp.jwksUri, audience: 'partner-api', algorithms: ['RS256'], types: ['at+jwt'], scopes: 'token' }],
      clockToleranceSeconds: 60, jwksRefreshSeconds: 3600, jwksCooldownSeconds: 30, jwksTimeoutMs: 2000, verifiedTokens: 1000, maxTokenLifetimeSeconds: 86400,
    },
    grantCache: { ttlMs: 3_600_000, graceMs: 0, maxEntries: 1000, maxUnknown: 1000 },
  })
  await store.createGrant({ issuer: idp.issuer, clientId: 'bench-client', brand: 'acme', mode: 'live', properties: '*' })
  const token = idp.mint({ claims: { client_id: 'bench-client', scope: 'properties:read', exp: Math.floor(Date.now() / 1000) + 86_400 } })
  await tokens.verify(token)

  const rounds: AuthBenchResult[] = []
  try {
    // Alternating rounds, so that a noisy neighbour hits all alike.
    for (let round = 0; round < 3; round += 1) {
      rounds.push({
        verifyHitNs: await timePerOp(iterations, () => authenticator.verify(key)),
        sha256Ns: await timePerOp(iterations, () => digestKey(key)),
        tokenHitNs: await timePerOp(iterations, () => tokens.verify(token)),
        tokenSha256Ns: await timePerOp(iterations, () => hash('sha256', token, 'base64url')),
        emptyAsyncNs: await timePerOp(iterations, async () => undefined),
      })
    }
  } finally {
    await tokens.close()
    await idp.close()
  }
  const median = (pick: (r: AuthBenchResult) => number) => rounds.map(pick).sort((x, y) => x - y)[1] as number
  return {
    verifyHitNs: median((r) => r.verifyHitNs), sha256Ns: median((r) => r.sha256Ns), tokenHitNs: median((r) => r.tokenHitNs),
    tokenSha256Ns: median((r) => r.tokenSha256Ns), emptyAsyncNs: median((r) => r.emptyAsyncNs),
  }
}
