import Fastify from 'fastify'
import { Agent, request } from 'undici'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError, type FileConfigInput } from '../src/config.js'
import { ACME_HOST, testConfig } from './helpers/config.js'
import { TestGateway } from './helpers/gateway.js'
import { expectProblem } from './helpers/problem.js'

// trustProxy in each of its forms (docs/operations.md, "Kubernetes"; docs/architecture.md
// §D46): the client address the gateway derives from a connection and its X-Forwarded-For
// chain is Fastify's, and every part that looks at a client address sees that one: allowed
// addresses (the 403 names the address seen), the bound on invalid credentials per address,
// and the request's log line (`clientIp`). Clients connect from 127.0.0.1 or 127.0.0.2 over
// real sockets; a hop count, which the installed Fastify ignores, is refused at start.

const agents = { '127.0.0.1': new Agent({ localAddress: '127.0.0.1' }), '127.0.0.2': new Agent({ localAddress: '127.0.0.2' }) }
type Peer = keyof typeof agents

afterAll(async () => {
  await Promise.all(Object.values(agents).map(async (agent) => agent.close()))
})

interface Chain {
  /** The connection's own address. */
  peer: Peer
  /** X-Forwarded-For as sent, or none. */
  forwarded: string | undefined
  /** The client address every part must see. */
  client: string
}

const forms: { name: string; trustProxy: FileConfigInput['trustProxy']; chains: Chain[] }[] = [
  {
    name: 'false: no proxy is believed',
    trustProxy: false,
    chains: [
      { peer: '127.0.0.1', forwarded: '203.0.113.7', client: '127.0.0.1' },
      { peer: '127.0.0.2', forwarded: '198.51.100.9, 10.1.2.3', client: '127.0.0.2' },
    ],
  },
  {
    name: 'true: every proxy is believed, the first address of the chain is the client',
    trustProxy: true,
    chains: [
      { peer: '127.0.0.1', forwarded: '203.0.113.7', client: '203.0.113.7' },
      { peer: '127.0.0.2', forwarded: '198.51.100.9, 10.1.2.3', client: '198.51.100.9' },
      { peer: '127.0.0.1', forwarded: undefined, client: '127.0.0.1' },
    ],
  },
  {
    name: 'an address: that proxy alone is believed',
    trustProxy: ['127.0.0.1'],
    chains: [
      { peer: '127.0.0.1', forwarded: '203.0.113.7', client: '203.0.113.7' },
      // 10.1.2.3 is no trusted proxy: it is the client, whatever it says came before it.
      { peer: '127.0.0.1', forwarded: '198.51.100.9, 10.1.2.3', client: '10.1.2.3' },
      // A connection from an address not listed is the client itself.
      { peer: '127.0.0.2', forwarded: '203.0.113.7', client: '127.0.0.2' },
    ],
  },
  {
    name: 'CIDR blocks: every proxy inside them is believed, walking the chain from the right',
    trustProxy: ['127.0.0.0/8', '10.0.0.0/8'],
    chains: [
      { peer: '127.0.0.2', forwarded: '198.51.100.9, 10.1.2.3', client: '198.51.100.9' },
      { peer: '127.0.0.1', forwarded: '192.0.2.1, 198.51.100.9, 10.200.0.1, 10.1.2.3', client: '198.51.100.9' },
      { peer: '127.0.0.1', forwarded: '10.9.9.9', client: '10.9.9.9' },
    ],
  },
  {
    name: 'an IPv4-mapped IPv6 address: the IPv4 proxy it maps is believed',
    trustProxy: ['::ffff:127.0.0.1'],
    chains: [
      { peer: '127.0.0.1', forwarded: '203.0.113.7', client: '203.0.113.7' },
      { peer: '127.0.0.2', forwarded: '203.0.113.7', client: '127.0.0.2' },
    ],
  },
]

/** Junk credentials an address may send in a minute before its look-ups are refused. */
const ALLOWANCE = 2

