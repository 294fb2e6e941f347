import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { DeliverySnapshot } from '../webhooks/deliveries.js'
import type { AttemptOutcome } from '../webhooks/endpoints.js'
import type { IdempotencyOutcome } from '../idempotency/records.js'
import type { CacheResult } from '../properties/cache.js'
import type { UpstreamOutcome } from '../upstream/errors.js'
import type { BreakerState } from '../upstream/upstream.js'
import { CounterSeries, HistogramSeries, type CounterRecord, type HistogramRecord } from './series.js'

// The gateway's metrics. Their names and labels are a contract with operators
// (docs/operations.md, "Metrics"): add, never rename. Each gateway has its own registry, so
// several can live in one process (tests) without sharing counters.

/** What became of an event sent to the ingest endpoint. */
export type IngestMetricOutcome = 'accepted' | 'duplicate' | 'dropped' | 'refused'

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, halfOpen: 1, open: 2 }

// From 100 µs, so a cached answer's latency shows (prom-client's default buckets start at
// 5 ms); up to a few seconds, the PMS's long tail.
export const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

const NOT_CALLED: ReadonlySet<UpstreamOutcome> = new Set(['circuit_open', 'overloaded', 'share_full', 'not_sent'])

/** A request's records in the per-request series. */
interface RequestRecords {
  count: CounterRecord
  duration: HistogramRecord
}

export class Metrics {
  readonly registry = new Registry()
  // Touched on every request: the lean series of series.ts.
  private readonly requests: CounterSeries
  private readonly requestDuration: HistogramSeries
  /** By route, method, status, then code (`requestRecords`). */
  private readonly requestRecordsByRoute = new Map<string, Map<string, Map<number, Map<string, RequestRecords>>>>()
  private readonly cacheRequests: CounterSeries
  private readonly upstreamRequests: CounterSeries
  private readonly upstreamDuration: HistogramSeries
  private readonly upstreamCuts: Counter<'upstream' | 'reason'>
  // On every refused request too (rejections must be cheap): the lean series as well.
  private readonly authFailures: CounterSeries
  readonly rateLimited: Counter
  readonly rateLimiterFailOpen: Counter
  readonly rateLimitLeased: Counter
  private readonly jwksRefreshes: Counter<'issuer' | 'result'>
  private readonly idempotencyOutcomes: CounterSeries
  readonly shedRequests: Counter
  private readonly deprecatedRequests: Counter<'route'>
  private readonly configInfo: Gauge<'hash'>
  private readonly configReloads: Counter<'outcome'>
  readonly traceSpansExported: Counter
  readonly traceSpansDropped: Counter<'reason'>
  private readonly eventsIngested: Counter<'publisher' | 'type' | 'outcome'>
  private readonly webhookAttempts: CounterSeries
  private readonly webhookAttemptSeconds: Histogram
  readonly webhookSecretUnreadable: Counter
  readonly requestLogEntries: Counter
  readonly requestLogDropped: Counter<'reason'>
  readonly requestLogFlushSeconds: Histogram
  private webhookSnapshot: (() => DeliverySnapshot | undefined) | undefined
  private readonly breakers = new Map<string, () => BreakerState>()
  private redisUp: (() => boolean) | undefined
  private healthy: (() => boolean) | undefined
  private shedding: (() => boolean) | undefined

