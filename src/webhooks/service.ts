import { ApiError } from '../contract/errors.js'
import type { EventLog, PublicEvent } from '../events/log.js'
import { hasScope } from '../events/types.js'
import { UlidFactory } from '../events/ulid.js'
import type { Principal } from '../keys/principal.js'
import { EVENT_ID_PREFIX } from '../routes/policy.js'
import { applyChanges, bodyOf, endpointChanges, endpointInput, failed, rotated, type EndpointInput } from './body.js'
import type { Deliveries, DeliveryJob } from './deliveries.js'
import { secretContext, viewOf, type Attempt, type EndpointRecord, type EndpointStore, type EndpointView, type SealedSecret } from './endpoints.js'
import type { Recoveries } from './recoveries.js'
import { canonicalId, endpointDisabled, recoveryInProgress, recoveryInput, recoveryNotFound, tooManyEvents, type RecoveryView } from './recovery.js'
import { newSecret, type SecretBox } from './secrets.js'

// What a partner does with its webhook endpoints (docs/partners.md, "Webhooks"), apart from
// HTTP: the public routes (routes.ts) and the portal call these. Each operation that writes
// is in two steps: its checks (which throw the problem to answer), then the change, so that an
// Idempotency-Key is claimed only for a request that passed them.

export const TEST_EVENT_TYPE = 'webhook.test'
/** How long a partner over the bound of deliveries it asked for is told to wait. */
export const MANUAL_RETRY_AFTER_SECONDS = 60

export interface WebhookSettings {
  maxEndpointsPerCredential: number
  maxManualDeliveriesPerEndpoint: number
  maxRecoveryEvents: number
  allowHttp: boolean
  allowPrivateTargets: boolean
}

export interface WebhookEndpointsOptions {
  store: EndpointStore
  deliveries: Deliveries
  log: EventLog
  box: SecretBox
  settings: WebhookSettings
  now?: () => number
}

/** What an operation answers: its status and its `data`. */
export interface Outcome {
  status: number
  data: unknown
}

/** The change of an operation whose checks passed. */
export type Prepared = () => Promise<Outcome>

function unavailable(error: unknown): ApiError {
  return new ApiError('SERVICE_UNAVAILABLE', 'Webhook endpoints cannot be read or changed right now; retry shortly.', { retryAfter: 1, cause: error })
}

const notFound = (id: string): ApiError => new ApiError('WEBHOOK_ENDPOINT_NOT_FOUND', `No webhook endpoint with id '${id}' exists for this credential.`)

/** 429 for a delivery asked for beyond the endpoint's bound (docs/partners.md, "Webhooks"). */
function manualBoundReached(endpointId: string, max: number): ApiError {
  return new ApiError('RATE_LIMITED',
    `Webhook endpoint '${endpointId}' has ${max} test or redelivered deliveries not yet finished, as many as it may; retry once some are delivered (GET /v1/webhook-endpoints/${endpointId}/deliveries shows them).`,
    { retryAfter: MANUAL_RETRY_AFTER_SECONDS })
}

/** The `webhook.test` event `ulid` (made at `millis`) to the endpoint: the same each time it is made, so a redelivery sends what the test sent. */
function testEvent(ulid: string, millis: number, mode: Principal['mode'], endpointId: string): PublicEvent {
  return {
    id: `${EVENT_ID_PREFIX}${ulid}`, type: TEST_EVENT_TYPE, createdAt: new Date(millis).toISOString(), mode, propertyId: null,
    object: { type: 'webhook_endpoint', id: endpointId, path: `/v1/webhook-endpoints/${endpointId}` },
  }
}

export class WebhookEndpoints {
  private readonly now: () => number
  private readonly ulids = new UlidFactory()

  constructor(private readonly options: WebhookEndpointsOptions) {
    this.now = options.now ?? Date.now
  }

  /** The settings of a reloaded configuration, for the next request. */
  reconfigure(settings: WebhookSettings): void {
    this.options.settings = settings
  }

  private get flags(): { allowHttp: boolean; allowPrivate: boolean } {
    return { allowHttp: this.options.settings.allowHttp, allowPrivate: this.options.settings.allowPrivateTargets }
  }

  private get publicTypes(): readonly string[] {
    return this.options.log.types.publicTypes
  }

  /** 403 naming the first type the credential may not see (it would receive nothing of it). */
  private checkScopes(principal: Principal, types: readonly string[]): void {
    for (const type of types) {
      const scope = this.options.log.types.scopeOf(type) as string
      if (!hasScope(principal, scope)) throw new ApiError('INSUFFICIENT_SCOPE', `Subscribing to '${type}' needs the scope '${scope}', which this credential does not have.`)
    }
  }

  /** The endpoint `id` of the credential; 404 when it has none of that id. */
  async owned(principal: Principal, id: string): Promise<EndpointRecord> {
    const canonical = canonicalId(id)
    const record = await this.options.store.ownedBy(principal.keyId, canonical).catch((error: unknown) => { throw unavailable(error) })
    if (record === undefined) throw notFound(id)
    return record
  }

