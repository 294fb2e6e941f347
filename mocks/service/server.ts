import { randomBytes, randomUUID } from 'node:crypto'
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { gzipSync } from 'node:zlib'
import { listen, stop } from '../listen.js'
import { EventPublisher, targetFromEnv, type PublishTarget } from '../publisher.js'
import { chainOf, generateGuests, guestOrder, messagesOf, reservationsOf, roomsOf, type Guest, type Room } from './data.js'

// A stand-in for an internal service behind the gateway's declared routes ("bookings"): guests
// per brand and the rooms of each PMS hotel. Like the real internal services it trusts its
// caller (the gateway), checks only a shared token (none when started without one), and
// already answers in the public shape: the success envelope and problem+json errors. Every
// answer also carries internal headers (LEAKY_HEADERS) that the gateway must drop. Controlled
// over HTTP:
//
//   PUT    /__mock/failure   {"mode": "...", "times"?: n, "latencyMs"?: n, "status"?: n, "retryAfter"?: s, "bytes"?: n, "brand"?: id}
//   DELETE /__mock/failure   back to healthy
//   GET    /__mock/requests  what the service received (method, path, headers, body, and the request line and
//                            header lines exactly as they came: names as spelled, duplicates, order)
//   DELETE /__mock/requests
//   GET    /__mock/writes    the guests created and changed, per Idempotency-Key received ("" for none):
//                            {"<key>": {"created": n, "updated": n}}; it never deduplicates on the key
//                            itself, so a test sees every call that reached it
//   DELETE /__mock/guests    created and changed guests back to the seeded ones (and the writes)
//   GET    /__mock/events    what it published, with the gateway's answers
//
// Events: a guest created (POST) or changed (PATCH) is published as
// `com.example.bookings.guest.created` / `.guest.updated`, `data: {guest_id, chain_code}` (and
// `changed: [fields]` for an update), before the service answers, to the ingest URL and token
// it is given (`publish`, or MOCK_SERVICE_EVENTS_URL and MOCK_SERVICE_EVENTS_TOKEN, source
// MOCK_SERVICE_EVENTS_SOURCE, default `bookings`; its sandbox is `bookings-sandbox`).
//
// Modes: latency (answer normally after latencyMs), html-5xx (status 502/503/504, text/html),
// json-500 (an internal error in JSON), throttle (429 with Retry-After), reset (socket destroyed
// mid-response), drop (socket destroyed before any answer), non-json (200 text/plain),
// unauthorized (401 to any token), problem-4xx (a problem+json client error, 409 CONFLICT by
// default), plain-4xx (400 text/plain), large (a 200 envelope of about `bytes` bytes, 5 MiB by
// default, streamed), no-content (204), redirect (302 to a guest, or to `location`), stall (200 and the first bytes of
// an envelope, then nothing until the caller closes the connection), links (the first page with
// Link headers to itself, its own absolute URL, another host and an internal path, or the lines
// of `link` when given, and a Content-Language), gzip (the first page gzip-encoded), empty
// (`status`, default 200, with no body and `contentType` if given),
// exact (`status`, default 200, with `headers` and `body` exactly as given: for the answers of
// a misbehaving service that no other mode gives, such as a header sent twice or left empty).

export type FailureMode = 'latency' | 'html-5xx' | 'json-500' | 'throttle' | 'reset' | 'drop' | 'non-json' | 'unauthorized'
  | 'problem-4xx' | 'plain-4xx' | 'large' | 'no-content' | 'redirect' | 'stall' | 'links' | 'gzip' | 'empty' | 'exact'

export const FAILURE_MODES: readonly FailureMode[] = ['latency', 'html-5xx', 'json-500', 'throttle', 'reset', 'drop', 'non-json',
  'unauthorized', 'problem-4xx', 'plain-4xx', 'large', 'no-content', 'redirect', 'stall', 'links', 'gzip', 'empty', 'exact']

export interface Failure {
  mode: FailureMode
  /** How many service requests it applies to; unset: until cleared. */
  times?: number
  latencyMs?: number
  status?: number
  retryAfter?: number
  /** Size of the `large` answer. */
  bytes?: number
  /** Only requests of this brand (X-Service-Brand) fail, and only they count against `times`; unset: every request. */
  brand?: string
  /** The Content-Type of the `empty` answer; none when unset. */
  contentType?: string
  /** Where the `redirect` answer points; a guest of the caller's brand when unset. */
  location?: string
  /** The headers of the `exact` answer (an array: the header sent once per value); none but LEAKY_HEADERS when unset. */
  headers?: Record<string, string | string[]>
  /** The body of the `exact` answer; none when unset (chunked when `headers` give no Content-Length). */
  body?: string
  /**
   * The Link header lines of the `links` answer, as given (one line per item), instead
   * of its own: how a gateway reads a Link header a service writes by hand is tested line by line.
   */
  link?: string | string[]
}

