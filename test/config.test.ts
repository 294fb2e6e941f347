import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, isLoopbackOrTls, loadConfig } from '../src/config.js'

function file(content: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-config-')), 'config.json')
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content))
  return path
}

const minimal = { docsUrl: 'https://docs.example', brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['api.acme.example'] }] }

function problemsOf(fn: () => unknown): string[] {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return (error as ConfigError).problems
  }
  throw new Error('expected a ConfigError')
}

describe('configuration (operations: environment and config file)', () => {
  it('fills every optional setting with its documented default', () => {
    const config = loadConfig({ CONFIG_FILE: file(minimal) })
    expect(config).toMatchObject({
      port: 3000, host: '127.0.0.1', adminPort: 9464, adminHost: '127.0.0.1', redisUrl: 'redis://127.0.0.1:6379', logLevel: 'info',
      accessDeniedStatus: 403, trustProxy: false, pms: undefined, pmsSandbox: undefined,
      upstream: { timeoutMs: 2000, connections: 64, retries: 1 },
      breaker: { errorThresholdPercentage: 50, volumeThreshold: 10, resetTimeoutMs: 10000, rollingCountTimeoutMs: 10000 },
      cache: { ttlMs: 30000, staleIfErrorMs: 300000, maxEntries: 10000 },
      keyCache: { ttlMs: 10000 },
      rateLimit: { enabled: true, limit: 1000, windowSeconds: 60 },
      shutdown: { drainMs: 5000, timeoutMs: 10000 },
      server: { headersTimeoutMs: 10000, requestTimeoutMs: 30000, keepAliveTimeoutMs: 65000 },
      abuse: { authFailuresPerMinute: 600, trackedAddresses: 100000, unknownKeys: 10000 },
      loadShedding: { maxEventLoopDelayMs: 1000, maxEventLoopUtilization: 0, sampleIntervalMs: 1000, sustainedSamples: 3 },
      adminToken: undefined,
    })
  })

  it('reads the environment', () => {
    const config = loadConfig({
      CONFIG_FILE: file(minimal), PORT: '8080', HOST: '0.0.0.0', REDIS_URL: 'redis://cache:6379/3',
      PMS_URL: 'http://pms:4010', PMS_TOKEN: 't0k3n', LOG_LEVEL: 'warn',
    })
    expect(config).toMatchObject({ port: 8080, host: '0.0.0.0', redisUrl: 'redis://cache:6379/3', logLevel: 'warn', pms: { url: 'http://pms:4010', token: 't0k3n' } })
  })

  it('names every bad field at once', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file({ ...minimal, accessDeniedStatus: 401, cache: { ttlMs: -1 }, upstrem: {} }),
      PORT: 'eighty', PMS_URL: 'http://pms:4010',
    }))
    expect(problems).toEqual([
      expect.stringMatching(/^environment PORT: /),
      expect.stringMatching(/^environment PMS_TOKEN: required when PMS_URL is set$/),
      expect.stringMatching(/config\.json accessDeniedStatus: must be 403 or 404$/),
      expect.stringMatching(/config\.json cache\.ttlMs: Too small: expected number to be >=0$/),
      expect.stringMatching(/config\.json: Unrecognized key: "upstrem"$/),
    ])
  })

  it('refuses a host claimed by two brands', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file({ ...minimal, brands: [...minimal.brands, { id: 'globex', chainCode: 'GLBX', hosts: ['API.acme.example:443'] }] }),
    }))
    expect(problems).toEqual([expect.stringMatching(/brands\[1\]\.hosts\[0\]: host 'api\.acme\.example' already belongs to brand 'acme'$/)])
  })

  it('refuses two brands with one chainCode', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file({ ...minimal, brands: [...minimal.brands, { id: 'acme-eu', chainCode: 'ACME', hosts: ['api.acme.example.eu'] }] }),
    }))
    expect(problems).toEqual([expect.stringMatching(/brands\[1\]\.chainCode: chainCode 'ACME' already belongs to brand 'acme'$/)])
  })

  it.each([
    [false], [true], [1], [3], [['10.0.0.0/8', '192.168.1.7', 'fd00::/8', '::1']],
  ])('takes trustProxy %j: none, any, a hop count, or proxy addresses and CIDR blocks', (trustProxy) => {
    expect(loadConfig({ CONFIG_FILE: file({ ...minimal, trustProxy }) }).trustProxy).toEqual(trustProxy)
  })

  it.each([[0], ['10.0.0.0/8'], [['10.0.0.0/33']], [['proxy.internal']], [[]]])('refuses trustProxy %j', (trustProxy) => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, trustProxy }) })))
      .toEqual([expect.stringMatching(/config\.json trustProxy(\[0\])?: /)])
  })

  it('refuses a header deadline beyond the request deadline', () => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, server: { headersTimeoutMs: 40000 } }) })))
      .toEqual([expect.stringMatching(/server\.headersTimeoutMs: must not exceed server\.requestTimeoutMs$/)])
  })

  it('reads ADMIN_TOKEN, and refuses a short one', () => {
    expect(loadConfig({ CONFIG_FILE: file(minimal), ADMIN_TOKEN: 'a-long-enough-admin-token' }).adminToken).toBe('a-long-enough-admin-token')
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file(minimal), ADMIN_TOKEN: 'short' })))
      .toEqual(['environment ADMIN_TOKEN: must be at least 16 characters'])
  })

  it('tells plain http: to another host from loopback and https:', () => {
    expect(['http://pms.internal:4010', 'http://10.1.2.3', 'http://[fd00::1]:80'].map(isLoopbackOrTls)).toEqual([false, false, false])
    expect(['https://pms.internal', 'http://127.0.0.1:4010', 'http://localhost:4010', 'http://[::1]:4010'].map(isLoopbackOrTls)).toEqual([true, true, true, true])
  })

  it('reports a file that is not JSON', () => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file('{ nope') }))).toEqual([expect.stringMatching(/not valid JSON/)])
  })

  it('requires PMS_URL when asked to start the gateway', () => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file(minimal) }, { requirePms: true })))
      .toEqual(['environment PMS_URL: required to start the gateway'])
  })

  it('loads the shipped config/default.json', () => {
    expect(loadConfig({}).brands.map((b) => b.id)).toEqual(['acme', 'globex'])
  })
})
