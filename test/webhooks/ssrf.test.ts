import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// No request into our own network (docs/architecture.md §D34), with the flags off: internal
// addresses refused when an endpoint is registered, and names that resolve to one blocked
// when an attempt connects, while a receiver on loopback waits for a request that must not come.

describe('the SSRF guard, flags off', () => {
  let t: TestGateway
  let admin: string
  let key: string
  let hotel: string
  let receiver: Receiver
  // The test's resolver: names that point at loopback, as a hostile DNS answer (or a rebinding) would.
  const names: Record<string, string> = { 'loopback.example': '127.0.0.1', 'mapped.example': '::ffff:127.0.0.1', 'metadata.example': '169.254.169.254' }

  beforeAll(async () => {
    receiver = await new Receiver().listen()
    t = await TestGateway.start({
      env: PUBLISHER_TOKENS,
      // http: allowed so the names can point at the plain receiver; private targets not.
      config: webhookConfig({ allowHttp: true, allowPrivateTargets: false, retrySchedule: [0.1] }),
      gateway: { webhookHooks: { lookup: async (name) => names[name] ?? '93.184.216.34' } },
    })
    admin = await listenAdmin(t.gateway)
    key = await t.key()
    hotel = String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid)
  })
  afterAll(async () => {
    await t.close()
    await receiver.close()
  })

  it.each([
    'https://localhost/hook', 'https://127.0.0.1/hook', 'https://[::ffff:127.0.0.1]/hook', 'https://169.254.169.254/latest/meta-data', 'https://[::1]/hook',
  ])('refuses to register %s (422 NOT_ALLOWED)', async (url) => {
    const answer = await t.call('POST', '/v1/webhook-endpoints', { key, body: JSON.stringify({ url, eventTypes: ['property.updated'] }) })
    expectProblem(answer, { code: 'VALIDATION_FAILED', instance: '/v1/webhook-endpoints', errors: [{ field: 'url', code: 'NOT_ALLOWED', detail: expect.stringMatching(/^url must not point at (localhost|an internal address)\.$/) as string }] })
  })

  it('blocks every attempt to a name that resolves to an internal address: nothing reaches the receiver', async () => {
    const port = new URL(receiver.url).port
    const endpoints = await Promise.all(Object.keys(names).map((name) => createEndpoint(t, key, { url: `http://${name}:${port}/hook`, eventTypes: ['property.updated'] })))
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    const attemptsOf = async (id: string): Promise<{ outcome: string; status: number | null }[]> =>
      (JSON.parse((await t.get(`/v1/webhook-endpoints/${id}/deliveries`, key)).body) as { data: { outcome: string; status: number | null }[] }).data
    // Two attempts each (the schedule has one retry), both blocked.
    for (const endpoint of endpoints) expect(await eventually(async () => (await attemptsOf(endpoint.id)).length === 2, WAIT_MS)).toBe(true)
    for (const endpoint of endpoints) {
      expect((await attemptsOf(endpoint.id)).map(({ outcome, status }) => ({ outcome, status }))).toEqual([{ outcome: 'blocked', status: null }, { outcome: 'blocked', status: null }])
    }
    expect(receiver.received).toEqual([])
    expect(t.logs.records().filter((r) => r.msg === 'webhook attempt' && r.eventId === event?.eventId && r.outcome === 'blocked')).toHaveLength(6)
  })
})
