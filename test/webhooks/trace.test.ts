import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockOtlp } from '../../mocks/otlp/server.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// Each attempt is a client span (docs/architecture.md, "Webhooks"), linked to the trace the
// publisher sent the event with, naming the event, the endpoint, the attempt and its outcome,
// and never a secret, a signature or a body.

describe('the span of a delivery attempt', () => {
  let collector: MockOtlp
  let receiver: Receiver
  let t: TestGateway

  beforeAll(async () => {
    collector = await new MockOtlp().listen()
    receiver = await new Receiver((n) => (n === 1 ? 503 : 204)).listen()
    t = await TestGateway.start({
      env: { ...PUBLISHER_TOKENS, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_SCHEDULE_DELAY: '20' },
      config: webhookConfig(),
    })
  })
  afterAll(async () => {
    await t.close()
    await collector.close()
    await receiver.close()
  })

  it('is linked to the publisher\'s trace, one per attempt, with the outcome and status only', async () => {
    const admin = await listenAdmin(t.gateway)
    const key = await t.key()
    const endpoint = await createEndpoint(t, key, { url: receiver.url, eventTypes: ['property.updated'] })
    const publisherTrace = '0af7651916cd43dd8448eb211c80319c'
    const [event] = accepted(await publish(admin, hotelChanged('3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', 'ACME', { traceparent: `00-${publisherTrace}-b7ad6b7169203331-01` })))
    const attemptSpans = () => collector.spans.filter((s) => s.name === 'POST webhook')
    expect(await eventually(async () => attemptSpans().length === 2, WAIT_MS)).toBe(true)
    const [first, second] = attemptSpans().sort((a, b) => Number(a.attributes['gateway.webhook.attempt']) - Number(b.attributes['gateway.webhook.attempt']))
    const common = { 'gateway.webhook.event_id': event?.eventId, 'gateway.webhook.endpoint_id': endpoint.id }
    expect(first).toMatchObject({
      kind: 'client', links: [{ traceId: publisherTrace, spanId: 'b7ad6b7169203331' }],
      attributes: { ...common, 'gateway.webhook.attempt': 1, 'gateway.webhook.outcome': 'failed', 'http.response.status_code': 503 }, status: { code: 'error' },
    })
    expect(second).toMatchObject({
      kind: 'client', links: [{ traceId: publisherTrace, spanId: 'b7ad6b7169203331' }],
      attributes: { ...common, 'gateway.webhook.attempt': 2, 'gateway.webhook.outcome': 'delivered', 'http.response.status_code': 204 },
    })
    expect(first?.traceId).not.toBe(publisherTrace)
    const text = JSON.stringify(collector.spans)
    for (const secret of [endpoint.secret, endpoint.secret.slice(6), String(receiver.received[0]?.headers['webhook-signature'])]) expect(text).not.toContain(secret)
  })
})
