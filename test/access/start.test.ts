import { spawn, type ChildProcess } from 'node:child_process'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockIdp } from '../../mocks/idp/server.js'
import { MockPms } from '../../mocks/pms/server.js'
import { ACME_HOST } from '../helpers/config.js'
import { grantClient, issuerEnv } from '../helpers/oauth.js'
import { eventually, freePort, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'
import { DEVELOPMENT_KEY } from '../../src/webhooks/secrets.js'

// `npm start` (dist/src/server.js) with its issuer from OAUTH_* over plain http: it says so in
// its log, and serves a token of that issuer.

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
const idp = new MockIdp()
let pms: MockPms
let child: ChildProcess
let printed = ''
let url: string

beforeAll(async () => {
  await idp.listen()
  pms = await new MockPms({ token: 'start-token' }).listen()
  const port = await freePort()
  url = `http://127.0.0.1:${port}`
  child = spawn(process.execPath, ['dist/src/server.js'], {
    env: {
      ...process.env, PORT: String(port), ADMIN_PORT: String(await freePort()), CONFIG_FILE: 'config/default.json', REDIS_URL, REDIS_PREFIX: prefix,
      PMS_URL: pms.url, PMS_TOKEN: 'start-token', UPSTREAM_BOOKINGS_TOKEN: 'x', UPSTREAM_BOOKINGS_SANDBOX_TOKEN: 'y', LOG_LEVEL: 'warn', WEBHOOKS_SECRET_KEY: DEVELOPMENT_KEY, ...issuerEnv(idp),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  child.stdout?.on('data', (c: Buffer) => { printed += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { printed += c.toString() })
  expect(await eventually(async () => (await request(`${url}/v1/health`).then((r) => r.body.text().then(() => r.statusCode), () => 0)) === 200, 15_000, 100)).toBe(true)
})

afterAll(async () => {
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
  await pms.close()
  await idp.close()
  await removePrefix(redis, prefix)
  redis.disconnect()
})

describe('npm start with an identity provider', () => {
  it('warns once that the JWKS is fetched over plain http', async () => {
    // The log is written asynchronously (flushed at least every second).
    expect(await eventually(async () => printed.includes('the JWKS of a token issuer'), 5000)).toBe(true)
    const warnings = printed.split('\n').filter((l) => l.includes('plain http:')).map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(warnings.filter((w) => String(w.msg).startsWith('the JWKS of a token issuer'))).toEqual([expect.objectContaining({
      level: 'warn', issuer: idp.issuer, jwksUri: idp.jwksUri,
      msg: 'the JWKS of a token issuer is fetched over plain http:; anyone on the path could swap its keys',
    })])
  })

  it('serves a token of the issuer named by OAUTH_ISSUER', async () => {
    await grantClient({ REDIS_URL, REDIS_PREFIX: prefix }, idp, 'started-client')
    const call = async (): Promise<number> => {
      const res = await request(`${url}/v1/properties`, {
        headers: { host: ACME_HOST, 'user-agent': 'start-test/1.0', authorization: `Bearer ${idp.issue('started-client', ['properties:read'])}` },
      })
      await res.body.dump()
      return res.statusCode
    }
    expect(await eventually(async () => (await call()) === 200, 10_000, 100)).toBe(true)
  })
})
