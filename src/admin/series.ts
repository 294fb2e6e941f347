import type { Metric, Registry } from 'prom-client'

// Per-request metrics without prom-client's per-observation cost: its counters and
// histograms convert, validate and hash the labels on every call, even through a labels()
// child. These keep one record per label set, found by a key the caller builds once, and
// hand prom-client the totals only when /metrics is scraped.

type Labels = Record<string, string>

interface Sample { labels: Labels; value: number; metricName?: string }

abstract class Series<Entry> {
  protected readonly entries = new Map<string, Entry>()

  constructor(readonly name: string, readonly help: string, readonly type: 'counter' | 'histogram', registry: Registry) {
    registry.registerMetric(this as unknown as Metric)
  }

  get aggregator(): 'sum' {
    return 'sum'
  }

  protected abstract samples(): Sample[]

  async get(): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: Sample[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: 'sum', values: this.samples() }
  }
}

export interface CounterRecord { readonly labels: Labels; value: number }

export class CounterSeries extends Series<CounterRecord> {
  constructor(name: string, help: string, registry: Registry) {
    super(name, help, 'counter', registry)
  }

  /** Adds one to the series of `key`; `labels()` is called only the first time a key is seen. */
  inc(key: string, labels: () => Labels): void {
    this.record(key, labels).value += 1
  }

  /** The record of `key`'s series (made at 0 the first time), for a caller that keeps it and adds to its `value` itself. */
  record(key: string, labels: () => Labels): CounterRecord {
    let entry = this.entries.get(key)
    if (entry === undefined) this.entries.set(key, entry = { labels: labels(), value: 0 })
    return entry
  }

  protected samples(): Sample[] {
    return [...this.entries.values()].map((e) => ({ labels: e.labels, value: e.value }))
  }
}

export interface HistogramRecord { readonly labels: Labels; readonly counts: Float64Array; sum: number; count: number }

export class HistogramSeries extends Series<HistogramRecord> {
  constructor(name: string, help: string, private readonly buckets: readonly number[], registry: Registry) {
    super(name, help, 'histogram', registry)
  }

  /** The record of `key`'s series (made empty the first time), for a caller that keeps it (`observeIn`). */
  record(key: string, labels: () => Labels): HistogramRecord {
    let entry = this.entries.get(key)
    if (entry === undefined) {
      entry = { labels: labels(), counts: new Float64Array(this.buckets.length), sum: 0, count: 0 }
      this.entries.set(key, entry)
    }
    return entry
  }

  /** Counts `value` in a record of this series. */
  observeIn(entry: HistogramRecord, value: number): void {
    entry.sum += value
    entry.count += 1
    for (let i = 0; i < this.buckets.length; i += 1) {
      if (value <= (this.buckets[i] as number)) {
        entry.counts[i] = (entry.counts[i] as number) + 1
        break
      }
    }
  }

  protected samples(): Sample[] {
    const out: Sample[] = []
    for (const e of this.entries.values()) {
      let cumulative = 0
      this.buckets.forEach((bound, i) => {
        cumulative += e.counts[i] as number
        out.push({ metricName: `${this.name}_bucket`, labels: { ...e.labels, le: String(bound) }, value: cumulative })
      })
      out.push({ metricName: `${this.name}_bucket`, labels: { ...e.labels, le: '+Inf' }, value: e.count })
      out.push({ metricName: `${this.name}_sum`, labels: e.labels, value: e.sum })
      out.push({ metricName: `${this.name}_count`, labels: e.labels, value: e.count })
    }
    return out
  }
}
