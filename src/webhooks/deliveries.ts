import { SpanStatusCode } from '@opentelemetry/api'
import { DelayedError, Queue, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq'
import { LRUCache } from 'lru-cache'
import type { Logger } from 'pino'
import { request } from 'undici'
import type { EventLog, LoggedEvent } from '../events/log.js'
import type { Viewer } from '../events/types.js'
import { UlidFactory } from '../events/ulid.js'
import type { KeyMode } from '../keys/principal.js'
import { RecordsById, type RecordsByIdOptions } from '../keys/records-by-id.js'
import type { KeyStore } from '../keys/store.js'
import { EVENT_ID_PREFIX } from '../routes/policy.js'
import type { RedisClient } from '../redis.js'
import type { Tracing } from '../tracing/tracing.js'
import { BlockedAddressError, type Lookup } from './addresses.js'
import { EndpointConnections } from './connections.js'
import { secretContext, type Attempt, type AttemptOutcome, type EndpointRecord, type EndpointStatus, type EndpointStore } from './endpoints.js'
import {
  afterFailure, afterGone, afterSuccess, attemptsOf, deliveryLifetimeMs, isLastAttempt, LEASE_GRACE_MS, outcomeOfStatus, parkSleepMs,
  retryDelayMs, viewerOfCredential, workerTimings, type AttemptFacts,
} from './rules.js'
import { Recoveries, type RecoveryStore } from './recoveries.js'
import { resealed } from './reseal.js'
import { SecretUnreadableError, signatureHeader, type Opened, type SecretBox } from './secrets.js'

// Deliveries (docs/architecture.md, "Webhooks"): each (event, endpoint) is a job in a BullMQ
// queue on the gateway's Redis, worked on by every instance that delivers. At least once: a
// job whose attempt's lock lapses (its instance died) runs again elsewhere, with the same
// `webhook-id`. Who may see the event is decided when the attempt is made, from the
// credential as it is then. At most `endpointConcurrency` attempts to one endpoint are in
// flight across instances (a lease per attempt in Redis); a job that finds its endpoint busy
// is parked: it sleeps in the delayed set, costing nothing, until an attempt that ends hands
// it its lease and wakes it (§D37).

export const QUEUE_NAME = 'deliveries'
/** Jobs kept after they end, so that a publisher's retry of an event finds its jobs (no second delivery) and operators can look. */
const KEEP_DONE_SECONDS = 86_400

export { retryDelayMs }

/** Nothing reads the queue's event stream (QueueEvents): a short one, not BullMQ's 10,000 entries. */
export const DELIVERY_QUEUE_STREAMS = { events: { maxLen: 1000 } }

export type DeliveryJobOptions = Parameters<Queue<DeliveryJob>['add']>[2] & { jobId: string }

/** A delivery job's options as enqueued (also by the bench's queue floor, which must match them). */
export function deliveryJobOptions(settings: Pick<DeliverySettings, 'retrySchedule'>, jobId: string): DeliveryJobOptions {
  return {
    jobId,
    attempts: attemptsOf(settings.retrySchedule),
    backoff: { type: 'schedule' },
    removeOnComplete: { age: KEEP_DONE_SECONDS },
    removeOnFail: { age: 7 * KEEP_DONE_SECONDS },
    // An attempt's failure is kept as its reason alone: no stack trace, no path of the gateway's files.
    stackTraceLimit: 0,
  }
}

/** The delivery worker's options but its connection and prefix (also the bench's queue floor's). */
export function deliveryWorkerOptions(settings: Pick<DeliverySettings, 'deliveryWorkers' | 'deliveryLockSeconds' | 'retrySchedule'>): Omit<WorkerOptions, 'connection'> {
  return {
    concurrency: settings.deliveryWorkers,
    ...workerTimings(settings.deliveryLockSeconds),
    // A job an instance died on runs again (at least once); only one that keeps killing instances fails.
    maxStalledCount: 10,
    settings: { backoffStrategy: (attemptsMade: number) => retryDelayMs(settings.retrySchedule, attemptsMade) },
  }
}

export interface DeliveryJob {
  /** The event's ULID (its id without `evt_`). */
  ulid: string
  brand: string
  mode: KeyMode
  endpointId: string
  /**
   * `event`: fanned out when it came; `redeliver`: asked for by the partner (sent even to a
   * disabled endpoint); `test`: a `webhook.test` event, carried in `json`; `recovery`: one
   * event of a recovery (recoveries.ts), one attempt.
   */
  kind: 'event' | 'redeliver' | 'test' | 'recovery'
  /** The recovery that sends it (kind `recovery`). */
  recoveryId?: string
  json?: string
  /** The publisher's trace context of the event, when it sent one: each attempt's span links to it. */
  traceparent?: string
}

/** Deliveries a partner asked for: they count against `events.maxManualDeliveriesPerEndpoint` until they finish. */
export const isManual = (kind: DeliveryJob['kind']): boolean => kind !== 'event'

export interface DeliverySettings {
  deliveryTimeoutMs: number
  retrySchedule: readonly number[]
  disableAfterHours: number
  endpointConcurrency: number
  deliveryWorkers: number
  deliveryLockSeconds: number
  allowPrivateTargets: boolean
  maxManualDeliveriesPerEndpoint: number
  maxRecoveryEvents: number
  /** How long events are kept (`events.retentionDays`): what an endpoint was due and received is kept as long. */
  retentionDays: number
}

export interface DeliveriesOptions {
  settings: DeliverySettings
  store: EndpointStore
  log: EventLog
  keys: KeyStore
  /** How long a credential's record is kept for attempts, when no change is heard (`keyCache`). */
  credentialCache: RecordsByIdOptions
  box: SecretBox
  logger: Logger
  /** BullMQ's connections (retries forever while Redis is away). */
  connection: () => RedisClient
  /** Whether this instance makes attempts (EVENTS_WORKER); every instance enqueues. */
  work: boolean
  userAgent: string
  /** Tests resolve names themselves. */
  lookup?: Lookup
  /** How long a parked delivery sleeps before it wakes by itself (tests of a lost wake-up shorten it). */
  sleepMs?: () => number
  now?: () => number
  onAttempt?: (outcome: AttemptOutcome, seconds: number) => void
  /** A signing secret that no configured key opens (docs/operations.md, "Changing WEBHOOKS_SECRET_KEY"). */
  onSecretUnreadable?: () => void
  /** Present when spans are exported: each attempt is a client span. */
  tracing?: Tracing
  /** Where recoveries are kept: with it, what each endpoint was due and received is written, and recoveries run. */
  recoveries?: RecoveryStore
}

/** How a shutdown waits for the queue to close (attempts handed back) before dropping its connections. */
const CLOSE_WAIT_MS = 5_000

const HAND_BACK = new Error('the instance is shutting down')
const TIMED_OUT = new Error('no answer within events.deliveryTimeoutMs')

/** The BlockedAddressError in an error's cause chain. */
function blockedIn(error: unknown): BlockedAddressError | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth += 1) {
    if (e instanceof BlockedAddressError) return e
  }
  return undefined
}

