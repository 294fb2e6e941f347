import { randomInt } from 'node:crypto'
import { SpanStatusCode } from '@opentelemetry/api'
import { DelayedError, Queue, UnrecoverableError, Worker, type Job } from 'bullmq'
import type { Logger } from 'pino'
import { Agent, request } from 'undici'
import type { EventLog, LoggedEvent } from '../events/log.js'
import type { Viewer } from '../events/types.js'
import type { KeyStore } from '../keys/store.js'
import type { KeyMode } from '../keys/principal.js'
import { EVENT_ID_PREFIX } from '../routes/policy.js'
import type { RedisClient } from '../redis.js'
import type { Tracing } from '../tracing/tracing.js'
import { BlockedAddressError, guardedConnector, type Lookup } from './addresses.js'
import type { Attempt, AttemptOutcome, EndpointRecord, EndpointStore } from './endpoints.js'
import { signatureHeader, type SecretBox } from './secrets.js'

// Deliveries (docs/architecture.md, "Webhooks"): each (event, endpoint) is a job in a BullMQ
// queue on the gateway's Redis, worked on by every instance that delivers. At least once: a
// job whose attempt's lock lapses (its instance died) runs again elsewhere, with the same
// `webhook-id`. Who may see the event is decided when the attempt is made, from the
// credential as it is then. At most `endpointConcurrency` attempts to one endpoint are in
// flight across instances (a lease per attempt in Redis); a job that finds its endpoint busy
// waits a moment in the delayed set, so it holds no worker from other endpoints' jobs.

export const QUEUE_NAME = 'deliveries'
/** Jobs kept after they end, so that a publisher's retry of an event finds its jobs (no second delivery) and operators can look. */
const KEEP_DONE_SECONDS = 86_400
/** A busy endpoint's job comes back after this long, plus some jitter. */
const BUSY_DELAY_MS = 200
/** A lease outlives the attempt by this much, so only a dead instance's lease lapses. */
const LEASE_GRACE_MS = 30_000

export interface DeliveryJob {
  /** The event's ULID (its id without `evt_`). */
  ulid: string
  brand: string
  mode: KeyMode
  endpointId: string
  /** `event`: fanned out when it came; `redeliver`: asked for by the partner (sent even to a disabled endpoint); `test`: a `webhook.test` event, carried in `json`. */
  kind: 'event' | 'redeliver' | 'test'
  json?: string
  /** The publisher's trace context of the event, when it sent one: each attempt's span links to it. */
  traceparent?: string
}

export interface DeliverySettings {
  deliveryTimeoutMs: number
  retrySchedule: readonly number[]
  disableAfterHours: number
  endpointConcurrency: number
  deliveryWorkers: number
  deliveryLockSeconds: number
  allowPrivateTargets: boolean
}

export interface DeliveriesOptions {
  settings: DeliverySettings
  store: EndpointStore
  log: EventLog
  keys: KeyStore
  box: SecretBox
  logger: Logger
  /** BullMQ's connections (retries forever while Redis is away). */
  connection: () => RedisClient
  /** Whether this instance makes attempts (EVENTS_WORKER); every instance enqueues. */
  work: boolean
  userAgent: string
  /** Tests resolve names themselves. */
  lookup?: Lookup
  now?: () => number
  onAttempt?: (outcome: AttemptOutcome, seconds: number) => void
  /** Present when spans are exported: each attempt is a client span. */
  tracing?: Tracing
}

/** The delay before retry `attemptsMade` (1 after the first failure): the schedule's entry, ±10 %. */
export function retryDelayMs(schedule: readonly number[], attemptsMade: number): number {
  const seconds = schedule[Math.min(attemptsMade, schedule.length) - 1] ?? 0
  return Math.round(seconds * 1000 * (0.9 + Math.random() * 0.2))
}

/** How long a shutdown waits for the queue to close (attempts handed back) before dropping its connections. */
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
  endpoints: Record<'enabled' | 'disabled', number>
}

/** How often the snapshot is read from Redis. */
const SNAPSHOT_MS = 5_000

export class Deliveries {
  /** Undefined until first read (or while Redis does not answer). */
  snapshot: DeliverySnapshot | undefined
  private snapshotTimer: NodeJS.Timeout | undefined
  readonly queue: Queue<DeliveryJob>
  private worker: Worker<DeliveryJob> | undefined
  private readonly agent: Agent
  private readonly inFlight = new Set<AbortController>()
  private closing = false
  private readonly now: () => number
  private readonly connections: RedisClient[] = []

