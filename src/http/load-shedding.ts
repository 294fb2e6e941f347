import { monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks'

// Load shedding that reacts to sustained overload, not to one stall (docs/architecture.md
// §D17). Each sample looks at the *median* event-loop delay of its interval (one long pause is
// one outlier among many short delays) and at the utilisation; only `sustainedSamples`
// overloaded samples in a row turn shedding on, and the first sample that keeps up turns it
// off. A process paused for 1.5 s (a GC pause, a throttled container) makes at most two
// overloaded samples: it answers the requests that waited and sheds nothing.

export interface LoadShedderOptions {
  maxEventLoopDelayMs: number
  maxEventLoopUtilization: number
  sampleIntervalMs: number
  sustainedSamples: number
}

// The histogram's own sampling period: its delays are measured against it.
const RESOLUTION_MS = 10

export class LoadShedder {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  private utilisation: EventLoopUtilization = performance.eventLoopUtilization()
  private timer: NodeJS.Timeout | undefined
  private hotSamples = 0
  /** True while the gateway sheds load. */
  overloaded = false

  constructor(private readonly options: LoadShedderOptions) {}

  get enabled(): boolean {
    return this.options.maxEventLoopDelayMs > 0 || this.options.maxEventLoopUtilization > 0
  }

  start(): void {
    if (!this.enabled || this.timer !== undefined) return
    this.histogram.enable()
    this.utilisation = performance.eventLoopUtilization()
    this.timer = setInterval(() => this.sample(), this.options.sampleIntervalMs)
    this.timer.unref()
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    this.histogram.disable()
  }

  private sample(): void {
    const { maxEventLoopDelayMs, maxEventLoopUtilization, sustainedSamples } = this.options
    // An interval without a single delay sample was spent entirely stalled: that says nothing about load.
    const delayMs = this.histogram.count === 0 ? 0 : Math.max(0, this.histogram.percentile(50) / 1e6 - RESOLUTION_MS)
    this.histogram.reset()
    const now = performance.eventLoopUtilization()
    const utilisation = performance.eventLoopUtilization(now, this.utilisation).utilization
    this.utilisation = now
    const hot = (maxEventLoopDelayMs > 0 && delayMs > maxEventLoopDelayMs)
      || (maxEventLoopUtilization > 0 && utilisation > maxEventLoopUtilization)
    this.hotSamples = hot ? this.hotSamples + 1 : 0
    this.overloaded = this.hotSamples >= sustainedSamples
  }
}