/** The queue as operators see it (/status and the gauges), refreshed every few seconds. */
export interface DeliverySnapshot {
  pending: number
  oldestPendingSeconds: number
  /** Endpoints that can receive (their credential active), by status. */
  endpoints: Record<EndpointStatus, number>
}

/** How often the snapshot is read from Redis. */
const SNAPSHOT_MS = 5_000
/** How long the snapshot trusts a credential's status before reading it again. */
const CREDENTIALS_SEEN_MS = 30_000

/** Endpoints whose signing secrets an instance keeps open between attempts. */
const OPENED_ENDPOINTS = 10_000

/** What a partner's request for a delivery came to. */
export type ManualQueued = 'queued' | 'full' | 'gone'

export class Deliveries {
  /** Undefined until first read (or while Redis does not answer). */
  snapshot: DeliverySnapshot | undefined
  private snapshotTimer: NodeJS.Timeout | undefined
  readonly queue: Queue<DeliveryJob>
  private worker: Worker<DeliveryJob> | undefined
  /** Connections to endpoints, kept alive between attempts (connections.ts). */
  private readonly outbound: EndpointConnections
  private readonly inFlight = new Set<AbortController>()
  /** Jobs whose lease the script writing their delivered attempt freed: `process` does not free it again. */
  private readonly released = new Set<string>()
  /** Wake-ups sent and not yet answered: a shutdown waits for them, else a lease handed over in its last attempts would sleep 10 to 15 minutes. */
  private readonly waking = new Set<Promise<unknown>>()
  private closing = false
  private readonly now: () => number
  private readonly connections: RedisClient[] = []
  private readonly ulids = new UlidFactory()
  /** A lease's length: the attempt's timeout and a grace. */
  private readonly leaseMs: number
  /** The longest a delivery lives: how long its manual count and its place in a park are kept. */
  readonly lifetimeMs: number
  private credentialsSeen = { at: 0, viewers: new Map<string, Promise<Viewer | undefined>>() }
  /** The endpoints' owners, read once until a change is heard (records-by-id.ts). */
  private readonly credentials: RecordsById
  /**
   * Signing secrets opened, by endpoint and sealed value: a sealed value never changes (a
   * rotation or a new key writes another), and opening one costs an attempt about 8 µs of
   * AES-GCM. They stay in this process's memory, where the key that opens them is anyway;
   * an endpoint deleted here drops its own.
   */
  private readonly opened = new LRUCache<string, Map<string, Opened>>({ max: OPENED_ENDPOINTS })
  /** Recoveries after an outage (with a RecoveryStore). */
  readonly recoveries: Recoveries | undefined
  private readonly retentionMs: number

