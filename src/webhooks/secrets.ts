import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto'

// Signing secrets of webhook endpoints (docs/architecture.md, "Webhooks"): `whsec_` and the
// base64 of 32 random bytes, shown to the partner only when made; kept in Redis encrypted
// (AES-256-GCM under WEBHOOKS_SECRET_KEY), never in clear. Signatures follow Standard Webhooks:
// `v1,` and the base64 HMAC-SHA256, keyed with the secret's decoded bytes, of
// `<webhook-id>.<webhook-timestamp>.<body>`.

export const SECRET_PREFIX = 'whsec_'

/** The key used when WEBHOOKS_SECRET_KEY is unset: fine for tests and the demo, never for production (the start warns). */
const DEVELOPMENT_KEY = 'partner-gateway development key: set WEBHOOKS_SECRET_KEY'

export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`
}

export class SecretBox {
  private readonly key: Buffer

  constructor(key: string | undefined) {
    this.key = createHash('sha256').update(key ?? DEVELOPMENT_KEY).digest()
  }

  seal(plain: Buffer): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    const body = Buffer.concat([cipher.update(plain), cipher.final()])
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')
  }

  open(sealed: string): Buffer {
    const bytes = Buffer.from(sealed, 'base64')
    const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, 12))
    decipher.setAuthTag(bytes.subarray(12, 28))
    return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()])
  }
}

/** `v1,<signature>` of one secret (`whsec_…`). */
export function signature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

/** The `webhook-signature` header: one signature per live secret, space-separated (two during a rotation). */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((secret) => signature(secret, id, timestamp, body)).join(' ')
}
