import { Webhook, WebhookVerificationError } from 'standardwebhooks'
import type { components } from './openapi.js'

export { WebhookVerificationError }

/** An event as the API delivers it: the `Event` of the API reference (partners ignore fields they do not know). */
export type WebhookEvent = components['schemas']['Event']

export type WebhookHeaders = Headers | Record<string, string | readonly string[] | undefined>

function headerRecord(headers: WebhookHeaders): Record<string, string> {
  const record: Record<string, string> = {}
  if (headers instanceof Headers) {
    headers.forEach((value, name) => {
      record[name] = value
    })
    return record
  }
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === 'string') record[name.toLowerCase()] = value
    else if (value !== undefined) record[name.toLowerCase()] = value.join(', ')
  }
  return record
}

/**
 * Checks a webhook delivery by the Standard Webhooks rules (the `webhook-id`,
 * `webhook-timestamp` and `webhook-signature` headers; an HMAC-SHA256 with the endpoint's
 * `whsec_…` secret over the body exactly as received; a timestamp within 5 minutes of now) and
 * returns the event. Anything else throws WebhookVerificationError: answer such a request 400
 * and do not act on it. Pass the raw body, not a re-serialised parse of it.
 */
export function verifyWebhook(body: string | Uint8Array, headers: WebhookHeaders, secret: string): WebhookEvent {
  const payload = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  new Webhook(secret).verify(payload, headerRecord(headers), { jsonParse: false })
  let event: unknown
  try {
    event = JSON.parse(payload.toString())
  } catch {
    throw new WebhookVerificationError('The payload is not JSON')
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) throw new WebhookVerificationError('The payload is not a JSON object')
  return event as WebhookEvent
}
