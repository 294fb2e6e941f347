import type { Principal } from '../../src/keys/principal.js'
import { unauthorized } from '../../src/contract/errors.js'
import type { KeyVerifier } from '../../src/keys/authenticator.js'

/** A key verifier at the pipeline's edge, for tests of stages that are not about keys. */
export class FakeKeys implements KeyVerifier {
  constructor(private readonly principals: Record<string, Principal>) {}

  async verify(key: string): Promise<Principal> {
    const principal = this.principals[key]
    if (principal === undefined) throw unauthorized('INVALID_API_KEY', 'The API key is not valid.')
    return principal
  }
}