  constructor(private readonly options: DeliveriesOptions) {
    this.now = options.now ?? Date.now
    const { settings } = options
    this.credentials = new RecordsById(options.keys, options.credentialCache)
    this.leaseMs = settings.deliveryTimeoutMs + LEASE_GRACE_MS
    this.lifetimeMs = deliveryLifetimeMs(settings.retrySchedule, settings.deliveryTimeoutMs)
    this.outbound = new EndpointConnections({
      timeoutMs: settings.deliveryTimeoutMs, allowPrivate: settings.allowPrivateTargets, ...(options.lookup === undefined ? {} : { lookup: options.lookup }),
    })
    this.queue = new Queue<DeliveryJob>(QUEUE_NAME, {
      connection: this.connection() as never, prefix: options.store.queuePrefix, streams: DELIVERY_QUEUE_STREAMS,
    })
    this.queue.on('error', (error) => options.logger.warn({ err: error }, 'webhook queue error'))
    this.retentionMs = settings.retentionDays * 86_400_000
    this.recoveries = options.recoveries === undefined ? undefined : new Recoveries({
      store: options.recoveries, queue: this.queue as never, jobOptions: (jobId) => this.jobOptions(jobId) as never,
      settings: { ...settings, retentionMs: this.retentionMs }, lifetimeMs: this.lifetimeMs, logger: options.logger, now: this.now,
    })
  }

  /**
   * The settings of a reloaded configuration (docs/operations.md, "Changing the
   * configuration"): what the next attempt, failure or request for a delivery reads. A reload
   * changes none of those fixed at start (src/webhooks/config.ts, `webhooksReload`).
   */
  reconfigure(settings: DeliverySettings): void {
    this.options.settings = settings
    // Connections opened before the reload are not kept past it.
    this.outbound.forgetAll()
    this.recoveries?.reconfigure({ ...settings, retentionMs: this.retentionMs })
  }

  private connection(): RedisClient {
    const client = this.options.connection()
    this.connections.push(client)
    return client
  }

  /** Reads the backlog and the endpoints that can receive, by status, into `snapshot`. */
  async refresh(): Promise<DeliverySnapshot> {
    const [{ pending, oldestSeconds }, endpoints] = await Promise.all([this.backlog(), this.countEndpoints()])
    this.snapshot = { pending, oldestPendingSeconds: Math.round(oldestSeconds), endpoints }
    return this.snapshot
  }

