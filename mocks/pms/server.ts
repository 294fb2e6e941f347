import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { listen, stop } from '../listen.js'
import { EventPublisher, targetFromEnv, type PublishTarget } from '../publisher.js'
import { generateHotels, pmsOrder, type Hotel } from './data.js'

// A stand-in for the internal PMS (its API and its failures), for development, the demo,
// docker-compose and the tests. Failures are switched over HTTP:
//
//   PUT    /__mock/failure   {"mode": "...", "times"?: n, "latencyMs"?: n, "status"?: n, "retryAfter"?: s}
//   DELETE /__mock/failure   back to healthy
//   GET    /__mock/requests  what the PMS received (path, X-Request-Id, traceparent, tracestate)
//   DELETE /__mock/requests
//   POST   /__mock/hotels    [records] added as given, broken ones included
//   PATCH  /__mock/hotels/<hotel_uuid>   {"field": value, …} changes a hotel (its hotel_uuid
//                            stays), sets its last_modified, and publishes what changed (below);
//                            answers {"hotel", "published"}: the record and the publication
//   GET    /__mock/events    what it published, with the gateway's answers
//
// Events (the PMS's own contract): on every change through PATCH it publishes
// `com.example.pms.hotel.changed` with `data: {hotel_uuid, chain_code, changed: [fields],
// revision}` to the ingest URL and token it is given (`publish`, or MOCK_PMS_EVENTS_URL and
// MOCK_PMS_EVENTS_TOKEN, source MOCK_PMS_EVENTS_SOURCE, default `pms`; its sandbox is
// `pms-sandbox`), at least once: a failed attempt is retried with the same id.
//
// Modes: latency (answer after latencyMs), html-5xx (status 502/503/504, text/html; with a
// Retry-After when retryAfter is given),
// json-500 (an internal error text), throttle (429 with Retry-After), reset (socket destroyed
// mid-response), non-json (200 text/plain), broken-record (every record loses a field),
// unauthorized (401 to any token), unfiltered (a list ignores chain_code and lifecycle).

export type FailureMode = 'latency' | 'html-5xx' | 'json-500' | 'throttle' | 'reset' | 'non-json' | 'broken-record' | 'unauthorized' | 'unfiltered'

export interface Failure {
  mode: FailureMode
  /** How many PMS requests it applies to; unset: until cleared. */
  times?: number
  latencyMs?: number
  status?: number
  retryAfter?: number
}

export interface ReceivedRequest {
  path: string
  requestId: string | undefined
  traceparent: string | undefined
  tracestate: string | undefined
}

export interface MockPmsOptions {
  token: string
  seed?: number
  scale?: number
  /** Added to every answer: the real PMS is never instant. */
  baseLatencyMs?: number
  /** Where it publishes what changes; nowhere when unset. */
  publish?: PublishTarget
}

export const HOTEL_CHANGED = 'com.example.pms.hotel.changed'

const MAX_IDS = 100

export class MockPms {
  readonly hotels: Hotel[]
  private failure: Failure | undefined
  readonly received: ReceivedRequest[] = []
  readonly events: EventPublisher
  /** Each hotel's revision: how many times it changed, counting its creation as 1. */
  private readonly revisions = new Map<string, number>()
  private server: Server | undefined

  constructor(private readonly options: MockPmsOptions) {
    this.hotels = generateHotels(options.seed ?? 1, options.scale ?? 1).sort(pmsOrder)
    this.events = new EventPublisher(options.publish)
  }

  /**
   * Changes a hotel's fields (never its hotel_uuid), sets its last_modified and publishes
   * what changed; undefined for an unknown hotel.
   */
  async change(hotelId: string, fields: Record<string, unknown>): Promise<{ hotel: Hotel; published: unknown } | undefined> {
    const hotel = this.hotels.find((h) => h.hotel_uuid === hotelId)
    if (hotel === undefined) return undefined
    const changed = Object.keys(fields).filter((name) => name !== 'hotel_uuid' && name !== 'last_modified')
    for (const name of changed) hotel[name] = fields[name]
    hotel.last_modified = new Date().toISOString()
    this.hotels.sort(pmsOrder)
    const revision = (this.revisions.get(hotelId) ?? 1) + 1
    this.revisions.set(hotelId, revision)
    const published = await this.events.publish(HOTEL_CHANGED, { hotel_uuid: hotelId, chain_code: hotel.chain_code, changed, revision })
    return { hotel, published: published ?? null }
  }

