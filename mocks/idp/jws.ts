import { createHmac, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'

// Signing for the stand-in identity provider, with node:crypto alone: JWS compact form
// (RFC 7515), RS256 and ES256 keys and their public JWKs, and the broken tokens a resource
// server must refuse (unsigned, HMAC "signed" with the public key).

export type SigningAlg = 'RS256' | 'ES256'

/** How a minted token is signed: a real key, or one of the classic attacks. */
export type Signature = SigningAlg | 'none' | 'HS256-with-public-key'

export interface SigningKey {
  kid: string
  alg: SigningAlg
  privateKey: KeyObject
  publicKey: KeyObject
}

export function generateSigningKey(alg: SigningAlg, kid: string): SigningKey {
  const pair = alg === 'RS256'
    ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : generateKeyPairSync('ec', { namedCurve: 'P-256' })
  return { kid, alg, privateKey: pair.privateKey, publicKey: pair.publicKey }
}

/** The public half as a JWK (RFC 7517), as providers publish it. */
export function publicJwk(key: SigningKey): Record<string, unknown> {
  return { ...key.publicKey.export({ format: 'jwk' }), kid: key.kid, alg: key.alg, use: 'sig' }
}

const part = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')

/**
 * A JWS in compact form of `header` and `payload` (a string is taken as the raw payload, for
 * tokens whose payload is not JSON). `key` signs it as `signature` says; the header's `alg`
 * is the caller's.
 */
export function compactJws(header: Record<string, unknown>, payload: unknown, key: SigningKey, signature: Signature): string {
  const input = `${part(header)}.${part(payload)}`
  switch (signature) {
    case 'none':
      return `${input}.`
    case 'HS256-with-public-key': {
      // The attack of RFC 8725 2.1: the public key's PEM as an HMAC secret.
      const secret = key.publicKey.export({ format: 'pem', type: 'spki' })
      return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`
    }
    case 'RS256':
      return `${input}.${sign('sha256', Buffer.from(input), key.privateKey).toString('base64url')}`
    case 'ES256':
      return `${input}.${sign('sha256', Buffer.from(input), { key: key.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`
  }
}
