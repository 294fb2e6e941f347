import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { gunzipSync } from 'node:zlib'
import protobuf from 'protobufjs'
import { listen, stop } from '../listen.js'

// A stand-in OpenTelemetry collector: it takes OTLP/HTTP trace exports, in protobuf or JSON,
// decodes them into one plain shape, and keeps them for the tests and the benchmark to read.
// `npm run mock-otlp` runs it alone (MOCK_OTLP_PORT, default 4318) and prints a line per span.
// Controlled over HTTP:
//
//   POST   /v1/traces        an export (application/x-protobuf or application/json)
//   GET    /__mock/spans     the spans received so far, decoded
//   DELETE /__mock/spans
//   PUT    /__mock/failure   {"status": n, "times"?: n} answer exports with `status`; {"mode": "hang"} never answer
//   DELETE /__mock/failure

// The part of the OTLP trace protocol (opentelemetry-proto, trace/v1 and collector/trace/v1)
// a decoder needs; unknown fields are skipped, as protobuf readers do.
const OTLP_PROTO = `
syntax = "proto3";
package otlp;
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; }
message Resource { repeated KeyValue attributes = 1; }
message Status { string message = 2; int32 code = 3; }
message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  repeated Link links = 13;
  Status status = 15;
  fixed32 flags = 16;
}
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
`
const ExportRequest = protobuf.parse(OTLP_PROTO, { keepCase: false }).root.lookupType('otlp.ExportTraceServiceRequest')

export type AttributeValue = string | number | boolean | AttributeValue[] | { [key: string]: AttributeValue } | null

/** One span as received, whichever encoding carried it. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** Absent for a root span. */
  parentSpanId: string | undefined
  traceState: string | undefined
  name: string
  kind: 'unspecified' | 'internal' | 'server' | 'client' | 'producer' | 'consumer'
  /** Nanoseconds since the epoch, as decimal text (they pass 2^53). */
  startTimeUnixNano: string
  endTimeUnixNano: string
  attributes: Record<string, AttributeValue>
  status: { code: 'unset' | 'ok' | 'error'; message: string | undefined }
  /** W3C trace flags (bit 0: sampled). */
  traceFlags: number
  resource: Record<string, AttributeValue>
  scope: { name: string; version: string | undefined }
  /** The spans it links to (other traces it continues, such as the publishers' of ingested events). */
  links: { traceId: string; spanId: string }[]
}

export interface ReceivedExport {
  encoding: 'protobuf' | 'json'
  /** Request headers, lower-cased. */
  headers: Record<string, string | string[] | undefined>
  spans: ReceivedSpan[]
}

export type Failure = { status: number; times?: number } | { mode: 'hang' }

const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const
const STATUS_CODES = ['unset', 'ok', 'error'] as const

// The decoded messages of either encoding, as plain objects with camelCase names.
interface WireValue {
  stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number
  arrayValue?: { values?: WireValue[] }; kvlistValue?: { values?: WireKeyValue[] }; bytesValue?: string
}
interface WireKeyValue { key: string; value?: WireValue }
interface WireSpan {
  traceId?: string; spanId?: string; traceState?: string; parentSpanId?: string; name?: string; kind?: number
  startTimeUnixNano?: string | number; endTimeUnixNano?: string | number; attributes?: WireKeyValue[]
  status?: { message?: string; code?: number }; flags?: number
  links?: { traceId?: string; spanId?: string }[]
}
interface WireRequest {
  resourceSpans?: { resource?: { attributes?: WireKeyValue[] }; scopeSpans?: { scope?: { name?: string; version?: string }; spans?: WireSpan[] }[] }[]
}

/** An id as hex: protobuf bytes arrive as base64 (protobufjs's toObject), OTLP/JSON sends hex. */
function hexId(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined
  if (/^[0-9a-f]+$/.test(value) && (value.length === 32 || value.length === 16)) return value
  return Buffer.from(value, 'base64').toString('hex')
}

function valueOf(value: WireValue | undefined): AttributeValue {
  if (value === undefined) return null
  if (value.stringValue !== undefined) return value.stringValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(valueOf)
  if (value.kvlistValue !== undefined) return attributesOf(value.kvlistValue.values)
  if (value.bytesValue !== undefined) return value.bytesValue
  return null
}

function attributesOf(list: WireKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {}
  for (const { key, value } of list ?? []) out[key] = valueOf(value)
  return out
}

/** The spans of an export request, decoded into ReceivedSpan. */
export function spansOf(request: WireRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = []
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes)
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      const scope = { name: scopeSpans.scope?.name ?? '', version: scopeSpans.scope?.version }
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          traceId: hexId(span.traceId) ?? '',
          spanId: hexId(span.spanId) ?? '',
          parentSpanId: hexId(span.parentSpanId),
          traceState: span.traceState === undefined || span.traceState === '' ? undefined : span.traceState,
          name: span.name ?? '',
          kind: KINDS[span.kind ?? 0] ?? 'unspecified',
          startTimeUnixNano: String(span.startTimeUnixNano ?? '0'),
          endTimeUnixNano: String(span.endTimeUnixNano ?? '0'),
          attributes: attributesOf(span.attributes),
          status: { code: STATUS_CODES[span.status?.code ?? 0] ?? 'unset', message: span.status?.message === '' ? undefined : span.status?.message },
          traceFlags: (span.flags ?? 0) & 0xff,
          resource,
          scope,
          links: (span.links ?? []).map((link) => ({ traceId: hexId(link.traceId) ?? '', spanId: hexId(link.spanId) ?? '' })),
        })
      }
    }
  }
  return spans
}