  async list(principal: Principal): Promise<EndpointView[]> {
    const all = await this.options.store.list(principal.keyId).catch((error: unknown) => { throw unavailable(error) })
    return all.map(viewOf)
  }

  async get(principal: Principal, id: string): Promise<EndpointView> {
    return viewOf(await this.owned(principal, id))
  }

  /** `POST /v1/webhook-endpoints`: 201 with the endpoint and its secret (the only time it is shown, with rotation). */
  prepareCreate(principal: Principal, body: unknown): Prepared {
    const input = endpointInput(body, this.publicTypes, this.flags)
    this.checkScopes(principal, input.eventTypes)
    return () => this.create(principal, input)
  }

  private async create(principal: Principal, input: EndpointInput): Promise<Outcome> {
    const { store, box, settings } = this.options
    const at = this.now()
    const secret = newSecret()
    const id = store.newId(at)
    const record: EndpointRecord = {
      id, credentialId: principal.keyId, brand: principal.brand, mode: principal.mode,
      url: input.url, eventTypes: input.eventTypes, description: input.description, status: 'enabled', disabledReason: null,
      createdAt: new Date(at).toISOString(), updatedAt: new Date(at).toISOString(),
      secrets: [{ sealed: box.seal(Buffer.from(secret, 'utf8'), secretContext(id)), expiresAt: null }], failingSince: null,
    }
    const created = await store.create(record, settings.maxEndpointsPerCredential).catch((error: unknown) => { throw unavailable(error) })
    if (!created) {
      throw new ApiError('WEBHOOK_ENDPOINT_LIMIT_REACHED', `This credential has ${settings.maxEndpointsPerCredential} webhook endpoints, as many as it may; delete one first.`)
    }
    return { status: 201, data: { ...viewOf(record), secret } }
  }

  /** `PATCH`: the changes made to the endpoint as it is now (a delivery's bookkeeping meanwhile is kept, and never undoes them). */
  async update(principal: Principal, id: string, body: unknown): Promise<EndpointView> {
    const changes = endpointChanges(body, this.publicTypes, this.flags)
    if (changes.eventTypes !== undefined) this.checkScopes(principal, changes.eventTypes)
    const record = await this.owned(principal, id)
    const changed = await this.options.store.update(record.id, (current) => applyChanges(current, changes, this.now()))
      .catch((error: unknown) => { throw unavailable(error) })
    if (changed === undefined) throw notFound(id)
    return viewOf(changed)
  }

  /** `DELETE`: the endpoint, its attempts and its queued deliveries go. */
  async remove(principal: Principal, id: string): Promise<void> {
    const record = await this.owned(principal, id)
    await this.options.deliveries.removeEndpoint(record).catch((error: unknown) => { throw unavailable(error) })
  }

  /** `POST …/rotate-secret`: 200 with the endpoint and its new secret; the old one signs beside it for 24 hours. */
  async prepareRotate(principal: Principal, id: string, body: unknown): Promise<Prepared> {
    bodyOf(body, [])
    const record = await this.owned(principal, id)
    return async () => {
      const secret = newSecret()
      const sealed = this.options.box.seal(Buffer.from(secret, 'utf8'), secretContext(record.id))
      // A current secret no configured key opens cannot sign beside the new one: it ends now.
      const opens = (secret: SealedSecret): boolean => {
        try {
          this.options.box.open(secret.sealed, secretContext(record.id))
          return true
        } catch {
          return false
        }
      }
      const changed = await this.options.store.update(record.id, (current) => rotated(current, sealed, this.now(), opens))
        .catch((error: unknown) => { throw unavailable(error) })
      if (changed === undefined) throw notFound(id)
      return { status: 200, data: { ...viewOf(changed), secret } }
    }
  }

  /** `POST …/test`: 202; a `webhook.test` event to this endpoint only, within the bound of deliveries asked for. */
  async prepareTest(principal: Principal, id: string, body: unknown): Promise<Prepared> {
    bodyOf(body, [])
    const record = await this.owned(principal, id)
    return async () => {
      const ulid = this.ulids.next(this.now())
      const event = testEvent(ulid.text, ulid.millis, principal.mode, record.id)
      // Kept before it is queued: its delivery, once listed, can always be asked for again.
      await this.options.store.recordTest(record.id, event.id, ulid.millis).catch((error: unknown) => { throw unavailable(error) })
      await this.enqueue(id, { ulid: ulid.text, brand: principal.brand, mode: principal.mode, endpointId: record.id, kind: 'test', json: JSON.stringify(event) })
      return { status: 202, data: { eventId: event.id } }
    }
  }

  /** `GET …/deliveries`: the attempts of the last 7 days, newest first. */
  async attempts(principal: Principal, id: string): Promise<Attempt[]> {
    const record = await this.owned(principal, id)
    return this.options.store.attempts(record.id, this.now()).catch((error: unknown) => { throw unavailable(error) })
  }

