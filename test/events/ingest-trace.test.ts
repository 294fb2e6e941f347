import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockOtlp } from '../../mocks/otlp/server.js'
import { TestGateway } from '../helpers/gateway.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { eventually } from '../helpers/redis.js'

// The ingest is a span (docs/operations.md, "Tracing"): a server span of the admin port, a
// child of the publisher's traceparent, linked to the trace each event came with, and never
// holding a token or a body.

describe('the span of an ingest request', () => {
  let collector: MockOtlp
  let t: TestGateway
  let admin: string

  beforeAll(async () => {
    collector = await new MockOtlp().listen()
    t = await TestGateway.start({
      env: { ...PUBLISHER_TOKENS, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_SCHEDULE_DELAY: '20' },
    })
    admin = await listenAdmin(t.gateway)
  })
  afterAll(async () => {
    await t.close()
    await collector.close()
  })

  it('continues the publisher\'s trace, links each event\'s own and says what became of the events', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    const eventTrace = '0af7651916cd43dd8448eb211c80319c'
    const events = [
      hotelChanged('3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', 'ACME', { traceparent: `00-${eventTrace}-b7ad6b7169203331-01` }),
      hotelChanged('3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10', 'ACME', { type: 'com.example.pms.unknown' }),
    ]
    accepted(await publish(admin, events, { headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } }))
    expect(await eventually(async () => collector.spans.some((s) => s.traceId === traceId), 15_000)).toBe(true)
    const span = collector.spans.find((s) => s.traceId === traceId)
    expect(span).toMatchObject({
      name: 'POST /events', kind: 'server', parentSpanId: '00f067aa0ba902b7', links: [{ traceId: eventTrace, spanId: 'b7ad6b7169203331' }],
      attributes: {
        'http.response.status_code': 202, 'gateway.publisher': 'pms', 'gateway.events': 2,
        'gateway.events.accepted': 1, 'gateway.events.duplicate': 0, 'gateway.events.dropped': 1,
      },
      status: { code: 'unset' },
    })
    const refused = await publish(admin, events[0], { token: 'no-token-of-anybody', headers: { traceparent: `00-${traceId.replace('4bf9', '5bf9')}-00f067aa0ba902b7-01` } })
    expect(refused.statusCode).toBe(401)
    expect(await eventually(async () => collector.spans.some((s) => s.traceId.startsWith('5bf9')), 15_000)).toBe(true)
    expect(collector.spans.find((s) => s.traceId.startsWith('5bf9'))?.attributes).toEqual({
      'http.response.status_code': 401, 'gateway.events.accepted': 0, 'gateway.events.duplicate': 0, 'gateway.events.dropped': 0, 'error.type': 'INVALID_AUTH_HEADER',
    })
    const text = JSON.stringify(collector.spans)
    for (const secret of [PUBLISHER_TOKENS.EVENTS_PMS_TOKEN, 'no-token-of-anybody', String(events[0]?.id)]) expect(text).not.toContain(secret)
  })
})
