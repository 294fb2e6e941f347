import type { FieldError } from '../contract/errors.js'
import { parseTraceparent } from '../http/trace.js'
import { rfc3339Millis } from '../contract/timestamp.js'
import { PLAIN_STRING } from '../routes/policy.js'
import type { EventTypes } from './types.js'

// What an internal service publishes to `POST /events` (docs/operations.md, "Events"): CloudEvents
// 1.0 in structured JSON, one event or a batch of 1 to 100, and the checks each event must pass
// before any of the request is kept. A publisher's bug is refused at once, whole, with one field
// error per mistake (`[3].type`: the event at index 3), so it is seen where it is made.

/** The most events of one batch. */
export const MAX_BATCH = 100

/** How deep arrays and objects may nest in an ingest body. */
export const MAX_NESTING = 32

const OPEN_ARRAY = 0x5b
const OPEN_OBJECT = 0x7b
const CLOSE_ARRAY = 0x5d
const CLOSE_OBJECT = 0x7d
const QUOTE = 0x22
const BACKSLASH = 0x5c

/**
 * Where a JSON text first nests arrays and objects deeper than `max` levels (the byte offset of
 * the bracket that does), or undefined. One pass over the bytes that stops there, before any
 * parse: a body of a million `[` is refused after `max + 1` bytes, instead of costing the event
 * loop a parse of it. Brackets inside strings do not count; what is malformed is left to the
 * parser (UTF-8 never puts these ASCII bytes inside another character).
 */
export function tooDeepAt(text: Uint8Array, max: number = MAX_NESTING): number | undefined {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i += 1) {
    const byte = text[i] as number
    if (inString) {
      if (byte === BACKSLASH) i += 1
      else if (byte === QUOTE) inString = false
    } else if (byte === QUOTE) {
      inString = true
    } else if (byte === OPEN_ARRAY || byte === OPEN_OBJECT) {
      depth += 1
      if (depth > max) return i
    } else if (byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      depth -= 1
    }
  }
  return undefined
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

/** A public event made from an internal one, before it has an id and a time. */
export interface MappedEvent {
  type: string
  /** The brand (its id) whose chain code the event named. */
  brand: string
  propertyId: string | null
  object: { type: string; id: string; path: string }
}

/** An event that passed the checks. */
export interface CheckedEvent {
  /** Its index in the request (0 for a single event). */
  index: number
  /** The CloudEvent's `id`: with its `source`, what a copy is recognised by. */
  id: string
  /** The CloudEvent's `type`, as sent. */
  internalType: string
  /** Its `traceparent` extension, when it sent a valid one. */
  traceparent: string | undefined
  /** Undefined when no public type maps its type: it is accepted and dropped. */
  mapped: MappedEvent | undefined
}

export type CheckResult =
  | { ok: true; events: CheckedEvent[] }
  /** `types`: each event's `type` as sent when it is a string (the metric's label), by index. */
  | { ok: false; detail: string; errors: FieldError[]; types: (string | undefined)[] }

type Json = Record<string, unknown>

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The value at a dotted path of `data`; undefined when a step is missing or not an object. */
function at(data: Json, path: readonly string[]): unknown {
  let value: unknown = data
  for (const name of path) {
    if (!isObject(value) || !Object.hasOwn(value, name)) return undefined
    value = value[name]
  }
  return value
}

