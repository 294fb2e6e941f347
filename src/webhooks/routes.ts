import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { sendJsonData } from '../contract/envelope.js'
import { ApiError, type FieldError } from '../contract/errors.js'
import { quoteInput } from '../contract/problem.js'
import type { EventLog, PublicEvent } from '../events/log.js'
import { hasScope } from '../events/types.js'
import { UlidFactory } from '../events/ulid.js'
import { callerOf } from '../http/request-state.js'
import { digest, type IdempotencyRecords } from '../idempotency/records.js'
import type { Principal } from '../keys/principal.js'
import { EVENT_ID_PREFIX, routerPath, webhookRoutes, type RoutePolicy } from '../routes/policy.js'
import { urlProblem } from './addresses.js'
import type { Deliveries } from './deliveries.js'
import { viewOf, type EndpointRecord, type EndpointStore } from './endpoints.js'
import { newSecret, type SecretBox } from './secrets.js'

// The webhook endpoints API (docs/partners.md, "Webhooks"): a credential's own endpoints,
// their secrets, test events, attempts and redeliveries. Routes like the others: their checks
// up to step 6 come from their policies (routes/policy.ts), composed in app.ts. Bodies are the
// gateway's own, so the gateway validates them: 400 UNKNOWN_BODY_FIELD, 422 VALIDATION_FAILED
// with one field error per bad field. POSTs honour Idempotency-Key with the records of
// declared routes; a kept answer that holds a secret is kept sealed.

export const TEST_EVENT_TYPE = 'webhook.test'
const DESCRIPTION_MAX = 500
/** A secret rotated out keeps signing beside the new one this long. */
export const ROTATION_OVERLAP_MS = 24 * 3_600_000
/** How long a request holds its Idempotency-Key's record while it runs. */
const IDEMPOTENCY_LEASE_MS = 30_000

export interface WebhookRouteOptions {
  store: EndpointStore
  deliveries: Deliveries
  log: EventLog
  box: SecretBox
  idempotency: IdempotencyRecords | undefined
  settings: { maxEndpointsPerCredential: number; allowHttp: boolean; allowPrivateTargets: boolean }
  now?: () => number
}

type Body = Record<string, unknown>

function unavailable(error: unknown): ApiError {
  return new ApiError('SERVICE_UNAVAILABLE', 'Webhook endpoints cannot be read or changed right now; retry shortly.', { retryAfter: 1, cause: error })
}

/** The body as an object; none is an empty one. 400 for fields the operation does not take. */
function bodyOf(request: FastifyRequest, known: readonly string[]): Body {
  const body = request.body
  if (body === undefined || body === null) return {}
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError('VALIDATION_FAILED', 'The body must be a JSON object.', { errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }] })
  }
  const errors: FieldError[] = []
  for (const name of Object.keys(body)) {
    if (known.includes(name)) continue
    const near = known.find((k) => k.toLowerCase() === name.toLowerCase())
    errors.push({ field: name, code: 'UNKNOWN_PARAMETER', detail: `Unknown field '${quoteInput(name)}'.${near === undefined ? '' : ` Did you mean '${near}'?`}` })
  }
  if (errors.length > 0) {
    throw new ApiError('UNKNOWN_BODY_FIELD', `The body has ${errors.length === 1 ? 'a field' : 'fields'} this operation does not take: ${errors.map((e) => quoteInput(e.field)).join(', ')}.`, { errors })
  }
  return body as Body
}

function failed(errors: FieldError[]): ApiError {
  return new ApiError('VALIDATION_FAILED', `The body has ${errors.length === 1 ? 'a field' : 'fields'} with a bad value.`, { errors })
}

