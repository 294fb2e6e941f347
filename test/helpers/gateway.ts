import { once } from 'node:events'
import { Redis } from 'ioredis'
import { request } from 'undici'
import type { Config, FileConfigInput } from '../../src/config.js'
import { createGateway, type Gateway, type GatewayOptions } from '../../src/gateway.js'
import { RedisKeyStore, type KeyStore, type NewKey } from '../../src/keys/store.js'
import { MockPms } from '../../mocks/pms/server.js'
import { ACME_HOST, testConfig } from './config.js'
import { checkAnswer } from './contract.js'
import { captureLogs } from './logs.js'
import { REDIS_URL, removePrefix, testPrefix } from './redis.js'

export const PMS_TOKEN = 'test-pms-token'

export interface Answer {
  statusCode: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** A gateway listening on a real socket, with the stand-in PMS and its own Redis namespace. */
/** What a request of TestGateway.call carries besides its method and path. */
export interface CallOptions {
  key?: string | undefined
  host?: string
  userAgent?: string
  headers?: Record<string, string>
  body?: string
}

export class TestGateway {
  readonly logs = captureLogs()
  private readonly admin = new Redis(REDIS_URL)
  readonly prefix = testPrefix()
  gateway!: Gateway
  url!: string

  private constructor(readonly pms: MockPms, readonly sandbox: MockPms | undefined) {}

  static async start(options: {
    config?: Partial<FileConfigInput>
    sandbox?: boolean
    env?: NodeJS.ProcessEnv
    pms?: MockPms
    pmsUrl?: string
    gateway?: Partial<GatewayOptions>
    /** A key store of the test's own, in the gateway's Redis namespace. */
    keyStore?: (prefix: string) => KeyStore
  } = {}): Promise<TestGateway> {
    const pms = options.pms ?? await new MockPms({ token: PMS_TOKEN }).listen()
    const sandbox = options.sandbox === true ? await new MockPms({ token: 'sandbox-token', seed: 99 }).listen() : undefined
    const t = new TestGateway(pms, sandbox)
    const env: NodeJS.ProcessEnv = { REDIS_URL, REDIS_PREFIX: t.prefix, PMS_URL: options.pmsUrl ?? pms.url, PMS_TOKEN }
    Object.assign(env, options.env)
    if (sandbox !== undefined) Object.assign(env, { PMS_SANDBOX_URL: sandbox.url, PMS_SANDBOX_TOKEN: 'sandbox-token' })
    const keyStore = options.keyStore?.(t.prefix)
    t.gateway = await createGateway({
      config: testConfig(options.config ?? {}, env), logger: t.logs.logger, ...(keyStore === undefined ? {} : { keyStore }), ...options.gateway,
    })
    await t.gateway.app.listen({ port: 0, host: '127.0.0.1' })
    // Until its Redis connection is up, a new gateway answers unknown keys with 503 (as it
    // should); tests start from a gateway that is ready.
    const redis = t.gateway.redis
    if (redis !== undefined && redis.status !== 'ready') await once(redis, 'ready')
    t.url = `http://127.0.0.1:${(t.gateway.app.server.address() as { port: number }).port}`
    return t
  }

  async key(input: Partial<NewKey> = {}): Promise<string> {
    return (await this.keyWithId(input)).key
  }

  /** A new key and its id (what services receive as X-Service-Key-Id). */
  async keyWithId(input: Partial<NewKey> = {}): Promise<{ key: string; id: string }> {
    const store = new RedisKeyStore(this.admin, this.prefix)
    const { key, record } = await store.create({ brand: 'acme', mode: 'live', properties: '*', ...input })
    return { key, id: record.id }
  }

  async get(path: string, key: string | undefined, headers: Record<string, string> = {}): Promise<Answer> {
    return this.call('GET', path, { key, headers })
  }

  /**
   * A request over a real socket; every answer must be one the OpenAPI document of this
   * gateway's routes describes. A body is sent as JSON unless the headers name a type.
   */
  async call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { host: options.host ?? ACME_HOST, 'user-agent': options.userAgent ?? 'facade-test/1.0', ...options.headers }
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`
    if (options.body !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json'
    const res = await request(`${this.url}${path}`, { method: method as 'GET', headers, body: options.body })
    const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
    checkAnswer(method, path, answer, this.gateway.serving().gatewayConfig)
    return answer
  }

  /** Another instance of the same gateway: same config, Redis namespace and stand-ins, its own socket. */
  async twin(change: Partial<Config> = {}): Promise<{ gateway: Gateway; url: string; close: () => Promise<void> }> {
    const gateway = await createGateway({ config: { ...this.gateway.app.gatewayConfig, ...change }, logger: this.logs.logger })
    await gateway.app.listen({ port: 0, host: '127.0.0.1' })
    if (gateway.redis !== undefined && gateway.redis.status !== 'ready') await once(gateway.redis, 'ready')
    const url = `http://127.0.0.1:${(gateway.app.server.address() as { port: number }).port}`
    return { gateway, url, close: () => gateway.app.close() }
  }

  async close(): Promise<void> {
    await this.gateway.app.close()
    await this.pms.close()
    await this.sandbox?.close()
    await removePrefix(this.admin, this.prefix)
    this.admin.disconnect()
  }
}