/** What the service wrote for the requests of one Idempotency-Key. */
export interface Writes {
  created: number
  updated: number
}

export interface ReceivedRequest {
  method: string
  /** Path with its query string, resolved as a URL parser reads it (dot segments removed). */
  path: string
  /** The request line as it came, target byte for byte: `GET /a/./b?x=1 HTTP/1.1`. */
  requestLine: string
  /** Every header line as it came: the name as spelled (`X_Service_Brand`), duplicates and order kept. */
  rawHeaders: [string, string][]
  /** Every header, names in lower case (Node's view: duplicates joined, some dropped). */
  headers: Record<string, string>
  /** The body as text ('' without one); null when it was over BODY_LIMIT and not kept. */
  body: string | null
}

export interface MockServiceOptions {
  /** Unset: the service checks no token, as one behind an upstream without `tokenHeader`. */
  token?: string
  /** Header the token is read from; default x-service-token. */
  tokenHeader?: string
  seed?: number
  /** Added to every answer: the real service is never instant. */
  baseLatencyMs?: number
  /** Most requests kept in `received` (the oldest are dropped), so a benchmark does not grow it without end; default 10,000. */
  logLimit?: number
  /** Where it publishes the guests it creates and changes; nowhere when unset. */
  publish?: PublishTarget
}

export const GUEST_CREATED = 'com.example.bookings.guest.created'
export const GUEST_UPDATED = 'com.example.bookings.guest.updated'

export interface FieldError {
  field: string
  code: 'REQUIRED' | 'INVALID_FORMAT' | 'NOT_ALLOWED' | 'OUT_OF_RANGE' | 'INVALID_ENUM_VALUE'
  detail: string
}

/** Internal headers on every service answer; none may reach a partner. */
export const LEAKY_HEADERS = {
  server: 'internal-bookings/3.2',
  'x-powered-by': 'bookings',
  'set-cookie': 'session=internal; Path=/',
  'x-internal-shard': 'eu-west-3',
} as const

export const BODY_LIMIT = 2 * 1024 * 1024
export const LARGE_DEFAULT_BYTES = 5 * 1024 * 1024
export const JSON_TYPE = 'application/json; charset=utf-8'
export const PROBLEM_TYPE = 'application/problem+json; charset=utf-8'
export const ERROR_DOCS = 'https://developer.example.com/errors'