  constructor(private readonly options: DeliveriesOptions) {
    this.now = options.now ?? Date.now
    const { settings } = options
    this.agent = new Agent({
      connect: guardedConnector({ allowPrivate: settings.allowPrivateTargets, connectTimeoutMs: settings.deliveryTimeoutMs, ...(options.lookup === undefined ? {} : { lookup: options.lookup }) }),
      headersTimeout: settings.deliveryTimeoutMs,
      bodyTimeout: settings.deliveryTimeoutMs,
      // A partner's endpoint is not ours to hold open: one connection per attempt.
      pipelining: 0,
    })
    this.queue = new Queue<DeliveryJob>(QUEUE_NAME, { connection: this.connection() as never, prefix: options.store.queuePrefix })
    this.queue.on('error', (error) => options.logger.warn({ err: error }, 'webhook queue error'))
  }

  private connection(): RedisClient {
    const client = this.options.connection()
    this.connections.push(client)
    return client
  }

  /** Reads the backlog and the endpoints by status into `snapshot`. */
  async refresh(): Promise<DeliverySnapshot> {
    const [{ pending, oldestSeconds }, endpoints] = await Promise.all([this.backlog(), this.options.store.countByStatus()])
    this.snapshot = { pending, oldestPendingSeconds: Math.round(oldestSeconds), endpoints }
    return this.snapshot
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
    const { settings } = this.options
    const lockMs = Math.round(settings.deliveryLockSeconds * 1000)
    this.worker = new Worker<DeliveryJob>(QUEUE_NAME, (job, token) => this.process(job, token), {
      connection: this.connection() as never,
      prefix: this.options.store.queuePrefix,
      concurrency: settings.deliveryWorkers,
      lockDuration: lockMs,
      stalledInterval: lockMs,
      // A job an instance died on runs again (at least once); only one that keeps killing instances fails.
      maxStalledCount: 10,
      settings: { backoffStrategy: (attemptsMade: number) => retryDelayMs(settings.retrySchedule, attemptsMade) },
    })
    this.worker.on('error', (error) => this.options.logger.warn({ err: error }, 'webhook worker error'))
  }

  private jobOptions(jobId: string | undefined): Parameters<Queue<DeliveryJob>['add']>[2] {
    return {
      ...(jobId === undefined ? {} : { jobId }),
      attempts: this.options.settings.retrySchedule.length + 1,
      backoff: { type: 'schedule' },
      removeOnComplete: { age: KEEP_DONE_SECONDS },
      removeOnFail: { age: 7 * KEEP_DONE_SECONDS },
    }
  }

  /**
   * Queues a delivery of each stored event to each enabled endpoint of its brand and mode
   * subscribed to its type. Run again for a publisher's copy of an event: the job ids are the
   * same, so nothing is queued twice while the first jobs are kept.
   */
  async fanOut(events: readonly LoggedEvent[]): Promise<void> {
    const jobs: { name: string; data: DeliveryJob; opts: ReturnType<Deliveries['jobOptions']> }[] = []
    const byPartition = new Map<string, Promise<EndpointRecord[]>>()
    for (const { event, brand, origin } of events) {
      const partition = `${brand} ${event.mode}`
      let endpoints = byPartition.get(partition)
      if (endpoints === undefined) {
        endpoints = this.options.store.ofPartition(brand, event.mode)
        byPartition.set(partition, endpoints)
      }
      const ulid = event.id.slice(EVENT_ID_PREFIX.length)
      for (const endpoint of await endpoints) {
        if (endpoint.status !== 'enabled' || !endpoint.eventTypes.includes(event.type)) continue
        const data: DeliveryJob = { ulid, brand, mode: event.mode, endpointId: endpoint.id, kind: 'event', ...(origin.traceparent === undefined ? {} : { traceparent: origin.traceparent }) }
        jobs.push({ name: event.type, data, opts: this.jobOptions(`${ulid}.${endpoint.id}`) })
      }
    }
    if (jobs.length > 0) await this.queue.addBulk(jobs)
  }

  /** Queues one delivery asked for by a partner (redeliver, test). */
  async enqueue(data: DeliveryJob): Promise<void> {
    await this.queue.add(data.kind, data, this.jobOptions(undefined))
  }

  /** What the credential that owns an endpoint sees now; undefined when it may see nothing (gone, suspended, revoked, expired). */
  private async viewerOf(credentialId: string): Promise<Viewer | undefined> {
    const keys = this.options.keys
    const record = credentialId.startsWith('cli_') ? await keys.findGrantById(credentialId) : await keys.findById(credentialId)
    if (record === null || record.status !== 'active') return undefined
    if ('expiresAt' in record && record.expiresAt !== null && Date.parse(record.expiresAt) <= this.now()) return undefined
    return {
      brand: record.brand, mode: record.mode,
      properties: record.properties === '*' ? 'all' : new Set(record.properties),
      scopes: record.scopes === '*' ? 'all' : new Set(record.scopes),
    }
  }