  /** Endpoints whose credential can receive (not suspended, revoked or expired), by status. */
  private async countEndpoints(): Promise<Record<EndpointStatus, number>> {
    if (this.now() - this.credentialsSeen.at > CREDENTIALS_SEEN_MS) this.credentialsSeen = { at: this.now(), viewers: new Map() }
    const seen = this.credentialsSeen.viewers
    const counts: Record<EndpointStatus, number> = { enabled: 0, disabled: 0 }
    const records = await this.options.store.all()
    const viewers = await Promise.all(records.map((record) => this.viewerOf(record.credentialId, seen)))
    records.forEach((record, i) => {
      if (viewers[i] !== undefined) counts[record.status] += 1
    })
    return counts
  }

  /** Starts this instance's workers (when it delivers) and the fan-out of stored events. */
  start(): void {
    this.options.log.subscribe((events) => this.fanOut(events))
    const refresh = (): void => {
      this.refresh().catch(() => {
        this.snapshot = undefined
      })
    }
    refresh()
    this.snapshotTimer = setInterval(refresh, SNAPSHOT_MS)
    this.snapshotTimer.unref()
    if (!this.options.work) return
    this.recoveries?.startSweeping()
    const { settings } = this.options
    this.worker = new Worker<DeliveryJob>(QUEUE_NAME, (job, token) => this.process(job, token), {
      connection: this.connection() as never,
      prefix: this.options.store.queuePrefix,
      ...deliveryWorkerOptions(settings),
    })
    this.worker.on('error', (error) => this.options.logger.warn({ err: error }, 'webhook worker error'))
  }

  private jobOptions(jobId: string): DeliveryJobOptions {
    return deliveryJobOptions(this.options.settings, jobId)
  }

  /**
   * Queues a delivery of each stored event to each enabled endpoint of its brand and mode
   * subscribed to its type, whose credential sees it now (not suspended, revoked or expired).
   * Run again for a publisher's copy of an event: the job ids are the same, so nothing is
   * queued twice while the first jobs are kept.
   */
  async fanOut(events: readonly LoggedEvent[]): Promise<void> {
    const jobs: { name: string; data: DeliveryJob; opts: DeliveryJobOptions }[] = []
    // What each endpoint was due, enabled or not: what a recovery chooses from (§D62).
    const due: { endpointId: string; ulid: string }[] = []
    const byPartition = new Map<string, Promise<EndpointRecord[]>>()
    const viewers = new Map<string, Promise<Viewer | undefined>>()
    for (const { event, brand, origin } of events) {
      const partition = `${brand} ${event.mode}`
      let endpoints = byPartition.get(partition)
      if (endpoints === undefined) {
        endpoints = this.options.store.ofPartition(brand, event.mode)
        byPartition.set(partition, endpoints)
      }
      const ulid = event.id.slice(EVENT_ID_PREFIX.length)
      const facts = { brand, mode: event.mode, type: event.type, propertyId: event.propertyId }
      for (const endpoint of await endpoints) {
        if (!endpoint.eventTypes.includes(event.type)) continue
        const viewer = await this.viewerOf(endpoint.credentialId, viewers)
        if (viewer === undefined || !this.options.log.types.sees(viewer, facts)) continue
        due.push({ endpointId: endpoint.id, ulid })
        if (endpoint.status !== 'enabled') continue
        const data: DeliveryJob = { ulid, brand, mode: event.mode, endpointId: endpoint.id, kind: 'event', ...(origin.traceparent === undefined ? {} : { traceparent: origin.traceparent }) }
        jobs.push({ name: event.type, data, opts: this.jobOptions(`${ulid}.${endpoint.id}`) })
      }
    }
    await this.recoveries?.store.recordDue(due, this.now(), this.retentionMs)
    if (jobs.length > 0) await this.queue.addBulk(jobs)
  }

  /** A new id for a delivery a partner asks for (`m.` and a ULID). */
  manualJobId(): string {
    return `m.${this.ulids.next(this.now()).text}`
  }

