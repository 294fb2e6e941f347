import { Agent, request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { canonicalEntry, compileAllowList } from '../../src/keys/addresses.js'
import { ACME_HOST, GLOBEX_HOST } from '../helpers/config.js'
import { TestGateway } from '../helpers/gateway.js'
import { grantClient, keyTool, oauthFor } from '../helpers/oauth.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { REDIS_URL } from '../helpers/redis.js'
import { checkAnswer } from '../helpers/contract.js'

// Where a credential may be used from (docs/architecture.md, "Allowed addresses"): a request
// from an address outside the credential's list is 403 IP_NOT_ALLOWED, after the credential is
// found and active and before the brand check; the detail names the address seen, never the
// list. The client here connects from 127.0.0.2 (outside) or 127.0.0.1 (inside) over real
// sockets; with trustProxy, the address is the one X-Forwarded-For gives.

// undici takes the local address as an option of the client (one inside `connect` is overridden by it).
const fromOutside = new Agent({ localAddress: '127.0.0.2' })
const fromInside = new Agent({ localAddress: '127.0.0.1' })
const idp = new MockIdp()
let t: TestGateway
let proxied: TestGateway

beforeAll(async () => {
  await idp.listen()
  t = await TestGateway.start({ config: { oauth: oauthFor(idp) } })
  proxied = await TestGateway.start({ config: { trustProxy: ['127.0.0.1'] } })
  expect(await t.gateway.tokens.ready(5000)).toBe(true)
})

afterAll(async () => {
  await t.close()
  await proxied.close()
  await idp.close()
  await fromOutside.close()
  await fromInside.close()
})

async function call(gateway: TestGateway, credential: string, dispatcher: Agent, headers: Record<string, string> = {}, host = ACME_HOST) {
  const res = await request(`${gateway.url}/v1/properties`, {
    dispatcher, headers: { host, 'user-agent': 'addresses-test/1.0', authorization: `Bearer ${credential}`, ...headers },
  })
  const answer = { statusCode: res.statusCode, headers: res.headers, body: await res.body.text() }
  checkAnswer('GET', '/v1/properties', answer, gateway.gateway.app.gatewayConfig)
  return answer
}

async function keyIn(gateway: TestGateway, ...flags: string[]): Promise<{ id: string; key: string }> {
  const run = await keyTool({ REDIS_URL, REDIS_PREFIX: gateway.prefix }, 'create', '--mode', 'live', '--all-properties', '--json',
    ...(flags.includes('--brand') ? [] : ['--brand', 'acme']), ...flags)
  expect({ code: run.code, err: run.err }).toEqual({ code: 0, err: [] })
  return JSON.parse(run.out[0] as string) as { id: string; key: string }
}

describe('a key limited to some addresses', () => {
  it('is served from an address of its list and refused from another, naming the address seen and never the list', async () => {
    const { key } = await keyIn(t, '--allow-ips', '127.0.0.1,10.20.0.0/16')
    expectEnvelope(await call(t, key, fromInside), { page: 1, perPage: 20, total: expect.any(Number) as unknown as number })
    const refused = await call(t, key, fromOutside)
    expectProblem(refused, { code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'This API key may not be used from the address 127.0.0.2.' })
    expect(refused.body).not.toContain('10.20.0.0')
    // A refusal spends no quota and carries no quota headers: step 4 comes before step 5.
    expect(refused.headers['ratelimit-limit']).toBeUndefined()
  })

  it('takes CIDR blocks: one that holds the address serves it', async () => {
    const { key } = await keyIn(t, '--allow-ips', '192.0.2.0/24,127.0.0.0/30')
    expect((await call(t, key, fromOutside)).statusCode).toBe(200)
    const narrower = await keyIn(t, '--allow-ips', '127.0.0.0/31')
    expect((await call(t, narrower.key, fromOutside)).statusCode).toBe(403)
    expect((await call(t, narrower.key, fromInside)).statusCode).toBe(200)
  })

  it('is checked after the key is found and active: a suspended key is API_KEY_SUSPENDED from anywhere', async () => {
    const { id, key } = await keyIn(t, '--allow-ips', '127.0.0.1')
    expect((await keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix }, 'suspend', id)).code).toBe(0)
    expectProblem(await call(t, key, fromOutside), { code: 'API_KEY_SUSPENDED', instance: '/v1/properties', detail: 'The API key is suspended.' })
  })

  it('is checked before the brand: a key of another brand from outside its list is IP_NOT_ALLOWED', async () => {
    const { key } = await keyIn(t, '--brand', 'globex', '--allow-ips', '127.0.0.1')
    expectProblem(await call(t, key, fromOutside), { code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'This API key may not be used from the address 127.0.0.2.' })
    expectProblem(await call(t, key, fromInside), { code: 'BRAND_ACCESS_DENIED', instance: '/v1/properties' })
    expect((await call(t, key, fromInside, {}, GLOBEX_HOST)).statusCode).toBe(200)
  })

  it('without a list is served from anywhere', async () => {
    const { key } = await keyIn(t)
    expect((await call(t, key, fromOutside)).statusCode).toBe(200)
  })
})