  private async process(job: Job<DeliveryJob>, token: string | undefined): Promise<string> {
    const data = job.data
    const eventId = `${EVENT_ID_PREFIX}${data.ulid}`
    const endpoint = await this.options.store.get(data.endpointId)
    // Deleted: its queued deliveries are dropped. Disabled: events of meanwhile are not sent later.
    if (endpoint === undefined) return 'endpoint deleted'
    if (endpoint.status !== 'enabled' && data.kind === 'event') return 'endpoint disabled'
    const viewer = await this.viewerOf(endpoint.credentialId)
    if (viewer === undefined || viewer.brand !== data.brand || viewer.mode !== data.mode) return 'credential sees nothing'
    const json = data.kind === 'test' ? data.json : await this.options.log.get(viewer, eventId)
    if (json === undefined) return 'event not visible'
    const holder = `${job.id ?? ''} ${token ?? ''}`
    const started = this.now()
    const timeoutMs = this.options.settings.deliveryTimeoutMs
    if (!await this.options.store.acquire(endpoint.id, holder, started, started + timeoutMs + LEASE_GRACE_MS, this.options.settings.endpointConcurrency)) {
      await job.moveToDelayed(started + BUSY_DELAY_MS + randomInt(BUSY_DELAY_MS), token)
      throw new DelayedError()
    }
    try {
      return await this.attempt(job, token, endpoint, eventId, json)
    } finally {
      await this.options.store.release(endpoint.id, holder).catch(() => undefined)
    }
  }

  private async attempt(job: Job<DeliveryJob>, token: string | undefined, endpoint: EndpointRecord, eventId: string, json: string): Promise<string> {
    const { store, box, logger } = this.options
    const started = this.now()
    const timestamp = Math.floor(started / 1000)
    const secrets = endpoint.secrets.filter((s) => s.expiresAt === null || s.expiresAt > started).map((s) => box.open(s.sealed).toString('utf8'))
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
        dispatcher: this.agent,
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
      outcome = status >= 200 && status < 300 ? 'delivered' : status === 410 ? 'gone' : 'failed'
    } catch (error) {
      if (controller.signal.reason === HAND_BACK) {
        span?.setAttribute('gateway.webhook.outcome', 'handed_back')
        span?.end()
        // Shutting down: the job goes back as it was, its attempt not counted; another instance (or this one, restarted) makes it.
        await job.moveToDelayed(this.now(), token)
        throw new DelayedError()
      }
      failure = error
      outcome = blockedIn(error) !== undefined ? 'blocked' : controller.signal.reason === TIMED_OUT ? 'timeout' : 'failed'
    } finally {
      clearTimeout(timer)
      this.inFlight.delete(controller)
    }
    const durationMs = this.now() - started
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
    await store.recordAttempt(endpoint.id, attempt)
    if (outcome === 'delivered') {
      if (endpoint.failingSince !== null) await this.update(endpoint.id, (e) => ({ ...e, failingSince: null }))
      return outcome
    }
    if (outcome === 'gone') {
      await this.update(endpoint.id, (e) => ({ ...e, status: 'disabled', disabledReason: 'gone', updatedAt: new Date(this.now()).toISOString() }))
      throw new UnrecoverableError('the endpoint answered 410 Gone: disabled')
    }
    const failingSince = endpoint.failingSince ?? started
    const disable = started - failingSince >= this.options.settings.disableAfterHours * 3_600_000
    await this.update(endpoint.id, (e) => ({
      ...e,
      failingSince: e.failingSince ?? started,
      ...(disable ? { status: 'disabled' as const, disabledReason: 'failing' as const, updatedAt: new Date(this.now()).toISOString() } : {}),
    }))
    if (disable) throw new UnrecoverableError('the endpoint failed throughout events.disableAfterHours: disabled')
    throw new Error(`attempt ${outcome}${status === null ? '' : ` (HTTP ${status})`}`)
  }

  /** Changes the endpoint as it is now in Redis (a PATCH may have come meanwhile). */
  private async update(id: string, change: (record: EndpointRecord) => EndpointRecord): Promise<void> {
    const current = await this.options.store.get(id)
    if (current !== undefined) await this.options.store.save(change(current))
  }

  /**
   * Deliveries pending (queued, waiting for a retry, or in flight), and how long the oldest one
   * ready to be attempted has waited since it became ready: a retry waiting for its time is not
   * late, so it does not count (the backlog alert would otherwise fire on every retry).
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
    for (const controller of this.inFlight) controller.abort(HAND_BACK)
    // Handing back needs Redis; without it, stop waiting: the jobs' locks lapse and another instance takes them.
    const closed = (async () => {
      await this.worker?.close()
      await this.queue.close()
    })().catch((error: unknown) => this.options.logger.warn({ err: error }, 'webhook queue not closed cleanly'))
    let timer: NodeJS.Timeout | undefined
    await Promise.race([closed, new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_WAIT_MS) })])
    clearTimeout(timer)
    await this.agent.destroy()
    for (const client of this.connections) client.disconnect()
  }

  get isClosing(): boolean {
    return this.closing
  }
}
