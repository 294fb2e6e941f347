import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { KeyMode } from '../keys/principal.js'
import type { CheckedEvent, MappedEvent } from './cloudevents.js'
import { publicPart, type AppendOutcome, type Claim, type EventStore, type NewEvent, type Partition } from './store.js'
import { EVENT_ID_PREFIX } from '../routes/policy.js'
import type { EventFacts, EventTypes, Viewer } from './types.js'
import { UlidFactory, ulidMillis } from './ulid.js'

// The event log (docs/architecture.md, "Events"): thin public events made from what internal
// services publish, kept for `events.retentionDays`, read by each credential within what it
// sees. Ids and times are the gateway's own: `createdAt` is when the gateway accepted an event.

/** A thin public event, as partners read it (field order is the order on the wire). */
export interface PublicEvent {
  id: string
  type: string
  createdAt: string
  mode: KeyMode
  propertyId: string | null
  object: { type: string; id: string; path: string }
}

/** What the log keeps of an event beside its public JSON, for later uses of it (deliveries). */
export interface EventOrigin {
  /** The publisher (its CloudEvents `source`). */
  source: string
  /** The CloudEvent's `id`. */
  sourceId: string
  /** The publisher's trace context, when it sent one. */
  traceparent?: string
}

/** An event the log holds: the public event, its JSON, its brand and where it came from. */
export interface LoggedEvent {
  event: PublicEvent
  json: string
  brand: string
  origin: EventOrigin
}

/** What became of one event of an ingest request, in the request's order. */
export type IngestOutcome =
  | { kind: 'accepted'; index: number; sourceId: string; eventId: string }
  | { kind: 'duplicate'; index: number; sourceId: string; eventId: string }
  /** No public type maps its type. */
  | { kind: 'dropped'; index: number; sourceId: string }

/**
 * Told of the events an ingest request stored (`duplicate` false) and of the copies it was sent
 * of events stored before (`duplicate` true, so that work a failed listener left undone gets a
 * second chance when the publisher retries), before the publisher is answered. A listener that
 * throws fails the request with 503: the publisher sends it again, and the listener sees its
 * events again as copies. It must therefore be idempotent by event id.
 */
export type EventListener = (events: readonly (LoggedEvent & { duplicate: boolean })[]) => Promise<void>

/** The filters of `GET /v1/events`, as validated. */
export interface EventFilters {
  type?: string
  propertyId?: string
  /** Epoch milliseconds (a time between two as their midpoint); events strictly after / before. */
  createdAfter?: number
  createdBefore?: number
}

export interface EventLogOptions {
  retentionDays: number
  /** Events whose public JSON this instance keeps once read (they never change); 0: none. */
  cachedEvents?: number
  /** The clock (tests move it past the retention). */
  now?: () => number
}

/** An event read by id, as the cache of such reads keeps it: its JSON, and what deciding who sees it needs. */
interface OneEvent {
  json: string
  mode: KeyMode
  type: string
  propertyId: string | null
  /** Epoch ms. */
  createdAt: number
}

/** Copies of a (source, id) are recognised for this long. */
export const DEDUPE_MS = 24 * 3_600_000

/** The id's digest of a (source, id): 128 bits, base64url. */
function dedupeDigest(source: string, id: string): string {
  return createHash('sha256').update(`${source.length}:${source}`).update(id).digest().subarray(0, 16).toString('base64url')
}

/** The public part of a stored record (before its newline) and the rest. */
function split(record: string): { json: string; origin: EventOrigin } {
  const json = publicPart(record)
  return { json, origin: JSON.parse(record.slice(json.length + 1)) as EventOrigin }
}

export class EventLog {
  private readonly ulids = new UlidFactory()
  private readonly listeners: EventListener[] = []
  readonly retentionMs: number
  private readonly now: () => number
  /**
   * Public JSON by ULID: an event never changes, so a copy is never stale; and a ULID is one
   * event's (80 random bits), which only the indexes of its own brand and mode ever name.
   */
  private readonly cache: LRUCache<string, string> | undefined
  /**
   * Events read one by one (a delivery's attempt, `GET /v1/events/{id}`), by brand, mode and
   * ULID: any id may be asked for there, so the key names the partition it was found in. An
   * event delivered to many endpoints is read from Redis once per instance, though their
   * attempts run at once: lru-cache's `fetch` shares a read under way, and keeps neither a miss
   * (undefined) nor a failed read.
   */
  private readonly single: LRUCache<string, OneEvent, { partition: Partition; ulid: string }> | undefined

  /** The public types in force: a reload replaces them whole (src/gateway.ts). */
  types: EventTypes

