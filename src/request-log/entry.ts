import type { FastifyRequest } from 'fastify'
import { arrivalOfRequestId } from '../http/request-id.js'
import { maybeQuoted, maybeQuotedPlain, quoted, quotedList, roundedText } from '../json-string.js'
import { indexFields, indexLine } from './filters.js'

// One entry of the request log (docs/partners.md, "The request log"): made after the answer
// from what the request already knows (its route's policy, the problem's code, the cache's
// outcome, the idempotency record's, the trace), never from a body, a query value or a header
// other than User-Agent, Idempotency-Key and the trace id of traceparent. Nothing of a secret
// is in it: a credential is named by its id.

export interface RequestLogEntry {
  id: string
  at: string
  credentialId: string
  secret: 'current' | 'previous' | null
  mode: 'live' | 'test'
  method: string
  route: string | null
  path: string
  queryParameters: string[]
  status: number
  code: string | null
  durationMs: number
  cache: 'hit' | 'miss' | 'stale' | null
  idempotencyKey: string | null
  replayed: boolean
  clientIp: string | null
  userAgent: string | null
  traceId: string | null
}

/**
 * An entry as the gateway holds it until it is written: the time it arrived as epoch ms (the
 * score it is stored under), its ISO form made only in the JSON written (`entryJson`).
 */
export type RequestLogRecord = Omit<RequestLogEntry, 'at'> & { atMs: number }

/** The fields of an entry in their documented order (the CSV export's columns). */
export const ENTRY_FIELDS = [
  'id', 'at', 'credentialId', 'secret', 'mode', 'method', 'route', 'path', 'queryParameters', 'status', 'code', 'durationMs', 'cache',
  'idempotencyKey', 'replayed', 'clientIp', 'userAgent', 'traceId',
] as const satisfies readonly (keyof RequestLogEntry)[]

export const MAX_PATH = 512
export const MAX_USER_AGENT = 200
/** A parameter's name is kept to this length, and at most this many names: what a partner needs to recognise its call. */
export const MAX_PARAMETER_NAME = 100
export const MAX_PARAMETERS = 50

const CACHE_RESULTS: ReadonlySet<string> = new Set(['hit', 'miss', 'stale'])

/** The request's path without its query, as sent, cut at MAX_PATH characters. */
export function pathOf(url: string): string {
  const query = url.indexOf('?')
  const path = query === -1 ? url : url.slice(0, query)
  return path.length > MAX_PATH ? path.slice(0, MAX_PATH) : path
}

/** A request without a query names no parameter: one array for all, never written to. */
const NO_PARAMETERS: string[] = []

/** The names of the query's parameters in the order sent, each once, never a value (a URL without a query: NO_PARAMETERS). */
export function queryNamesOf(url: string): string[] {
  const query = url.indexOf('?')
  if (query === -1 || query === url.length - 1) return NO_PARAMETERS
  const names: string[] = []
  for (const pair of url.slice(query + 1).split('&')) {
    if (names.length >= MAX_PARAMETERS) break
    const equals = pair.indexOf('=')
    const raw = (equals === -1 ? pair : pair.slice(0, equals)).replaceAll('+', ' ')
    if (raw === '') continue
    let name: string
    try {
      name = decodeURIComponent(raw)
    } catch {
      name = raw
    }
    if (name.length > MAX_PARAMETER_NAME) name = name.slice(0, MAX_PARAMETER_NAME)
    if (!names.includes(name)) names.push(name)
  }
  return names
}

/** Time in ms rounded to one decimal. */
export function tenths(ms: number): number {
  return Math.round(ms * 10) / 10
}

/** Who made the request: its credential, found or refused as known; null when it belongs to nobody. */
export function ownerOf(request: FastifyRequest): { id: string; mode: 'live' | 'test'; secret: RequestLogEntry['secret'] } | null {
  const { principal } = request
  if (principal !== null) {
    return { id: principal.keyId, mode: principal.mode, secret: principal.kind === 'apiKey' ? (principal.previousSecret === true ? 'previous' : 'current') : null }
  }
  return request.refusedCredential
}

