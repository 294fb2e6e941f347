import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { sendJsonData } from '../contract/envelope.js'
import { ApiError } from '../contract/errors.js'
import { callerOf } from '../http/request-state.js'
import { digest, type IdempotencyRecords } from '../idempotency/records.js'
import { routerPath, webhookRoutes, type RoutePolicy } from '../routes/policy.js'
import { SecretUnreadableError, type SecretBox } from './secrets.js'
import type { Prepared, WebhookEndpoints } from './service.js'

// The webhook endpoints API over HTTP (docs/partners.md, "Webhooks"): thin handlers over
// WebhookEndpoints (service.ts). Routes like the others: their checks up to step 6 come from
// their policies (routes/policy.ts), composed in app.ts. POSTs honour Idempotency-Key with
// the records of declared routes; a kept answer that holds a secret is kept sealed.

/** How long a request holds its Idempotency-Key's record while it runs. */
const IDEMPOTENCY_LEASE_MS = 30_000

export interface WebhookRouteOptions {
  endpoints: WebhookEndpoints
  box: SecretBox
  idempotency: IdempotencyRecords | undefined
  logger: Logger
  /** A kept answer that no configured key opens (docs/operations.md, "Changing WEBHOOKS_SECRET_KEY"). */
  onSecretUnreadable?: () => void
}

/** What a kept answer is sealed with: bound to its idempotency record. */
const answerContext = (recordKey: string): string => `idempotent-answer:${recordKey}`

export function webhookEndpointRoutes(options: WebhookRouteOptions) {
  const { endpoints, box } = options

  function send(request: FastifyRequest, reply: FastifyReply, status: number, data: unknown, pagination?: { page: number; perPage: number; total: number }): FastifyReply {
    reply.code(status)
    return sendJsonData(request, reply, JSON.stringify(data), pagination)
  }

  function page<T>(request: FastifyRequest, reply: FastifyReply, all: readonly T[]): FastifyReply {
    const { page: number, perPage } = request.parsedQuery as unknown as { page: number; perPage: number }
    return send(request, reply, 200, all.slice((number - 1) * perPage, number * perPage), { page: number, perPage, total: all.length })
  }

  /** The kept answer, opened; 503 (never a 500) when no configured key opens it. */
  function kept(sealed: string, recordKey: string): string {
    try {
      return box.open(sealed, answerContext(recordKey)).plain.toString('utf8')
    } catch (error) {
      if (!(error instanceof SecretUnreadableError)) throw error
      options.onSecretUnreadable?.()
      options.logger.error({ idempotencyRecord: recordKey }, 'idempotent answer unreadable: no configured key (WEBHOOKS_SECRET_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS) opens it')
      throw new ApiError('SERVICE_UNAVAILABLE', 'The answer kept for this Idempotency-Key cannot be read right now; retry later with the same key, or list the webhook endpoints to find what the first request did.', { retryAfter: 60 })
    }
  }

  /**
   * Runs a POST under its Idempotency-Key, when it has one: the first answer (a success, or
   * a problem of the request's own) is kept, sealed, and replayed to a retry of the same
   * request; 409 while the first runs, 422 for the key on another request.
   */
  async function idempotent(request: FastifyRequest, reply: FastifyReply, policy: RoutePolicy, run: Prepared): Promise<FastifyReply> {
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
      const body = kept(claim.answer.body.toString('latin1'), key)
      reply.header('idempotent-replayed', 'true')
      reply.code(claim.answer.status)
      return sendJsonData(request, reply, body)
    }
    let answer
    try {
      answer = await run()
    } catch (error) {
      await records.release(claim.lease).catch(() => undefined)
      throw error
    }
    const data = JSON.stringify(answer.data)
    await records.answer(claim.lease, { status: answer.status, headers: {}, body: Buffer.from(box.seal(Buffer.from(data, 'utf8'), answerContext(key)), 'latin1') })
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

    const principalOf = (request: FastifyRequest) => callerOf(request).principal
    const collection = webhookRoutes.webhookEndpoints
    const single = webhookRoutes.webhookEndpoint
    type One = { Params: { endpointId: string } }

    app.get(routerPath(collection.path), { config: { policy: collection } }, async (request, reply) => {
      return page(request, reply, await endpoints.list(principalOf(request)))
    })

    app.post(routerPath(collection.path), { config: { policy: collection } }, async (request, reply) => {
      return idempotent(request, reply, collection, endpoints.prepareCreate(principalOf(request), request.body))
    })

    app.get<One>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      return send(request, reply, 200, await endpoints.get(principalOf(request), request.params.endpointId))
    })

    app.patch<One>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      return send(request, reply, 200, await endpoints.update(principalOf(request), request.params.endpointId, request.body))
    })

    app.delete<One>(routerPath(single.path), { config: { policy: single } }, async (request, reply) => {
      await endpoints.remove(principalOf(request), request.params.endpointId)
      if (request.correlationId !== null) reply.header('service-correlation-id', request.correlationId)
      return reply.code(204).send()
    })

    const rotate = webhookRoutes.rotateWebhookSecret
    app.post<One>(routerPath(rotate.path), { config: { policy: rotate } }, async (request, reply) => {
      return idempotent(request, reply, rotate, await endpoints.prepareRotate(principalOf(request), request.params.endpointId, request.body))
    })

    const test = webhookRoutes.testWebhookEndpoint
    app.post<One>(routerPath(test.path), { config: { policy: test } }, async (request, reply) => {
      return idempotent(request, reply, test, await endpoints.prepareTest(principalOf(request), request.params.endpointId, request.body))
    })

    const attempts = webhookRoutes.listWebhookDeliveries
    app.get<One>(routerPath(attempts.path), { config: { policy: attempts } }, async (request, reply) => {
      return page(request, reply, await endpoints.attempts(principalOf(request), request.params.endpointId))
    })

    const recover = webhookRoutes.recoverWebhookEndpoint
    app.post<One>(routerPath(recover.path), { config: { policy: recover } }, async (request, reply) => {
      return idempotent(request, reply, recover, await endpoints.prepareRecover(principalOf(request), request.params.endpointId, request.body))
    })

    const recoveries = webhookRoutes.listWebhookRecoveries
    app.get<One>(routerPath(recoveries.path), { config: { policy: recoveries } }, async (request, reply) => {
      return page(request, reply, await endpoints.recoveriesOf(principalOf(request), request.params.endpointId))
    })

    const recovery = webhookRoutes.webhookRecovery
    type OneRecovery = { Params: { endpointId: string; recoveryId: string } }
    app.get<OneRecovery>(routerPath(recovery.path), { config: { policy: recovery } }, async (request, reply) => {
      return send(request, reply, 200, await endpoints.recovery(principalOf(request), request.params.endpointId, request.params.recoveryId))
    })

    app.delete<OneRecovery>(routerPath(recovery.path), { config: { policy: recovery } }, async (request, reply) => {
      await endpoints.cancelRecovery(principalOf(request), request.params.endpointId, request.params.recoveryId)
      if (request.correlationId !== null) reply.header('service-correlation-id', request.correlationId)
      return reply.code(204).send()
    })

    const redeliver = webhookRoutes.redeliverEvent
    app.post<{ Params: { eventId: string } }>(routerPath(redeliver.path), { config: { policy: redeliver } }, async (request, reply) => {
      return idempotent(request, reply, redeliver, await endpoints.prepareRedeliver(principalOf(request), request.params.eventId, request.body))
    })
  }
}
