import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, describe, expect, it } from 'vitest'
import { createGateway, type Gateway } from '../../src/gateway.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { keyTool } from '../helpers/oauth.js'
import { eventually, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// Rules of credentials over their life that are set when a gateway is built, so each test
// builds its own (test/mutation-kills/ and the comments of stryker.config.mjs say why): the
// expiry warning's period and its boundary, usage counted by method and route template on a
// running gateway and flushed every usage.flushSeconds, and GET /v1/credential's quota.

const admin = new Redis(REDIS_URL)
const prefixes: string[] = []
afterAll(async () => {
  for (const prefix of prefixes) await removePrefix(admin, prefix)
  admin.disconnect()
})

const DAY = 86_400_000

async function gatewayWith(overrides: Parameters<typeof testConfig>[0]): Promise<{ gateway: Gateway; prefix: string; url: string }> {
  const prefix = testPrefix()
  prefixes.push(prefix)
  const gateway = await createGateway({ config: testConfig(overrides, { REDIS_URL, REDIS_PREFIX: prefix }), logger: captureLogs().logger, properties: new MemorySource([]) })
  await gateway.app.listen({ port: 0, host: '127.0.0.1' })
  expect(await eventually(async () => gateway.redis?.status === 'ready', 5000)).toBe(true)
  return { gateway, prefix, url: `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}` }
}

async function keyIn(prefix: string, ...flags: string[]): Promise<{ id: string; key: string }> {
  const run = await keyTool({ REDIS_URL, REDIS_PREFIX: prefix }, 'create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json', ...flags)
  expect(run.code).toBe(0)
  return JSON.parse(run.out[0] as string) as { id: string; key: string }
}

async function get(url: string, key: string, path = '/v1/properties', method: 'GET' | 'HEAD' = 'GET') {
  const res = await request(`${url}${path}`, { method, headers: { host: ACME_HOST, 'user-agent': 'mutation-kills/1.0', authorization: `Bearer ${key}` } })
  await res.body.dump()
  return { statusCode: res.statusCode, headers: res.headers }
}

describe('the expiry warning, as built', () => {
  it('is on answers within keys.expiryWarningDays of the expiry, and not a minute before', async () => {
    const { gateway, prefix, url } = await gatewayWith({ keys: { expiryWarningDays: 2 } })
    try {
      const within = new Date(Date.now() + 2 * DAY - 60_000).toISOString()
      const beyond = new Date(Date.now() + 2 * DAY + 60_000).toISOString()
      const soon = await keyIn(prefix, '--expires-at', within)
      const later = await keyIn(prefix, '--expires-at', beyond)
      const never = await keyIn(prefix)
      expect((await get(url, soon.key)).headers['service-credential-expires']).toBe(within)
      expect((await get(url, later.key)).headers['service-credential-expires']).toBeUndefined()
      expect((await get(url, never.key)).headers['service-credential-expires']).toBeUndefined()
    } finally {
      await gateway.app.close()
    }
  })

  it('is never sent with keys.expiryWarningDays 0', async () => {
    const { gateway, prefix, url } = await gatewayWith({ keys: { expiryWarningDays: 0 } })
    try {
      const soon = await keyIn(prefix, '--expires-at', new Date(Date.now() + 3_600_000).toISOString())
      const answer = await get(url, soon.key)
      expect({ status: answer.statusCode, header: answer.headers['service-credential-expires'] }).toEqual({ status: 200, header: undefined })
    } finally {
      await gateway.app.close()
    }
  })
})

describe('usage, as a running gateway counts it', () => {
  it('counts each method on its route template, flushes every usage.flushSeconds, and notes the minute last used', async () => {
    const { gateway, prefix, url } = await gatewayWith({ usage: { flushSeconds: 1, retentionDays: 3 } })
    try {
      const { id, key } = await keyIn(prefix)
      expect((await get(url, key)).statusCode).toBe(200)
      expect((await get(url, key, '/v1/properties', 'HEAD')).statusCode).toBe(200)
      expect((await get(url, key, '/v1/properties/c0ffee00-0000-4000-8000-00000000000a')).statusCode).toBe(404)
      // An unknown key is no credential's use.
      expect((await get(url, 'svc_live_0000000000000000000000000000')).statusCode).toBe(401)
      const day = new Date().toISOString().slice(0, 10)
      const counts = `${prefix}usage:{${id}}:${day}`
      // Written by the timer, without a shutdown.
      expect(await eventually(async () => Object.keys(await admin.hgetall(counts)).length === 3, 10_000)).toBe(true)
      expect(await admin.hgetall(counts)).toEqual({ 'GET /v1/properties|2xx': '1', 'HEAD /v1/properties|2xx': '1', 'GET /v1/properties/{propertyId}|4xx': '1' })
      const expiresAt = await admin.pexpiretime(counts)
      expect(expiresAt).toBe(Date.parse(`${day}T00:00:00.000Z`) + DAY + 3 * DAY)
      // To the minute: the minute of the requests above, or the one after if a minute turned meanwhile.
      const { lastUsedAt } = await gateway.credentials.show(id)
      expect(lastUsedAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/)
      expect(Date.now() - Date.parse(lastUsedAt as string)).toBeLessThan(10 * 60_000)
    } finally {
      await gateway.app.close()
    }
  })

  it('writes at close what the timer has not', async () => {
    const { gateway, prefix, url } = await gatewayWith({ usage: { flushSeconds: 3600, retentionDays: 90 } })
    const { id, key } = await keyIn(prefix)
    expect((await get(url, key, '/v1/credential')).statusCode).toBe(200)
    expect(await admin.keys(`${prefix}usage:*`)).toEqual([])
    await gateway.app.close()
    expect(await admin.hgetall(`${prefix}usage:{${id}}:${new Date().toISOString().slice(0, 10)}`)).toEqual({ 'GET /v1/credential|2xx': '1' })
  })
})
