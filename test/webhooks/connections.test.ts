import { request } from 'undici'
import { afterEach, describe, expect, it } from 'vitest'
import { BlockedAddressError } from '../../src/webhooks/addresses.js'
import { EndpointConnections, type ConnectionOptions } from '../../src/webhooks/connections.js'
import { receiversClosedAfterEach } from '../helpers/receiver.js'
import { eventually, freePort } from '../helpers/redis.js'

// The connections deliveries keep to endpoints (src/webhooks/connections.ts): kept alive
// between attempts to one origin, each opened through the address guard (a name is resolved
// and judged for every new connection, never for a request on a kept one), and closed when
// idle, when their origin is forgotten or pushed out, and at shutdown. What is observed is
// what the endpoint sees: the port each request comes from, and the connections open to it.

const receiver = receiversClosedAfterEach()
const made: EndpointConnections[] = []
afterEach(async () => {
  await Promise.all(made.splice(0).map((c) => c.destroy()))
})

function connections(over: Partial<ConnectionOptions> = {}): EndpointConnections {
  const c = new EndpointConnections({ timeoutMs: 2000, allowPrivate: true, ...over })
  made.push(c)
  return c
}

/** An idle time far beyond every wait below, for the tests of what closes a connection before it idles out. */
const LONG_MS = 60_000

/** A receiver that keeps an idle connection open for LONG_MS: only what a test does closes one. */
async function keptOpen(): ReturnType<typeof receiver> {
  return receiver(() => 204, { keepAliveMs: LONG_MS })
}

async function post(c: EndpointConnections, url: string): Promise<number> {
  const answer = await request(url, { method: 'POST', dispatcher: c.of(url), body: '{}', headers: { 'content-type': 'application/json' } })
  await answer.body.dump()
  return answer.statusCode
}

describe('connections to endpoints', () => {
  it('sends later requests to an origin on connections already open, whatever the path', async () => {
    const r = await receiver(() => 204)
    const c = connections()
    for (const path of ['/a', '/b?x=1', '/a', '/c']) expect(await post(c, `${r.url}${path}`)).toBe(204)
    expect(r.received.map((q) => q.path)).toEqual(['/a', '/b?x=1', '/a', '/c'])
    // undici may open a second connection while the first is being freed; never one per request.
    const ports = new Set(r.received.map((q) => q.remotePort))
    expect(ports.size).toBeLessThan(r.received.length)
    expect(c.size).toBe(1)
  })

  it('resolves and judges a name once per connection: again after its origin is forgotten', async () => {
    // Neither side closes an idle connection for a minute here: only forgetting the origin closes them.
    const r = await keptOpen()
    const asked: string[] = []
    const c = connections({ idleMs: LONG_MS, lookup: async (name) => { asked.push(name); return '127.0.0.1' } })
    const url = `http://hooks.example:${new URL(r.url).port}/hook`
    for (let i = 0; i < 4; i += 1) await post(c, url)
    const ports = new Set(r.received.map((q) => q.remotePort))
    expect(ports.size).toBeLessThan(4)
    expect(asked).toEqual([...ports].map(() => 'hooks.example'))
    expect(r.open.size).toBeGreaterThan(0)
    c.forgetUrl(url)
    expect(await eventually(async () => r.open.size === 0, 5000)).toBe(true)
    await post(c, url)
    expect(asked).toHaveLength(ports.size + 1)
    expect(ports.has(r.received[4]?.remotePort)).toBe(false)
  })

  it('refuses a name that resolves to an internal address, on a pool as on every connection: nothing is sent', async () => {
    const r = await receiver(() => 204)
    const c = connections({ allowPrivate: false, lookup: async () => '127.0.0.1' })
    const url = `http://rebound.example:${new URL(r.url).port}/hook`
    for (let i = 0; i < 2; i += 1) {
      const error = await post(c, url).then(() => undefined, (e: unknown) => e)
      expect(error).toBeInstanceOf(BlockedAddressError)
    }
    expect(r.received).toEqual([])
    expect(r.open.size).toBe(0)
  })

  it('closes a connection left idle', async () => {
    const r = await receiver(() => 204)
    const c = connections({ idleMs: 200 })
    await post(c, r.url)
    expect(r.open.size).toBe(1)
    expect(await eventually(async () => r.open.size === 0, 5000)).toBe(true)
  })

  it('keeps the origins used last: the one used longest ago closes when one more comes', async () => {
    // Neither side closes an idle connection for a minute here: b's closes because its pool is pushed out.
    const [a, b, d] = [await keptOpen(), await keptOpen(), await keptOpen()]
    const c = connections({ maxOrigins: 2, idleMs: LONG_MS })
    await post(c, a.url)
    await post(c, b.url)
    await post(c, a.url)
    await post(c, d.url)
    expect(c.size).toBe(2)
    expect(await eventually(async () => b.open.size === 0, 5000)).toBe(true)
    expect([a.open.size, d.open.size]).toEqual([1, 1])
  })

  it('drops every connection at shutdown', async () => {
    // Neither side closes an idle connection for a minute here: only destroy closes them.
    const [a, b] = [await keptOpen(), await keptOpen()]
    const c = connections({ idleMs: LONG_MS })
    await post(c, a.url)
    await post(c, b.url)
    expect([a.open.size, b.open.size]).toEqual([1, 1])
    await c.destroy()
    expect(c.size).toBe(0)
    expect(await eventually(async () => a.open.size + b.open.size === 0, 5000)).toBe(true)
  })

  it('fails a request whose connection is refused, with the refusal', async () => {
    const port = await freePort()
    const c = connections()
    const error = await post(c, `http://127.0.0.1:${port}/hook`).then(() => undefined, (e: unknown) => e)
    expect(error).toMatchObject({ code: 'ECONNREFUSED' })
  })

  it('fails a request whose host name does not resolve with the resolver\'s error, before the delivery timeout', async () => {
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.example'), { code: 'ENOTFOUND' })
    // The delivery timeout (which also bounds connecting) is far beyond the race's limit below,
    // so a lookup failure left unreported shows as 'still waiting', not as a timeout error.
    const c = connections({ timeoutMs: 120_000, lookup: async () => { throw notFound } })
    const attempt = post(c, 'http://nowhere.example:8080/hook').then(() => 'answered', (e: unknown) => e)
    let timer: NodeJS.Timeout | undefined
    const waited = new Promise<string>((resolve) => { timer = setTimeout(() => resolve('still waiting'), 10_000) })
    const outcome = await Promise.race([attempt, waited])
    clearTimeout(timer)
    expect(outcome).toBe(notFound)
  })
})
