import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { runKeyTool } from '../../src/credentials/tool.js'
import { RedisKeyStore } from '../../src/keys/store.js'
import { accepted, hotelChanged, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { Receiver } from '../helpers/receiver.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'
import { createEndpoint, WAIT_MS, webhookConfig } from '../helpers/webhooks.js'

// Endpoints belong to the credential that made them (docs/partners.md, "Webhooks"): a
// credential suspended, revoked or expired gets no new deliveries; a revoked one's endpoints
// are deleted with it; /status and gateway_webhook_endpoints count only endpoints that can
// receive.

const ADMIN_TOKEN = 'webhooks-credentials-admin-token'

describe('endpoints of credentials that may not receive', () => {
  const redis = new Redis(REDIS_URL)
  const gateways: TestGateway[] = []
  const receivers: Receiver[] = []

  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()))
    await Promise.all(gateways.splice(0).map((g) => g.close()))
  })
  afterAll(() => {
    redis.disconnect()
  })

  async function start(worker: 'on' | 'off'): Promise<{ t: TestGateway; admin: string; keys: RedisKeyStore; hotel: string; r: Receiver }> {
    const t = await TestGateway.start({ env: { ...PUBLISHER_TOKENS, EVENTS_WORKER: worker, ADMIN_TOKEN }, config: webhookConfig() })
    gateways.push(t)
    const r = await new Receiver().listen()
    receivers.push(r)
    return { t, admin: await listenAdmin(t.gateway), keys: new RedisKeyStore(redis, t.prefix), hotel: String(t.pms.hotels.find((h) => h.chain_code === 'ACME')?.hotel_uuid), r }
  }

  it('queues nothing for a suspended or an expired key\'s endpoints, and counts only endpoints that can receive', async () => {
    // Serving only: the queued deliveries stay to be counted.
    const { t, admin, keys, hotel, r } = await start('off')
    const active = await t.keyWithId()
    const suspended = await t.keyWithId()
    const expired = await t.keyWithId()
    await createEndpoint(t, active.key, { url: `${r.url}/active`, eventTypes: ['property.updated'] })
    const off = await createEndpoint(t, active.key, { url: `${r.url}/off`, eventTypes: ['property.updated'] })
    expect((await t.call('PATCH', `/v1/webhook-endpoints/${off.id}`, { key: active.key, body: JSON.stringify({ status: 'disabled' }) })).statusCode).toBe(200)
    await createEndpoint(t, suspended.key, { url: `${r.url}/suspended`, eventTypes: ['property.updated'] })
    await createEndpoint(t, expired.key, { url: `${r.url}/expired`, eventTypes: ['property.updated'] })
    await keys.setStatus(suspended.id, 'suspended')
    await keys.update(expired.id, { expiresAt: new Date(Date.now() - 1000).toISOString() })
    accepted(await publish(admin, hotelChanged(hotel)))
    const deliveries = t.gateway.deliveries
    // One delivery: to the active key's enabled endpoint.
    expect(await deliveries?.backlog()).toEqual({ pending: 1, oldestSeconds: expect.any(Number) })
    const [job] = await deliveries?.queue.getJobs(['wait']) ?? []
    expect(job?.data.endpointId).toMatch(/^we_/)
    expect((await t.get(`/v1/webhook-endpoints/${job?.data.endpointId as string}`, active.key)).statusCode).toBe(200)
    const snapshot = await deliveries?.refresh()
    expect(snapshot?.endpoints).toEqual({ enabled: 1, disabled: 1 })
    expect((await (await fetch(`${admin}/status`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json() as { events: unknown }).events).toEqual(snapshot)
    const metrics = await (await fetch(`${admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text()
    expect(metrics).toMatch(/^gateway_webhook_endpoints\{status="enabled"\} 1$/m)
    expect(metrics).toMatch(/^gateway_webhook_endpoints\{status="disabled"\} 1$/m)
    // Resumed, the key's endpoint gets the next event again. The change is published before
    // setStatus resolves, so the gateway's subscriber holds it before the ingest below has made
    // its first Redis round trip, let alone fanned out with the owner's record it keeps.
    await keys.setStatus(suspended.id, 'active')
    accepted(await publish(admin, hotelChanged(hotel)))
    expect((await deliveries?.backlog())?.pending).toBe(3)
  })

  it('deletes a revoked credential\'s endpoints with it, through the credentials API or the key tool, and delivers them nothing more', async () => {
    const { t, admin, hotel, r } = await start('on')
    const viaApi = await t.keyWithId()
    const viaTool = await t.keyWithId()
    const witness = await t.keyWithId()
    const gone = [
      await createEndpoint(t, viaApi.key, { url: `${r.url}/api`, eventTypes: ['property.updated'] }),
      await createEndpoint(t, viaApi.key, { url: `${r.url}/api`, eventTypes: ['property.updated'] }),
      await createEndpoint(t, viaTool.key, { url: `${r.url}/tool`, eventTypes: ['property.updated'] }),
    ]
    await createEndpoint(t, witness.key, { url: `${r.url}/witness`, eventTypes: ['property.updated'] })
    const revoked = await request(`${admin}/admin/v1/credentials/${viaApi.id}/revoke`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    expect(revoked.statusCode).toBe(200)
    await revoked.body.dump()
    const out: string[] = []
    const code = await runKeyTool(['revoke', viaTool.id], { CONFIG_FILE: 'config/default.json', REDIS_URL, REDIS_PREFIX: t.prefix }, { out: (l) => out.push(l), err: () => undefined })
    expect({ code, out }).toEqual({ code: 0, out: [`revoked ${viaTool.id}`] })
    const stored = await redis.hkeys(`${t.prefix}{webhooks}:ep`)
    for (const { id } of gone) expect(stored).not.toContain(id)
    expect(stored).toHaveLength(1)
    expect(await redis.exists(`${t.prefix}{webhooks}:cred:${viaApi.id}`, `${t.prefix}{webhooks}:cred:${viaTool.id}`)).toBe(0)
    const [event] = accepted(await publish(admin, hotelChanged(hotel)))
    expect(await eventually(async () => r.of(event?.eventId as string).length === 1, WAIT_MS)).toBe(true)
    expect(await eventually(async () => (await t.gateway.deliveries?.backlog())?.pending === 0, WAIT_MS)).toBe(true)
    expect(r.received.map((x) => x.path)).toEqual(['/witness'])
    expect((await t.gateway.deliveries?.refresh())?.endpoints).toEqual({ enabled: 1, disabled: 0 })
  })
})
