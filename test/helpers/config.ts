import { loadConfig, type Config, type FileConfig } from '../../src/config.js'

export const DOCS_URL = 'https://developer.example.com'
export const ACME_HOST = 'api.acme-hotels.example'
export const GLOBEX_HOST = 'api.globex-resorts.example'

/**
 * The shipped config file, with the settings a test needs on top. Its declared routes are
 * left out unless a test asks for them (their services need tokens and a stand-in).
 */
export function testConfig(overrides: Partial<FileConfig> = {}, env: NodeJS.ProcessEnv = {}): Config {
  return loadConfig({ CONFIG_FILE: 'config/default.json', REDIS_URL: process.env.REDIS_URL, ...env }, {
    // Load shedding is off unless a test is about it: a stalled second on a loaded machine
    // would otherwise turn every test's answers into 503s.
    overrides: { upstreams: {}, routes: [], loadShedding: { maxEventLoopDelayMs: 0, maxEventLoopUtilization: 0, sampleIntervalMs: 1000 }, ...overrides },
  })
}
