import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import createClient, { type Client } from 'openapi-fetch'
import { ApiConnectionError, ApiError, ApiTimeoutError, isRefusedToken, TokenError } from './errors.js'
import { ClientCredentials, type OAuthOptions } from './oauth.js'
import type { components, operations, paths } from './openapi.js'
import { isRetryable, retryDelayMs, sleep } from './retry.js'
import { NoAnswer, attemptSignal, wholeAnswers, type Fetch } from './transport.js'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

/** What the client sends as `User-Agent` (the API requires one). */
export const USER_AGENT = `partner-gateway-sdk/${version} node/${process.versions.node}`

export type Property = components['schemas']['Property']
export type Event = components['schemas']['Event']
export type Meta = components['schemas']['Meta']
export type CollectionMeta = components['schemas']['CollectionMeta']
export type Pagination = components['schemas']['Pagination']

type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never
type BodyOf<O> = O extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never
/** The JSON body of an operation's success (200, 201 or 202), as the document describes it. */
type OkBodyOf<O> = O extends { responses: infer R }
  ? { [S in keyof R]: S extends 200 | 201 | 202 ? (R[S] extends { content: { 'application/json': infer B } } ? B : never) : never }[keyof R]
  : never

export type ListPropertiesQuery = QueryOf<operations['listProperties']>
export type ListEventsQuery = QueryOf<operations['listEvents']>
export type ListGuestsQuery = QueryOf<operations['listGuests']>
export type GetGuestQuery = QueryOf<operations['getGuestsByGuestId']>
export type ListRoomsQuery = QueryOf<operations['listRooms']>
export type CreateGuestBody = BodyOf<operations['createGuests']>
export type WebhookEndpoint = components['schemas']['WebhookEndpoint']
export type WebhookAttempt = components['schemas']['WebhookAttempt']
export type ListWebhookEndpointsQuery = QueryOf<operations['listWebhookEndpoints']>
export type ListWebhookDeliveriesQuery = QueryOf<operations['listWebhookEndpointDeliveries']>
export type CreateWebhookEndpointBody = BodyOf<operations['createWebhookEndpoint']>
export type UpdateWebhookEndpointBody = BodyOf<operations['updateWebhookEndpoint']>
export type WebhookRecovery = components['schemas']['WebhookRecovery']
export type RecoverWebhookEndpointBody = BodyOf<operations['recoverWebhookEndpoint']>
export type ListWebhookRecoveriesQuery = QueryOf<operations['listWebhookRecoveries']>
export type UpdateGuestBody = BodyOf<operations['updateGuestsByGuestId']>

interface CommonOptions {
  /** The brand's API host, e.g. `https://api.acme-hotels.example`. */
  baseUrl: string
  /** Retries of a request that failed in a way worth retrying (default 2: three attempts at most). */
  maxRetries?: number
  /** The bound on each attempt, connection to last byte of the answer (default 30,000 ms). */
  timeoutMs?: number
  /** The first wait of the exponential backoff when the answer names none (default 500 ms: 0.5 s, 1 s, 2 s…). */
  backoffBaseMs?: number
  /** Sent as `Service-Correlation-Id` on every request (1 to 128 of `A-Z a-z 0-9 . _ = + / -`). */
  correlationId?: string
  /** The fetch to use (default the global one). */
  fetch?: typeof globalThis.fetch
  /** Called before each wait for a retry: to log or count them. */
  onRetry?: (retry: RetryInfo) => void
}

export type ClientOptions = CommonOptions & ({ apiKey: string; oauth?: never } | { oauth: OAuthOptions; apiKey?: never })

export interface RetryInfo {
  method: string
  path: string
  /** 1 for the first retry. */
  retry: number
  delayMs: number
  /** Why the attempt failed: an ApiError, an ApiConnectionError (or ApiTimeoutError) when no answer came, a TokenError. */
  error: Error
}