/** The problems this service answers, with their status, title and tip. */
export const SERVICE_PROBLEMS = {
  VALIDATION_FAILED: { status: 422, title: 'Validation failed', moreInfo: 'Fix the fields listed in `errors`; guests take firstName, lastName, email and an optional phone.' },
  MALFORMED_JSON: { status: 400, title: 'Malformed JSON', moreInfo: 'Check the body with a JSON validator; it must be one UTF-8 JSON document.' },
  GUEST_NOT_FOUND: { status: 404, title: 'Guest not found', moreInfo: 'Use an id returned by GET /v1/guests for this brand.' },
  PROPERTY_NOT_FOUND: { status: 404, title: 'Property not found', moreInfo: 'Use an id returned by GET /v1/properties for this brand.' },
  MISSING_REQUIRED_HEADER: { status: 400, title: 'Missing required header', moreInfo: 'Send the headers listed in `errors`.' },
  INVALID_HEADER: { status: 400, title: 'Invalid header', moreInfo: 'The headers listed in `errors` do not match the request.' },
  INVALID_QUERY_PARAMETER: { status: 400, title: 'Invalid query parameter', moreInfo: 'Send each parameter once, within the range given in `errors`.' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large', moreInfo: 'Request bodies are limited to 2 MiB.' },
  ROUTE_NOT_FOUND: { status: 404, title: 'Not found', moreInfo: 'Check the path against the API reference.' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method not allowed', moreInfo: 'Use one of the methods in the `Allow` header.' },
  INTERNAL_ERROR: { status: 500, title: 'Internal server error', moreInfo: 'Retry later; if it persists, contact support and quote the requestId.' },
  BAD_REQUEST: { status: 400, title: 'Bad request', moreInfo: 'Check the request against the API reference.' },
  FORBIDDEN: { status: 403, title: 'Forbidden', moreInfo: 'This action is not allowed for this guest.' },
  NOT_FOUND: { status: 404, title: 'Not found', moreInfo: 'The resource does not exist.' },
  CONFLICT: { status: 409, title: 'Conflict', moreInfo: 'Fetch the resource again and retry with its current state.' },
  GONE: { status: 410, title: 'Gone', moreInfo: 'The resource was removed for good.' },
  PRECONDITION_FAILED: { status: 412, title: 'Precondition failed', moreInfo: 'Fetch the resource again and retry with its current state.' },
  CLIENT_ERROR: { status: 400, title: 'Client error', moreInfo: 'Check the request against the API reference.' },
} as const

export type ServiceProblemCode = keyof typeof SERVICE_PROBLEMS

/** `FOO_BAR` → `foo-bar`, the last segment of a problem's `type`. */
export function kebab(code: string): string {
  return code.toLowerCase().replaceAll('_', '-')
}

/** The code of the problem-4xx failure for its status. */
export function clientErrorCode(status: number): ServiceProblemCode {
  const codes: Record<number, ServiceProblemCode> = { 400: 'BAD_REQUEST', 403: 'FORBIDDEN', 404: 'NOT_FOUND', 409: 'CONFLICT', 410: 'GONE', 412: 'PRECONDITION_FAILED', 422: 'VALIDATION_FAILED' }
  return codes[status] ?? 'CLIENT_ERROR'
}

const GUEST_FIELDS = ['firstName', 'lastName', 'email', 'phone'] as const
const RELATIONS = ['messages', 'reservations'] as const
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/
const PHONE = /^\+?[0-9][0-9 ().-]{2,31}$/
const LIST_PATH = '/partner/v1/guests'

export class MockService {
  readonly seed: number
  readonly tokenHeader: string
  readonly received: ReceivedRequest[] = []
  /** Guests created and changed, per Idempotency-Key received ('' for requests without one). */
  readonly writes = new Map<string, Writes>()
  private failure: Failure | undefined
  private readonly guests = new Map<string, Guest[]>()
  /** Ids of created guests: they have no messages or reservations. */
  private readonly created = new Set<string>()
  private server: Server | undefined
  readonly events: EventPublisher

  constructor(private readonly options: MockServiceOptions) {
    this.seed = options.seed ?? 1
    this.tokenHeader = (options.tokenHeader ?? 'x-service-token').toLowerCase()
    this.events = new EventPublisher(options.publish)
  }

  get url(): string {
    const address = this.server?.address() as AddressInfo | null | undefined
    if (address === undefined || address === null) throw new Error('mock service not listening')
    return `http://127.0.0.1:${address.port}`
  }

  setFailure(failure: Failure | undefined): void {
    this.failure = failure
  }

  /** The guests of a brand as they are now (seeded, created and changed), in the public order. */
  guestsOf(brand: string): Guest[] {
    let guests = this.guests.get(brand)
    if (guests === undefined) {
      guests = generateGuests(brand, this.seed)
      this.guests.set(brand, guests)
    }
    return guests
  }

  /** Created and changed guests back to the seeded ones. */
  resetGuests(): void {
    this.guests.clear()
    this.created.clear()
    this.writes.clear()
  }

  /** The writes of one Idempotency-Key ('' for requests without one). */
  writesOf(key: string): Writes {
    return this.writes.get(key) ?? { created: 0, updated: 0 }
  }

  private wrote(req: IncomingMessage, what: keyof Writes): void {
    const key = header(req, 'idempotency-key') ?? ''
    const writes = this.writesOf(key)
    writes[what] += 1
    this.writes.set(key, writes)
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = await listen((req, res) => {
      this.handle(req, res).catch(() => {
        // Never crash: a bug here answers 500 problem+json, or drops the socket if too late.
        if (!res.headersSent) problem(res, 'INTERNAL_ERROR', 'The service failed.', req.url ?? '/', undefined)
        else res.destroy()
      })
    }, port, host)
    return this
  }

  async close(): Promise<void> {
    await stop(this.server)
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://service')
    const body = await readBody(req)
    if (url.pathname.startsWith('/__mock/')) return this.control(req, res, url, body)

    this.received.push({
      method: req.method ?? 'GET',
      path: `${url.pathname}${url.search}`,
      requestLine: `${req.method ?? ''} ${req.url ?? ''} HTTP/${req.httpVersion}`,
      rawHeaders: pairs(req.rawHeaders),
      headers: headers(req),
      body,
    })
    const limit = this.options.logLimit ?? 10_000
    if (this.received.length > limit) this.received.splice(0, this.received.length - limit)
    const requestId = header(req, 'x-request-id')
    if (this.options.baseLatencyMs !== undefined) await sleep(this.options.baseLatencyMs)
    const failure = this.takeFailure(header(req, 'x-service-brand'))
    if (failure !== undefined) {
      if (failure.latencyMs !== undefined) await sleep(failure.latencyMs)
      if (await this.fail(failure, req, res, url, requestId)) return
    }
    if (this.options.token !== undefined && header(req, this.tokenHeader) !== this.options.token) {
      return send(res, 401, 'application/json', JSON.stringify({ error: 'unauthenticated' }))
    }
    const instance = url.pathname
    if (body === null) return problem(res, 'PAYLOAD_TOO_LARGE', `The request body exceeds ${BODY_LIMIT} bytes.`, instance, requestId)

    const method = req.method === 'HEAD' ? 'GET' : req.method
    if (url.pathname === LIST_PATH) {
      if (method === 'GET') return this.withBrand(req, res, instance, requestId, (brand) => this.list(res, url.searchParams, brand, instance, requestId))
      if (method === 'POST') return this.withBrand(req, res, instance, requestId, (brand) => this.create(req, res, body, brand, instance, requestId))
      return notAllowed(res, 'GET, HEAD, POST', instance, requestId)
    }
    const guest = /^\/partner\/v1\/guests\/([^/]+)$/.exec(url.pathname)
    if (guest !== null) {
      const id = decoded(guest[1] as string)
      if (method === 'GET') return this.withBrand(req, res, instance, requestId, (brand) => this.one(res, id, url.searchParams, brand, instance, requestId))
      if (method === 'PATCH') return this.withBrand(req, res, instance, requestId, (brand) => this.update(req, res, id, body, brand, instance, requestId))
      return notAllowed(res, 'GET, HEAD, PATCH', instance, requestId)
    }
    const rooms = /^\/partner\/v1\/properties\/([^/]+)\/rooms$/.exec(url.pathname)
    if (rooms !== null) {
      if (method !== 'GET') return notAllowed(res, 'GET, HEAD', instance, requestId)
      return this.rooms(req, res, decoded(rooms[1] as string), url.searchParams, instance, requestId)
    }
    problem(res, 'ROUTE_NOT_FOUND', `No endpoint at ${url.pathname}.`, instance, requestId)
  }

  private async withBrand(req: IncomingMessage, res: ServerResponse, instance: string, requestId: string | undefined, answer: (brand: string) => void | Promise<void>): Promise<void> {
    const brand = header(req, 'x-service-brand')
    if (brand === undefined || brand === '') {
      return problem(res, 'MISSING_REQUIRED_HEADER', 'The X-Service-Brand header is missing.', instance, requestId,
        [{ field: 'X-Service-Brand', code: 'REQUIRED', detail: 'The caller must name the brand.' }])
    }
    await answer(brand)
  }

  /** Publishes a change of a guest of `brand`, when it is told where to and the brand has a chain. */
  private async published(type: string, brand: string, guestId: string, changed?: string[]): Promise<void> {
    const chain = chainOf(brand)
    if (chain === undefined) return
    await this.events.publish(type, { guest_id: guestId, chain_code: chain, ...(changed === undefined ? {} : { changed }) })
  }

  private list(res: ServerResponse, params: URLSearchParams, brand: string, instance: string, requestId: string | undefined): void {
    const paging = pagination(params)
    if ('errors' in paging) return problem(res, 'INVALID_QUERY_PARAMETER', 'Invalid query parameter.', instance, requestId, paging.errors)
    const email = params.get('email')
    const matching = this.guestsOf(brand).filter((g) => email === null || g.email === email)
    envelope(res, 200, page(matching, paging), requestId, { ...paging, total: matching.length })
  }

  private async create(req: IncomingMessage, res: ServerResponse, body: string, brand: string, instance: string, requestId: string | undefined): Promise<void> {
    const parsed = parseJson(body)
    if (parsed === undefined) return problem(res, 'MALFORMED_JSON', 'The request body is not valid JSON.', instance, requestId)
    const errors = validateGuest(parsed.value, false)
    if (errors.length > 0) return problem(res, 'VALIDATION_FAILED', 'The request body failed validation.', instance, requestId, errors)
    const fields = parsed.value as Record<string, unknown>
    const now = new Date().toISOString()
    const guest: Guest = {
      object: 'guest',
      id: randomUUID(),
      firstName: fields.firstName as string,
      lastName: fields.lastName as string,
      email: fields.email as string,
      phone: (fields.phone ?? null) as string | null,
      createdAt: now,
      updatedAt: now,
    }
    const guests = this.guestsOf(brand)
    guests.push(guest)
    guests.sort(guestOrder)
    this.created.add(guest.id)
    this.wrote(req, 'created')
    await this.published(GUEST_CREATED, brand, guest.id)
    envelope(res, 201, guest, requestId, undefined, { location: `${LIST_PATH}/${guest.id}` })
  }

  private one(res: ServerResponse, id: string, params: URLSearchParams, brand: string, instance: string, requestId: string | undefined): void {
    const relations = params.get('with')
    const wanted = relations === null ? [] : relations.split(',')
    const bad = wanted.filter((r) => !(RELATIONS as readonly string[]).includes(r))
    if (bad.length > 0) {
      return problem(res, 'INVALID_QUERY_PARAMETER', 'Invalid query parameter.', instance, requestId,
        [{ field: 'with', code: 'INVALID_ENUM_VALUE', detail: `with takes a comma-separated list of ${RELATIONS.join(', ')}.` }])
    }
    const guest = this.guestsOf(brand).find((g) => g.id === id)
    if (guest === undefined) return problem(res, 'GUEST_NOT_FOUND', `No guest with id '${id}' exists for this brand.`, instance, requestId)
    const seeded = !this.created.has(guest.id)
    const data: Record<string, unknown> = { ...guest }
    if (wanted.includes('messages')) data.messages = seeded ? messagesOf(guest, this.seed) : []
    if (wanted.includes('reservations')) data.reservations = seeded ? reservationsOf(guest, brand, this.seed) : []
    envelope(res, 200, data, requestId)
  }

  private async update(req: IncomingMessage, res: ServerResponse, id: string, body: string, brand: string, instance: string, requestId: string | undefined): Promise<void> {
    const guest = this.guestsOf(brand).find((g) => g.id === id)
    if (guest === undefined) return problem(res, 'GUEST_NOT_FOUND', `No guest with id '${id}' exists for this brand.`, instance, requestId)
    const parsed = parseJson(body)
    if (parsed === undefined) return problem(res, 'MALFORMED_JSON', 'The request body is not valid JSON.', instance, requestId)
    const errors = validateGuest(parsed.value, true)
    if (errors.length > 0) return problem(res, 'VALIDATION_FAILED', 'The request body failed validation.', instance, requestId, errors)
    // JSON merge patch: the fields present replace the guest's; null clears the phone.
    const fields = parsed.value as Record<string, unknown>
    if (Object.keys(fields).length > 0) {
      for (const field of GUEST_FIELDS) {
        if (field in fields) (guest as unknown as Record<string, unknown>)[field] = fields[field]
      }
      guest.updatedAt = new Date().toISOString()
      await this.published(GUEST_UPDATED, brand, guest.id, GUEST_FIELDS.filter((field) => field in fields))
    }
    this.wrote(req, 'updated')
    envelope(res, 200, guest, requestId)
  }

  private rooms(req: IncomingMessage, res: ServerResponse, propertyId: string, params: URLSearchParams, instance: string, requestId: string | undefined): void {
    const scoped = header(req, 'x-service-property-id')
    if (scoped === undefined) {
      return problem(res, 'MISSING_REQUIRED_HEADER', 'The X-Service-Property-Id header is missing.', instance, requestId,
        [{ field: 'X-Service-Property-Id', code: 'REQUIRED', detail: 'The caller must name the property of the path.' }])
    }
    if (scoped !== propertyId) {
      return problem(res, 'INVALID_HEADER', 'The X-Service-Property-Id header does not match the path.', instance, requestId,
        [{ field: 'X-Service-Property-Id', code: 'INVALID_FORMAT', detail: 'It must equal the property id of the path.' }])
    }
    const paging = pagination(params)
    if ('errors' in paging) return problem(res, 'INVALID_QUERY_PARAMETER', 'Invalid query parameter.', instance, requestId, paging.errors)
    const all = roomsOf(propertyId, this.seed)
    if (all === undefined) return problem(res, 'PROPERTY_NOT_FOUND', `No property with id '${propertyId}' exists.`, instance, requestId)
    const status = params.get('status')
    const matching: Room[] = all.filter((r) => status === null || r.status === status)
    envelope(res, 200, page(matching, paging), requestId, { ...paging, total: matching.length })
  }

  private takeFailure(brand: string | undefined): Failure | undefined {
    const failure = this.failure
    if (failure?.brand !== undefined && failure.brand !== brand) return undefined
    if (failure?.times !== undefined) {
      if (failure.times <= 1) this.failure = undefined
      else this.failure = { ...failure, times: failure.times - 1 }
    }
    return failure
  }

  /** Answers with the failure; false when the failure only delays. */
  private async fail(failure: Failure, req: IncomingMessage, res: ServerResponse, url: URL, requestId: string | undefined): Promise<boolean> {
    switch (failure.mode) {
      case 'html-5xx':
        send(res, failure.status ?? 503, 'text/html', '<html><body><h1>503 Service Temporarily Unavailable</h1><hr>bookings-lb-eu-west-3</body></html>')
        return true
      case 'json-500':
        send(res, 500, 'application/json', JSON.stringify({ error: 'internal', message: 'NullPointerException at com.bookings.guests.GuestService.find(GuestService.java:87)' }))
        return true
      case 'throttle':
        send(res, 429, 'application/json', JSON.stringify({ error: 'throttled' }), { 'retry-after': String(failure.retryAfter ?? 2) })
        return true
      case 'reset':
        res.writeHead(200, { ...LEAKY_HEADERS, 'content-type': JSON_TYPE, 'content-length': '5000' })
        res.write('{"data":{"object":"guest","id":"')
        setTimeout(() => res.socket?.destroy(), 5)
        return true
      case 'drop':
        // The connection is lost before any byte of an answer.
        req.socket.destroy()
        return true
      case 'non-json':
        send(res, 200, 'text/plain', 'OK bookings service v3.2.7 build 4c1d2e')
        return true
      case 'unauthorized':
        send(res, 401, 'application/json', JSON.stringify({ error: 'unauthenticated' }))
        return true
      case 'problem-4xx': {
        const status = failure.status ?? 409
        const code = clientErrorCode(status)
        const body = { ...problemBody(code, 'The guest was changed by another request.', url.pathname, requestId), status }
        send(res, status, PROBLEM_TYPE, JSON.stringify(body))
        return true
      }
      case 'plain-4xx':
        send(res, failure.status ?? 400, 'text/plain', 'Bad Request: rejected by bookings request filter')
        return true
      case 'large':
        await streamLarge(res, failure.bytes ?? LARGE_DEFAULT_BYTES, this.guestsOf(header(req, 'x-service-brand') ?? 'acme'), requestId)
        return true
      case 'no-content':
        res.writeHead(204, { ...LEAKY_HEADERS })
        res.end()
        return true
      case 'stall':
        res.writeHead(200, { ...LEAKY_HEADERS, 'content-type': JSON_TYPE })
        res.write('{"data":[')
        await new Promise<void>((resolve) => res.once('close', () => resolve()))
        return true
      case 'links': {
        const brand = header(req, 'x-service-brand') ?? 'acme'
        const guests = this.guestsOf(brand)
        const self = `http://${header(req, 'host') ?? 'service'}`
        const links = [`<${LIST_PATH}?page=2&perPage=2>; rel="next"`, `<${self}${LIST_PATH}?page=1&perPage=2>; rel="first"; title="First, page"`,
          '<https://bookings.example/partner/v1/guests>; rel="alternate"', '</internal/admin>; rel="admin"',
          `<${LIST_PATH}/${guests[0]?.id ?? randomUUID()}>; rel="item"; anchor="http://bookings.internal/x"`]
        envelope(res, 200, page(guests, { page: 1, perPage: 2 }), requestId, { page: 1, perPage: 2, total: guests.length }, { link: failure.link ?? links.join(', '), 'content-language': 'en-GB' })
        return true
      }
      case 'gzip': {
        const guests = this.guestsOf(header(req, 'x-service-brand') ?? 'acme')
        const body = gzipSync(JSON.stringify({ data: page(guests, { page: 1, perPage: 2 }), meta: { requestId: requestId ?? newRequestId(), timestamp: new Date().toISOString() } }))
        res.writeHead(200, { ...LEAKY_HEADERS, 'content-type': JSON_TYPE, 'content-encoding': 'gzip', 'content-length': body.length })
        res.end(body)
        return true
      }
      case 'empty':
        res.writeHead(failure.status ?? 200, { ...LEAKY_HEADERS, ...(failure.contentType === undefined ? {} : { 'content-type': failure.contentType }), 'content-length': '0' })
        res.end()
        return true
      case 'exact':
        res.writeHead(failure.status ?? 200, { ...LEAKY_HEADERS, ...failure.headers })
        res.end(failure.body)
        return true
      case 'redirect': {
        const first = this.guestsOf(header(req, 'x-service-brand') ?? 'acme')[0] ?? this.guestsOf('acme')[0]
        res.writeHead(302, { ...LEAKY_HEADERS, location: failure.location ?? `${LIST_PATH}/${first?.id ?? randomUUID()}`, 'content-length': '0' })
        res.end()
        return true
      }
      default:
        return false
    }
  }

  private control(req: IncomingMessage, res: ServerResponse, url: URL, body: string | null): void {
    if (url.pathname === '/__mock/failure' && req.method === 'PUT') {
      const parsed = body === null ? undefined : parseJson(body)
      const failure = parsed?.value as Failure | undefined
      if (typeof failure !== 'object' || failure === null || !FAILURE_MODES.includes(failure.mode)) {
        return control(res, 400, { error: `mode must be one of ${FAILURE_MODES.join(', ')}` })
      }
      this.setFailure(failure)
      return control(res, 200, { failure: this.failure })
    }
    if (url.pathname === '/__mock/failure' && req.method === 'DELETE') {
      this.setFailure(undefined)
      return control(res, 200, { failure: null })
    }
    if (url.pathname === '/__mock/requests' && req.method === 'GET') return control(res, 200, this.received)
    if (url.pathname === '/__mock/requests' && req.method === 'DELETE') {
      this.received.length = 0
      return control(res, 200, [])
    }
    if (url.pathname === '/__mock/writes' && req.method === 'GET') return control(res, 200, Object.fromEntries(this.writes))
    if (url.pathname === '/__mock/events' && req.method === 'GET') return control(res, 200, this.events.sent)
    if (url.pathname === '/__mock/guests' && req.method === 'DELETE') {
      this.resetGuests()
      return control(res, 200, { reset: true })
    }
    control(res, 404, { error: 'unknown control endpoint' })
  }
}

/** The whole problem+json body of a service error. */
export function problemBody(code: ServiceProblemCode, detail: string, instance: string, requestId: string | undefined, errors: FieldError[] = []): Record<string, unknown> {
  const spec = SERVICE_PROBLEMS[code]
  return {
    type: `${ERROR_DOCS}/${kebab(code)}`,
    title: spec.title,
    status: spec.status,
    detail,
    moreInfo: spec.moreInfo,
    instance,
    code,
    errors,
    requestId: requestId ?? newRequestId(),
    timestamp: new Date().toISOString(),
  }
}

/**
 * The field errors of a guest body: `partial` for a merge patch (nothing required). Declared
 * fields first, in the order firstName, lastName, email, phone; then unknown fields in body order.
 */
export function validateGuest(body: unknown, partial: boolean): FieldError[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }]
  }
  const fields = body as Record<string, unknown>
  const errors: FieldError[] = []
  for (const field of ['firstName', 'lastName'] as const) {
    const value = fields[field]
    if (value === undefined ? !partial : value === null) errors.push({ field, code: 'REQUIRED', detail: `${field} is required.` })
    else if (value !== undefined && (typeof value !== 'string' || value.trim() === '' || value.length > 100)) {
      errors.push({ field, code: 'INVALID_FORMAT', detail: `${field} must be a string of 1 to 100 characters.` })
    }
  }
  const email = fields.email
  if (email === undefined ? !partial : email === null) errors.push({ field: 'email', code: 'REQUIRED', detail: 'email is required.' })
  else if (email !== undefined && (typeof email !== 'string' || email.length > 254 || !EMAIL.test(email))) {
    errors.push({ field: 'email', code: 'INVALID_FORMAT', detail: 'email must be an email address such as jane@example.com.' })
  }
  const phone = fields.phone
  if (phone !== undefined && phone !== null && (typeof phone !== 'string' || !PHONE.test(phone))) {
    errors.push({ field: 'phone', code: 'INVALID_FORMAT', detail: 'phone must be null or 3 to 32 digits, spaces and + ( ) . - characters.' })
  }
  for (const field of Object.keys(fields)) {
    if (!(GUEST_FIELDS as readonly string[]).includes(field)) {
      errors.push({ field, code: 'NOT_ALLOWED', detail: `Unknown field; allowed: ${GUEST_FIELDS.join(', ')}.` })
    }
  }
  return errors
}

