import { randomUUID } from 'node:crypto'
import { request } from 'undici'

// How the stand-ins publish what changed, as the internal services do: one CloudEvent 1.0 in
// structured JSON to the gateway's ingest endpoint (`POST /events` on its admin port, with the
// publisher's own token), retried a few times when it does not get a 2xx. What it sent, and
// what the gateway answered, is kept for the stand-in's control API (`GET /__mock/events`).

export interface PublishTarget {
  /** The ingest endpoint, e.g. http://127.0.0.1:9464/events. */
  url: string
  token: string
  /** The CloudEvents `source`: the publisher's name in the gateway's config. */
  source: string
}

export interface Published {
  id: string
  type: string
  data: Record<string, unknown>
  /** The gateway's last answer, or null when none came. */
  status: number | null
  /** What the gateway answered (its JSON), or why nothing came. */
  answer: unknown
}

const ATTEMPTS = 3
/** The most publications kept for the control API. */
const KEPT = 1000

/** The target the environment names (`<PREFIX>URL`, `<PREFIX>TOKEN`, `<PREFIX>SOURCE`), or undefined without a URL and a token. */
export function targetFromEnv(env: NodeJS.ProcessEnv, prefix: string, source: string): PublishTarget | undefined {
  const url = env[`${prefix}URL`]
  const token = env[`${prefix}TOKEN`]
  if (url === undefined || url === '' || token === undefined || token === '') return undefined
  return { url, token, source: env[`${prefix}SOURCE`] || source }
}

export class EventPublisher {
  readonly sent: Published[] = []

  constructor(private target: PublishTarget | undefined) {}

  /** Where to publish from now on (the demo learns the gateway's admin port after starting the stand-ins); undefined: nowhere. */
  publishTo(target: PublishTarget | undefined): void {
    this.target = target
  }

  /** Publishes one event, retrying (the same id, as at-least-once delivery does); undefined when there is nowhere to publish. */
  async publish(type: string, data: Record<string, unknown>): Promise<Published | undefined> {
    const target = this.target
    if (target === undefined) return undefined
    const event = { specversion: '1.0', id: randomUUID(), source: target.source, type, time: new Date().toISOString(), datacontenttype: 'application/json', data }
    const published: Published = { id: event.id, type, data, status: null, answer: null }
    for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
      try {
        const res = await request(target.url, {
          method: 'POST', body: JSON.stringify(event),
          headers: { authorization: `Bearer ${target.token}`, 'content-type': 'application/cloudevents+json' },
          headersTimeout: 5000, bodyTimeout: 5000,
        })
        const text = await res.body.text()
        published.status = res.statusCode
        published.answer = text.startsWith('{') ? JSON.parse(text) as unknown : text
        // A refusal of the event itself will not change on a retry.
        if (res.statusCode < 500 && res.statusCode !== 429) break
      } catch (error) {
        published.answer = (error as Error).message
      }
      if (attempt < ATTEMPTS) await new Promise((resolve) => setTimeout(resolve, 100 * attempt))
    }
    this.sent.push(published)
    if (this.sent.length > KEPT) this.sent.splice(0, this.sent.length - KEPT)
    return published
  }
}