/** Per call. `idempotencyKey` counts on POST and PATCH only (the API ignores it on other methods). */
export interface CallOptions {
  idempotencyKey?: string
  headers?: Record<string, string>
  signal?: AbortSignal
}

export interface ApiResponse<D = unknown, M = unknown> {
  status: number
  /** The envelope's `data`; the whole body for an answer without an envelope; null for an answer without a body. */
  data: D
  /** The envelope's `meta`, or null. */
  meta: M
  headers: Headers
  /** `Service-Request-Id`: quote it to support. */
  requestId: string | null
}

type Envelope<B> = string extends keyof B
  ? { data: unknown; meta: unknown } // a service's answer: the API does not describe it
  : B extends { data: infer D; meta: infer M } ? { data: D; meta: M } : { data: B; meta: null }
type AnswerOf<B> = ApiResponse<Envelope<B>['data'], Envelope<B>['meta']>

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
export type QueryValue = string | number | boolean | readonly (string | number | boolean)[] | undefined

/** A request to any path: routes declared by a deployment are not all in the client's types. */
export interface RequestOptions extends CallOptions {
  method: Method
  /** The path, starting with `/v1/`, without a query string. */
  path: string
  query?: Record<string, QueryValue>
  /** Sent as JSON. */
  body?: unknown
}

/** What one attempt sends besides the operation's own parameters. */
interface Attempt {
  headers: Headers
  signal: AbortSignal
  fetch: Fetch
}

interface Outcome {
  data?: unknown
  error?: unknown
  response: Response
}

interface LooseClient {
  request(method: string, path: string, init: Record<string, unknown>): Promise<Outcome>
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function answerOf(outcome: Outcome): ApiResponse {
  const { data: body, response } = outcome
  const envelope = isObject(body) && 'data' in body && 'meta' in body
  return {
    status: response.status,
    data: envelope ? body.data : body ?? null,
    meta: envelope ? body.meta : null,
    headers: response.headers,
    requestId: response.headers.get('service-request-id'),
  }
}

/** Every item of every page, from `firstPage` until the pages hold `total` items. */
async function* allItems<T>(firstPage: number, load: (page: number) => Promise<{ data: T[]; meta: { pagination: Pagination } }>): AsyncGenerator<T, void, undefined> {
  for (let page = firstPage; ; page += 1) {
    const { data, meta } = await load(page)
    yield* data
    // An empty page ends it too: items removed meanwhile would otherwise make it ask forever.
    if (data.length === 0 || page * meta.pagination.perPage >= meta.pagination.total) return
  }
}

function isPaginated(answer: ApiResponse): answer is ApiResponse<unknown[], { pagination: Pagination }> {
  if (!Array.isArray(answer.data) || !isObject(answer.meta) || !isObject(answer.meta.pagination)) return false
  const { perPage, total } = answer.meta.pagination
  return typeof perPage === 'number' && perPage > 0 && typeof total === 'number'
}

/**
 * The partner API's client: typed calls for the operations of the OpenAPI document, `request`
 * for any path; retries with `Retry-After` and backoff, one `Idempotency-Key` per write across
 * its retries, access tokens of the client-credentials grant, problems as ApiError.
 */
export class PartnerClient {
  private readonly api: Client<paths>
  private readonly fetchImpl: typeof globalThis.fetch
  private readonly apiKey: string | undefined
  private readonly credentials: ClientCredentials | undefined
  private readonly maxRetries: number
  private readonly timeoutMs: number
  private readonly backoffBaseMs: number
  private readonly correlationId: string | undefined
  private readonly onRetry: ((retry: RetryInfo) => void) | undefined
  private readonly ua = { 'User-Agent': USER_AGENT }