function pagination(params: URLSearchParams): { page: number; perPage: number } | { errors: FieldError[] } {
  const errors: FieldError[] = []
  const read = (name: string, fallback: number, max: number): number => {
    const values = params.getAll(name)
    if (values.length === 0) return fallback
    const value = values[0] as string
    if (values.length > 1 || !/^[0-9]{1,9}$/.test(value)) {
      errors.push({ field: name, code: 'INVALID_FORMAT', detail: `${name} must be given once, as digits.` })
    } else if (Number(value) < 1 || Number(value) > max) {
      errors.push({ field: name, code: 'OUT_OF_RANGE', detail: `${name} must be between 1 and ${max}.` })
    }
    return Number(value)
  }
  const result = { page: read('page', 1, 1_000_000_000), perPage: read('perPage', 20, 100) }
  return errors.length > 0 ? { errors } : result
}

function page<T>(items: T[], paging: { page: number; perPage: number }): T[] {
  return items.slice((paging.page - 1) * paging.perPage, paging.page * paging.perPage)
}

function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown }
  } catch {
    return undefined
  }
}

/** A path segment decoded; as sent when its percent-encoding is broken (it then matches nothing). */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

function newRequestId(): string {
  return `req_${randomBytes(16).toString('hex')}`
}

function send(res: ServerResponse, status: number, contentType: string, text: string, extra: OutgoingHttpHeaders = {}): void {
  res.writeHead(status, { ...LEAKY_HEADERS, ...extra, 'content-type': contentType, 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function envelope(res: ServerResponse, status: number, data: unknown, requestId: string | undefined,
  pagination?: { page: number; perPage: number; total: number }, extra: OutgoingHttpHeaders = {}): void {
  const meta = { requestId: requestId ?? newRequestId(), timestamp: new Date().toISOString(), ...(pagination === undefined ? {} : { pagination }) }
  send(res, status, JSON_TYPE, JSON.stringify({ data, meta }), extra)
}

function problem(res: ServerResponse, code: ServiceProblemCode, detail: string, instance: string, requestId: string | undefined, errors: FieldError[] = []): void {
  send(res, SERVICE_PROBLEMS[code].status, PROBLEM_TYPE, JSON.stringify(problemBody(code, detail, instance, requestId, errors)))
}

function notAllowed(res: ServerResponse, allow: string, instance: string, requestId: string | undefined): void {
  send(res, 405, PROBLEM_TYPE, JSON.stringify(problemBody('METHOD_NOT_ALLOWED', `Use ${allow}.`, instance, requestId)), { allow })
}

function control(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

/**
 * A 200 envelope of about `bytes` bytes (over by less than one guest), written in chunks of
 * about 64 KiB as the socket takes them, never held in memory whole.
 */
async function streamLarge(res: ServerResponse, bytes: number, guests: Guest[], requestId: string | undefined): Promise<void> {
  res.writeHead(200, { ...LEAKY_HEADERS, 'content-type': JSON_TYPE })
  const items = (guests.length > 0 ? guests : generateGuests('acme')).map((g) => JSON.stringify(g))
  const itemBytes = items.map((item) => Buffer.byteLength(item))
  const tail = `],"meta":${JSON.stringify({ requestId: requestId ?? newRequestId(), timestamp: new Date().toISOString() })}}`
  const tailBytes = Buffer.byteLength(tail)
  let chunk = '{"data":['
  let chunkBytes = chunk.length
  let written = 0
  for (let i = 0; written + chunkBytes + tailBytes < bytes; i += 1) {
    const item = i % items.length
    chunk += `${i === 0 ? '' : ','}${items[item] as string}`
    chunkBytes += (itemBytes[item] as number) + (i === 0 ? 0 : 1)
    if (chunkBytes >= 65_536) {
      written += chunkBytes
      const more = res.write(chunk)
      chunk = ''
      chunkBytes = 0
      if (res.destroyed) return
      if (!more) await drained(res)
      if (res.destroyed) return
    }
  }
  res.end(chunk + tail)
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

/** Node's flat raw header list as [name, value] pairs. */
function pairs(raw: string[]): [string, string][] {
  const out: [string, string][] = []
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i] as string, raw[i + 1] as string])
  return out
}

function headers(req: IncomingMessage): Record<string, string> {
  const all: Record<string, string> = {}
  for (const name of Object.keys(req.headers)) all[name] = header(req, name) as string
  return all
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The body as text; null when over BODY_LIMIT (the rest is read and dropped, so the socket stays usable). */
async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size <= BODY_LIMIT) chunks.push(chunk as Buffer)
    else chunks.length = 0
  }
  return size > BODY_LIMIT ? null : Buffer.concat(chunks).toString('utf8')
}

// `npm run mock-service`: MOCK_SERVICE_PORT (4020), MOCK_SERVICE_HOST (127.0.0.1),
// MOCK_SERVICE_TOKEN (dev-service-token), MOCK_SERVICE_SEED (1), and where it publishes:
// MOCK_SERVICE_EVENTS_URL, MOCK_SERVICE_EVENTS_TOKEN, MOCK_SERVICE_EVENTS_SOURCE (bookings).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.MOCK_SERVICE_PORT ?? 4020)
  const host = process.env.MOCK_SERVICE_HOST ?? '127.0.0.1'
  const token = process.env.MOCK_SERVICE_TOKEN ?? 'dev-service-token'
  const publish = targetFromEnv(process.env, 'MOCK_SERVICE_EVENTS_', 'bookings')
  const service = await new MockService({ token, seed: Number(process.env.MOCK_SERVICE_SEED ?? 1), ...(publish === undefined ? {} : { publish }) }).listen(port, host)
  console.log(`stand-in service on ${service.url.replace('127.0.0.1', host)} (token from MOCK_SERVICE_TOKEN in X-Service-Token)`)
  const stop = (): void => void service.close().then(() => process.exit(0))
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}