/** Checks one CloudEvent; pushes its field errors (each field prefixed with `prefix`) and returns it when it passed. */
function checkOne(event: unknown, index: number, prefix: string, publisher: string, types: EventTypes, chains: ReadonlyMap<string, string>, errors: FieldError[]): CheckedEvent | undefined {
  const before = errors.length
  const fail = (field: string, code: FieldError['code'], detail: string): void => {
    errors.push({ field: `${prefix}${field}`, code, detail })
  }
  if (!isObject(event)) {
    errors.push({ field: prefix === '' ? 'body' : prefix.slice(0, -1), code: 'INVALID_FORMAT', detail: 'Must be a JSON object: a CloudEvent in structured mode.' })
    return undefined
  }
  const text = (name: string, maxLength: number): string | undefined => {
    const value = event[name]
    if (value === undefined) fail(name, 'REQUIRED', `A CloudEvent needs \`${name}\`.`)
    else if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) fail(name, 'INVALID_FORMAT', `Must be a string of 1 to ${maxLength} characters.`)
    else return value
    return undefined
  }
  const specversion = event.specversion
  if (specversion === undefined) fail('specversion', 'REQUIRED', 'A CloudEvent needs `specversion`: "1.0".')
  else if (specversion !== '1.0') fail('specversion', 'INVALID_FORMAT', 'Must be "1.0": CloudEvents 1.0 is what the gateway reads.')
  const id = text('id', 255)
  const source = text('source', 255)
  if (source !== undefined && source !== publisher) fail('source', 'NOT_ALLOWED', `Must be '${publisher}', the name of the publisher whose token was sent.`)
  const internalType = text('type', 255)
  const contentType = event.datacontenttype
  if (contentType !== undefined && (typeof contentType !== 'string' || contentType.toLowerCase() !== 'application/json')) {
    fail('datacontenttype', 'INVALID_FORMAT', 'Must be "application/json", or left out.')
  }
  if (Object.hasOwn(event, 'data_base64')) fail('data_base64', 'NOT_ALLOWED', 'Send `data` as a JSON object; binary data is not taken.')
  const data = event.data
  if (data === undefined) fail('data', 'REQUIRED', 'An event needs `data`, a JSON object.')
  else if (!isObject(data)) fail('data', 'INVALID_FORMAT', 'Must be a JSON object.')
  const time = event.time
  if (time !== undefined && (typeof time !== 'string' || rfc3339Millis(time) === undefined)) fail('time', 'INVALID_FORMAT', 'Must be an RFC 3339 date-time with an offset, or left out.')
  const traceparent = event.traceparent
  if (traceparent !== undefined && (typeof traceparent !== 'string' || parseTraceparent(traceparent) === undefined)) {
    fail('traceparent', 'INVALID_FORMAT', 'Must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), or left out.')
  }
  const mapping = internalType === undefined ? undefined : types.mappingOf(publisher, internalType)
  let mapped: MappedEvent | undefined
  if (mapping !== undefined && isObject(data)) {
    // The fields the mapping names: a missing or malformed one is the publisher's bug.
    const field = (path: readonly string[]): string => `data.${path.join('.')}`
    const chain = at(data, mapping.brand)
    const brand = typeof chain === 'string' ? chains.get(chain) : undefined
    if (chain === undefined) fail(field(mapping.brand), 'REQUIRED', `Events of type '${internalType as string}' name their chain code here.`)
    else if (typeof chain !== 'string') fail(field(mapping.brand), 'INVALID_FORMAT', 'Must be a chain code (a string).')
    else if (brand === undefined) fail(field(mapping.brand), 'NOT_ALLOWED', 'Names no brand of this gateway (`brands[].chainCode`).')
    let propertyId: string | null = null
    if (mapping.property !== undefined) {
      const value = at(data, mapping.property)
      if (value === undefined) fail(field(mapping.property), 'REQUIRED', `Events of type '${internalType as string}' name their property here.`)
      else if (typeof value !== 'string' || !UUID.test(value)) fail(field(mapping.property), 'INVALID_FORMAT', 'Must be a property id (a UUID).')
      else propertyId = value.toLowerCase()
    }
    const objectId = at(data, mapping.object.id)
    let changed: string | undefined
    if (objectId === undefined) fail(field(mapping.object.id), 'REQUIRED', `Events of type '${internalType as string}' name the id of the changed ${mapping.object.type} here.`)
    else if (typeof objectId !== 'string' || !PLAIN_STRING.test(objectId)) fail(field(mapping.object.id), 'INVALID_FORMAT', 'Must be an id of 1 to 128 characters of A-Z a-z 0-9 . _ ~ -.')
    else changed = UUID.test(objectId) ? objectId.toLowerCase() : objectId
    if (brand !== undefined && changed !== undefined) {
      mapped = { type: mapping.type, brand, propertyId, object: { type: mapping.object.type, id: changed, path: mapping.object.path.replace('{id}', changed) } }
    }
  }
  if (errors.length > before) return undefined
  return { index, id: id as string, internalType: internalType as string, traceparent: traceparent as string | undefined, mapped }
}

/**
 * Checks what a publisher sent: one event, or (`batch`) an array of 1 to MAX_BATCH. `chains`
 * maps each configured chain code to its brand's id. All or nothing: one bad event refuses
 * the whole request.
 */
export function checkEvents(body: unknown, batch: boolean, publisher: string, types: EventTypes, chains: ReadonlyMap<string, string>): CheckResult {
  const errors: FieldError[] = []
  if (!batch) {
    const event = checkOne(body, 0, '', publisher, types, chains, errors)
    if (event !== undefined) return { ok: true, events: [event] }
    return { ok: false, detail: `The event breaks ${errors.length === 1 ? 'a rule' : `${errors.length} rules`} of the ingest; it was not accepted.`, errors, types: [typeOf(body)] }
  }
  if (!Array.isArray(body) || body.length === 0 || body.length > MAX_BATCH) {
    const size = Array.isArray(body) ? `${body.length} events` : 'no JSON array'
    return { ok: false, detail: `A batch is a JSON array of 1 to ${MAX_BATCH} events; this one is ${size}. Nothing was accepted.`, errors: [], types: Array.isArray(body) ? body.map(typeOf) : [] }
  }
  const events: CheckedEvent[] = []
  body.forEach((item, index) => {
    const event = checkOne(item, index, `[${index}].`, publisher, types, chains, errors)
    if (event !== undefined) events.push(event)
  })
  if (errors.length === 0) return { ok: true, events }
  const bad = new Set(errors.map((e) => /^\[(\d+)\]/.exec(e.field)?.[1])).size
  return { ok: false, detail: `${bad} of the ${body.length} events break rules of the ingest; none of the batch was accepted.`, errors, types: body.map(typeOf) }
}

function typeOf(event: unknown): string | undefined {
  return isObject(event) && typeof event.type === 'string' ? event.type : undefined
}
