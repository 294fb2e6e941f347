import { readFileSync } from 'node:fs'
import type { FileConfigInput } from '../../src/config.js'
import type { TestGateway } from './gateway.js'

// Webhook endpoints in tests (docs/partners.md, "Webhooks"): the shipped events section with
// deliveries fit for tests, and an endpoint made through the public API.

const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as { events: FileConfigInput['events'] }

/** The shipped events section with deliveries fit for tests: loopback allowed, short retries. */
export function webhookConfig(events: Partial<NonNullable<FileConfigInput['events']>> = {}): Partial<FileConfigInput> {
  return {
    events: {
      ...shipped.events, allowHttp: true, allowPrivateTargets: true, retrySchedule: [0.2, 0.2, 0.2], deliveryTimeoutMs: 10_000, ...events,
    },
  }
}

/** Long enough for a delivery on a busy machine; tests wait for what they expect, never this long when it comes. */
export const WAIT_MS = 20_000

export async function createEndpoint(t: TestGateway, key: string, body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const answer = await t.call('POST', '/v1/webhook-endpoints', { key, body: JSON.stringify(body) })
  if (answer.statusCode !== 201) throw new Error(`create answered ${answer.statusCode}: ${answer.body}`)
  return (JSON.parse(answer.body) as { data: { id: string; secret: string } }).data
}