  get url(): string {
    const address = this.server?.address() as AddressInfo | null | undefined
    if (address === undefined || address === null) throw new Error('mock PMS not listening')
    return `http://127.0.0.1:${address.port}`
  }

  setFailure(failure: Failure | undefined): void {
    this.failure = failure
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = await listen((req, res) => void this.handle(req, res), port, host)
    return this
  }

  async close(): Promise<void> {
    await stop(this.server)
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://pms')
    if (url.pathname.startsWith('/__mock/')) return this.control(req, res, url)

    this.received.push({
      path: `${url.pathname}${url.search}`,
      requestId: header(req, 'x-request-id'),
      traceparent: header(req, 'traceparent'),
      tracestate: header(req, 'tracestate'),
    })
    if (this.options.baseLatencyMs !== undefined) await sleep(this.options.baseLatencyMs)
    const failure = this.takeFailure()
    if (failure !== undefined) {
      if (failure.latencyMs !== undefined) await sleep(failure.latencyMs)
      if (this.fail(failure, res)) return
    }
    if (req.headers['x-pms-service-token'] !== this.options.token || failure?.mode === 'unauthorized') {
      return json(res, 401, { error_code: 'UNAUTHENTICATED', message: 'missing or invalid service token' })
    }
    const broken = failure?.mode === 'broken-record'
    if (url.pathname === '/internal/v3/ping') return json(res, 200, { status: 'UP' })
    if (url.pathname === '/internal/v3/hotels') return this.list(url.searchParams, res, broken, failure?.mode === 'unfiltered')
    const single = /^\/internal\/v3\/hotels\/([^/]+)$/.exec(url.pathname)
    if (single !== null) {
      const hotel = this.hotels.find((h) => h.hotel_uuid === single[1])
      if (hotel === undefined) return json(res, 404, { error_code: 'HOTEL_NOT_FOUND', message: `hotel ${single[1]} not found in shard eu-west-3` })
      return json(res, 200, broken ? breakRecord(hotel) : hotel)
    }
    json(res, 404, { error_code: 'NOT_FOUND', message: 'no such endpoint' })
  }

  private takeFailure(): Failure | undefined {
    const failure = this.failure
    if (failure?.times !== undefined) {
      if (failure.times <= 1) this.failure = undefined
      else this.failure = { ...failure, times: failure.times - 1 }
    }
    return failure
  }

  /** Answers with the failure; false when the failure only delays. */
  private fail(failure: Failure, res: ServerResponse): boolean {
    switch (failure.mode) {
      case 'html-5xx':
        res.writeHead(failure.status ?? 503, { 'content-type': 'text/html', ...(failure.retryAfter === undefined ? {} : { 'retry-after': String(failure.retryAfter) }) })
        res.end('<html><body><h1>503 Service Temporarily Unavailable</h1><hr>pms-lb-eu-west-3</body></html>')
        return true
      case 'json-500':
        json(res, 500, { error_code: 'INTERNAL', message: 'NullPointerException at com.pms.hotels.HotelService.find(HotelService.java:212)' })
        return true
      case 'throttle':
        res.setHeader('retry-after', String(failure.retryAfter ?? 2))
        json(res, 429, { error_code: 'THROTTLED' })
        return true
      case 'reset':
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' })
        res.write('{"hotel_uuid":"')
        setTimeout(() => res.socket?.destroy(), 5)
        return true
      case 'non-json':
        res.writeHead(200, { 'content-type': 'text/plain' })
        res.end('OK hotels service v3.14.2 build 9f8e7d')
        return true
      default:
        return false
    }
  }

