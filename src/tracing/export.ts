import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import { BatchSpanProcessor, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base'
import { TraceFlags, type Context } from '@opentelemetry/api'

// The way out for finished spans: the SDK's batch processor in front of the OTLP exporter,
// with what it loses counted. A collector that is slow or gone costs dropped spans and
// nothing else: the queue is bounded, an export that fails is given up after its timeout,
// and no request ever waits for either.

export type DropReason = 'queue_full' | 'export_failed'

export interface ExportObserver {
  /** Spans that will never reach the collector, and why. */
  dropped(reason: DropReason, spans: number): void
  /** Spans the collector accepted. */
  exported(spans: number): void
  /** The collector stopped (`false`) or started again (`true`) accepting spans. */
  health?(accepting: boolean): void
}

/** Counts what the exporter hands on and what the collector refused or never got. */
export class CountingExporter implements SpanExporter {
  /** Spans given to the exporter so far: the batch processor's queue is what it holds beyond these. */
  handed = 0
  private accepting = true

  constructor(private readonly inner: SpanExporter, private readonly observer: ExportObserver) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.handed += spans.length
    this.inner.export(spans, (result) => {
      const ok = result.code === ExportResultCode.SUCCESS
      if (ok) this.observer.exported(spans.length)
      else this.observer.dropped('export_failed', spans.length)
      if (ok !== this.accepting) {
        this.accepting = ok
        this.observer.health?.(ok)
      }
      done(result)
    })
  }

  async shutdown(): Promise<void> {
    await this.inner.shutdown()
  }

  async forceFlush(): Promise<void> {
    await this.inner.forceFlush?.()
  }
}

export interface BatchOptions {
  scheduledDelayMs: number
  maxQueueSize: number
  maxExportBatchSize: number
  exportTimeoutMs: number
}

/**
 * The SDK's BatchSpanProcessor, with its drops counted. It drops a finished span when its
 * queue is full but only says so in a diagnostic message; this refuses the span itself one
 * step earlier, under the same condition (the queue is what it was given less what it handed
 * to the exporter), and counts it.
 */
export class BoundedBatchProcessor implements SpanProcessor {
  private readonly batch: BatchSpanProcessor
  private queued = 0

  constructor(private readonly exporter: CountingExporter, private readonly options: BatchOptions, private readonly observer: ExportObserver) {
    this.batch = new BatchSpanProcessor(exporter, {
      scheduledDelayMillis: options.scheduledDelayMs,
      maxQueueSize: options.maxQueueSize,
      maxExportBatchSize: options.maxExportBatchSize,
      exportTimeoutMillis: options.exportTimeoutMs,
    })
  }

  onStart(_span: Span, _parentContext: Context): void {}

  onEnd(span: ReadableSpan): void {
    // The batch processor exports sampled spans only.
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return
    if (this.queued - this.exporter.handed >= this.options.maxQueueSize) {
      this.observer.dropped('queue_full', 1)
      return
    }
    this.queued += 1
    this.batch.onEnd(span)
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush()
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown()
  }
}
