import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto'

// Signing secrets of webhook endpoints (docs/architecture.md, "Webhooks", §D35): `whsec_` and
// the base64 of 32 random bytes, shown to the partner only when made; kept in Redis sealed
// (AES-256-GCM under WEBHOOKS_SECRET_KEY, bound to what it belongs to), never in clear.
// Signatures follow Standard Webhooks: `v1,` and the base64 HMAC-SHA256, keyed with the
// secret's decoded bytes, of `<webhook-id>.<webhook-timestamp>.<body>`.

export const SECRET_PREFIX = 'whsec_'

/**
 * The key of tests and the demo, which have no WEBHOOKS_SECRET_KEY of their own: `npm start`
 * refuses to start without one (docs/operations.md, "Webhooks").
 */
export const DEVELOPMENT_KEY = 'partner-gateway development key: set WEBHOOKS_SECRET_KEY'

/** What a sealed value starts with: its format (a value without it was sealed before the context was bound). */
const FORMAT = 'v1.'
const IV_BYTES = 12
const TAG_BYTES = 16

export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`
}

/** No configured key (WEBHOOKS_SECRET_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS) opens a sealed value. */
export class SecretUnreadableError extends Error {
  readonly code = 'WEBHOOK_SECRET_UNREADABLE'
  constructor(readonly context: string) {
    super('no configured key (WEBHOOKS_SECRET_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS) opens it')
    this.name = 'SecretUnreadableError'
  }
}

export interface Opened {
  plain: Buffer
  /** Sealed as `seal` seals now (the current key, the current format); false: seal it again. */
  current: boolean
}

/** The AES key of a configured key: its SHA-256, so any text of 32 characters or more serves. */
const aesKey = (text: string): Buffer => createHash('sha256').update(text).digest()

export class SecretBox {
  /** The current key first, then the previous ones. */
  private readonly keys: Buffer[]

  constructor(current: string, previous: readonly string[] = []) {
    this.keys = [current, ...previous].map(aesKey)
  }

  /** Seals `plain` under the current key, bound to `context` (an endpoint's id, an idempotency record): it opens only with the same context. */
  seal(plain: Buffer, context: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.keys[0] as Buffer, iv)
    cipher.setAAD(Buffer.from(context, 'utf8'))
    const body = Buffer.concat([cipher.update(plain), cipher.final()])
    return `${FORMAT}${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`
  }

  /** Opens what `seal` sealed with `context`, under any configured key; throws SecretUnreadableError when none opens it. */
  open(sealed: string, context: string): Opened {
    const bound = sealed.startsWith(FORMAT)
    const bytes = Buffer.from(bound ? sealed.slice(FORMAT.length) : sealed, 'base64')
    for (const [index, key] of this.keys.entries()) {
      const plain = openWith(key, bytes, bound ? context : undefined)
      if (plain !== undefined) return { plain, current: bound && index === 0 }
    }
    throw new SecretUnreadableError(context)
  }
}

function openWith(key: Buffer, bytes: Buffer, context: string | undefined): Buffer | undefined {
  if (bytes.length < IV_BYTES + TAG_BYTES) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES))
    if (context !== undefined) decipher.setAAD(Buffer.from(context, 'utf8'))
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()])
  } catch {
    return undefined
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