export function webhookEndpointRoutes(options: WebhookRouteOptions) {
  const { store, deliveries, log, box, settings } = options
  const now = options.now ?? Date.now
  const ulids = new UlidFactory()
  const publicTypes = log.types.publicTypes

  function checkUrl(value: unknown, errors: FieldError[]): string | undefined {
    if (value === undefined) {
      errors.push({ field: 'url', code: 'REQUIRED', detail: 'url is required.' })
      return undefined
    }
    if (typeof value !== 'string') {
      errors.push({ field: 'url', code: 'INVALID_FORMAT', detail: 'url must be a string: an absolute https URL.' })
      return undefined
    }
    const problem = urlProblem(value, { allowHttp: settings.allowHttp, allowPrivate: settings.allowPrivateTargets })
    if (problem !== undefined) {
      errors.push({ field: 'url', code: 'NOT_ALLOWED', detail: `${problem}.` })
      return undefined
    }
    return value
  }

  function checkTypes(value: unknown, errors: FieldError[]): string[] | undefined {
    if (value === undefined || (Array.isArray(value) && value.length === 0)) {
      errors.push({ field: 'eventTypes', code: 'REQUIRED', detail: 'eventTypes must name at least one event type.' })
      return undefined
    }
    if (!Array.isArray(value) || value.some((t) => typeof t !== 'string') || value.length > 100) {
      errors.push({ field: 'eventTypes', code: 'INVALID_FORMAT', detail: 'eventTypes must be a list of 1 to 100 event types.' })
      return undefined
    }
    const unknown = (value as string[]).filter((t) => !publicTypes.includes(t))
    if (unknown.length > 0) {
      errors.push({ field: 'eventTypes', code: 'INVALID_ENUM_VALUE', detail: `Unknown event type${unknown.length > 1 ? 's' : ''}: ${unknown.map((t) => `'${quoteInput(t)}'`).join(', ')}; the types are ${publicTypes.join(', ')}.` })
      return undefined
    }
    return [...new Set(value as string[])]
  }

  function checkDescription(value: unknown, errors: FieldError[]): string | null | undefined {
    if (value === undefined || value === null) return value as undefined | null
    if (typeof value !== 'string') errors.push({ field: 'description', code: 'INVALID_FORMAT', detail: 'description must be a text, or null.' })
    else if (value.length > DESCRIPTION_MAX) errors.push({ field: 'description', code: 'OUT_OF_RANGE', detail: `description must be at most ${DESCRIPTION_MAX} characters.` })
    else return value
    return undefined
  }

  /** 403 naming the first type the credential may not see (it would receive nothing of it). */
  function checkScopes(principal: Principal, types: readonly string[]): void {
    for (const type of types) {
      const scope = log.types.scopeOf(type) as string
      if (!hasScope(principal, scope)) throw new ApiError('INSUFFICIENT_SCOPE', `Subscribing to '${type}' needs the scope '${scope}', which this credential does not have.`)
    }
  }

  async function owned(request: FastifyRequest<{ Params: { endpointId: string } }>): Promise<EndpointRecord> {
    return ownedBy(callerOf(request).principal, request.params.endpointId)
  }

  async function ownedBy(principal: Principal, id: string): Promise<EndpointRecord> {
    const canonical = `${id.slice(0, 3)}${id.slice(3).toUpperCase()}`
    const record = await store.ownedBy(principal.keyId, canonical).catch((error: unknown) => { throw unavailable(error) })
    if (record === undefined) throw new ApiError('WEBHOOK_ENDPOINT_NOT_FOUND', `No webhook endpoint with id '${id}' exists for this credential.`)
    return record
  }

  function send(request: FastifyRequest, reply: FastifyReply, status: number, data: unknown, pagination?: { page: number; perPage: number; total: number }): FastifyReply {
    reply.code(status)
    return sendJsonData(request, reply, JSON.stringify(data), pagination)
  }

  /**
   * Runs a POST under its Idempotency-Key, when it has one: the first answer (a success, or
   * a problem of the request's own) is kept, sealed, and replayed to a retry of the same
   * request; 409 while the first runs, 422 for the key on another request.
   */
  async function idempotent(request: FastifyRequest, reply: FastifyReply, policy: RoutePolicy, run: () => Promise<{ status: number; data: unknown }>): Promise<FastifyReply> {
    const records = options.idempotency
    const idempotencyKey = request.idempotencyKey
    if (records === undefined || idempotencyKey === null) {
      const { status, data } = await run()
      return send(request, reply, status, data)
    }
    const key = records.keyOf(callerOf(request).principal.keyId, request.method, policy.path, idempotencyKey)
    const fingerprint = digest(request.url, JSON.stringify(request.body ?? null))
    const claim = await records.claim(key, fingerprint, IDEMPOTENCY_LEASE_MS).catch((error: unknown) => {
      throw new ApiError('SERVICE_UNAVAILABLE', 'Idempotency keys cannot be checked right now; retry in 1 second.', { retryAfter: 1, cause: error })
    })
    if (claim.kind === 'in_use') throw new ApiError('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still in flight; retry in 1 second to get its answer.', { retryAfter: 1 })
    if (claim.kind === 'reused') throw new ApiError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for a different request; send a new key with each new request.')
    if (claim.kind === 'answered') {
      reply.header('idempotent-replayed', 'true')
      reply.code(claim.answer.status)
      return sendJsonData(request, reply, box.open(claim.answer.body.toString('latin1')).toString('utf8'))
    }
    let answer
    try {
      answer = await run()
    } catch (error) {
      await records.release(claim.lease).catch(() => undefined)
      throw error
    }
    const data = JSON.stringify(answer.data)
    await records.answer(claim.lease, { status: answer.status, headers: {}, body: Buffer.from(box.seal(Buffer.from(data, 'utf8')), 'latin1') })
      .catch((error: unknown) => request.log.warn({ err: error }, 'idempotency answer not kept (Redis failed); its record frees itself when its lease runs out'))
    reply.code(answer.status)
    return sendJsonData(request, reply, data)
  }

  return async function routes(app: FastifyInstance): Promise<void> {
    // Step 3 has checked the type and the length; the JSON is read here, after step 6.
    app.removeAllContentTypeParsers()
    app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 64 * 1024 }, (_request, text, done) => {
      if (text === '') return done(null, undefined)
      try {
        done(null, JSON.parse(text as string))
      } catch {
        done(new ApiError('MALFORMED_JSON', 'The body is not one well-formed JSON document.'), undefined)
      }
    })
    app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined))

    const collection = webhookRoutes.webhookEndpoints
    const single = webhookRoutes.webhookEndpoint

    app.get(routerPath(collection.path), { config: { policy: collection } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const { page, perPage } = request.parsedQuery as unknown as { page: number; perPage: number }
      const all = await store.list(principal.keyId).catch((error: unknown) => { throw unavailable(error) })
      return send(request, reply, 200, all.slice((page - 1) * perPage, page * perPage).map(viewOf), { page, perPage, total: all.length })
    })

    app.post(routerPath(collection.path), { config: { policy: collection } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const body = bodyOf(request, ['url', 'eventTypes', 'description'])
      const errors: FieldError[] = []
      const url = checkUrl(body.url, errors)
      const eventTypes = checkTypes(body.eventTypes, errors)
      const description = checkDescription(body.description, errors)
      if (errors.length > 0) throw failed(errors)
      checkScopes(principal, eventTypes as string[])
      return idempotent(request, reply, collection, async () => {
        const at = now()
        const secret = newSecret()
        const record: EndpointRecord = {
          id: store.newId(at), credentialId: principal.keyId, brand: principal.brand, mode: principal.mode,
          url: url as string, eventTypes: eventTypes as string[], description: description ?? null, status: 'enabled', disabledReason: null,
          createdAt: new Date(at).toISOString(), updatedAt: new Date(at).toISOString(),
          secrets: [{ sealed: box.seal(Buffer.from(secret, 'utf8')), expiresAt: null }], failingSince: null,
        }
        const created = await store.create(record, settings.maxEndpointsPerCredential).catch((error: unknown) => { throw unavailable(error) })
        if (!created) {
          throw new ApiError('WEBHOOK_ENDPOINT_LIMIT_REACHED', `This credential has ${settings.maxEndpointsPerCredential} webhook endpoints, as many as it may; delete one first.`)
        }
        return { status: 201, data: { ...viewOf(record), secret } }
      })
    })

    app.get<{ Params: { endpointId: string } }>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      return send(request, reply, 200, viewOf(await owned(request)))
    })

    app.patch<{ Params: { endpointId: string } }>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const body = bodyOf(request, ['url', 'eventTypes', 'description', 'status'])
      const errors: FieldError[] = []
      const url = body.url === undefined ? undefined : checkUrl(body.url, errors)
      const eventTypes = body.eventTypes === undefined ? undefined : checkTypes(body.eventTypes, errors)
      const description = checkDescription(body.description, errors)
      const status = body.status
      if (status !== undefined && status !== 'enabled' && status !== 'disabled') {
        errors.push({ field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is "enabled" or "disabled".' })
      }
      if (errors.length > 0) throw failed(errors)
      if (eventTypes !== undefined) checkScopes(principal, eventTypes)
      const record = await owned(request)
      const changed: EndpointRecord = {
        ...record,
        ...(url === undefined ? {} : { url }),
        ...(eventTypes === undefined ? {} : { eventTypes }),
        ...(description === undefined ? {} : { description }),
        ...(status === 'enabled' ? { status: 'enabled', disabledReason: null, failingSince: null } : {}),
        ...(status === 'disabled' && record.status === 'enabled' ? { status: 'disabled', disabledReason: 'partner' } : {}),
        updatedAt: new Date(now()).toISOString(),
      }
      await store.save(changed).catch((error: unknown) => { throw unavailable(error) })
      return send(request, reply, 200, viewOf(changed))
    })

    app.delete<{ Params: { endpointId: string } }>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      const record = await owned(request)
      await store.remove(record).catch((error: unknown) => { throw unavailable(error) })
      if (request.correlationId !== null) reply.header('service-correlation-id', request.correlationId)
      return reply.code(204).send()
    })

    const rotate = webhookRoutes.rotateWebhookSecret
    app.post<{ Params: { endpointId: string } }>(routerPath(rotate.path), { config: { policy: rotate } }, async (request, reply) => {
      bodyOf(request, [])
      const record = await owned(request)
      return idempotent(request, reply, rotate, async () => {
        const at = now()
        const secret = newSecret()
        // The current secret keeps signing beside the new one for the overlap; older ones end now.
        const previous = record.secrets.find((s) => s.expiresAt === null)
        const changed: EndpointRecord = {
          ...record,
          secrets: [{ sealed: box.seal(Buffer.from(secret, 'utf8')), expiresAt: null }, ...(previous === undefined ? [] : [{ ...previous, expiresAt: at + ROTATION_OVERLAP_MS }])],
          updatedAt: new Date(at).toISOString(),
        }
        await store.save(changed).catch((error: unknown) => { throw unavailable(error) })
        return { status: 200, data: { ...viewOf(changed), secret } }
      })
    })

    const test = webhookRoutes.testWebhookEndpoint
    app.post<{ Params: { endpointId: string } }>(routerPath(test.path), { config: { policy: test } }, async (request, reply) => {
      const { principal } = callerOf(request)
      bodyOf(request, [])
      const record = await owned(request)
      return idempotent(request, reply, test, async () => {
        const at = now()
        const ulid = ulids.next(at)
        const event: PublicEvent = {
          id: `${EVENT_ID_PREFIX}${ulid.text}`, type: TEST_EVENT_TYPE, createdAt: new Date(ulid.millis).toISOString(), mode: principal.mode, propertyId: null,
          object: { type: 'webhook_endpoint', id: record.id, path: `/v1/webhook-endpoints/${record.id}` },
        }
        await deliveries.enqueue({ ulid: ulid.text, brand: principal.brand, mode: principal.mode, endpointId: record.id, kind: 'test', json: JSON.stringify(event) })
          .catch((error: unknown) => { throw unavailable(error) })
        return { status: 202, data: { eventId: event.id } }
      })
    })

    const attempts = webhookRoutes.listWebhookDeliveries
    app.get<{ Params: { endpointId: string } }>(routerPath(attempts.path), { config: { policy: attempts } }, async (request, reply) => {
      const { page, perPage } = request.parsedQuery as unknown as { page: number; perPage: number }
      const record = await owned(request)
      const all = await store.attempts(record.id, now()).catch((error: unknown) => { throw unavailable(error) })
      return send(request, reply, 200, all.slice((page - 1) * perPage, page * perPage), { page, perPage, total: all.length })
    })

    const redeliver = webhookRoutes.redeliverEvent
    app.post<{ Params: { eventId: string } }>(routerPath(redeliver.path), { config: { policy: redeliver } }, async (request, reply) => {
      const { principal } = callerOf(request)
      const body = bodyOf(request, ['endpointId'])
      const endpointId = body.endpointId
      if (typeof endpointId !== 'string') {
        throw failed([{ field: 'endpointId', code: endpointId === undefined ? 'REQUIRED' : 'INVALID_FORMAT', detail: 'endpointId names one of this credential\'s webhook endpoints.' }])
      }
      const eventId = request.params.eventId
      const json = await log.get(principal, eventId).catch((error: unknown) => { throw unavailable(error) })
      if (json === undefined) throw new ApiError('EVENT_NOT_FOUND', `No event with id '${eventId}' exists for this credential.`)
      const record = await ownedBy(principal, endpointId)
      return idempotent(request, reply, redeliver, async () => {
        const ulid = eventId.slice(EVENT_ID_PREFIX.length).toUpperCase()
        await deliveries.enqueue({ ulid, brand: principal.brand, mode: principal.mode, endpointId: record.id, kind: 'redeliver' })
          .catch((error: unknown) => { throw unavailable(error) })
        return { status: 202, data: { eventId: `${EVENT_ID_PREFIX}${ulid}`, endpointId: record.id } }
      })
    })
  }
}
