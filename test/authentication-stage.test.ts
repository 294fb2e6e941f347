import type { FastifyRequest } from 'fastify'
import { describe, expect, it } from 'vitest'
import { ApiError } from '../src/contract/errors.js'
import { KeyAuthenticator } from '../src/keys/authenticator.js'
import { generateKey } from '../src/keys/format.js'
import { MemoryKeyStore } from '../src/keys/store.js'
import { AuthFailureLimiter } from '../src/pipeline/abuse.js'
import { authenticationStage } from '../src/pipeline/authentication.js'

// Step 4 without a gateway: a key refused is counted against the client's address whether the
// key check returned its 401 at once (a key of no known form, or one remembered as unknown) or
// rejected with it after a look-up, and counted once per request; a key it knows passes and
// costs the address nothing.

const ADDRESS = '192.0.2.7'

function requestWith(key: string): FastifyRequest {
  return { ip: ADDRESS, headers: { authorization: `Bearer ${key}` }, brand: { id: 'acme' }, refusedCredential: null } as unknown as FastifyRequest
}

/** The address's 401s left before its look-ups are refused: how many `reserve` takes before it throws. */
function leftFor(failures: AuthFailureLimiter, perMinute: number): number {
  for (let left = 0; left <= perMinute; left += 1) {
    try {
      failures.check(ADDRESS)
    } catch {
      return left
    }
    failures.add(ADDRESS)
  }
  return perMinute
}

describe('step 4 counts a refused key against the address', () => {
  it('once for a refusal returned at once, once for one a look-up ends in, never for a key it knows', async () => {
    const store = new MemoryKeyStore()
    const { key: known } = await store.create({ brand: 'acme', mode: 'live', properties: '*' })
    const verifier = new KeyAuthenticator(store, { ttlMs: 600_000, graceMs: 0, maxEntries: 10 })
    const failures = new AuthFailureLimiter({ perMinute: 10, trackedAddresses: 100 })
    const authenticate = authenticationStage(verifier, failures)

    const malformed = authenticate(requestWith('svc_live_not-a-key'))
    expect(malformed).toBeInstanceOf(ApiError)
    expect(malformed).toMatchObject({ code: 'INVALID_API_KEY', status: 401 })

    // Well formed, in no store: looked up once (the promise ends in the refusal), then remembered.
    const unknown = generateKey('live')
    const lookedUp = authenticate(requestWith(unknown))
    expect(lookedUp).toBeInstanceOf(Promise)
    expect(await lookedUp).toMatchObject({ code: 'INVALID_API_KEY', status: 401 })
    const remembered = authenticate(requestWith(unknown))
    expect(remembered).toBeInstanceOf(ApiError)
    expect(remembered).toMatchObject({ code: 'INVALID_API_KEY', status: 401 })

    // A key it knows: looked up (its reservation given back), then held.
    const request = requestWith(known)
    expect(await authenticate(request)).toBeUndefined()
    expect(authenticate(requestWith(known))).toBeUndefined()
    expect(request.principal).toMatchObject({ brand: 'acme', mode: 'live', kind: 'apiKey' })

    // Three refusals counted, one each: seven of the ten left.
    expect(leftFor(failures, 10)).toBe(7)
  })
})
