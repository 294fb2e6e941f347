import type { ApiError } from '../contract/errors.js'
import type { Principal } from './principal.js'
import type { KeyVerifier, VerifyHooks } from './authenticator.js'

// What a `Bearer` value is (docs/architecture.md, "Access tokens"; docs/architecture.md §D6):
// one that starts with `svc_` is an API key; three base64url parts joined by dots are an access
// token (a JWS in compact form; the signature part may be empty, so that an unsigned token is
// refused as a token); anything else goes to the key check, which refuses it as
// INVALID_API_KEY.

const TOKEN_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/

export function isAccessToken(value: string): boolean {
  return !value.startsWith('svc_') && TOKEN_SHAPE.test(value)
}

export class Credentials implements KeyVerifier {
  constructor(private readonly keys: KeyVerifier, private readonly tokens: KeyVerifier) {}

  verify(value: string, hooks?: VerifyHooks): Principal | ApiError | Promise<Principal> {
    return isAccessToken(value) ? this.tokens.verify(value, hooks) : this.keys.verify(value, hooks)
  }
}