/** Decodes an OTLP/HTTP trace export body of `contentType`. */
export function decodeExport(body: Buffer, contentType: string): { encoding: 'protobuf' | 'json'; spans: ReceivedSpan[] } {
  if (/^application\/json/i.test(contentType)) return { encoding: 'json', spans: spansOf(JSON.parse(body.toString('utf8')) as WireRequest) }
  if (/^application\/x-protobuf/i.test(contentType)) {
    const message = ExportRequest.decode(body)
    const plain = ExportRequest.toObject(message, { longs: String, bytes: String, defaults: false }) as WireRequest
    return { encoding: 'protobuf', spans: spansOf(plain) }
  }
  throw new Error(`unsupported content type ${contentType}`)
}

export class MockOtlp {
  readonly exports: ReceivedExport[] = []
  /** Exports that could not be decoded: a test expects none. */
  readonly rejected: string[] = []
  private failure: Failure | undefined
  private held = 0
  private server: Server | undefined
  private readonly hanging = new Set<ServerResponse>()

  constructor(private readonly options: {
    print?: boolean
    /** Most spans kept (the oldest exports are dropped), so a benchmark does not grow it without end; default 100,000. */
    maxSpans?: number
  } = {}) {}

  get url(): string {
    const address = this.server?.address() as AddressInfo | null | undefined
    if (address === undefined || address === null) throw new Error('mock OTLP receiver not listening')
    return `http://127.0.0.1:${address.port}`
  }

  /** Every span received so far, in the order they arrived. */
  get spans(): ReceivedSpan[] {
    return this.exports.flatMap((e) => e.spans)
  }

  setFailure(failure: Failure | undefined): void {
    this.failure = failure
    if (failure === undefined) this.release()
  }

  reset(): void {
    this.exports.length = 0
    this.held = 0
    this.rejected.length = 0
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = await listen((req, res) => void this.handle(req, res), port, host)
    return this
  }

  async close(): Promise<void> {
    this.release()
    await stop(this.server)
  }

  private release(): void {
    for (const res of this.hanging) res.destroy()
    this.hanging.clear()
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://otlp')
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    let body = Buffer.concat(chunks)
    if (url.pathname.startsWith('/__mock/')) return this.control(req, res, url, body)
    if (url.pathname !== '/v1/traces' || req.method !== 'POST') return answer(res, 404, 'application/json', '{}')
    const failure = this.failure
    if (failure !== undefined) {
      if ('mode' in failure) {
        this.hanging.add(res)
        return
      }
      if (failure.times !== undefined) this.failure = failure.times <= 1 ? undefined : { ...failure, times: failure.times - 1 }
      return answer(res, failure.status, 'application/json', '{}')
    }
    const contentType = String(req.headers['content-type'] ?? '')
    try {
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body)
      const decoded = decodeExport(body, contentType)
      this.exports.push({ ...decoded, headers: { ...req.headers } })
      this.held += decoded.spans.length
      while (this.held > (this.options.maxSpans ?? 100_000) && this.exports.length > 1) this.held -= this.exports.shift()?.spans.length ?? 0
      if (this.options.print === true) {
        for (const span of decoded.spans) console.log(`${span.traceId} ${span.spanId} ${span.parentSpanId ?? '-'} ${span.kind} ${span.name} ${JSON.stringify(span.attributes)}`)
      }
    } catch (error) {
      this.rejected.push(`${contentType}: ${(error as Error).message}`)
      return answer(res, 400, 'application/json', '{}')
    }
    // An empty ExportTraceServiceResponse: full success.
    if (contentType.startsWith('application/json')) answer(res, 200, 'application/json', '{}')
    else answer(res, 200, 'application/x-protobuf', '')
  }

  private control(req: IncomingMessage, res: ServerResponse, url: URL, body: Buffer): void {
    if (url.pathname === '/__mock/spans' && req.method === 'GET') return answer(res, 200, 'application/json', JSON.stringify(this.spans))
    if (url.pathname === '/__mock/spans' && req.method === 'DELETE') {
      this.reset()
      return answer(res, 204, 'application/json', '')
    }
    if (url.pathname === '/__mock/failure' && req.method === 'PUT') {
      this.setFailure(JSON.parse(body.toString('utf8')) as Failure)
      return answer(res, 204, 'application/json', '')
    }
    if (url.pathname === '/__mock/failure' && req.method === 'DELETE') {
      this.setFailure(undefined)
      return answer(res, 204, 'application/json', '')
    }
    answer(res, 404, 'application/json', '{}')
  }
}

function answer(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type })
  res.end(body)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.MOCK_OTLP_PORT ?? 4318)
  const host = process.env.MOCK_OTLP_HOST ?? '127.0.0.1'
  const receiver = await new MockOtlp({ print: process.env.MOCK_OTLP_QUIET !== 'true' }).listen(port, host)
  console.log(`stand-in OTLP receiver on ${receiver.url.replace('127.0.0.1', host)}: OTEL_EXPORTER_OTLP_ENDPOINT=${receiver.url}`)
  const shutdown = (): void => void receiver.close().then(() => process.exit(0))
  process.on('SIGTERM', shutdown)
  process.on('SIGINT', shutdown)
}
