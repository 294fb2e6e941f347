import { describe, expect, it } from 'vitest'
import { medianRound, WEBHOOK_ROW, webhookAttemptLines, type WebhookAttemptRound } from '../../bench/webhook-attempts.js'

// The webhook attempt row's line under the bench's table: its figures and the verdict against
// the target (an attempt at most 3× a bare POST's CPU), read from the round of the median ratio.

function cost(median: WebhookAttemptRound, rounds: WebhookAttemptRound[] = [median]) {
  return { events: 500, endpoints: 16, rounds, median }
}

describe('the webhook attempt row', () => {
  it('prints the median round, each round and the verdict "held" at exactly three times the bare POST', () => {
    const round = { attemptUs: 300, redisUs: 60, fanOutRedisUs: 20.4, attemptsPerSecond: 4000, bareUs: 100, floorUs: 212.6 }
    const other = { attemptUs: 250.4, redisUs: 55, fanOutRedisUs: 21, attemptsPerSecond: 4100, bareUs: 99.6, floorUs: 190 }
    expect(webhookAttemptLines(cost(round, [other, round]))).toEqual([
      `Webhooks, ${WEBHOOK_ROW}: 500 events to 16 endpoints on loopback (a receiver answering 204 at once), 8000 attempts per round, `
        + 'the round of the median ratio of 2 (attempt / bare POST / queue\'s floor: 250 / 100 / 190 µs, 300 / 100 / 213 µs): 300 µs of the delivering instance\'s CPU per attempt against 100 µs per bare POST '
        + '(3.00×; target at most 3×: held); 4000 attempts/s; Redis\'s own CPU 60 µs per attempt (3.60× with it), and 20 µs per delivery while the events were written and fanned out. '
        + 'The queue\'s floor, a BullMQ worker with the delivery worker\'s settings that only POSTs the same body: 213 µs per job (2.13× the bare POST); the attempt\'s own work above it 87 µs (0.87× the bare POST).',
      '',
    ])
  })

  it('says "missed" above three times', () => {
    const [line] = webhookAttemptLines(cost({ attemptUs: 301, redisUs: 0, fanOutRedisUs: 0, attemptsPerSecond: 1, bareUs: 100, floorUs: 200 }))
    expect(line).toContain('(3.01×; target at most 3×: missed)')
  })

  it('reads the round of the median ratio, whole: the middle of three, the higher of two', () => {
    const round = (attemptUs: number, bareUs: number, attemptsPerSecond: number): WebhookAttemptRound => ({ attemptUs, redisUs: 1, fanOutRedisUs: 1, attemptsPerSecond, bareUs, floorUs: 1 })
    const [low, middle, high] = [round(200, 100, 1), round(260, 100, 2), round(240, 60, 3)]
    expect(medianRound([high, low, middle])).toBe(middle)
    expect(medianRound([middle, low])).toBe(middle)
    expect(medianRound([low])).toBe(low)
    expect(() => medianRound([])).toThrow('the webhook row measured no round')
  })

  it('prints nothing when the row did not run', () => {
    expect(webhookAttemptLines(undefined)).toEqual([])
  })
})