  constructor(private readonly store: EventStore, types: EventTypes, options: EventLogOptions) {
    this.types = types
    this.retentionMs = options.retentionDays * 86_400_000
    this.now = options.now ?? Date.now
    const entries = options.cachedEvents ?? 0
    this.cache = entries > 0 ? new LRUCache({ max: entries }) : undefined
    this.single = entries > 0
      ? new LRUCache<string, OneEvent, { partition: Partition; ulid: string }>({ max: entries, fetchMethod: async (_key, _stale, { context }) => this.readOne(context.partition, context.ulid) })
      : undefined
  }

  /** Adds a listener of stored events (deliveries hook in here). */
  subscribe(listener: EventListener): void {
    this.listeners.push(listener)
  }

  /**
   * Keeps the events of one ingest request, checked and mapped, from `source` in `mode`: an id
   * each, one claim of their (source, id)s, one append per brand. Resolves once every event is
   * written and every listener has seen it; rejects when the store cannot (nothing is half
   * answered: a retry finds the events written so far as copies).
   *
   * A (source, id) is one event whatever brand it names (docs/architecture.md, "The ingest"):
   * the first claim of it names the brand and id its event is kept under. A copy of the same
   * brand is written under that id (the store keeps the first write of an id), so a retry
   * completes what a failed request claimed and did not write; a copy naming another brand is
   * answered with the event kept there, and when that is not written yet, the request fails
   * (503) and its retry finds it.
   */
  async ingest(source: string, mode: KeyMode, events: readonly CheckedEvent[], requestTraceparent?: string): Promise<IngestOutcome[]> {
    const now = this.now()
    const outcomes: IngestOutcome[] = []
    const fresh: { event: CheckedEvent & { mapped: MappedEvent }; ulid: string; millis: number; dedupe: string }[] = []
    for (const event of events) {
      if (event.mapped === undefined) outcomes[event.index] = { kind: 'dropped', index: event.index, sourceId: event.id }
      else {
        const ulid = this.ulids.next(now)
        fresh.push({ event: event as CheckedEvent & { mapped: MappedEvent }, ulid: ulid.text, millis: ulid.millis, dedupe: dedupeDigest(source, event.id) })
      }
    }
    const claims = await this.store.claim(source, fresh.map((f) => ({ dedupe: f.dedupe, brand: f.event.mapped.brand, ulid: f.ulid })), DEDUPE_MS)
    // A request's events share a millisecond (or a few): its text is made once for each.
    let millis = -1
    let createdAt = ''
    const byBrand = new Map<string, { event: CheckedEvent; made: NewEvent; logged: LoggedEvent }[]>()
    const elsewhere: { event: CheckedEvent; claim: Claim }[] = []
    fresh.forEach(({ event, ulid: own, millis: ownMillis }, i) => {
      const mapped = event.mapped
      const claim = claims[i] ?? { brand: mapped.brand, ulid: own }
      if (claim.brand !== mapped.brand) {
        elsewhere.push({ event, claim })
        return
      }
      const at = claim.ulid === own ? ownMillis : ulidMillis(claim.ulid)
      if (at !== millis) {
        millis = at
        createdAt = new Date(at).toISOString()
      }
      const publicEvent: PublicEvent = {
        id: `${EVENT_ID_PREFIX}${claim.ulid}`,
        type: mapped.type,
        createdAt,
        mode,
        propertyId: mapped.propertyId,
        object: mapped.object,
      }
      const traceparent = event.traceparent ?? requestTraceparent
      const origin: EventOrigin = { source, sourceId: event.id, ...(traceparent === undefined ? {} : { traceparent }) }
      const json = JSON.stringify(publicEvent)
      const made: NewEvent = { ulid: claim.ulid, millis: at, type: mapped.type, propertyId: mapped.propertyId, record: `${json}\n${JSON.stringify(origin)}` }
      const group = byBrand.get(mapped.brand) ?? []
      group.push({ event, made, logged: { event: publicEvent, json, brand: mapped.brand, origin } })
      byBrand.set(mapped.brand, group)
    })
    const times = { oldest: now - this.retentionMs, retentionMs: this.retentionMs }
    const seen: (LoggedEvent & { duplicate: boolean })[] = []
    const copy = (event: CheckedEvent, brand: string, record: string): void => {
      const { json, origin } = split(record)
      const kept = JSON.parse(json) as PublicEvent
      outcomes[event.index] = { kind: 'duplicate', index: event.index, sourceId: event.id, eventId: kept.id }
      seen.push({ event: kept, json, brand, origin, duplicate: true })
    }
    await Promise.all([...byBrand].map(async ([brand, group]) => {
      const results = await this.store.append({ brand, mode }, group.map((g) => g.made), times)
      results.forEach((result: AppendOutcome, i) => {
        const { event, logged } = group[i] as (typeof group)[number]
        if (result.kind === 'stored') {
          outcomes[event.index] = { kind: 'accepted', index: event.index, sourceId: event.id, eventId: logged.event.id }
          seen.push({ ...logged, duplicate: false })
        } else {
          copy(event, brand, result.record)
        }
      })
    }))
    // Copies of events kept under another brand: read once this request's own are written (the
    // first of them may be in this very request).
    for (const { event, claim } of elsewhere) {
      const record = await this.store.get({ brand: claim.brand, mode }, claim.ulid)
      if (record === null) throw new Error(`the first copy of event '${event.id}' of ${source} is not written yet`)
      copy(event, claim.brand, record)
    }
    for (const listener of this.listeners) await listener(seen)
    return outcomes
  }