  constructor(options: ClientOptions) {
    const url = URL.canParse(options.baseUrl) ? new URL(options.baseUrl) : undefined
    if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:')) throw new TypeError(`baseUrl must be an http(s) URL, not ${JSON.stringify(options.baseUrl)}`)
    if ((options.apiKey === undefined) === (options.oauth === undefined)) throw new TypeError('give either apiKey or oauth')
    if (options.apiKey !== undefined && options.apiKey === '') throw new TypeError('apiKey is empty')
    this.maxRetries = whole('maxRetries', options.maxRetries ?? 2, 0)
    this.timeoutMs = whole('timeoutMs', options.timeoutMs ?? 30_000, 1)
    this.backoffBaseMs = whole('backoffBaseMs', options.backoffBaseMs ?? 500, 0)
    this.fetchImpl = options.fetch ?? globalThis.fetch
    this.apiKey = options.apiKey
    this.credentials = options.oauth === undefined ? undefined : new ClientCredentials(options.oauth, this.fetchImpl, USER_AGENT, this.timeoutMs)
    this.correlationId = options.correlationId
    this.onRetry = options.onRetry
    // Lists go comma-separated (`with=a,b`): the API refuses a parameter given twice.
    this.api = createClient<paths>({ baseUrl: options.baseUrl, querySerializer: { array: { style: 'form', explode: false } } })
  }

  /** `GET /v1/health`: `{ status: 'ok' }`; no credential is sent. */
  health(options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getHealth']>>> {
    return this.send('GET', '/v1/health', (a) => this.api.GET('/v1/health', { ...a }), options, false)
  }

  /** `GET /v1/credential`: the key or the token's client this client calls with; never a secret. */
  credential(options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getCredential']>>> {
    return this.send('GET', '/v1/credential', (a) => this.api.GET('/v1/credential', { params: { header: this.ua }, ...a }), options)
  }