  private list(params: URLSearchParams, res: ServerResponse, broken: boolean, unfiltered = false): void {
    const chain = params.get('chain_code')
    if (chain === null || chain === '') return json(res, 400, { error_code: 'BAD_REQUEST', message: 'chain_code is required' })
    const offset = integer(params.get('offset'), 0)
    const limit = integer(params.get('limit'), 50)
    if (offset === undefined || offset < 0) return json(res, 400, { error_code: 'BAD_REQUEST', message: 'offset must be an integer >= 0' })
    if (limit === undefined || limit < 1 || limit > 200) return json(res, 400, { error_code: 'BAD_REQUEST', message: 'limit must be 1-200' })
    const lifecycles = params.get('lifecycle')?.split(',')
    const ids = params.get('hotel_uuid')?.split(',')
    if (ids !== undefined && ids.length > MAX_IDS) return json(res, 400, { error_code: 'BAD_REQUEST', message: `at most ${MAX_IDS} hotel_uuid values` })
    const idSet = ids === undefined ? undefined : new Set(ids)
    const matching = this.hotels.filter((h) => (unfiltered || h.chain_code === chain)
      && (unfiltered || lifecycles === undefined || lifecycles.includes(String(h.lifecycle)))
      && (idSet === undefined || idSet.has(String(h.hotel_uuid))))
    const page = matching.slice(offset, offset + limit)
    json(res, 200, { results: broken ? page.map(breakRecord) : page, total_count: matching.length, offset, limit })
  }

  private async control(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const body = await readBody(req)
    if (url.pathname === '/__mock/failure' && req.method === 'PUT') {
      this.setFailure(JSON.parse(body) as Failure)
      return json(res, 200, { failure: this.failure })
    }
    if (url.pathname === '/__mock/failure' && req.method === 'DELETE') {
      this.setFailure(undefined)
      return json(res, 200, { failure: null })
    }
    if (url.pathname === '/__mock/requests' && req.method === 'GET') return json(res, 200, this.received)
    if (url.pathname === '/__mock/requests' && req.method === 'DELETE') {
      this.received.length = 0
      return json(res, 200, [])
    }
    const changing = /^\/__mock\/hotels\/([^/]+)$/.exec(url.pathname)
    if (changing !== null && req.method === 'PATCH') {
      const fields = parseObject(body)
      if (fields === undefined) return json(res, 400, { error: 'the body must be a JSON object of the fields to change' })
      const result = await this.change(decodeURIComponent(changing[1] as string), fields)
      return result === undefined ? json(res, 404, { error: 'no such hotel' }) : json(res, 200, result)
    }
    if (url.pathname === '/__mock/events' && req.method === 'GET') return json(res, 200, this.events.sent)
    if (url.pathname === '/__mock/hotels' && req.method === 'POST') {
      this.hotels.push(...(JSON.parse(body) as Hotel[]))
      this.hotels.sort(pmsOrder)
      return json(res, 200, { count: this.hotels.length })
    }
    json(res, 404, { error: 'unknown control endpoint' })
  }
}

/** A record as a bad deploy leaves it: a required field gone, a number as a string. */
function breakRecord(hotel: Hotel): Hotel {
  const { tz_name: _dropped, ...rest } = hotel
  return { ...rest, created_epoch_ms: String(hotel.created_epoch_ms) }
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name]
  return Array.isArray(value) ? value.join(',') : value
}

function integer(value: string | null, fallback: number): number | undefined {
  if (value === null) return fallback
  return /^[0-9]+$/.test(value) ? Number(value) : undefined
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

// `npm run mock-pms`: MOCK_PMS_PORT (4010), MOCK_PMS_HOST (127.0.0.1), MOCK_PMS_TOKEN, MOCK_PMS_SEED,
// and where it publishes: MOCK_PMS_EVENTS_URL, MOCK_PMS_EVENTS_TOKEN, MOCK_PMS_EVENTS_SOURCE (pms).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.MOCK_PMS_PORT ?? 4010)
  const token = process.env.MOCK_PMS_TOKEN ?? 'dev-pms-token'
  const publish = targetFromEnv(process.env, 'MOCK_PMS_EVENTS_', 'pms')
  const pms = await new MockPms({ token, seed: Number(process.env.MOCK_PMS_SEED ?? 1), ...(publish === undefined ? {} : { publish }) })
    .listen(port, process.env.MOCK_PMS_HOST ?? '127.0.0.1')
  console.log(`stand-in PMS on ${pms.url.replace('127.0.0.1', process.env.MOCK_PMS_HOST ?? '127.0.0.1')} (token from MOCK_PMS_TOKEN, ${pms.hotels.length} hotels)`)
  const stop = (): void => void pms.close().then(() => process.exit(0))
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}