  constructor() {
    collectDefaultMetrics({ register: this.registry })
    this.requests = new CounterSeries('gateway_http_requests_total', 'Requests answered, by route, method, status and error code', this.registry)
    this.requestDuration = new HistogramSeries('gateway_http_request_duration_seconds', 'Time to answer a request', DURATION_BUCKETS, this.registry)
    // Counted on every call to an upstream and every attempt: series of our own, as the requests' (series.ts).
    this.upstreamRequests = new CounterSeries('gateway_upstream_requests_total', 'Calls to an upstream, by outcome', this.registry)
    this.upstreamDuration = new HistogramSeries('gateway_upstream_request_duration_seconds', 'Time of a call to an upstream', DURATION_BUCKETS, this.registry)
    this.upstreamCuts = new Counter({
      name: 'gateway_upstream_calls_cut_total', help: 'Streamed answers of a declared service that ended before their end, by why',
      labelNames: ['upstream', 'reason'], registers: [this.registry],
    })
    const breakers = this.breakers
    new Gauge({
      name: 'gateway_circuit_breaker_state', help: 'Circuit breaker state: 0 closed, 1 half-open, 2 open',
      labelNames: ['upstream'], registers: [this.registry],
      collect() {
        // Only the upstreams in force: one a reload removed leaves the series.
        this.reset()
        for (const [upstream, state] of breakers) this.set({ upstream }, BREAKER_VALUE[state()])
      },
    })
    this.cacheRequests = new CounterSeries('gateway_cache_requests_total', 'Read-cache lookups, by result', this.registry)
    this.authFailures = new CounterSeries('gateway_auth_failures_total', 'Requests refused by authentication, by error code', this.registry)
    this.rateLimited = new Counter({
      name: 'gateway_rate_limited_total', help: 'Requests refused with 429 RATE_LIMITED', registers: [this.registry],
    })
    this.rateLimiterFailOpen = new Counter({
      name: 'gateway_rate_limiter_fail_open_total', help: 'Requests let through because Redis could not answer the limiter',
      registers: [this.registry],
    })
    this.rateLimitLeased = new Counter({
      name: 'gateway_rate_limit_leased_total', help: 'Quota units this instance leased from Redis (each admits one request)',
      registers: [this.registry],
    })
    this.jwksRefreshes = new Counter({
      name: 'gateway_jwks_refresh_total', help: 'Fetches of a token issuer\'s signing keys (JWKS), by result (ok, error)',
      labelNames: ['issuer', 'result'], registers: [this.registry],
    })
    this.idempotencyOutcomes = new CounterSeries('gateway_idempotency_total',
      'POST and PATCH requests with an Idempotency-Key, by what their record did: stored (the answer kept), replayed, in_use (409), reused (422), released (not kept; a retry is forwarded again)',
      this.registry)
    this.eventsIngested = new Counter({
      name: 'gateway_events_ingested_total',
      help: 'Events publishers sent to POST /events, by publisher, internal type (`other` for one the config does not name) and outcome: accepted, duplicate (a copy, nothing stored), dropped (no public type maps it), refused (its request was refused)',
      labelNames: ['publisher', 'type', 'outcome'], registers: [this.registry],
    })
    // Read when scraped, from the same state /status and /v1/health report.
    const gauge = (name: string, help: string, read: () => (() => boolean) | undefined): void => {
      new Gauge({
        name, help, registers: [this.registry],
        collect() {
          const value = read()
          if (value !== undefined) this.set(value() ? 1 : 0)
        },
      })
    }
    gauge('gateway_redis_up', 'Whether this instance reaches Redis: 1 up, 0 down', () => this.redisUp)
    gauge('gateway_healthy', 'Whether /v1/health answers healthy on this instance: 1 healthy, 0 unhealthy (Redis, event loop, draining)', () => this.healthy)
    gauge('gateway_load_shedding', 'Whether this instance sheds load now (503 to every API request): 1 shedding, 0 not', () => this.shedding)
    this.webhookAttempts = new CounterSeries('gateway_webhook_attempts_total',
      'Webhook delivery attempts by outcome: delivered (2xx), failed (another status, a redirect, a refused connection), blocked (an internal address), gone (410), timeout',
      this.registry)
    this.webhookSecretUnreadable = new Counter({
      name: 'gateway_webhook_secret_unreadable_total',
      help: 'Webhook signing secrets (and kept answers that show one) that no configured key (WEBHOOKS_SECRET_KEY, WEBHOOKS_SECRET_KEY_PREVIOUS) opens, each time one is needed: the attempt fails, the replay is 503',
      registers: [this.registry],
    })
    this.webhookAttemptSeconds = new Histogram({
      name: 'gateway_webhook_attempt_duration_seconds', help: 'How long a webhook delivery attempt took, to its answer or its failure',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30], registers: [this.registry],
    })
    this.requestLogEntries = new Counter({
      name: 'gateway_request_log_entries_total', help: 'Request log entries written to Redis by this instance', registers: [this.registry],
    })
    this.requestLogDropped = new Counter({
      name: 'gateway_request_log_dropped_total', help: 'Request log entries dropped, by why: buffer_full (the buffer held requestLog.bufferMax), redis (Redis away or refusing the write)',
      labelNames: ['reason'], registers: [this.registry],
    })
    this.requestLogFlushSeconds = new Histogram({
      name: 'gateway_request_log_flush_seconds', help: 'How long a write of the request log\'s buffer to Redis took',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: [this.registry],
    })
    // From the deliveries' snapshot (refreshed every few seconds), not a Redis read per scrape.
    const snapshotOf = (): DeliverySnapshot | undefined => this.webhookSnapshot?.()
    const snapshotGauge = (name: string, help: string, labelNames: string[], set: (gauge: Gauge, snapshot: DeliverySnapshot) => void): void => {
      new Gauge({
        name, help, labelNames, registers: [this.registry],
        collect() {
          const snapshot = snapshotOf()
          if (snapshot !== undefined) set(this, snapshot)
        },
      })
    }
    snapshotGauge('gateway_webhook_pending', 'Webhook deliveries queued, waiting for a retry or in flight', [], (g, s) => g.set(s.pending))
    snapshotGauge('gateway_webhook_oldest_pending_seconds', 'How long the oldest queued webhook delivery has waited since it was queued', [], (g, s) => g.set(s.oldestPendingSeconds))
    snapshotGauge('gateway_webhook_endpoints', 'Webhook endpoints that can receive (their credential active: not suspended, revoked or expired), by status: enabled, disabled', ['status'], (g, s) => {
      for (const [status, count] of Object.entries(s.endpoints)) g.set({ status }, count)
    })
    this.deprecatedRequests = new Counter({
      name: 'gateway_deprecated_requests_total', help: 'Requests to a deprecated route from its `since`, retired ones included, by route',
      labelNames: ['route'], registers: [this.registry],
    })
    this.configInfo = new Gauge({
      name: 'gateway_config_info', help: 'The configuration in force: its file\'s content hash (value 1)', labelNames: ['hash'], registers: [this.registry],
    })
    this.configReloads = new Counter({
      name: 'gateway_config_reloads_total', help: 'Reloads of the configuration, by outcome: applied, unchanged, refused', labelNames: ['outcome'], registers: [this.registry],
    })
    this.shedRequests = new Counter({
      name: 'gateway_shed_requests_total', help: 'Requests answered 503 because the instance was overloaded', registers: [this.registry],
    })
    this.traceSpansExported = new Counter({
      name: 'gateway_trace_spans_exported_total', help: 'Spans the trace collector accepted', registers: [this.registry],
    })
    this.traceSpansDropped = new Counter({
      name: 'gateway_trace_spans_dropped_total', help: 'Spans lost: queue_full (the export queue was full) or export_failed (the collector refused them or could not be reached)',
      labelNames: ['reason'], registers: [this.registry],
    })
  }

  /** Events a publisher sent to the ingest endpoint (docs/operations.md, "Events"). */
  eventIngested(publisher: string, type: string, outcome: IngestMetricOutcome, count = 1): void {
    this.eventsIngested.inc({ publisher, type, outcome }, count)
  }

  idempotency(route: string, outcome: IdempotencyOutcome): void {
    this.idempotencyOutcomes.inc(`${route} ${outcome}`, () => ({ route, outcome }))
  }

  /** A request to a deprecated route (docs/operations.md, "Deprecating, retiring and moving a route"). */
  deprecatedRequest(route: string): void {
    this.deprecatedRequests.inc({ route })
  }

  /** A reload's outcome (none at start), and the hash of the configuration then in force. */
  configReload(outcome: 'applied' | 'unchanged' | 'refused' | undefined, hash: string): void {
    if (outcome !== undefined) this.configReloads.inc({ outcome })
    this.configInfo.reset()
    this.configInfo.set({ hash }, 1)
  }

  jwksRefresh(issuer: string, result: 'ok' | 'error'): void {
    this.jwksRefreshes.inc({ issuer, result })
  }

  request(route: string, method: string, status: number, code: string, seconds: number): void {
    const records = this.requestRecords(route, method, status, code)
    records.count.value += 1
    this.requestDuration.observeIn(records.duration, seconds)
  }

  /**
   * The records of a request's two series, found through maps of the strings and the number the
   * request already holds (the route's template, Node's method, the catalog's code): a key
   * made per request, and the closures for its labels, were 1.9 % of a cached GET's samples
   * (docs/performance.md, "Metrics of a request"). Bounded as the series are: by routes,
   * methods Node parses, statuses and codes.
   */
  private requestRecords(route: string, method: string, status: number, code: string): RequestRecords {
    let byMethod = this.requestRecordsByRoute.get(route)
    if (byMethod === undefined) this.requestRecordsByRoute.set(route, byMethod = new Map())
    let byStatus = byMethod.get(method)
    if (byStatus === undefined) byMethod.set(method, byStatus = new Map())
    let byCode = byStatus.get(status)
    if (byCode === undefined) byStatus.set(status, byCode = new Map())
    let records = byCode.get(code)
    if (records === undefined) {
      const key = `${route} ${method} ${status}`
      records = {
        count: this.requests.record(`${key} ${code}`, () => ({ route, method, status: String(status), code })),
        duration: this.requestDuration.record(key, () => ({ route, method, status: String(status) })),
      }
      byCode.set(code, records)
    }
    return records
  }

  upstreamCall(upstream: string, outcome: UpstreamOutcome, seconds: number): void {
    this.upstreamRequests.inc(`${upstream} ${outcome}`, () => ({ upstream, outcome }))
    // A refusal by the breaker or the in-flight bounds, or by undici, never reached the upstream.
    if (!NOT_CALLED.has(outcome)) this.upstreamDuration.observeIn(this.upstreamDuration.record(upstream, () => ({ upstream })), seconds)
  }

  upstreamCut(upstream: string, reason: string): void {
    this.upstreamCuts.inc({ upstream, reason })
  }

  cacheRead(cache: string, result: CacheResult): void {
    this.cacheRequests.inc(`${cache} ${result}`, () => ({ cache, result }))
  }

  authFailure(code: string): void {
    this.authFailures.inc(code, () => ({ code }))
  }

  watchBreaker(upstream: string, state: () => BreakerState): void {
    this.breakers.set(upstream, state)
  }

  /** An upstream a reload removed or replaced: its breaker is no longer reported. */
  unwatchBreaker(upstream: string): void {
    this.breakers.delete(upstream)
  }

  /** One webhook delivery attempt (docs/operations.md, "Webhooks"). */
  webhookAttempt(outcome: AttemptOutcome, seconds: number): void {
    this.webhookAttempts.inc(outcome, () => ({ outcome }))
    this.webhookAttemptSeconds.observe(seconds)
  }

  watchWebhooks(snapshot: () => DeliverySnapshot | undefined): void {
    this.webhookSnapshot = snapshot
  }

  watchRedis(up: () => boolean): void {
    this.redisUp = up
  }

  watchHealth(healthy: () => boolean): void {
    this.healthy = healthy
  }

  watchShedding(shedding: () => boolean): void {
    this.shedding = shedding
  }
}