  /**
   * One page of the events `viewer` sees, oldest first (as one JSON array), and how many it sees in all
   * (docs/architecture.md, "Events"): the indexes of the types it has the scope of, about any
   * property or, for a credential limited to some, about none or one of them.
   */
  async list(viewer: Viewer, filters: EventFilters, page: number, perPage: number): Promise<{ total: number; json: string }> {
    const types = this.types.typesSeenBy(viewer).filter((type) => filters.type === undefined || type === filters.type)
    const now = this.now()
    const from = Math.max(now - this.retentionMs, filters.createdAfter === undefined ? 0 : Math.floor(filters.createdAfter) + 1)
    const to = filters.createdBefore === undefined ? Number.MAX_SAFE_INTEGER : Math.ceil(filters.createdBefore) - 1
    // About one property (asked for, and one the credential may use), any (a credential of all
    // properties), or none or one of the credential's.
    const wanted = filters.propertyId
    const visible = wanted === undefined || viewer.properties === 'all' || viewer.properties.has(wanted)
    if (types.length === 0 || from > to || !visible) return { total: 0, json: '[]' }
    const selection = wanted !== undefined
      ? { properties: [wanted], withoutProperty: false }
      : viewer.properties === 'all' ? { properties: '*' as const, withoutProperty: false } : { properties: [...viewer.properties], withoutProperty: true }
    const partition: Partition = { brand: viewer.brand, mode: viewer.mode }
    const { total, ulids } = await this.store.page(partition, { types, ...selection, from, to, offset: (page - 1) * perPage, limit: perPage })
    return { total, json: `[${(await this.publicJson(partition, ulids)).join(',')}]` }
  }

  /**
   * The public JSON of some events, in their order, from this instance's cache or else in one
   * read; an event gone meanwhile (past its retention) is left out.
   */
  private async publicJson(partition: Partition, ulids: readonly string[]): Promise<string[]> {
    const found = ulids.map((ulid) => this.cache?.get(ulid))
    const missing = ulids.filter((_, i) => found[i] === undefined)
    if (missing.length > 0) {
      const records = await this.store.records(partition, missing)
      let next = 0
      for (let i = 0; i < found.length; i += 1) {
        if (found[i] !== undefined) continue
        const record = records[next]
        next += 1
        if (record === null || record === undefined) continue
        const json = publicPart(record)
        found[i] = json
        this.cache?.set(ulids[i] as string, json)
      }
    }
    return found.filter((json): json is string => json !== undefined)
  }

  /** One event's public JSON and what deciding who sees it needs, from Redis; undefined when it has none. */
  private async readOne(partition: Partition, ulid: string): Promise<OneEvent | undefined> {
    const record = await this.store.get(partition, ulid)
    if (record === null) return undefined
    const json = publicPart(record)
    const event = JSON.parse(json) as PublicEvent
    return { json, mode: event.mode, type: event.type, propertyId: event.propertyId, createdAt: Date.parse(event.createdAt) }
  }

  /** The JSON of event `id` (`evt_` and a ULID, any case) when `viewer` sees it; undefined otherwise. */
  async get(viewer: Viewer, id: string): Promise<string | undefined> {
    const ulid = id.slice(EVENT_ID_PREFIX.length).toUpperCase()
    const partition: Partition = { brand: viewer.brand, mode: viewer.mode }
    const found = this.single === undefined
      ? await this.readOne(partition, ulid)
      : await this.single.fetch(`${viewer.brand} ${viewer.mode} ${ulid}`, { context: { partition, ulid } })
    if (found === undefined) return undefined
    const facts: EventFacts = { brand: viewer.brand, mode: found.mode, type: found.type, propertyId: found.propertyId }
    // Past the retention it is gone, though its record outlives it by the grace.
    if (found.createdAt < this.now() - this.retentionMs || !this.types.sees(viewer, facts)) return undefined
    return found.json
  }
}