/**
 * An entry made after an answer. A class and not an object literal: V8 tracks the objects of a
 * literal and, seeing most of them outlive a young collection (as entries did while they waited
 * for their batch as objects), allocates the literal's objects in the old generation from then
 * on, where each young string stored in one costs a write barrier's slow path. Made that way,
 * an entry cost a cached GET about a twentieth of its CPU in the profile. An entry now lives
 * only until its line is in its batch's bytes (batch.ts); objects made by a constructor are not
 * tracked so, whatever their life (docs/performance.md, "2026-11-30 (afternoon): an entry outlives its answer").
 */
class AnsweredRequest implements RequestLogRecord {
  readonly id: string
  readonly atMs: number
  readonly credentialId: string
  readonly secret: RequestLogRecord['secret']
  readonly mode: RequestLogRecord['mode']
  readonly method: string
  readonly route: string | null
  readonly path: string
  readonly queryParameters: string[]
  readonly status: number
  readonly code: string | null
  readonly durationMs: number
  readonly cache: RequestLogRecord['cache']
  readonly idempotencyKey: string | null
  readonly replayed: boolean
  readonly clientIp: string | null
  readonly userAgent: string | null
  readonly traceId: string | null

  constructor(request: FastifyRequest, elapsed: number, owner: NonNullable<ReturnType<typeof ownerOf>>, status: number, route: string | null, now: number, clientIp: string | null) {
    const userAgent = request.headers['user-agent']
    const cache = request.cacheResult
    const url = request.url
    this.id = request.id
    // The time in the request's id, under which the log finds the entry of an id; whole ms, as
    // the ISO time written has them, for an id not of ours.
    this.atMs = arrivalOfRequestId(request.id) ?? Math.floor(now - elapsed)
    this.credentialId = owner.id
    this.secret = owner.secret
    this.mode = owner.mode
    this.method = request.method
    this.route = route
    this.path = pathOf(url)
    this.queryParameters = queryNamesOf(url)
    this.status = status
    this.code = request.errorCode
    this.durationMs = tenths(elapsed)
    this.cache = cache !== null && CACHE_RESULTS.has(cache) ? cache as RequestLogRecord['cache'] : null
    this.idempotencyKey = request.idempotencyKey
    this.replayed = request.idempotency === 'replayed'
    this.clientIp = clientIp
    this.userAgent = typeof userAgent === 'string' ? userAgent.slice(0, MAX_USER_AGENT) : null
    this.traceId = request.trace?.traceId ?? null
  }
}

/**
 * The entry of a request of `status` on the route `route` (its template, or null) answered
 * `elapsed` ms after it arrived, or null when no credential owns it. `now` and the client's
 * address are given by a caller that read them already; `now` read with `elapsed`, their
 * difference is the arrival of a request whose id holds no time.
 */
export function entryOf(request: FastifyRequest, elapsed: number, status: number, route: string | null, now: number = Date.now(), clientIp: string | null = request.ip ?? null): RequestLogRecord | null {
  const owner = ownerOf(request)
  return owner === null ? null : new AnsweredRequest(request, elapsed, owner, status, route, now, clientIp)
}

/**
 * The JSON of an entry, as JSON.stringify writes the entry with its `at` in ISO form: its
 * fields in their documented order, written by hand (a string quoted as it is unless it holds
 * a character JSON escapes), which costs a fraction of the generic serialiser's walk.
 */
export function entryJson(record: RequestLogRecord): string {
  return `{"id":${quoted(record.id)},"at":"${new Date(record.atMs).toISOString()}","credentialId":${quoted(record.credentialId)}`
    + `,"secret":${maybeQuoted(record.secret)},"mode":${quoted(record.mode)},"method":${quoted(record.method)},"route":${maybeQuoted(record.route)}`
    + `,"path":${quoted(record.path)},"queryParameters":[${quotedList(record.queryParameters)}],"status":${record.status},"code":${maybeQuoted(record.code)}`
    + `,"durationMs":${record.durationMs},"cache":${maybeQuoted(record.cache)},"idempotencyKey":${maybeQuoted(record.idempotencyKey)}`
    + `,"replayed":${record.replayed},"clientIp":${maybeQuoted(record.clientIp)},"userAgent":${maybeQuoted(record.userAgent)},"traceId":${maybeQuoted(record.traceId)}}`
}

