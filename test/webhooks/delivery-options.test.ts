import { describe, expect, it } from 'vitest'
import { DELIVERY_QUEUE_STREAMS, deliveryJobOptions, deliveryWorkerOptions } from '../../src/webhooks/deliveries.js'

// The options every delivery job is enqueued with and the delivery worker runs with: one
// source for the gateway and the bench's queue floor (bench/queue-floor.ts).

describe('a delivery job\'s options', () => {
  it('give it the first attempt and one per entry of the schedule, the schedule\'s backoff, no stack trace, and keep it a day when done, a week when failed', () => {
    expect(deliveryJobOptions({ retrySchedule: [5, 300, 1800] }, '01KB.we_1')).toEqual({
      jobId: '01KB.we_1', attempts: 4, backoff: { type: 'schedule' }, removeOnComplete: { age: 86_400 }, removeOnFail: { age: 604_800 }, stackTraceLimit: 0,
    })
  })
})

describe('the delivery worker\'s options', () => {
  it('run as many deliveries at once as configured, lock each for the configured time and check for stalled ones twice a lock, and retry a job an instance died on up to 10 times', () => {
    const { settings, ...options } = deliveryWorkerOptions({ deliveryWorkers: 8, deliveryLockSeconds: 20, retrySchedule: [5, 300] })
    expect(options).toEqual({ concurrency: 8, lockDuration: 20_000, stalledInterval: 10_000, maxStalledCount: 10 })
    // The backoff follows the schedule, within its ±10 % spread: the second attempt ~5 s after the first, the third ~300 s after.
    const backoff = settings?.backoffStrategy as (attemptsMade: number) => number
    expect([backoff(1), backoff(2)].map((ms) => [ms >= 4500 && ms <= 5500, ms >= 270_000 && ms <= 330_000])).toEqual([[true, false], [false, true]])
  })

  it('keep the queue\'s event stream short: nothing reads it', () => {
    expect(DELIVERY_QUEUE_STREAMS).toEqual({ events: { maxLen: 1000 } })
  })
})
