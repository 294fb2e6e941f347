import { randomHex } from './random-hex.js'

// W3C Trace Context (https://www.w3.org/TR/trace-context/#traceparent-header).
// A malformed header never fails the request: a fresh trace starts instead and the
// caller's tracestate is dropped with it (spec 3.3.1.1).

export interface TraceContext {
  traceId: string
  /** The caller's span, or undefined when this trace started here. */
  parentId: string | undefined
  flags: string
  tracestate: string | undefined
  /**
   * The gateway's own span of this request (its server span) when tracing is on: the parent
   * named in the traceparent of its upstream calls. Without tracing each call gets a new id.
   */
  spanId?: string
}

const HEX = /^[0-9a-f]+$/
const ZERO_TRACE = '00000000000000000000000000000000'
const ZERO_SPAN = '0000000000000000'

function isHex(value: string, length: number): boolean {
  return value.length === length && HEX.test(value)
}

/** Parses a traceparent value; undefined when it is not valid. */
export function parseTraceparent(header: string | undefined): Omit<TraceContext, 'tracestate'> | undefined {
  if (header === undefined || header.length < 55) return undefined
  const version = header.slice(0, 2)
  if (!isHex(version, 2) || version === 'ff') return undefined
  // Version 00 is exactly 55 characters; a higher version may append fields after a dash,
  // and is parsed as 00 for the fields it shares (spec 4.3, "versioning").
  if (version === '00' ? header.length !== 55 : header.length > 55 && header[55] !== '-') return undefined
  if (header[2] !== '-' || header[35] !== '-' || header[52] !== '-') return undefined
  const traceId = header.slice(3, 35)
  const parentId = header.slice(36, 52)
  const flags = header.slice(53, 55)
  if (!isHex(traceId, 32) || traceId === ZERO_TRACE) return undefined
  if (!isHex(parentId, 16) || parentId === ZERO_SPAN) return undefined
  if (!isHex(flags, 2)) return undefined
  return { traceId, parentId, flags }
}

/** A new trace's id: 128 random bits, never the all-zero id the spec forbids. */
export function newTraceId(): string {
  let id = randomHex(16)
  while (id === ZERO_TRACE) id = randomHex(16)
  return id
}

/** A span's id: 64 random bits, never all zero. */
export function newSpanId(): string {
  let id = randomHex(8)
  while (id === ZERO_SPAN) id = randomHex(8)
  return id
}

// tracestate (spec 3.3): up to 32 comma-separated list-members `key=value`, with optional
// spaces and tabs around each; empty members are allowed. We forward it only when it follows
// this grammar and is at most MAX_TRACESTATE_LENGTH characters (docs/security.md, "Big
// inputs"), so a caller cannot push markup, raw bytes or kilobytes into upstream requests
// through it.
export const MAX_TRACESTATE_LENGTH = 512
const MAX_TRACESTATE_MEMBERS = 32
const SIMPLE_KEY = '[a-z][a-z0-9_\\-*/]{0,255}'
const MULTI_TENANT_KEY = '[a-z0-9][a-z0-9_\\-*/]{0,240}@[a-z][a-z0-9_\\-*/]{0,13}'
// value: printable ASCII but ',' and '=', spaces allowed inside, not at the end.
const VALUE = '[\\x20-\\x2b\\x2d-\\x3c\\x3e-\\x7e]{0,255}[\\x21-\\x2b\\x2d-\\x3c\\x3e-\\x7e]'
const LIST_MEMBER = new RegExp(`^(?:${SIMPLE_KEY}|${MULTI_TENANT_KEY})=${VALUE}$`)

/** The tracestate to pass on, or undefined when it is absent, too long or not well-formed. */
export function validTracestate(value: string): string | undefined {
  if (value.length === 0 || value.length > MAX_TRACESTATE_LENGTH) return undefined
  const members = value.split(',')
  let count = 0
  for (const raw of members) {
    const member = raw.replace(/^[ \t]+|[ \t]+$/g, '')
    if (member === '') continue
    count += 1
    if (count > MAX_TRACESTATE_MEMBERS || !LIST_MEMBER.test(member)) return undefined
  }
  return count === 0 ? undefined : value
}

export function traceFromHeaders(traceparent: string | string[] | undefined, tracestate: string | string[] | undefined): TraceContext {
  // Two traceparent headers cannot both be believed.
  const parsed = typeof traceparent === 'string' ? parseTraceparent(traceparent) : undefined
  if (parsed === undefined) return { traceId: newTraceId(), parentId: undefined, flags: '00', tracestate: undefined }
  const state = Array.isArray(tracestate) ? tracestate.join(',') : tracestate
  return { ...parsed, tracestate: state === undefined ? undefined : validTracestate(state) }
}

/** The traceparent for a call we make: same trace, our own span. */
export function outgoingTraceparent(trace: TraceContext): string {
  return `00-${trace.traceId}-${trace.spanId ?? newSpanId()}-${trace.flags}`
}

/** The trace headers of a call we make (W3C: tracestate goes along with its traceparent). */
export function outgoingTraceHeaders(trace: TraceContext): Record<string, string> {
  const headers: Record<string, string> = { traceparent: outgoingTraceparent(trace) }
  if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate
  return headers
}
