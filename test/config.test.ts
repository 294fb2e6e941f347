import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../src/config.js'

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
