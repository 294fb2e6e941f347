import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { loadConfig, type Config } from '../../src/config.js'
import { restartOnlyChanges } from '../../src/lifecycle/reload.js'
import { configProblems, MINIMAL_CONFIG } from '../helpers/config.js'

// The `requestLog` section of the config file (docs/operations.md, "The request log"): checked
// at start with every other setting, and what a reload may change of it.

const dir = mkdtempSync(join(tmpdir(), 'gw-request-log-config-'))
let files = 0
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function file(requestLog?: unknown): string {
  const path = join(dir, `config-${(files += 1)}.json`)
  writeFileSync(path, JSON.stringify(requestLog === undefined ? MINIMAL_CONFIG : { ...MINIMAL_CONFIG, requestLog }))
  return path
}

function configWith(requestLog?: unknown): Config {
  return loadConfig({ CONFIG_FILE: file(requestLog) })
}

function problemsOf(requestLog: unknown): string[] {
  const path = file(requestLog)
  return configProblems(() => loadConfig({ CONFIG_FILE: path })).map((problem) => problem.replace(path, '<file>'))
}

describe('the requestLog section', () => {
  it('defaults to on, a write a second, 10,000 entries held, 7 days and 50,000 entries kept', () => {
    expect(configWith().requestLog).toEqual({ enabled: true, flushMs: 1000, bufferMax: 10_000, retentionDays: 7, maxPerCredential: 50_000 })
  })

  it('takes each setting up to its bound', () => {
    const bounds = { enabled: false, flushMs: 50, bufferMax: 1_000_000, retentionDays: 30, maxPerCredential: 1_000_000 }
    expect(configWith(bounds).requestLog).toEqual(bounds)
    expect(configWith({ flushMs: 60_000, bufferMax: 1, retentionDays: 1, maxPerCredential: 1 }).requestLog).toEqual({ enabled: true, flushMs: 60_000, bufferMax: 1, retentionDays: 1, maxPerCredential: 1 })
  })

  it('refuses every setting beyond its bound, and a field it does not know, naming each', () => {
    expect(problemsOf({ enabled: 'yes', flushMs: 49, bufferMax: 1_000_001, retentionDays: 31, maxPerCredential: 1_000_001, other: 1 })).toEqual([
      '<file> requestLog.enabled: Invalid input: expected boolean, received string',
      '<file> requestLog.flushMs: Too small: expected number to be >=50',
      '<file> requestLog.bufferMax: Too big: expected number to be <=1000000',
      '<file> requestLog.retentionDays: Too big: expected number to be <=30',
      '<file> requestLog.maxPerCredential: Too big: expected number to be <=1000000',
      '<file> requestLog: Unrecognized key: "other"',
    ])
    expect(problemsOf({ flushMs: 60_001, bufferMax: 0 })).toEqual([
      '<file> requestLog.flushMs: Too big: expected number to be <=60000',
      '<file> requestLog.bufferMax: Too small: expected number to be >0',
    ])
  })

  it('is switched off or on by a reload; its other settings need a restart', () => {
    const current = configWith()
    expect(restartOnlyChanges(current, configWith({ enabled: false }))).toEqual([])
    expect(restartOnlyChanges(current, configWith({ enabled: false, flushMs: 500, bufferMax: 20, retentionDays: 2, maxPerCredential: 3 }))).toEqual([
      'requestLog.flushMs', 'requestLog.bufferMax', 'requestLog.retentionDays', 'requestLog.maxPerCredential',
    ])
  })
})
