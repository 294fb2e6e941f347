import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { haRedisMissing, RedisCluster } from '../../bench/redis-ha/topology.js'
import { MockIdp } from '../../mocks/idp/server.js'
import { ACME_HOST, testConfig } from '../helpers/config.js'
import { captureLogs } from '../helpers/logs.js'
import { MemorySource } from '../helpers/memory-source.js'
import { grantClient, keyTool, oauthFor } from '../helpers/oauth.js'
import { eventually } from '../helpers/redis.js'
import { createGateway, type Gateway } from '../../src/gateway.js'

// Grants on a Redis Cluster (docs/operations.md, "Running many instances";
// docs/architecture.md, "Redis layout"): every command of a grant touches one key, so
// registering, suspending and revoking a client work across the nodes, and the change reaches a
// running gateway through the Cluster's pub/sub.

const missing = haRedisMissing()
if (missing !== undefined) console.warn(`skipping the Cluster grant tests: ${missing}`)

describe.skipIf(missing !== undefined)('grants of token clients on a Redis Cluster', () => {
  let cluster: RedisCluster
  let gateway: Gateway
  const idp = new MockIdp()

  beforeAll(async () => {
    cluster = await RedisCluster.start()
    await idp.listen()
    gateway = await createGateway({
      config: testConfig({ oauth: oauthFor(idp), keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } }, cluster.env),
      logger: captureLogs('silent').logger, properties: new MemorySource([]),
    })
    expect(await gateway.tokens.ready(5000)).toBe(true)
    expect(await eventually(async () => gateway.redis?.status === 'ready', 15_000)).toBe(true)
  }, 180_000)

  afterAll(async () => {
    await gateway?.app.close()
    await idp.close()
    await cluster?.stop()
  }, 30_000)

  const call = (token: string) => gateway.app.inject({
    url: '/v1/properties', headers: { host: ACME_HOST, 'user-agent': 'cluster-test/1.0', authorization: `Bearer ${token}` },
  })

  it('registers, suspends, resumes and revokes a client, each change reaching the running gateway', async () => {
    const env = cluster.env
    const { id } = await grantClient(env, idp, 'cluster-client')
    const token = idp.issue('cluster-client', ['properties:read'])
    expect(await eventually(async () => (await call(token)).statusCode === 200, 5000)).toBe(true)
    expect(JSON.parse((await keyTool(env, 'show', id, '--json')).out[0] as string)).toMatchObject({ id, clientId: 'cluster-client', status: 'active' })

    expect((await keyTool(env, 'suspend', id)).code).toBe(0)
    expect(await eventually(async () => (await call(token)).statusCode === 403, 5000)).toBe(true)
    expect(JSON.parse((await call(token)).body)).toMatchObject({ code: 'CLIENT_SUSPENDED' })
    expect((await keyTool(env, 'resume', id)).code).toBe(0)
    expect(await eventually(async () => (await call(token)).statusCode === 200, 5000)).toBe(true)

    const again = await keyTool({ ...env, OAUTH_ISSUER: idp.issuer, OAUTH_JWKS_URI: idp.jwksUri, OAUTH_AUDIENCE: 'partner-api' },
      'grant-client', '--issuer', idp.issuer, '--client-id', 'cluster-client', '--brand', 'acme', '--mode', 'live', '--all-properties')
    expect(again).toEqual({ code: 2, out: [], err: [`client 'cluster-client' of ${idp.issuer} already has grant ${id}`] })

    expect((await keyTool(env, 'revoke', id)).code).toBe(0)
    expect(await eventually(async () => (await call(token)).statusCode === 403, 5000)).toBe(true)
    expect(JSON.parse((await call(token)).body)).toMatchObject({ code: 'CLIENT_NOT_REGISTERED' })
    const listed = JSON.parse((await keyTool(env, 'list', '--json')).out[0] as string) as { id: string }[]
    expect(listed.map((r) => r.id)).not.toContain(id)
  }, 60_000)
})