async function send(t: TestGateway, chain: Chain, authorization: string) {
  const res = await request(`${t.url}/v1/properties?perPage=1`, {
    dispatcher: agents[chain.peer],
    headers: {
      host: ACME_HOST, 'user-agent': 'trust-proxy-test/1.0', authorization,
      ...(chain.forwarded === undefined ? {} : { 'x-forwarded-for': chain.forwarded }),
    },
  })
  return { statusCode: res.statusCode, headers: res.headers as Record<string, string>, body: await res.body.text() }
}

function clientIpLogged(t: TestGateway, requestId: string): unknown {
  const line = t.logs.records().find((record) => record.reqId === requestId)
  expect(line, `the log line of ${requestId}`).toBeDefined()
  return line?.clientIp
}

describe.each(forms)('trustProxy $name', ({ trustProxy, chains }) => {
  it('gives allowed addresses, the abuse bound and the log line the same client address, for every chain', async () => {
    const t = await TestGateway.start({ config: { trustProxy, abuse: { authFailuresPerMinute: ALLOWANCE, trackedAddresses: 1000, unknownKeys: 1000 } } })
    try {
      for (const chain of chains) {
        // Allowed addresses: a key of this client's address only is served; one of another
        // address is refused, naming the address it saw.
        const own = await t.key({ allowedIps: [chain.client] })
        const served = await send(t, chain, `Bearer ${own}`)
        expect(served.statusCode, JSON.stringify(chain)).toBe(200)
        expect(clientIpLogged(t, served.headers['service-request-id'] as string)).toBe(chain.client)
        const elsewhere = await t.key({ allowedIps: ['192.0.2.250'] })
        const refused = await send(t, chain, `Bearer ${elsewhere}`)
        expectProblem(refused, { code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: `This API key may not be used from the address ${chain.client}.` })
        expect(clientIpLogged(t, refused.headers['service-request-id'] as string)).toBe(chain.client)
      }
      // The abuse bound counts each client address apart: the first chain's address uses up
      // its allowance of junk, and then may not make the instance look up a key it does not
      // know; a chain of another client address still may.
      const [first, ...others] = chains as [Chain, ...Chain[]]
      for (let i = 0; i < ALLOWANCE; i += 1) {
        const junk = await send(t, first, 'Bearer nope')
        expect(junk.statusCode).toBe(401)
        expect(clientIpLogged(t, junk.headers['service-request-id'] as string)).toBe(first.client)
      }
      expectProblem(await send(t, first, `Bearer ${await t.key()}`), { code: 'RATE_LIMITED', instance: '/v1/properties', headers: { 'retry-after': /^\d+$/ } })
      for (const other of others) {
        const looked = await send(t, other, `Bearer ${await t.key()}`)
        expect(looked.statusCode, JSON.stringify(other)).toBe(other.client === first.client ? 429 : 200)
      }
    } finally {
      await t.close()
    }
  })
})

describe('trustProxy as a hop count', () => {
  it('is ignored by the installed Fastify, which then believes no proxy', async () => {
    // Why the gateway refuses it: taken, the count would be ignored in silence.
    const app = Fastify({ trustProxy: 1 as unknown as boolean })
    app.get('/', async (request) => ({ ip: request.ip, ips: request.ips }))
    const res = await app.inject({ method: 'GET', url: '/', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': '203.0.113.7' } })
    expect(res.json()).toEqual({ ip: '10.0.0.1', ips: ['10.0.0.1'] })
    await app.close()
  })

  it.each([1, 2, 32])('is refused at start (%i), the message saying what to set instead', (hops) => {
    let thrown: unknown
    try {
      testConfig({ trustProxy: hops })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(ConfigError)
    expect((thrown as ConfigError).problems).toEqual([
      'config/default.json trustProxy: a hop count is ignored by Fastify, which then believes no proxy at all: list the addresses or CIDR blocks your proxies connect from instead (e.g. ["10.0.0.0/8"])',
    ])
  })

  it.each([['10.0.0.1/33'], ['example.com'], ['010.0.0.1'], ['fe80::1%eth0']])('is no more taken than an entry that is no address or block: %s', (entry) => {
    expect(() => testConfig({ trustProxy: [entry] })).toThrow('config/default.json trustProxy[0]: must be an IP address or a CIDR block')
  })
})