  /**
   * Admits `jobIds` (in order) against the endpoint's bound of deliveries a partner asked for
   * (`events.maxManualDeliveriesPerEndpoint`): how many were admitted, -1 when the endpoint is
   * gone. Each admitted id must then be queued as a manual delivery; it counts until it
   * finishes. The one place the bound is counted: `test`, `redeliver`, and recoveries.
   */
  admitManual(endpointId: string, jobIds: readonly string[]): Promise<number> {
    return this.options.store.admitManual(endpointId, jobIds, this.options.settings.maxManualDeliveriesPerEndpoint, this.now(), this.lifetimeMs)
  }

  /** Queues one delivery a partner asked for (redeliver, test), within the endpoint's bound. */
  async enqueueManual(data: DeliveryJob): Promise<ManualQueued> {
    const jobId = this.manualJobId()
    const admitted = await this.admitManual(data.endpointId, [jobId])
    if (admitted < 0) return 'gone'
    if (admitted === 0) return 'full'
    try {
      await this.queue.add(data.kind, data, this.jobOptions(jobId))
    } catch (error) {
      await this.options.store.finishManual(data.endpointId, jobId).catch(() => undefined)
      throw error
    }
    return 'queued'
  }

  /** What the credential that owns an endpoint sees now; undefined when it may see nothing (gone, suspended, revoked, expired). Read once per `seen`. */
  private viewerOf(credentialId: string, seen?: Map<string, Promise<Viewer | undefined>>): Promise<Viewer | undefined> {
    let viewer = seen?.get(credentialId)
    if (viewer === undefined) {
      viewer = this.credentials.get(credentialId).then((record) => viewerOfCredential(record, this.now()))
      seen?.set(credentialId, viewer)
    }
    return viewer
  }

  /** Deletes the endpoints of a revoked credential; their sleeping deliveries wake and end. */
  async removeEndpointsOf(credentialId: string): Promise<void> {
    const records = await this.options.store.list(credentialId)
    this.wake(await this.options.store.removeAllOf(credentialId))
    for (const record of records) {
      this.outbound.forgetUrl(record.url)
      this.opened.delete(record.id)
      await this.recoveries?.store.removeAllOf(record.id)
    }
  }

  /** Deletes one endpoint; its sleeping deliveries wake and end (queued deliveries to it are dropped). */
  async removeEndpoint(record: EndpointRecord): Promise<void> {
    this.wake(await this.options.store.remove(record))
    // No connection is kept to a deleted endpoint (another endpoint at its origin opens a new one).
    this.outbound.forgetUrl(record.url)
    this.opened.delete(record.id)
    await this.recoveries?.store.removeAllOf(record.id)
  }

  /** Moves sleeping deliveries to the queue's wait list. One that is not asleep (yet) wakes itself (`sleep`). */
  private wake(jobIds: readonly string[]): void {
    for (const id of jobIds) {
      const woken = this.queue.backend.promote(id).catch(() => undefined)
      this.waking.add(woken)
      void woken.finally(() => this.waking.delete(woken))
    }
  }

  private async process(job: Job<DeliveryJob>, token: string | undefined): Promise<string> {
    const { store, settings } = this.options
    const { endpointId, kind } = job.data
    // Shutting down: a job taken after the close began (the attempt this instance just handed
    // back, or the next in the queue, before its worker stopped taking jobs) goes back untouched
    // for another instance, rather than being attempted while the connections close.
    if (this.closing) return this.handBack(job, token)
    // The lease's holder is the job: after its instance died, the job run again finds its own lease.
    const holder = job.id as string
    const now = this.now()
    // The endpoint as it is when the lease is taken comes with the lease (one round trip).
    const acquired = await store.take(endpointId, holder, now, now + this.leaseMs, settings.endpointConcurrency, job.timestamp, this.lifetimeMs)
    this.wake(acquired.woken)
    if (!acquired.taken) return this.sleep(job, token)
    let finished = true
    let result: string | undefined
    let skipped = false
    try {
      // A recovery's delivery that was cancelled, or counted already (its instance died after), ends unsent.
      skipped = kind === 'recovery' && this.recoveries !== undefined && !(await this.recoveries.live(job.data, holder))
      result = skipped ? 'recovery ended' : await this.deliver(job, token, acquired.record)
      return result
    } catch (error) {
      finished = error instanceof UnrecoverableError || (!(error instanceof DelayedError) && isLastAttempt(job.attemptsMade, job.opts.attempts ?? 1))
      throw error
    } finally {
      const ended = this.now()
      // Freed already when a delivered attempt was written (`attempt`).
      if (!this.released.delete(holder)) this.wake(await store.release(endpointId, holder, ended, ended + this.leaseMs, settings.endpointConcurrency).catch(() => []))
      if (finished && isManual(kind)) await store.finishManual(endpointId, holder).catch(() => undefined)
      if (finished && kind === 'recovery') {
        await this.recoveries?.finished(job.data, holder, result, skipped)
          .catch((error: unknown) => this.options.logger.warn({ err: error, recoveryId: job.data.recoveryId }, 'recovery delivery not counted yet; the sweep counts it'))
      }
    }
  }

