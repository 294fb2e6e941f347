import { z } from 'zod'
import { milliseconds, optionalUrl, positiveIntText } from '../config/fields.js'

// Tracing's section of the configuration (docs/architecture.md, "Configuration"): the
// OpenTelemetry SDK's own variables, validated here and handed to the SDK (docs/operations.md,
// "Tracing"). Without an endpoint nothing is exported and no span is made.

/** The OpenTelemetry samplers the gateway builds (the OpenTelemetry SDK environment specification). */
export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const
export type SamplerName = (typeof SAMPLERS)[number]

const otlpProtocol = z.enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json (grpc is not supported)' })

// `key=value,key=value` with percent-encoded values (W3C Baggage syntax, which the
// OpenTelemetry variables use). The message never quotes the value: it may be a credential.
const KEY_VALUE_MEMBER = /^\s*[A-Za-z0-9!#$%&'*+\-.^_`|~]+\s*=[^,]*$/
const keyValueList = z.string().refine((text) => text.split(',').every((member) => member.trim() === '' || KEY_VALUE_MEMBER.test(member)),
  'must be a list of key=value separated by commas')

/** A `key=value,key=value` list as a record, values percent-decoded (a bad escape is kept as written). */
export function parseKeyValueList(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  if (text === undefined) return out
  for (const member of text.split(',')) {
    const equals = member.indexOf('=')
    if (equals === -1) continue
    const key = member.slice(0, equals).trim()
    const raw = member.slice(equals + 1).trim()
    let value = raw
    try {
      value = decodeURIComponent(raw)
    } catch {
      // Kept as written.
    }
    if (key !== '') out[key] = value
  }
  return out
}

export const tracingEnvFields = {
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl.describe('Base URL of an OTLP/HTTP collector; spans go to `<url>/v1/traces`. Without it (or the next) no span is made or exported'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalUrl.describe('Full URL spans are posted to (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`)'),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.default('http/protobuf').describe('Encoding of the export'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional().describe('Encoding of the span export (wins over `OTEL_EXPORTER_OTLP_PROTOCOL`)'),
  OTEL_EXPORTER_OTLP_HEADERS: keyValueList.optional()
    .describe('Headers of every export, `name=value,name=value` (values percent-encoded), e.g. a collector\'s credentials; never logged'),
  OTEL_EXPORTER_OTLP_TIMEOUT: milliseconds.default(10000).describe('Time one export may take, retries included (ms); past it its spans are dropped'),
  OTEL_SERVICE_NAME: z.string().min(1).default('partner-gateway').describe('`service.name` of the spans'),
  OTEL_RESOURCE_ATTRIBUTES: keyValueList.optional().describe('More resource attributes of the spans, `key=value,key=value` (e.g. `deployment.environment.name=prod`)'),
  OTEL_TRACES_SAMPLER: z.enum(SAMPLERS, { error: `must be one of ${SAMPLERS.join(', ')}` }).default('parentbased_traceidratio')
    .describe('Which requests are traced: `parentbased_*` follow the caller\'s sampled flag when it sent a `traceparent`'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).default(0.01).describe('The ratio (0-1) of new traces the `*traceidratio` samplers keep'),
  OTEL_BSP_SCHEDULE_DELAY: milliseconds.default(5000).describe('Longest wait before the finished spans are exported (ms)'),
  OTEL_BSP_MAX_QUEUE_SIZE: positiveIntText.default(2048).describe('Finished spans held for export; beyond it spans are dropped (and counted)'),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: positiveIntText.default(512).describe('Most spans in one export (at most `OTEL_BSP_MAX_QUEUE_SIZE`)'),
  OTEL_BSP_EXPORT_TIMEOUT: milliseconds.default(30000).describe('Time the batch processor waits for one export (ms)'),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).default('false').describe('`true` turns tracing off whatever else is set'),
}

// Checked on the raw values, so that they are reported even when another variable is bad.
export function tracingEnvProblems(env: Record<string, string>): string[] {
  if (env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE !== undefined && Number(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE) > Number(env.OTEL_BSP_MAX_QUEUE_SIZE ?? 2048)) {
    return ['environment OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE']
  }
  return []
}

/** Where and how spans are exported; absent when tracing is off (no endpoint, or OTEL_SDK_DISABLED). */
export interface TracingSettings {
  /** The URL spans are posted to. */
  url: string
  protocol: 'http/protobuf' | 'http/json'
  /** Sent with every export; may hold a credential. */
  headers: Record<string, string>
  timeoutMs: number
  serviceName: string
  resourceAttributes: Record<string, string>
  sampler: SamplerName
  /** The ratio of the `*traceidratio` samplers. */
  ratio: number
  batch: { scheduledDelayMs: number; maxQueueSize: number; maxExportBatchSize: number; exportTimeoutMs: number }
}

/** The span export the environment asks for; undefined without an endpoint or with OTEL_SDK_DISABLED=true. */
export function tracingSettings(e: z.infer<z.ZodObject<typeof tracingEnvFields>>): TracingSettings | undefined {
  // OTLP/HTTP: a signal's own endpoint is used as given; the base endpoint gets the signal's path.
  const url = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    ?? (e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined ? undefined : `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`)
  if (url === undefined || e.OTEL_SDK_DISABLED === 'true') return undefined
  return {
    url,
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL,
    headers: parseKeyValueList(e.OTEL_EXPORTER_OTLP_HEADERS),
    timeoutMs: e.OTEL_EXPORTER_OTLP_TIMEOUT,
    serviceName: e.OTEL_SERVICE_NAME,
    resourceAttributes: parseKeyValueList(e.OTEL_RESOURCE_ATTRIBUTES),
    sampler: e.OTEL_TRACES_SAMPLER,
    ratio: e.OTEL_TRACES_SAMPLER_ARG,
    batch: {
      scheduledDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
      maxQueueSize: e.OTEL_BSP_MAX_QUEUE_SIZE,
      // A smaller queue set alone shrinks the default batch with it.
      maxExportBatchSize: Math.min(e.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, e.OTEL_BSP_MAX_QUEUE_SIZE),
      exportTimeoutMs: e.OTEL_BSP_EXPORT_TIMEOUT,
    },
  }
}
