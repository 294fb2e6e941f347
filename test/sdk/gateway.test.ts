import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateHotels, type Hotel } from '../../mocks/pms/data.js'
import { GUEST_COUNTS } from '../../mocks/service/data.js'
import { ApiError, PartnerClient, verifyWebhook, type RetryInfo } from '../../sdk/src/index.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually } from '../helpers/redis.js'
import { WAIT_MS, webhookConfig } from '../helpers/webhooks.js'
import { UUID_V4, watchedFetch } from './helpers.js'

// The client (sdk/) against a gateway on a real socket, with the stand-in PMS and bookings
// service over HTTP: what a partner's code sees. Every answer the client receives is checked
// against the gateway's OpenAPI document (helpers.ts, watchedFetch).

const ACTIVE = 230
let s: Setup
let properties: string[]
/** A property of the PMS's own seed: the bookings stand-in has rooms for those. */
let seeded: string

/** The active properties of acme in the API's order: `createdAt`, then `id`. */
function acmeActive(hotels: Hotel[]): string[] {
  return hotels.filter((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')
    .sort((a, b) => Number(a.created_epoch_ms) - Number(b.created_epoch_ms) || String(a.hotel_uuid).localeCompare(String(b.hotel_uuid)))
    .map((h) => String(h.hotel_uuid))
}

function client(options: { correlationId?: string; onRetry?: (retry: RetryInfo) => void; maxRetries?: number } = {}): { client: PartnerClient; sent: ReturnType<typeof watchedFetch>['sent'] } {
  const { fetch, sent } = watchedFetch({ url: s.t.url, source: s.t.gateway.app.gatewayConfig })
  return { client: new PartnerClient({ baseUrl: s.t.url, apiKey: s.key, fetch, ...options }), sent }
}

async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(() => undefined, (e: unknown) => e)
  expect(error).toBeInstanceOf(ApiError)
  return error as ApiError
}

beforeAll(async () => {
  // A long bound on calls to the service: a test holds one in flight for seconds.
  s = await startWithService({ bookings: { timeoutMs: 10_000 }, env: PUBLISHER_TOKENS, config: webhookConfig() })
  seeded = acmeActive(s.t.pms.hotels)[0] as string
  // The stand-in PMS seeds 33 active acme hotels; more of them, over its control API, make 230.
  const more = generateHotels(7, 4).filter((h) => h.chain_code === 'ACME').slice(0, ACTIVE - acmeActive(s.t.pms.hotels).length)
    .map((h) => ({ ...h, lifecycle: 'LIVE' }))
  const added = await fetch(`${s.t.pms.url}/__mock/hotels`, { method: 'POST', body: JSON.stringify(more) })
  expect(added.status).toBe(200)
  properties = acmeActive(s.t.pms.hotels)
  expect(properties).toHaveLength(ACTIVE)
})

afterAll(async () => {
  await s.close()
})

describe('properties', () => {
  it('listAll yields every property of every page in the API order, and stops at total', async () => {
    const { client: c, sent } = client()
    const ids: string[] = []
    for await (const property of c.properties.listAll({ perPage: 46 })) ids.push(property.id)
    expect(ids).toEqual(properties)
    // 230 is 5 full pages of 46: a client that stopped at the first short page would ask for a sixth.
    expect(sent.map((r) => `${r.method} ${r.url.pathname}${r.url.search} ${r.status}`)).toEqual(
      [1, 2, 3, 4, 5].map((page) => `GET /v1/properties?perPage=46&page=${page} 200`))
  })

  it('listAll asks for 100 a page unless told otherwise, and starts at the page given', async () => {
    const { client: c, sent } = client()
    const ids: string[] = []
    for await (const property of c.properties.listAll()) ids.push(property.id)
    expect(ids).toEqual(properties)
    expect(sent.map((r) => r.url.search)).toEqual(['?perPage=100&page=1', '?perPage=100&page=2', '?perPage=100&page=3'])

    const rest: string[] = []
    for await (const property of c.properties.listAll({ page: 3, perPage: 100 })) rest.push(property.id)
    expect(rest).toEqual(properties.slice(200))
  })

  it('list and get answer data, meta and the request id', async () => {
    const { client: c } = client()
    const list = await c.properties.list({ page: 2, perPage: 3 })
    expect(list.status).toBe(200)
    expect(list.data.map((p) => p.id)).toEqual(properties.slice(3, 6))
    expect(list.meta.pagination).toEqual({ page: 2, perPage: 3, total: ACTIVE })
    expect(list.requestId).toBe(list.meta.requestId)
    expect(list.headers.get('service-request-id')).toBe(list.requestId)

    const one = await c.properties.get((list.data[0]?.id as string).toUpperCase())
    expect(one.status).toBe(200)
    expect(one.data).toEqual(list.data[0])
    expect(one.meta).toEqual({ requestId: one.requestId, timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as string })
  })

  it('an unknown property is an ApiError 404 PROPERTY_NOT_FOUND carrying the whole problem, not retried', async () => {
    const { client: c, sent } = client()
    const id = randomUUID()
    const error = await rejection(c.properties.get(id))
    expect(sent).toHaveLength(1)
    expect({ status: error.status, code: error.code, title: error.title, errors: error.errors, retryAfter: error.retryAfter }).toEqual({
      status: 404, code: 'PROPERTY_NOT_FOUND', title: 'Property not found', errors: [], retryAfter: null,
    })
    expect(error.requestId).toMatch(/.+/)
    expect(error.requestId).toBe(error.headers.get('service-request-id'))
    expect(error.problem).toEqual({
      type: 'https://developer.example.com/errors/property-not-found', title: 'Property not found', status: 404, detail: error.detail,
      moreInfo: expect.any(String) as string, instance: `/v1/properties/${id}`, code: 'PROPERTY_NOT_FOUND', errors: [],
      requestId: error.requestId, timestamp: expect.any(String) as string,
    })
    expect(error.detail).not.toBe('')
    expect(error.message).toBe(`404 PROPERTY_NOT_FOUND: ${error.detail} (request ${error.requestId})`)
  })

  it('a bad parameter is an ApiError 400 with its field errors', async () => {
    const { client: c } = client()
    const error = await rejection(c.properties.list({ perPage: 101 }))
    expect({ status: error.status, code: error.code }).toEqual({ status: 400, code: 'INVALID_QUERY_PARAMETER' })
    expect(error.errors).toEqual([{ field: 'perPage', code: 'OUT_OF_RANGE', detail: expect.any(String) as string }])
  })
})

describe('what every request carries', () => {
  it('its User-Agent, the key, the correlation id (echoed), and no Idempotency-Key on a GET', async () => {
    const { client: c, sent } = client({ correlationId: 'order-4711' })
    const answer = await c.properties.list({ perPage: 1 })
    expect(answer.headers.get('service-correlation-id')).toBe('order-4711')
    const headers = sent[0]?.headers as Headers
    expect(headers.get('user-agent')).toBe(`partner-gateway-sdk/0.1.0 node/${process.versions.node}`)
    expect(headers.get('authorization')).toBe(`Bearer ${s.key}`)
    expect(headers.get('service-correlation-id')).toBe('order-4711')
    expect(headers.get('idempotency-key')).toBeNull()
  })

  it('health sends no credential and answers the bare status', async () => {
    const { client: c, sent } = client()
    const health = await c.health()
    expect({ status: health.status, data: health.data, meta: health.meta }).toEqual({ status: 200, data: { status: 'ok' }, meta: null })
    expect(sent[0]?.headers.get('authorization')).toBeNull()
  })
})

describe('the credential', () => {
  it('credential() answers who the client is, as the gateway shows it, never a secret', async () => {
    const { client: c } = client()
    const answer = await c.credential()
    expect(answer.status).toBe(200)
    expect(answer.data).toMatchObject({ id: s.keyId, type: 'api_key', brand: 'acme', mode: 'live', scopes: '*', properties: '*', expiresAt: null, allowedIps: null })
    expect(answer.requestId).toEqual(expect.stringMatching(/^req_[0-9a-f]{32}$/))
    expect(answer.meta?.requestId).toBe(answer.requestId)
    expect(JSON.stringify(answer.data)).not.toContain(s.key)
  })
})

describe('events', () => {
  it('listAll catches up on every event of every page, oldest first; get reads one; an unknown id is an ApiError 404', async () => {
    const admin = await listenAdmin(s.t.gateway)
    const published: string[] = []
    for (let batch = 0; batch < 3; batch += 1) {
      const answer = await publish(admin, properties.slice(batch * 50, batch * 50 + 50).map((id) => hotelChanged(id)))
      published.push(...accepted(answer).map((a) => a.eventId as string))
    }
    const { client: c, sent } = client()
    const seen: string[] = []
    for await (const event of c.events.listAll({ perPage: 40, type: 'property.updated' })) seen.push(event.id)
    expect(seen).toEqual(published)
    // 150 events, 40 a page: four pages, the last one short, and no fifth request.
    expect(sent.map((r) => new URL(r.url).searchParams.get('page'))).toEqual(['1', '2', '3', '4'])
    const one = await c.events.get(published[0] as string)
    expect(one.data).toMatchObject({ id: published[0], type: 'property.updated', mode: 'live', propertyId: properties[0], object: { type: 'property', id: properties[0], path: `/v1/properties/${properties[0]}` } })
    const missing = await rejection(c.events.get('evt_00000000000000000000000000'))
    expect({ status: missing.status, code: missing.code }).toEqual({ status: 404, code: 'EVENT_NOT_FOUND' })
  })
})

describe('webhook endpoints', () => {
  it('create shows the secret; a delivery the gateway makes to a loopback receiver passes verifyWebhook; deliveries and redeliver', async () => {
    const receiver = await new Receiver().listen()
    try {
      const { client: c, sent } = client()
      const created = await c.webhookEndpoints.create({ url: `${receiver.url}/partner`, eventTypes: ['property.updated'] })
      expect(created.status).toBe(201)
      expect(sent[0]?.headers.get('idempotency-key')).toMatch(UUID_V4)
      const { id, secret } = created.data
      // The events test above may have opened the admin listener already.
      const server = s.t.gateway.admin.server
      const admin = server.listening ? `http://127.0.0.1:${(server.address() as { port: number }).port}` : await listenAdmin(s.t.gateway)
      const [event] = accepted(await publish(admin, hotelChanged(properties[0] as string)))
      const eventId = event?.eventId as string
      expect(await eventually(async () => receiver.of(eventId).length === 1, WAIT_MS)).toBe(true)
      const [delivery] = receiver.of(eventId)
      const verified = verifyWebhook(delivery?.body as string, delivery?.headers as Record<string, string>, secret)
      expect(verified).toEqual((await c.events.get(eventId)).data)
      const rotated = (await c.webhookEndpoints.rotateSecret(id)).data.secret
      expect(() => verifyWebhook(delivery?.body as string, delivery?.headers as Record<string, string>, rotated)).toThrow('No matching signature found')
      expect(await eventually(async () => (await c.webhookEndpoints.deliveries(id)).data.length === 1, WAIT_MS)).toBe(true)
      expect((await c.webhookEndpoints.deliveries(id)).data).toEqual([{ eventId, attempt: 1, at: expect.any(String), status: 200, outcome: 'delivered', durationMs: expect.any(Number) }])
      expect((await c.webhookEndpoints.redeliver(eventId, id)).status).toBe(202)
      expect(await eventually(async () => receiver.of(eventId).length === 2, WAIT_MS)).toBe(true)
      expect((await c.webhookEndpoints.list()).data.map((e) => e.id)).toContain(id)
      expect((await c.webhookEndpoints.update(id, { description: 'sdk' })).data).toMatchObject({ id, description: 'sdk' })
      expect((await c.webhookEndpoints.test(id)).status).toBe(202)
      expect((await c.webhookEndpoints.delete(id)).status).toBe(204)
      const gone = await rejection(c.webhookEndpoints.get(id))
      expect({ status: gone.status, code: gone.code }).toEqual({ status: 404, code: 'WEBHOOK_ENDPOINT_NOT_FOUND' })
    } finally {
      await receiver.close()
    }
  })

  it('recover sends again what a receiver that was down missed; recoveries, recovery and cancelRecovery follow it', async () => {
    const receiver = await new Receiver(() => 503).listen()
    try {
      const { client: c, sent } = client()
      const { id, secret } = (await c.webhookEndpoints.create({ url: receiver.url, eventTypes: ['property.updated'] })).data
      const server = s.t.gateway.admin.server
      const admin = server.listening ? `http://127.0.0.1:${(server.address() as { port: number }).port}` : await listenAdmin(s.t.gateway)
      const since = new Date(Date.now() - 1000).toISOString()
      const [event] = accepted(await publish(admin, hotelChanged(properties[0] as string)))
      const eventId = event?.eventId as string
      // Every attempt of the schedule fails (four with the tests' schedule); the receiver is then up.
      expect(await eventually(async () => (await c.webhookEndpoints.deliveries(id)).data.length === 4, WAIT_MS)).toBe(true)
      receiver.behaviour = () => 200
      const started = await c.webhookEndpoints.recover(id, { since })
      expect(started.status).toBe(202)
      expect(sent.at(-1)?.headers.get('idempotency-key')).toMatch(UUID_V4)
      expect(started.data).toMatchObject({ endpointId: id, since, include: 'failed', status: 'running', queued: 1, delivered: 0, failed: 0 })
      const recoveryId = started.data.id
      expect(await eventually(async () => (await c.webhookEndpoints.recovery(id, recoveryId)).data.status === 'done', WAIT_MS)).toBe(true)
      expect((await c.webhookEndpoints.recovery(id, recoveryId)).data).toEqual({ ...started.data, status: 'done', delivered: 1 })
      const [, , , , recovered] = receiver.of(eventId)
      expect(verifyWebhook(recovered?.body as string, recovered?.headers as Record<string, string>, secret)).toEqual((await c.events.get(eventId)).data)
      const list = await c.webhookEndpoints.recoveries(id)
      expect({ data: list.data, pagination: list.meta.pagination }).toEqual({ data: [{ ...started.data, status: 'done', delivered: 1 }], pagination: { page: 1, perPage: 20, total: 1 } })
      // Cancelling one that is done leaves it done.
      expect((await c.webhookEndpoints.cancelRecovery(id, recoveryId)).status).toBe(204)
      expect((await c.webhookEndpoints.recovery(id, recoveryId)).data.status).toBe('done')
      const unknown = await rejection(c.webhookEndpoints.recovery(id, 'wr_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2'))
      expect({ status: unknown.status, code: unknown.code }).toEqual({ status: 404, code: 'WEBHOOK_RECOVERY_NOT_FOUND' })
    } finally {
      await receiver.close()
    }
  })
})

describe('declared routes: guests and rooms', () => {
  it('create sends a new UUID v4 Idempotency-Key; the same key again gets the first answer back, created once', async () => {
    const { client: c, sent } = client()
    const guest = { firstName: 'Ada', lastName: 'Lovelace', email: `ada-${randomUUID()}@example.com` }
    const created = await c.guests.create(guest)
    expect(created.status).toBe(201)
    expect(created.data).toMatchObject({ object: 'guest', ...guest, phone: null })
    const key = sent[0]?.headers.get('idempotency-key') as string
    expect(key).toMatch(UUID_V4)
    expect(s.service.writesOf(key)).toEqual({ created: 1, updated: 0 })

    const again = await c.guests.create(guest, { idempotencyKey: key })
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(again.data).toEqual(created.data)
    expect(s.service.writesOf(key)).toEqual({ created: 1, updated: 0 })
  })

  it('a write while the first with its key is in flight: 409 IDEMPOTENCY_KEY_IN_USE, retried after Retry-After until the first answer comes back', async () => {
    const key = randomUUID()
    const guest = { firstName: 'Grace', lastName: 'Hopper', email: `grace-${randomUUID()}@example.com` }
    s.service.setFailure({ mode: 'latency', latencyMs: 3000, times: 1 })
    const first = client().client.guests.create(guest, { idempotencyKey: key })
    expect(await eventually(async () => s.service.received.some((r) => r.headers['idempotency-key'] === key), 10_000)).toBe(true)

    const retries: RetryInfo[] = []
    const { client: second, sent } = client({ maxRetries: 20, onRetry: (r) => retries.push(r) })
    const [a, b] = await Promise.all([first, second.guests.create(guest, { idempotencyKey: key })])
    expect(b.data).toEqual(a.data)
    expect(b.headers.get('idempotent-replayed')).toBe('true')
    expect(s.service.writesOf(key)).toEqual({ created: 1, updated: 0 })
    expect(retries.length).toBeGreaterThan(0)
    for (const retry of retries) {
      expect({ delayMs: retry.delayMs, status: (retry.error as ApiError).status, code: (retry.error as ApiError).code })
        .toEqual({ delayMs: 1000, status: 409, code: 'IDEMPOTENCY_KEY_IN_USE' })
    }
    expect(new Set(sent.map((r) => r.headers.get('idempotency-key')))).toEqual(new Set([key]))
    expect(sent.map((r) => r.status)).toEqual([...retries.map(() => 409), 201])
  })

  it('update is a PATCH with its own key; get sends a list parameter comma-separated', async () => {
    const { client: c, sent } = client()
    const id = s.service.guestsOf('acme')[0]?.id as string
    const updated = await c.guests.update(id, { phone: '+44 20 7946 0000' })
    expect(updated.data).toMatchObject({ id, phone: '+44 20 7946 0000' })
    expect(sent[0]?.method).toBe('PATCH')
    expect(sent[0]?.headers.get('idempotency-key')).toMatch(UUID_V4)

    const full = await c.guests.get(id, { with: ['messages', 'reservations'] })
    expect(sent[1]?.url.search).toBe('?with=messages,reservations')
    expect(full.data).toMatchObject({ id, messages: expect.any(Array) as unknown[], reservations: expect.any(Array) as unknown[] })
  })

  it('rooms of a property, sent as Service-Property-Id', async () => {
    const { client: c, sent } = client()
    const rooms = await c.rooms.list(seeded, { perPage: 5 })
    expect(sent[0]?.headers.get('service-property-id')).toBe(seeded)
    expect(rooms.data).toHaveLength(5)
    expect(rooms.meta).toMatchObject({ pagination: { page: 1, perPage: 5, total: expect.any(Number) as number } })
  })

  it('request reaches any path; paginate walks any list', async () => {
    const { client: c, sent } = client()
    const one = await c.request<{ id: string }[]>({ method: 'GET', path: '/v1/guests', query: { perPage: 5 } })
    expect(one.data).toHaveLength(5)
    const guests = s.service.guestsOf('acme').map((g) => g.id)
    // The seeded guests, and those the tests above created.
    expect(guests.length).toBeGreaterThan(GUEST_COUNTS.acme as number)
    expect(one.meta).toMatchObject({ pagination: { page: 1, perPage: 5, total: guests.length } })

    const ids: string[] = []
    for await (const guest of c.paginate<{ id: string }>({ path: '/v1/guests', query: { perPage: 10 } })) ids.push(guest.id)
    expect(ids).toEqual(guests)
    const pages = Math.ceil(guests.length / 10)
    expect(sent.slice(1).map((r) => r.url.search)).toEqual(Array.from({ length: pages }, (_, i) => `?perPage=10&page=${i + 1}`))

    const error = await rejection(c.request({ method: 'DELETE', path: '/v1/guests' }))
    expect({ status: error.status, code: error.code, allow: error.headers.get('allow') }).toEqual({ status: 405, code: 'METHOD_NOT_ALLOWED', allow: 'GET, HEAD, POST' })
  })
})