  /** Puts a job back as it was, ready at once and its attempt not counted, for another instance: this one is shutting down. */
  private async handBack(job: Job<DeliveryJob>, token: string | undefined): Promise<never> {
    await job.moveToDelayed(this.now(), token)
    throw new DelayedError()
  }

  /**
   * Parks a job whose endpoint has no lease free: it sleeps in the delayed set, costing Redis
   * nothing, until an attempt that ends hands it a lease and wakes it, or, should that wake-up
   * be lost with its instance, until it wakes by itself (rules.ts, `parkSleepMs`).
   */
  private async sleep(job: Job<DeliveryJob>, token: string | undefined): Promise<never> {
    await job.moveToDelayed(this.now() + (this.options.sleepMs ?? parkSleepMs)(), token)
    // A lease handed to it between the park and this move found it awake, and could not wake it.
    if (await this.options.store.holds(job.data.endpointId, job.id as string).catch(() => false)) this.wake([job.id as string])
    throw new DelayedError()
  }

  /** The checks of an attempt, then the attempt, with a lease of the endpoint held; `endpoint` as read when the lease was taken. */
  private async deliver(job: Job<DeliveryJob>, token: string | undefined, endpoint: EndpointRecord | undefined): Promise<string> {
    const data = job.data
    const eventId = `${EVENT_ID_PREFIX}${data.ulid}`
    // Deleted: its queued deliveries are dropped. Disabled: events of meanwhile are not sent later.
    if (endpoint === undefined) return 'endpoint deleted'
    // A recovery stops sending to an endpoint disabled meanwhile (by its partner, a 410, or its failures).
    if (endpoint.status !== 'enabled' && (data.kind === 'event' || data.kind === 'recovery')) return 'endpoint disabled'
    const viewer = await this.viewerOf(endpoint.credentialId)
    if (viewer === undefined || viewer.brand !== data.brand || viewer.mode !== data.mode) return 'credential sees nothing'
    const json = data.kind === 'test' ? data.json : await this.options.log.get(viewer, eventId)
    if (json === undefined) return 'event not visible'
    return this.attempt(job, token, endpoint, eventId, json)
  }

  /**
   * The secrets that sign now, opened; sealed again under the current key when they were not (a
   * key change). Throws SecretUnreadableError when no configured key opens the current secret;
   * a rotated-out one that none opens is left out (the partner rotated to have one that works).
   */
  private async secretsOf(endpoint: EndpointRecord, now: number): Promise<string[]> {
    const { box, store, logger } = this.options
    const kept = this.opened.get(endpoint.id)
    const signing: [string, Opened][] = []
    let opening = false
    for (const secret of endpoint.secrets.filter((s) => s.expiresAt === null || s.expiresAt > now)) {
      const open = kept?.get(secret.sealed)
      if (open !== undefined) {
        signing.push([secret.sealed, open])
        continue
      }
      try {
        signing.push([secret.sealed, box.open(secret.sealed, secretContext(endpoint.id))])
        opening = true
      } catch (error) {
        if (secret.expiresAt === null || !(error instanceof SecretUnreadableError)) throw error
        this.options.onSecretUnreadable?.()
        logger.error({ endpointId: endpoint.id, credentialId: endpoint.credentialId }, 'webhook signing secret unreadable: no configured key opens the rotated-out secret; deliveries are signed with the current one alone')
      }
    }
    // Kept anew when one was opened: the values that sign now, and no other.
    if (opening) this.opened.set(endpoint.id, new Map(signing))
    const opened = signing.map(([, o]) => o)
    if (opened.some((o) => !o.current)) {
      await store.update(endpoint.id, (record) => resealed(record, box))
        .catch((error: unknown) => logger.warn({ err: error, endpointId: endpoint.id }, 'webhook signing secret not sealed again under WEBHOOKS_SECRET_KEY; retried at its next use'))
    }
    return opened.map((o) => o.plain.toString('utf8'))
  }