describe('a client grant limited to some addresses', () => {
  it('refuses the client\'s tokens from elsewhere', async () => {
    await grantClient({ REDIS_URL, REDIS_PREFIX: t.prefix }, idp, 'fenced-client', '--allow-ips', '127.0.0.1')
    const token = idp.issue('fenced-client', ['properties:read'])
    expect((await call(t, token, fromInside)).statusCode).toBe(200)
    expectProblem(await call(t, token, fromOutside), {
      code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'The client of this access token may not be used from the address 127.0.0.2.',
    })
  })
})

describe('behind a trusted proxy (trustProxy)', () => {
  it('checks the client address X-Forwarded-For gives, as Fastify derives it', async () => {
    const { key } = await keyIn(proxied, '--allow-ips', '203.0.113.7')
    expect((await call(proxied, key, fromInside, { 'x-forwarded-for': '203.0.113.7' })).statusCode).toBe(200)
    expectProblem(await call(proxied, key, fromInside, { 'x-forwarded-for': '198.51.100.1' }), {
      code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'This API key may not be used from the address 198.51.100.1.',
    })
    // A proxy it does not trust (127.0.0.2) is not believed: the peer's address counts.
    expectProblem(await call(proxied, key, fromOutside, { 'x-forwarded-for': '203.0.113.7' }), {
      code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'This API key may not be used from the address 127.0.0.2.',
    })
  })
})

describe('an allow-list entry', () => {
  it.each([
    ['10.1.2.3', '10.1.2.3'],
    ['10.0.0.0/8', '10.0.0.0/8'],
    ['0.0.0.0/0', '0.0.0.0/0'],
    [' 192.0.2.1/32 ', '192.0.2.1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:db8:0:0:0:0:0:0/32', '2001:db8::/32'],
    ['2001:db8:0:1:0:0:0:1', '2001:db8:0:1::1'],
    ['::', '::'],
    ['::/0', '::/0'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    ['::ffff:10.0.0.0/104', '10.0.0.0/8'],
    ['fe80::1:2:3:4', 'fe80::1:2:3:4'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
  ])('takes %j, written %j', (text, written) => {
    expect(canonicalEntry(text)).toEqual({ entry: written })
  })

  it.each([
    ['10.0.0.0/33', "'10.0.0.0/33' is not an IPv4 or IPv6 address or CIDR block"],
    ['256.0.0.1', "'256.0.0.1' is not an IPv4 or IPv6 address or CIDR block"],
    ['010.0.0.1', "'010.0.0.1' is not an IPv4 or IPv6 address or CIDR block"],
    ['10.0.0', "'10.0.0' is not an IPv4 or IPv6 address or CIDR block"],
    ['1::2::3', "'1::2::3' is not an IPv4 or IPv6 address or CIDR block"],
    ['2001:db8::/129', "'2001:db8::/129' is not an IPv4 or IPv6 address or CIDR block"],
    ['10.0.0.0/08', "'10.0.0.0/08' is not an IPv4 or IPv6 address or CIDR block"],
    ['example.com', "'example.com' is not an IPv4 or IPv6 address or CIDR block"],
    ['10.0.0.1/8', "'10.0.0.1/8' has bits set past its prefix; the block is 10.0.0.0/8"],
    ['2001:db8::1/32', "'2001:db8::1/32' has bits set past its prefix; the block is 2001:db8::/32"],
  ])('refuses %j', (text, problem) => {
    expect(canonicalEntry(text)).toEqual({ problem })
  })
})

describe('the compiled allow-list', () => {
  const allowed = compileAllowList(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '0.0.0.0/32'])

  it.each([
    ['10.255.255.255', true], ['11.0.0.0', false], ['9.255.255.255', false], ['192.0.2.7', true], ['192.0.2.8', false],
    ['::ffff:10.1.1.1', true], ['::ffff:11.1.1.1', false], ['2001:db8:ffff::1', true], ['2001:db9::1', false],
    ['0.0.0.0', true], ['0.0.0.1', false], ['not an address', false], ['fe80::1%eth0', false],
  ])('answers %s: %s', (address, expected) => {
    expect(allowed(address)).toBe(expected)
    // Asked again (the address remembered), the same.
    expect(allowed(address)).toBe(expected)
  })

  it('lets any address through a /0 of its family only', () => {
    expect(compileAllowList(['0.0.0.0/0'])('203.0.113.9')).toBe(true)
    expect(compileAllowList(['0.0.0.0/0'])('2001:db8::1')).toBe(false)
    expect(compileAllowList(['::/0'])('2001:db8::1')).toBe(true)
    expect(compileAllowList(['::/0'])('203.0.113.9')).toBe(false)
  })
})