/**
 * What Redis keeps of an entry, one line: its arrival (epoch ms), its index line (filters.ts,
 * the fields a filter reads, unquoted) and, after a tab, the rest of its fields as a JSON array
 * without their names. Its credential and mode are not in it: the log's key names them. It
 * is the member of the log's sorted set, scored by the arrival the store's script takes from
 * it (store.ts), so no field is written twice; a reader makes the JSON again (`storedEntryJson`). Neither part can hold a
 * tab or a line break: the index line's fields hold none, and JSON escapes every control
 * character in its strings. Made as one string and written into its batch's bytes at once:
 * written there piece by piece, it cost about 4 µs more CPU per entry for the 1.4 KB of young
 * garbage it spared (docs/performance.md, "2026-12-02 (night): the writer's CPU per entry since
 * the line is written as bytes").
 */
export function storedEntry(record: RequestLogRecord): string {
  // The secret and the cache are words of their unions, a trace id hex: nothing in them to escape.
  return `${record.atMs} ${indexLine(record)}\t[${maybeQuotedPlain(record.secret)},${quoted(record.path)},[${quotedList(record.queryParameters)}],${roundedText(record.durationMs, 1)}`
    + `,${maybeQuotedPlain(record.cache)},${record.replayed},${maybeQuoted(record.clientIp)},${maybeQuoted(record.userAgent)},${maybeQuotedPlain(record.traceId)}]`
}

type StoredRest = [RequestLogRecord['secret'], string, string[], number, RequestLogRecord['cache'], boolean, string | null, string | null, string | null]

/** The fields of the form written before this one: every field in one JSON array, without credential and mode. */
type ArrayFields = [string, number, RequestLogRecord['secret'], string, string | null, string, string[], number, string | null, number,
  RequestLogRecord['cache'], string | null, boolean, string | null, string | null, string | null]

/** The entry Redis keeps for the log of `credentialId` and `mode`, as the gateway held it; either form of `storedEntry`'s. */
export function storedRecord(stored: string, credentialId: string, mode: string): RequestLogRecord {
  const owner = { credentialId, mode: mode as RequestLogRecord['mode'] }
  if (stored.startsWith('[')) {
    const [id, atMs, secret, method, route, path, queryParameters, status, code, durationMs, cache, idempotencyKey, replayed, clientIp, userAgent, traceId] = JSON.parse(stored) as ArrayFields
    return { id, atMs, ...owner, secret, method, route, path, queryParameters, status, code, durationMs, cache, idempotencyKey, replayed, clientIp, userAgent, traceId }
  }
  const tab = stored.indexOf('\t')
  const space = stored.indexOf(' ')
  const { id, status, method, code, route, idempotencyKey } = indexFields(stored.slice(space + 1, tab))
  const [secret, path, queryParameters, durationMs, cache, replayed, clientIp, userAgent, traceId] = JSON.parse(stored.slice(tab + 1)) as StoredRest
  return {
    id, atMs: Number(stored.slice(0, space)), ...owner, secret, method, route, path, queryParameters, status, code, durationMs, cache, idempotencyKey,
    replayed, clientIp, userAgent, traceId,
  }
}

/** An entry Redis keeps, as a partner reads it (the CSV export's rows); one kept whole as JSON, the first form, as it is. */
export function storedEntryOf(stored: string, credentialId: string, mode: string): RequestLogEntry {
  if (stored.startsWith('{')) return JSON.parse(stored) as RequestLogEntry
  const { atMs, ...fields } = storedRecord(stored, credentialId, mode)
  return { ...fields, at: new Date(atMs).toISOString() }
}

/** The JSON of an entry Redis keeps (an entry kept whole as JSON, the first form, as it is). */
export function storedEntryJson(stored: string, credentialId: string, mode: string): string {
  return stored.startsWith('{') ? stored : entryJson(storedRecord(stored, credentialId, mode))
}