  private async attempt(job: Job<DeliveryJob>, token: string | undefined, endpoint: EndpointRecord, eventId: string, json: string): Promise<string> {
    const { store, logger } = this.options
    const started = this.now()
    const timestamp = Math.floor(started / 1000)
    let secrets: string[]
    try {
      secrets = await this.secretsOf(endpoint, started)
    } catch (error) {
      if (error instanceof SecretUnreadableError) return this.unreadable(job, endpoint, eventId, started)
      throw error
    }
    // A close that began while this attempt was being prepared found nothing to abort: it goes back unsent.
    if (this.closing) return this.handBack(job, token)
    const span = this.options.tracing?.startLinkedClientSpan('POST webhook', job.data.traceparent)
    const controller = new AbortController()
    this.inFlight.add(controller)
    const timer = setTimeout(() => controller.abort(TIMED_OUT), this.options.settings.deliveryTimeoutMs)
    let status: number | null = null
    let outcome: AttemptOutcome
    let failure: unknown
    try {
      const answer = await request(endpoint.url, {
        method: 'POST',
        dispatcher: this.outbound.of(endpoint.url),
        signal: controller.signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': this.options.userAgent,
          'webhook-id': eventId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(secrets, eventId, timestamp, json),
        },
        body: json,
      })
      status = answer.statusCode
      await answer.body.dump({ limit: 64 * 1024 }).catch(() => undefined)
      outcome = outcomeOfStatus(status)
    } catch (error) {
      if (controller.signal.reason === HAND_BACK) {
        span?.setAttribute('gateway.webhook.outcome', 'handed_back')
        span?.end()
        // Shutting down: the job goes back as it was, its attempt not counted; another instance (or this one, restarted) makes it.
        return this.handBack(job, token)
      }
      failure = error
      outcome = blockedIn(error) !== undefined ? 'blocked' : controller.signal.reason === TIMED_OUT ? 'timeout' : 'failed'
    } finally {
      clearTimeout(timer)
      this.inFlight.delete(controller)
    }
    const ended = this.now()
    const durationMs = ended - started
    const attempt: Attempt = { eventId, attempt: job.attemptsMade + 1, at: new Date(started).toISOString(), status, outcome, durationMs }
    this.options.onAttempt?.(outcome, durationMs / 1000)
    if (span !== undefined) {
      // Ids, outcome and status only: never the URL's query, a secret, a signature or a body.
      span.setAttributes({
        'gateway.webhook.event_id': eventId, 'gateway.webhook.endpoint_id': endpoint.id, 'gateway.webhook.attempt': attempt.attempt, 'gateway.webhook.outcome': outcome,
        ...(status === null ? {} : { 'http.response.status_code': status }),
      })
      if (outcome !== 'delivered') span.setStatus({ code: SpanStatusCode.ERROR })
      span.end()
    }
    logger.info({ eventId, endpointId: endpoint.id, attempt: attempt.attempt, outcome, status, durationMs, ...(failure === undefined ? {} : { reason: (failure as Error).message }) }, 'webhook attempt')
    // The bookkeeping changes the endpoint as it is now, and only if its partner has not changed it since the attempt began.
    const facts: AttemptFacts = { url: endpoint.url, started, ended }
    if (outcome === 'delivered') {
      // The attempt, that its event was received (a recovery of failed events leaves it out), and the record as it is now when it was failing, in one round trip.
      const received = job.data.kind === 'test' ? undefined : this.recoveries?.store.received(endpoint.id, job.data.ulid, ended, this.retentionMs)
      // The lease is freed by the same call when the endpoint was not failing (nothing more to write for it).
      const holder = job.id as string
      const written = await store.recordDelivered(endpoint.id, attempt, received, { holder, now: ended, until: ended + this.leaseMs, limit: this.options.settings.endpointConcurrency })
      if (written.released) {
        this.released.add(holder)
        this.wake(written.woken)
      }
      // Written only when it was failing (the record as just read says so): the change is made again on the record as it is then.
      if (written.record !== undefined && afterSuccess(written.record) !== undefined) await store.update(endpoint.id, afterSuccess)
      return outcome
    }
    await store.recordAttempt(endpoint.id, attempt)
    if (outcome === 'gone') {
      await store.update(endpoint.id, (record) => afterGone(record, facts))
      throw new UnrecoverableError('the endpoint answered 410 Gone')
    }
    let disabled = false
    await store.update(endpoint.id, (record) => {
      const next = afterFailure(record, facts, this.options.settings.disableAfterHours * 3_600_000)
      disabled = next?.status === 'disabled'
      return next
    })
    if (disabled) throw new UnrecoverableError('the endpoint failed throughout events.disableAfterHours: disabled')
    throw new Error(`attempt ${outcome}${status === null ? '' : ` (HTTP ${status})`}`)
  }

  /** A signing secret no configured key opens: the attempt fails, visibly (docs/runbooks.md, "GatewayWebhookSecretUnreadable"), and is retried on the schedule. */
  private async unreadable(job: Job<DeliveryJob>, endpoint: EndpointRecord, eventId: string, started: number): Promise<never> {
    const attempt: Attempt = { eventId, attempt: job.attemptsMade + 1, at: new Date(started).toISOString(), status: null, outcome: 'failed', durationMs: 0 }
    this.options.onSecretUnreadable?.()
    this.options.onAttempt?.('failed', 0)
    this.options.logger.error(
      { eventId, endpointId: endpoint.id, credentialId: endpoint.credentialId, attempt: attempt.attempt },
      'webhook signing secret unreadable: no configured key (WEBHOOKS_SECRET_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS) opens it; nothing was sent',
    )
    await this.options.store.recordAttempt(endpoint.id, attempt)
    throw new Error('attempt failed: the signing secret cannot be opened')
  }

  /**
   * Deliveries pending (queued, waiting for a retry or a lease, or in flight), and how long the
   * oldest one ready to be attempted has waited since it became ready: a retry waiting for its
   * time is not late, so it does not count (the backlog alert would otherwise fire on every retry).
   */
  async backlog(): Promise<{ pending: number; oldestSeconds: number }> {
    const counts = await this.queue.getJobCounts('wait', 'delayed', 'active', 'prioritized')
    const pending = Object.values(counts).reduce((a, b) => a + b, 0)
    const [oldest] = await this.queue.getJobs(['wait'], 0, 0, true)
    if (oldest === undefined) return { pending, oldestSeconds: 0 }
    const readySince = oldest.attemptsMade > 0 ? (oldest.processedOn ?? oldest.timestamp) + oldest.delay : oldest.timestamp
    return { pending, oldestSeconds: Math.max(0, (this.now() - readySince) / 1000) }
  }

  /** Stops working: attempts in flight are handed back to the queue (not counted), then the queue's connections close. */
  async close(): Promise<void> {
    this.closing = true
    clearInterval(this.snapshotTimer)
    this.recoveries?.stop()
    for (const controller of this.inFlight) controller.abort(HAND_BACK)
    // Handing back needs Redis; without it, stop waiting: the jobs' locks lapse and another instance takes them.
    const closed = (async () => {
      await this.worker?.close()
      await Promise.all(this.waking)
      await this.queue.close()
    })().catch((error: unknown) => this.options.logger.warn({ err: error }, 'webhook queue not closed cleanly'))
    let timer: NodeJS.Timeout | undefined
    await Promise.race([closed, new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_WAIT_MS) })])
    clearTimeout(timer)
    await this.outbound.destroy()
    for (const client of this.connections) client.disconnect()
  }

  get isClosing(): boolean {
    return this.closing
  }
}
