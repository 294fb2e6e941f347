import { randomUUID } from 'node:crypto'

// W3C Trace Context (https://www.w3.org/TR/trace-context/#traceparent-header).
// A malformed header never fails the request: a fresh trace starts instead and the
// caller's tracestate is dropped with it (spec 3.3.1.1).

export interface TraceContext {
  traceId: string
  /** The caller's span, or undefined when this trace started here. */
  parentId: string | undefined
  flags: string
  tracestate: string | undefined
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

// From randomUUID, which draws on a cached pool of entropy: a fresh randomBytes() call per
// request cost more than the rest of the trace handling together. 122 random bits a trace.
export function newTraceId(): string {
  const uuid = randomUUID()
  return `${uuid.slice(0, 8)}${uuid.slice(9, 13)}${uuid.slice(14, 18)}${uuid.slice(19, 23)}${uuid.slice(24)}`
}

export function newSpanId(): string {
  const uuid = randomUUID()
  return `${uuid.slice(0, 8)}${uuid.slice(24, 32)}`
}

export function traceFromHeaders(traceparent: string | string[] | undefined, tracestate: string | string[] | undefined): TraceContext {
  // Two traceparent headers cannot both be believed.
  const parsed = typeof traceparent === 'string' ? parseTraceparent(traceparent) : undefined
  if (parsed === undefined) return { traceId: newTraceId(), parentId: undefined, flags: '00', tracestate: undefined }
  const state = Array.isArray(tracestate) ? tracestate.join(',') : tracestate
  return { ...parsed, tracestate: state === '' ? undefined : state }
}

/** The traceparent for a call we make: same trace, our own new span. */
export function outgoingTraceparent(trace: TraceContext): string {
  return `00-${trace.traceId}-${newSpanId()}-${trace.flags}`
}

/** The trace headers of a call we make (W3C: tracestate goes along with its traceparent). */
export function outgoingTraceHeaders(trace: TraceContext): Record<string, string> {
  const headers: Record<string, string> = { traceparent: outgoingTraceparent(trace) }
  if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate
  return headers
}