  readonly properties = {
    /** `GET /v1/properties`: one page of the active properties the credential may use. */
    list: (query: ListPropertiesQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listProperties']>>> =>
      this.send('GET', '/v1/properties', (a) => this.api.GET('/v1/properties', { params: { query, header: this.ua }, ...a }), options),
    /** `GET /v1/properties/{propertyId}`: one property, whatever its status. */
    get: (propertyId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getProperty']>>> =>
      this.send('GET', '/v1/properties/{propertyId}', (a) => this.api.GET('/v1/properties/{propertyId}', { params: { path: { propertyId }, header: this.ua }, ...a }), options),
    /** Every property of every page (100 a page unless `perPage` says otherwise), until `total`. */
    listAll: (query: ListPropertiesQuery = {}, options?: CallOptions): AsyncGenerator<Property, void, undefined> =>
      allItems(query.page ?? 1, (page) => this.properties.list({ perPage: 100, ...query, page }, options)),
  }

  readonly events = {
    /** `GET /v1/events`: one page of the events the credential sees, oldest first. */
    list: (query: ListEventsQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listEvents']>>> =>
      this.send('GET', '/v1/events', (a) => this.api.GET('/v1/events', { params: { query, header: this.ua }, ...a }), options),
    /** `GET /v1/events/{eventId}`: one event the credential sees. */
    get: (eventId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getEvent']>>> =>
      this.send('GET', '/v1/events/{eventId}', (a) => this.api.GET('/v1/events/{eventId}', { params: { path: { eventId }, header: this.ua }, ...a }), options),
    /** Every event of every page (100 a page unless `perPage` says otherwise), until `total`: to catch up from `createdAfter`. */
    listAll: (query: ListEventsQuery = {}, options?: CallOptions): AsyncGenerator<Event, void, undefined> =>
      allItems(query.page ?? 1, (page) => this.events.list({ perPage: 100, ...query, page }, options)),
  }

  readonly webhookEndpoints = {
    /** `GET /v1/webhook-endpoints`: one page of the credential's own endpoints, oldest first. */
    list: (query: ListWebhookEndpointsQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listWebhookEndpoints']>>> =>
      this.send('GET', '/v1/webhook-endpoints', (a) => this.api.GET('/v1/webhook-endpoints', { params: { query, header: this.ua }, ...a }), options),
    /** `POST /v1/webhook-endpoints`, with an `Idempotency-Key`: the endpoint and its `secret`, shown only here (and on rotation). */
    create: (body: CreateWebhookEndpointBody, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['createWebhookEndpoint']>>> =>
      this.send('POST', '/v1/webhook-endpoints', (a) => this.api.POST('/v1/webhook-endpoints', { params: { header: this.ua }, body, ...a }), options),
    /** `GET /v1/webhook-endpoints/{endpointId}`: one endpoint, without its secret. */
    get: (endpointId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getWebhookEndpoint']>>> =>
      this.send('GET', '/v1/webhook-endpoints/{endpointId}', (a) => this.api.GET('/v1/webhook-endpoints/{endpointId}', { params: { path: { endpointId }, header: this.ua }, ...a }), options),
    /** `PATCH /v1/webhook-endpoints/{endpointId}`: its URL, types, description or status (`enabled` turns it on again). */
    update: (endpointId: string, body: UpdateWebhookEndpointBody, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['updateWebhookEndpoint']>>> =>
      this.send('PATCH', '/v1/webhook-endpoints/{endpointId}', (a) => this.api.PATCH('/v1/webhook-endpoints/{endpointId}', { params: { path: { endpointId }, header: this.ua }, body, ...a }), options),
    /** `DELETE /v1/webhook-endpoints/{endpointId}`: its queued deliveries are dropped. */
    delete: (endpointId: string, options?: CallOptions): Promise<ApiResponse<undefined>> =>
      this.send('DELETE', '/v1/webhook-endpoints/{endpointId}', (a) => this.api.DELETE('/v1/webhook-endpoints/{endpointId}', { params: { path: { endpointId }, header: this.ua }, ...a }), options),
    /** `POST …/rotate-secret`: a new secret; the old one keeps signing beside it for 24 hours. */
    rotateSecret: (endpointId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['rotateWebhookEndpointSecret']>>> =>
      this.send('POST', '/v1/webhook-endpoints/{endpointId}/rotate-secret', (a) => this.api.POST('/v1/webhook-endpoints/{endpointId}/rotate-secret', { params: { path: { endpointId }, header: this.ua }, ...a }), options),
    /** `POST …/test`: sends a `webhook.test` event to this endpoint only. */
    test: (endpointId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['testWebhookEndpoint']>>> =>
      this.send('POST', '/v1/webhook-endpoints/{endpointId}/test', (a) => this.api.POST('/v1/webhook-endpoints/{endpointId}/test', { params: { path: { endpointId }, header: this.ua }, ...a }), options),
    /** `GET …/deliveries`: one page of its attempts of the last 7 days, newest first. */
    deliveries: (endpointId: string, query: ListWebhookDeliveriesQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listWebhookEndpointDeliveries']>>> =>
      this.send('GET', '/v1/webhook-endpoints/{endpointId}/deliveries', (a) => this.api.GET('/v1/webhook-endpoints/{endpointId}/deliveries', { params: { path: { endpointId }, query, header: this.ua }, ...a }), options),
    /** `POST /v1/events/{eventId}/redeliver`: queues a new delivery of a retained event to one of the credential's endpoints. */
    redeliver: (eventId: string, endpointId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['redeliverEvent']>>> =>
      this.send('POST', '/v1/events/{eventId}/redeliver', (a) => this.api.POST('/v1/events/{eventId}/redeliver', { params: { path: { eventId }, header: this.ua }, body: { endpointId }, ...a }), options),
    /**
     * `POST …/recover`, with an `Idempotency-Key`: after an outage, the events of a time range
     * the endpoint did not receive (or all of them, `include: 'all'`) sent again, oldest first;
     * 202 with the recovery, whose counts `recovery` follows.
     */
    recover: (endpointId: string, body: RecoverWebhookEndpointBody, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['recoverWebhookEndpoint']>>> =>
      this.send('POST', '/v1/webhook-endpoints/{endpointId}/recover', (a) => this.api.POST('/v1/webhook-endpoints/{endpointId}/recover', { params: { path: { endpointId }, header: this.ua }, body, ...a }), options),
    /** `GET …/recoveries`: one page of its recoveries of the last 7 days, newest first. */
    recoveries: (endpointId: string, query: ListWebhookRecoveriesQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listWebhookRecoveries']>>> =>
      this.send('GET', '/v1/webhook-endpoints/{endpointId}/recoveries', (a) => this.api.GET('/v1/webhook-endpoints/{endpointId}/recoveries', { params: { path: { endpointId }, query, header: this.ua }, ...a }), options),
    /** `GET …/recoveries/{recoveryId}`: one recovery, with its counts so far. */
    recovery: (endpointId: string, recoveryId: string, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getWebhookRecovery']>>> =>
      this.send('GET', '/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}', (a) => this.api.GET('/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}', { params: { path: { endpointId, recoveryId }, header: this.ua }, ...a }), options),
    /** `DELETE …/recoveries/{recoveryId}`: what it has not sent yet is not sent. */
    cancelRecovery: (endpointId: string, recoveryId: string, options?: CallOptions): Promise<ApiResponse<undefined>> =>
      this.send('DELETE', '/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}', (a) => this.api.DELETE('/v1/webhook-endpoints/{endpointId}/recoveries/{recoveryId}', { params: { path: { endpointId, recoveryId }, header: this.ua }, ...a }), options),
  }

  readonly guests = {
    /** `GET /v1/guests`: the bookings service's answer. */
    list: (query: ListGuestsQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listGuests']>>> =>
      this.send('GET', '/v1/guests', (a) => this.api.GET('/v1/guests', { params: { query, header: this.ua }, ...a }), options),
    /** `POST /v1/guests`, with an `Idempotency-Key` (the one given, else a new UUID). */
    create: (body: CreateGuestBody, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['createGuests']>>> =>
      this.send('POST', '/v1/guests', (a) => this.api.POST('/v1/guests', { params: { header: this.ua }, body, ...a }), options),
    /** `GET /v1/guests/{guestId}`. */
    get: (guestId: string, query: GetGuestQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['getGuestsByGuestId']>>> =>
      this.send('GET', '/v1/guests/{guestId}', (a) => this.api.GET('/v1/guests/{guestId}', { params: { path: { guestId }, query, header: this.ua }, ...a }), options),
    /** `PATCH /v1/guests/{guestId}`, with an `Idempotency-Key`. */
    update: (guestId: string, body: UpdateGuestBody, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['updateGuestsByGuestId']>>> =>
      this.send('PATCH', '/v1/guests/{guestId}', (a) => this.api.PATCH('/v1/guests/{guestId}', { params: { path: { guestId }, header: this.ua }, body, ...a }), options),
  }

  readonly rooms = {
    /** `GET /v1/rooms` of one property (sent as `Service-Property-Id`). */
    list: (propertyId: string, query: ListRoomsQuery = {}, options?: CallOptions): Promise<AnswerOf<OkBodyOf<operations['listRooms']>>> =>
      this.send('GET', '/v1/rooms', (a) => this.api.GET('/v1/rooms', { params: { query, header: { ...this.ua, 'Service-Property-Id': propertyId } }, ...a }), options),
  }

  /** Any method and path, with the same retries, keys and errors as the typed calls. */
  request<T = unknown>(options: RequestOptions): Promise<ApiResponse<T>> {
    const { method, path, query, body } = options
    if (!path.startsWith('/') || path.includes('?') || path.includes('#')) throw new TypeError(`path must start with / and hold no query: ${JSON.stringify(path)}`)
    const loose = this.api as unknown as LooseClient
    return this.send(method, path, (a) => loose.request(method, path, { params: { query }, ...(body === undefined ? {} : { body }), ...a }), options) as Promise<ApiResponse<T>>
  }

  /** Every item of a paginated list at any path, page after page until `total`. */
  async *paginate<T = unknown>(options: Omit<RequestOptions, 'method' | 'body' | 'idempotencyKey'>): AsyncGenerator<T, void, undefined> {
    const first = Number(options.query?.page ?? 1)
    yield* allItems(first, async (page) => {
      const answer = await this.request({ ...options, method: 'GET', query: { ...options.query, page } })
      if (!isPaginated(answer)) throw new TypeError(`${options.path} did not answer with a list and meta.pagination`)
      return answer as ApiResponse<T[], { pagination: Pagination }>
    })
  }

  /**
   * One call: attempts until an answer that is not worth retrying or the retries run out.
   * A write keeps one Idempotency-Key across its attempts, so the API does it at most once.
   */
  private async send<R>(method: string, path: string, run: (attempt: Attempt) => Promise<Outcome>, options: CallOptions = {}, authenticate = true): Promise<R> {
    const headers = new Headers({ accept: 'application/json', 'user-agent': USER_AGENT })
    if (this.correlationId !== undefined) headers.set('service-correlation-id', this.correlationId)
    for (const [name, value] of Object.entries(options.headers ?? {})) headers.set(name, value)
    // The API takes an Idempotency-Key on POST and PATCH; the client always sends one, so they can be retried.
    if (method === 'POST' || method === 'PATCH') headers.set('idempotency-key', options.idempotencyKey ?? headers.get('idempotency-key') ?? randomUUID())
    const signal = options.signal
    let tokenRefetched = false
    for (let retry = 0; ; retry += 1) {
      let failure: Error
      let token: string | undefined
      try {
        if (authenticate) {
          token = this.credentials === undefined ? this.apiKey as string : await this.credentials.token()
          headers.set('authorization', `Bearer ${token}`)
        }
        const outcome = await run({ headers, signal: attemptSignal(this.timeoutMs, signal), fetch: wholeAnswers(this.fetchImpl, signal) })
        if (outcome.response.ok) return answerOf(outcome) as R
        failure = new ApiError(outcome.response.status, outcome.response.headers, outcome.error, outcome.response.statusText)
      } catch (error) {
        if (error instanceof NoAnswer) failure = this.noAnswer(error, method, path, retry + 1)
        else if (error instanceof TokenError && (error.status === null || isRetryable(error.status, null))) failure = error
        else throw error
      }
      let delayMs: number | undefined
      if (failure instanceof ApiError) {
        // A refused token gets one new token and one more attempt, outside the retries.
        if (this.credentials !== undefined && token !== undefined && !tokenRefetched && failure.status === 401 && isRefusedToken(failure.code)) {
          this.credentials.invalidate(token)
          tokenRefetched = true
          retry -= 1
          continue
        }
        delayMs = retry < this.maxRetries && isRetryable(failure.status, failure.code) ? retryDelayMs(retry, failure.retryAfter, this.backoffBaseMs) : undefined
        if (delayMs === undefined) throw failure
      } else {
        if (retry >= this.maxRetries) throw failure
        delayMs = retryDelayMs(retry, null, this.backoffBaseMs) as number
      }
      this.onRetry?.({ method, path, retry: retry + 1, delayMs, error: failure })
      await sleep(delayMs, signal)
    }
  }

  private noAnswer(failure: NoAnswer, method: string, path: string, attempts: number): ApiConnectionError {
    const tries = attempts === 1 ? '' : ` (${attempts} attempts)`
    return failure.timedOut
      ? new ApiTimeoutError(`${method} ${path}: no answer within ${this.timeoutMs} ms${tries}`, { cause: failure.cause })
      : new ApiConnectionError(`${method} ${path}: the connection failed${tries}`, { cause: failure.cause })
  }
}

function whole(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) throw new TypeError(`${name} must be a whole number of at least ${min}, not ${value}`)
  return value
}
