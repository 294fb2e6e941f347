import { randomUUID } from 'node:crypto'
import { request } from 'undici'
import type { Gateway } from '../../src/gateway.js'
import type { Answer } from './gateway.js'

// Publishing to a gateway's ingest endpoint (docs/operations.md, "Events") as an internal
// service does: CloudEvents over HTTP to the admin port, with a publisher's token.

/** The publishers' tokens the tests set, by the variable the shipped config names. */
export const PUBLISHER_TOKENS = {
  EVENTS_PMS_TOKEN: 'test-pms-publisher-token',
  EVENTS_PMS_SANDBOX_TOKEN: 'test-pms-sandbox-publisher-token',
  EVENTS_BOOKINGS_TOKEN: 'test-bookings-publisher-token',
  EVENTS_BOOKINGS_SANDBOX_TOKEN: 'test-bookings-sandbox-publisher-token',
} as const

export const SINGLE = 'application/cloudevents+json'
export const BATCH = 'application/cloudevents-batch+json'
export const HOTEL_CHANGED = 'com.example.pms.hotel.changed'

/** The admin listener of a gateway on a port of its own; returns its URL. */
export async function listenAdmin(gateway: Gateway): Promise<string> {
  await gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(gateway.admin.server.address() as { port: number }).port}`
}

export interface PublishOptions {
  /** The bearer token; null sends no Authorization header. Default: the live PMS's. */
  token?: string | null
  contentType?: string | null
  /** The body as sent, instead of the JSON of `events`. */
  raw?: string | Buffer
  headers?: Record<string, string>
}

/** POSTs `events` (one object, or an array sent as a batch) to the ingest endpoint at `adminUrl`. */
export async function publish(adminUrl: string, events: unknown, options: PublishOptions = {}): Promise<Answer> {
  const token = options.token === undefined ? PUBLISHER_TOKENS.EVENTS_PMS_TOKEN : options.token
  const contentType = options.contentType === undefined ? (Array.isArray(events) ? BATCH : SINGLE) : options.contentType
  const headers: Record<string, string> = { ...options.headers }
  if (token !== null) headers.authorization = `Bearer ${token}`
  if (contentType !== null) headers['content-type'] = contentType
  const res = await request(`${adminUrl}/events`, { method: 'POST', headers, body: options.raw ?? JSON.stringify(events) })
  return { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
}

/** A CloudEvent of the PMS saying a hotel changed; `overrides` replace attributes, `data` fields of its data. */
export function hotelChanged(hotelId: string, chainCode = 'ACME', overrides: Record<string, unknown> = {}, data: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specversion: '1.0', id: randomUUID(), source: 'pms', type: HOTEL_CHANGED, time: new Date().toISOString(), datacontenttype: 'application/json',
    data: { hotel_uuid: hotelId, chain_code: chainCode, changed: ['status'], revision: 1, ...data },
    ...overrides,
  }
}

/** A CloudEvent of the bookings service about a guest. */
export function guestEvent(kind: 'created' | 'updated', guestId: string, chainCode = 'ACME', overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specversion: '1.0', id: randomUUID(), source: 'bookings', type: `com.example.bookings.guest.${kind}`, datacontenttype: 'application/json',
    data: { guest_id: guestId, chain_code: chainCode }, ...overrides,
  }
}

export interface AcceptedEvent { id: string; eventId: string | null; duplicate: boolean }

/** The `data` of a 202 of the ingest. */
export function accepted(answer: Answer): AcceptedEvent[] {
  if (answer.statusCode !== 202) throw new Error(`the ingest answered ${answer.statusCode}: ${answer.body}`)
  return (JSON.parse(answer.body) as { data: AcceptedEvent[] }).data
}

/** The public event an ingest of `hotelChanged(hotelId)` by the PMS makes. */
export function propertyUpdated(eventId: string, createdAt: string, hotelId: string, mode: 'live' | 'test' = 'live'): Record<string, unknown> {
  return {
    id: eventId, type: 'property.updated', createdAt, mode, propertyId: hotelId,
    object: { type: 'property', id: hotelId, path: `/v1/properties/${hotelId}` },
  }
}

export const EVENT_ID = /^evt_[0-7][0-9A-HJKMNP-TV-Z]{25}$/
