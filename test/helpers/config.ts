import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig, type Config, type FileConfig, type FileConfigInput } from '../../src/config.js'

export const DOCS_URL = 'https://developer.example.com'
export const ACME_HOST = 'api.acme-hotels.example'
export const GLOBEX_HOST = 'api.globex-resorts.example'

/** Load shedding off: a test must not fail because the shared machine is busy. */
export const NO_LOAD_SHEDDING: FileConfig['loadShedding'] = { maxEventLoopDelayMs: 0, maxEventLoopUtilization: 0, sampleIntervalMs: 1000, sustainedSamples: 3 }

/** No token issuer: the shipped one is the stand-in identity provider, which a test starts itself when it needs one. */
export const NO_OAUTH: FileConfig['oauth'] = { issuers: [], clockToleranceSeconds: 60, jwksRefreshSeconds: 300, jwksCooldownSeconds: 30, jwksTimeoutMs: 2000, verifiedTokens: 100000, maxTokenLifetimeSeconds: 86400 }

/**
 * The shipped config file, with the settings a test needs on top. Its declared routes and
 * its token issuer are left out unless a test asks for them (their services need tokens and
 * a stand-in), and load shedding is off unless the test is about it.
 */
export function testConfig(overrides: Partial<FileConfigInput> = {}, env: NodeJS.ProcessEnv = {}): Config {
  // Load shedding is off unless a test is about it: a stalled second on a loaded machine
  // would otherwise turn every test's answers into 503s.
  return loadConfig({ CONFIG_FILE: 'config/default.json', REDIS_URL: process.env.REDIS_URL, ...env },
    { overrides: { upstreams: {}, routes: [], oauth: NO_OAUTH, loadShedding: NO_LOAD_SHEDDING, ...overrides } })
}

/** The least a config file must hold: the docs' address and one brand. */
export const MINIMAL_CONFIG = { docsUrl: 'https://docs.example', brands: [{ id: 'acme', chainCode: 'ACME', hosts: ['api.acme.example'] }] }

/** A config file holding `content` (JSON, or a string as it is), in a directory of its own; its path. */
export function configFile(content: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-config-')), 'config.json')
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content))
  return path
}

/** The problems of the ConfigError that `load` throws; the test fails when it throws none, or another error. */
export function configProblems(load: () => unknown): string[] {
  try {
    load()
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  throw new Error('expected a ConfigError')
}
