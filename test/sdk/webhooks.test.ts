import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'
import { describe, expect, it } from 'vitest'
import { verifyWebhook, WebhookVerificationError } from '../../sdk/src/index.js'

// verifyWebhook (sdk/) on deliveries signed by the Standard Webhooks package itself, so the
// signatures are made by code we did not write. (A delivery made by the gateway cannot be
// tested yet: the gateway does not deliver webhooks.)

const secret = `whsec_${randomBytes(32).toString('base64')}`
const event = {
  id: 'evt_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2', type: 'property.updated', createdAt: '2026-11-26T12:00:00.000Z', mode: 'live',
  propertyId: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10',
  object: { type: 'property', id: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', path: '/v1/properties/3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10' },
}
const body = JSON.stringify(event)

/** The headers of a delivery of `payload`, signed with `key` as at `at`. */
function signed(payload: string, at = new Date(), key = secret, id = event.id): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(key).sign(id, at, payload),
  }
}

function refusal(run: () => unknown): WebhookVerificationError {
  let caught: unknown
  try {
    run()
  } catch (error) {
    caught = error
  }
  expect(caught).toBeInstanceOf(WebhookVerificationError)
  return caught as WebhookVerificationError
}

describe('verifyWebhook', () => {
  it('returns the event of a delivery signed with the secret', () => {
    expect(verifyWebhook(body, signed(body), secret)).toEqual(event)
  })

  it('takes the body as bytes and the headers as a fetch Headers, names in any case', () => {
    const headers = new Headers(Object.entries(signed(body)).map(([name, value]): [string, string] => [name.toUpperCase(), value]))
    expect(verifyWebhook(new TextEncoder().encode(body), headers, secret)).toEqual(event)
    const plain = signed(body)
    const capitalised = { 'Webhook-Id': plain['webhook-id'], 'Webhook-Timestamp': plain['webhook-timestamp'], 'Webhook-Signature': plain['webhook-signature'] }
    expect(verifyWebhook(Buffer.from(body), capitalised, secret)).toEqual(event)
  })

  it('accepts any of two signatures, as during a rotation of the secret', () => {
    const other = `whsec_${randomBytes(32).toString('base64')}`
    const headers = signed(body)
    const both = { ...headers, 'webhook-signature': `${signed(body, new Date(), other)['webhook-signature']} ${headers['webhook-signature']}` }
    expect(verifyWebhook(body, both, secret)).toEqual(event)
  })

  it('refuses a body changed after signing', () => {
    const tampered = body.replace('property.updated', 'property.deleted')
    expect(refusal(() => verifyWebhook(tampered, signed(body), secret)).message).toBe('No matching signature found')
  })

  it('refuses a changed webhook-id or timestamp, and another secret', () => {
    const headers = signed(body)
    expect(refusal(() => verifyWebhook(body, { ...headers, 'webhook-id': 'evt_other' }, secret)).message).toBe('No matching signature found')
    const later = String(Number(headers['webhook-timestamp']) + 1)
    expect(refusal(() => verifyWebhook(body, { ...headers, 'webhook-timestamp': later }, secret)).message).toBe('No matching signature found')
    expect(refusal(() => verifyWebhook(body, headers, `whsec_${randomBytes(32).toString('base64')}`)).message).toBe('No matching signature found')
  })

  it('refuses a delivery signed more than 5 minutes ago, or for more than 5 minutes ahead; 4 minutes is fine', () => {
    const minutes = (n: number): Date => new Date(Date.now() + n * 60_000)
    expect(refusal(() => verifyWebhook(body, signed(body, minutes(-5.1)), secret)).message).toBe('Message timestamp too old')
    expect(refusal(() => verifyWebhook(body, signed(body, minutes(5.1)), secret)).message).toBe('Message timestamp too new')
    expect(verifyWebhook(body, signed(body, minutes(-4)), secret)).toEqual(event)
  })

  it('refuses a delivery without its headers, and a signed body that is not a JSON object', () => {
    const { 'webhook-signature': _signature, ...unsigned } = signed(body)
    expect(refusal(() => verifyWebhook(body, unsigned, secret)).message).toBe('Missing required headers')
    expect(refusal(() => verifyWebhook('not json', signed('not json'), secret)).message).toBe('The payload is not JSON')
    for (const payload of ['[1,2]', 'null', '42', '"property.updated"']) {
      expect(refusal(() => verifyWebhook(payload, signed(payload), secret)).message).toBe('The payload is not a JSON object')
    }
  })

  it('takes a header given as several values, as Node gives one sent twice: the signatures of both', () => {
    const other = `whsec_${randomBytes(32).toString('base64')}`
    const headers = signed(body)
    const twice = { ...headers, 'webhook-signature': [signed(body, new Date(), other)['webhook-signature'] as string, headers['webhook-signature'] as string], 'x-absent': undefined }
    expect(verifyWebhook(body, twice, secret)).toEqual(event)
  })

  it('verifies what a receiver on a real socket got: the raw body and Node\'s headers', async () => {
    const verdicts: unknown[] = []
    const receiver = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        try {
          verdicts.push(verifyWebhook(Buffer.concat(chunks), req.headers, secret))
          res.writeHead(204).end()
        } catch (error) {
          verdicts.push((error as Error).message)
          res.writeHead(400).end()
        }
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`
      const good = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...signed(body) }, body })
      const bad = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...signed(body) }, body: `${body} ` })
      expect([good.status, bad.status]).toEqual([204, 400])
      expect(verdicts).toEqual([event, 'No matching signature found'])
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})
