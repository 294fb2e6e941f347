import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  ACCEPTED_FILE, REPORT_FILE, SUMMARY_FILE, UNIT_TEST_FILES, filesUnder, mergeReports, modulesOf, mutantKey, mutatePatterns, mutationSummary, patternsFor, sourcesOf, unitTestFilesFor,
  type Accepted, type Report,
} from '../scripts/mutation.js'

// docs/mutation/README.md is derived from the committed StrykerJS report; these keep it so.

function mutant(id: string, status: string, line: number, column: number, mutatorName = 'ConditionalExpression', replacement = 'false') {
  return { id, status, mutatorName, replacement, location: { start: { line, column }, end: { line, column: column + 5 } } }
}

const report = JSON.parse(readFileSync(REPORT_FILE, 'utf8')) as Report
const accepted = JSON.parse(readFileSync(ACCEPTED_FILE, 'utf8')) as Accepted

describe('the mutation summary', () => {
  it('is the one generated from the report and the reasons given', async () => {
    expect(readFileSync(SUMMARY_FILE, 'utf8'), 'run `npm run build && npm run mutation -- --summary`')
      .toBe(mutationSummary(report, accepted, modulesOf(await mutatePatterns()), sourcesOf(await mutatePatterns(), filesUnder)))
  })

  it('names the files of a module that no run has covered yet, beside the score of those that were', () => {
    const sample = { files: { 'src/webhooks/rules.ts': { mutants: [mutant('1', 'Killed', 1, 1), mutant('2', 'Survived', 2, 1)] } } } as unknown as Report
    const text = mutationSummary(sample, {}, ['src/webhooks'], { 'src/webhooks': ['src/webhooks/deliveries.ts', 'src/webhooks/rules.ts', 'src/webhooks/service.ts'] })
    expect(text).toContain('| `src/webhooks` (1 of 3 files; not run: deliveries.ts, service.ts) | 2 | 1 | 0 | 1 | 0 | 0 | 0 | 50.0 % |\n')
  })

  it('takes a module\'s files from its folder, less those the config leaves out', () => {
    const tree: Record<string, string[]> = {
      'src/portal': ['src/portal/links.ts', 'src/portal/web/main.ts', 'src/portal/web/style.css', 'src/portal/notes.txt'],
      'src/keys': ['src/keys/store.ts', 'src/keys/cli.ts'],
    }
    expect(sourcesOf(['src/keys/**/*.ts', 'src/portal/**/*.ts', '!src/portal/web/**', '!src/keys/cli.ts'], (dir) => tree[dir] ?? []))
      .toEqual({ 'src/keys': ['src/keys/store.ts'], 'src/portal': ['src/portal/links.ts'] })
  })

  it('gives reasons only for mutants that survive in the report', () => {
    const alive = new Set(Object.entries(report.files).flatMap(([file, result]) => result.mutants
      .filter((m) => m.status === 'Survived' || m.status === 'NoCoverage').map((m) => mutantKey(file, m))))
    expect(Object.keys(accepted).filter((key) => !alive.has(key))).toEqual([])
  })

  it('counts each status per module, scores killed and timed out over those that ran or no test reaches, and lists survivors', () => {
    const sample = {
      files: {
        'src/ratelimit/a.ts': { mutants: [mutant('1', 'Killed', 1, 1), mutant('2', 'Timeout', 2, 1), mutant('3', 'Survived', 9, 4, 'EqualityOperator', 'a <= b')] },
        'src/ratelimit/b.ts': { mutants: [mutant('4', 'NoCoverage', 3, 7), mutant('5', 'Ignored', 4, 1), mutant('6', 'RuntimeError', 5, 1), mutant('7', 'Killed', 6, 1)] },
      },
    } as unknown as Report
    const text = mutationSummary(sample, { 'src/ratelimit/a.ts:9:4 EqualityOperator': 'the two agree at the boundary' }, ['src/ratelimit', 'src/oauth'])
    expect(text).toContain('| `src/ratelimit` | 7 | 2 | 1 | 1 | 1 | 1 | 1 | 60.0 % |\n| `src/oauth` | not run | | | | | | | |\n')
    expect(text).toContain('The runs behind this report used 0 test files;')
    expect(text).toContain([
      '| where and what | replaced by | why it is left alive |',
      '|---|---|---|',
      '| `src/ratelimit/a.ts:9:4 EqualityOperator` | `a <= b` | the two agree at the boundary |',
      '| `src/ratelimit/b.ts:3:7 ConditionalExpression` | `false` (no test reaches it) | **not explained yet** |',
    ].join('\n'))
  })

  it('keeps the modules a run did not touch and drops files that are gone', () => {
    const base = { files: { 'src/a/x.ts': { mutants: [mutant('1', 'Killed', 1, 1)] }, 'src/b/y.ts': { mutants: [mutant('2', 'Survived', 1, 1)] }, 'src/gone.ts': { mutants: [] } }, testFiles: { 't1': {} } } as unknown as Report
    const run = { schemaVersion: '2', projectRoot: '/home/someone/gateway', files: { 'src/b/y.ts': { mutants: [mutant('3', 'Killed', 1, 1)] } }, testFiles: { 't2': {} } } as unknown as Report
    // The run's root, a path of the machine that ran it, is not kept.
    expect(mergeReports(base, run, (file) => file !== 'src/gone.ts')).toEqual({
      schemaVersion: '2',
      files: { 'src/a/x.ts': { mutants: [mutant('1', 'Killed', 1, 1)] }, 'src/b/y.ts': { mutants: [mutant('3', 'Killed', 1, 1)] } },
      testFiles: { 't1': {}, 't2': {} },
    })
  })

  it('takes from a run over some modules only the files it mutated', () => {
    const base = { files: { 'src/a/x.ts': { mutants: [mutant('1', 'Survived', 1, 1)] }, 'src/b/y.ts': { mutants: [mutant('2', 'Survived', 1, 1)] } } } as unknown as Report
    const run = { files: { 'src/a/x.ts': { mutants: [mutant('3', 'Survived', 2, 1)] }, 'src/b/y.ts': { mutants: [mutant('4', 'Killed', 1, 1)] }, 'src/c/z.ts': { mutants: [] } } } as unknown as Report
    expect(mergeReports(base, run, () => true, (file) => file.startsWith('src/b/')).files).toEqual({
      'src/a/x.ts': { mutants: [mutant('1', 'Survived', 1, 1)] }, 'src/b/y.ts': { mutants: [mutant('4', 'Killed', 1, 1)] },
    })
  })

  it('narrows the config to some modules, keeping the files it leaves out', async () => {
    const patterns = await mutatePatterns()
    expect(patternsFor(patterns, ['src/ratelimit/', 'src/keys'])).toEqual([
      'src/keys/**/*.ts', 'src/ratelimit/**/*.ts', '!src/portal/web/**', '!src/request-log/routes.ts', '!src/request-log/admin-routes.ts', '!src/pipeline/log.ts', '!src/keys/cli.ts', '!src/credentials/tool.ts', '!src/credentials/admin-openapi.ts', '!src/events/routes.ts', '!src/webhooks/cli.ts', '!src/webhooks/routes.ts',
    ])
    expect(() => patternsFor(patterns, ['src/nothing'])).toThrow('not a module of stryker.config.mjs: src/nothing')
  })

  it('runs a module with unit tests of its own over those only, and a mix with another module over every related test', () => {
    expect(unitTestFilesFor(['src/events/'])).toEqual(UNIT_TEST_FILES['src/events'])
    expect(unitTestFilesFor(['src/events', 'src/events'])).toEqual(UNIT_TEST_FILES['src/events'])
    expect(unitTestFilesFor(['src/events', 'src/keys'])).toBeUndefined()
    expect(unitTestFilesFor([])).toBeUndefined()
    for (const files of Object.values(UNIT_TEST_FILES)) for (const file of files) expect(existsSync(file), file).toBe(true)
  })

  it('mutates every module that holds contract rules, the idempotency code, the event log, the request log and the partner client included', async () => {
    expect(modulesOf(await mutatePatterns())).toEqual([
      'src/pipeline', 'src/contract', 'src/keys', 'src/proxy', 'src/properties', 'src/ratelimit', 'src/oauth', 'src/idempotency', 'sdk/src', 'src/credentials', 'src/events', 'src/webhooks', 'src/portal', 'src/lifecycle', 'src/request-log',
    ])
    expect(patternsFor(await mutatePatterns(), ['sdk/src'])).toEqual(['sdk/src/**/*.ts', '!src/portal/web/**', '!src/request-log/routes.ts', '!src/request-log/admin-routes.ts', '!src/pipeline/log.ts', '!src/keys/cli.ts', '!src/credentials/tool.ts', '!src/credentials/admin-openapi.ts', '!src/events/routes.ts', '!src/webhooks/cli.ts', '!src/webhooks/routes.ts'])
  })
})