  /** `POST /v1/events/{eventId}/redeliver`: 202; the event again to one of the credential's endpoints, within the bound. */
  async prepareRedeliver(principal: Principal, eventId: string, body: unknown): Promise<Prepared> {
    const fields = bodyOf(body, ['endpointId'])
    const endpointId = fields.endpointId
    if (typeof endpointId !== 'string') {
      throw failed([{ field: 'endpointId', code: endpointId === undefined ? 'REQUIRED' : 'INVALID_FORMAT', detail: 'endpointId names one of this credential\'s webhook endpoints.' }])
    }
    const json = await this.options.log.get(principal, eventId).catch((error: unknown) => { throw unavailable(error) })
    const ulid = eventId.slice(EVENT_ID_PREFIX.length).toUpperCase()
    if (json === undefined) {
      // A `webhook.test` event is in no log: it is sent again, the same event, to the endpoint
      // it was sent to (docs/architecture.md §D86).
      const record = await this.owned(principal, endpointId)
      const canonical = `${EVENT_ID_PREFIX}${ulid}`
      const sentAt = await this.options.store.testSentAt(record.id, canonical, this.now()).catch((error: unknown) => { throw unavailable(error) })
      if (sentAt === undefined) throw new ApiError('EVENT_NOT_FOUND', `No event with id '${eventId}' exists for this credential.`)
      return async () => {
        const event = testEvent(ulid, sentAt, principal.mode, record.id)
        await this.enqueue(endpointId, { ulid, brand: principal.brand, mode: principal.mode, endpointId: record.id, kind: 'test', json: JSON.stringify(event) })
        return { status: 202, data: { eventId: event.id, endpointId: record.id } }
      }
    }
    const record = await this.owned(principal, endpointId)
    return async () => {
      await this.enqueue(endpointId, { ulid, brand: principal.brand, mode: principal.mode, endpointId: record.id, kind: 'redeliver' })
      return { status: 202, data: { eventId: `${EVENT_ID_PREFIX}${ulid}`, endpointId: record.id } }
    }
  }

  private get recoveries(): Recoveries {
    const recoveries = this.options.deliveries.recoveries
    if (recoveries === undefined) throw unavailable(new Error('recoveries are not kept by this gateway'))
    return recoveries
  }

  /**
   * `POST …/recover`: 202 with the recovery; the events of the range the endpoint was due and
   * did not receive (or all of them) go out oldest first, one attempt each (docs/partners.md,
   * "After an outage: recover").
   */
  async prepareRecover(principal: Principal, id: string, body: unknown): Promise<Prepared> {
    const input = recoveryInput(body, this.now(), this.options.log.retentionMs)
    const record = await this.owned(principal, id)
    if (record.status !== 'enabled') throw endpointDisabled(record.id)
    const recoveries = this.recoveries
    const running = await recoveries.store.runningOf(record.id).catch((error: unknown) => { throw unavailable(error) })
    if (running !== undefined) throw recoveryInProgress(record.id, running)
    return async () => {
      const started = await recoveries.start(record, input).catch((error: unknown) => { throw unavailable(error) })
      if (started.kind === 'gone') throw notFound(id)
      if (started.kind === 'running') throw recoveryInProgress(record.id, started.id)
      if (started.kind === 'too many') throw tooManyEvents(this.options.settings.maxRecoveryEvents)
      return { status: 202, data: started.recovery }
    }
  }

  /** `GET …/recoveries`: the endpoint's recoveries of the last 7 days, newest first. */
  async recoveriesOf(principal: Principal, id: string): Promise<RecoveryView[]> {
    const record = await this.owned(principal, id)
    return this.recoveries.store.list(record.id, this.now()).catch((error: unknown) => { throw unavailable(error) })
  }

  /** `GET …/recoveries/{recoveryId}`: one, with its counts so far. */
  async recovery(principal: Principal, id: string, recoveryId: string): Promise<RecoveryView> {
    const record = await this.owned(principal, id)
    const view = await this.recoveries.store.get(record.id, canonicalId(recoveryId)).catch((error: unknown) => { throw unavailable(error) })
    if (view === undefined) throw recoveryNotFound(recoveryId)
    return view
  }

  /** `DELETE …/recoveries/{recoveryId}`: what is not yet sent is not sent; one that has ended stays as it is. */
  async cancelRecovery(principal: Principal, id: string, recoveryId: string): Promise<void> {
    const view = await this.recovery(principal, id, recoveryId)
    await this.recoveries.store.cancel(view.endpointId, view.id).catch((error: unknown) => { throw unavailable(error) })
  }

  private async enqueue(asked: string, data: DeliveryJob): Promise<void> {
    const queued = await this.options.deliveries.enqueueManual(data).catch((error: unknown) => { throw unavailable(error) })
    if (queued === 'gone') throw notFound(asked)
    if (queued === 'full') throw manualBoundReached(data.endpointId, this.options.settings.maxManualDeliveriesPerEndpoint)
  }
}
