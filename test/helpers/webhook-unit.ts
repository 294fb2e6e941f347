import type { CheckedEvent } from '../../src/events/cloudevents.js'
import { EventTypes } from '../../src/events/types.js'
import type { DeliverySettings } from '../../src/webhooks/deliveries.js'
import type { WebhookSettings } from '../../src/webhooks/service.js'
import type { Receiver } from './receiver.js'

// What the webhooks' gateway-free tests share (worker.test.ts, deliveries-paths.test.ts,
// service-failures.test.ts): the event types, the settings, the events as the ingest checks
// them, and paths of the receiver answered per test.

export const WAIT_MS = 20_000
export const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'

export const eventTypes = (): EventTypes => new EventTypes([
  { type: 'property.updated', publisher: 'pms', internalType: 'hotel.changed', scope: 'properties:read', brand: 'chain', property: 'hotel', object: { type: 'property', id: 'hotel', path: '/v1/properties/{id}' } },
  { type: 'guest.created', publisher: 'crm', internalType: 'guest.new', scope: 'guests:read', brand: 'chain', object: { type: 'guest', id: 'guest', path: '/v1/guests/{id}' } },
])

/** Short retries and timeouts, one lease per endpoint, loopback allowed: what the tests' deliveries run under. */
export const DELIVERY_SETTINGS: DeliverySettings = {
  deliveryTimeoutMs: 1500, retrySchedule: [0.05, 0.05], disableAfterHours: 1, endpointConcurrency: 1, deliveryWorkers: 4, deliveryLockSeconds: 5,
  allowPrivateTargets: true, maxManualDeliveriesPerEndpoint: 2, maxRecoveryEvents: 100, retentionDays: 1,
}

/** The owners' records kept by an instance (`keyCache`); a key store made without a subscriber hears no changes, so it reads them every time (src/keys/records-by-id.ts). */
export const CREDENTIAL_CACHE = { ttlMs: 10_000, maxEntries: 100 }

export const WEBHOOK_SETTINGS: WebhookSettings = { maxEndpointsPerCredential: 3, maxManualDeliveriesPerEndpoint: 2, maxRecoveryEvents: 100, allowHttp: true, allowPrivateTargets: true }

/** A property.updated of the hotel (or a guest.created), as the ingest checks it. */
export function checked(index: number, id: string, type: 'property.updated' | 'guest.created' = 'property.updated'): CheckedEvent {
  return type === 'property.updated'
    ? { index, id, internalType: 'hotel.changed', traceparent: undefined, mapped: { type, brand: 'acme', propertyId: HOTEL, object: { type: 'property', id: HOTEL, path: `/v1/properties/${HOTEL}` } } }
    : { index, id, internalType: 'guest.new', traceparent: undefined, mapped: { type, brand: 'acme', propertyId: null, object: { type: 'guest', id: 'g1', path: '/v1/guests/g1' } } }
}

/** A fresh path on `receiver`, answered by `answer` (n counts this path's requests from 1); its URL. */
export function receiverPath(receiver: Receiver, name: string, answer: (n: number) => number | 'hang' = () => 200): string {
  let count = 0
  const previous = receiver.behaviour
  receiver.behaviour = (n, request) => {
    if (request.path !== `/${name}`) return previous(n, request)
    count += 1
    return answer(count)
  }
  return `${receiver.url}/${name}`
}
