import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { pathToFileURL } from 'node:url'

// `npm run mutation [-- module… | stryker options]`: runs StrykerJS (stryker.config.mjs) and
// keeps docs/mutation/mutation.json, the one report, whole: a run over some modules only
// (`npm run mutation -- src/keys src/ratelimit`) replaces their files in it and leaves the
// others as they were. The
// report seeds the run, so only mutants whose code or tests changed are tested again. Then it
// writes docs/mutation/README.md from the report and from docs/mutation/accepted.json, the
// reason each surviving mutant is left alive. `npm run mutation -- --summary` only rewrites
// the README; a test fails when it drifts from the report.

export const REPORT_FILE = 'docs/mutation/mutation.json'
export const ACCEPTED_FILE = 'docs/mutation/accepted.json'
export const SUMMARY_FILE = 'docs/mutation/README.md'
export const CONFIG_FILE = 'stryker.config.mjs'

const RUN_FILE = 'reports/mutation/incremental.json'

type Status = 'Killed' | 'Survived' | 'NoCoverage' | 'Timeout' | 'CompileError' | 'RuntimeError' | 'Ignored' | 'Pending'

interface Mutant {
  id: string
  mutatorName: string
  replacement?: string
  status: Status
  location: { start: { line: number; column: number }; end: { line: number; column: number } }
  [more: string]: unknown
}

export interface Report {
  files: Record<string, { mutants: Mutant[]; [more: string]: unknown }>
  testFiles?: Record<string, unknown>
  [more: string]: unknown
}

/** Reasons keyed by `file:line:column Mutator` (the mutant's start, 1-based line and column). */
export type Accepted = Record<string, string>

/** The config's `mutate` patterns: one glob per module, then `!file` for each file left out. */
export async function mutatePatterns(): Promise<string[]> {
  const config = (await import(pathToFileURL(CONFIG_FILE).href)) as { default: { mutate: string[] } }
  return config.default.mutate
}

/** The modules the config mutates, in its order. */
export function modulesOf(patterns: string[]): string[] {
  return patterns.filter((p) => !p.startsWith('!')).map((p) => p.replace(/\/\*\*.*$/, ''))
}

/**
 * The files the config mutates, by module: each module's `.ts` files under its folder, less
 * those a `!` pattern leaves out (a file, or a folder ending in `/**`).
 */
export function sourcesOf(patterns: string[], list: (dir: string) => string[]): Record<string, string[]> {
  const left = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1))
  const out = (file: string): boolean => left.some((p) => (p.endsWith('/**') ? file.startsWith(p.slice(0, -2)) : file === p))
  return Object.fromEntries(modulesOf(patterns).map((m) => [m, list(m).filter((file) => file.endsWith('.ts') && !out(file)).sort()]))
}

/** The patterns for some modules only, keeping every file left out. */
export function patternsFor(patterns: string[], modules: string[]): string[] {
  const wanted = modules.map((m) => m.replace(/\/+$/, ''))
  const unknown = wanted.filter((m) => !modulesOf(patterns).includes(m))
  if (unknown.length > 0) throw new Error(`not a module of ${CONFIG_FILE}: ${unknown.join(', ')}`)
  return patterns.filter((p) => p.startsWith('!') || wanted.some((m) => p.startsWith(`${m}/`)))
}

/**
 * Modules whose rules have unit tests that need no gateway: a run over such modules only uses
 * those files (Stryker's `--testFiles`), so it takes minutes instead of the hours of every
 * related test, most of which start gateways. A module not listed runs its related tests.
 */
export const UNIT_TEST_FILES: Record<string, readonly string[]> = {
  'src/events': ['test/events/rules.test.ts', 'test/events/log.test.ts', 'test/events/ingest-route.test.ts', 'test/events/config.test.ts', 'test/events/store.test.ts'],
  'src/credentials': ['test/credentials/service.test.ts', 'test/credentials/admin-rules.test.ts', 'test/credentials/usage-recorder.test.ts', 'test/credentials/partner-route.test.ts', 'test/credentials/config.test.ts', 'test/credentials/admin-routes.test.ts', 'test/credentials/usage-failures.test.ts'],
  'src/request-log': ['test/request-log/rules.test.ts', 'test/request-log/entries.test.ts', 'test/request-log/bytes.test.ts', 'test/request-log/config.test.ts', 'test/request-log/store.test.ts'],
  'src/portal': ['test/portal/rules.test.ts', 'test/portal/pages.test.ts', 'test/portal/store.test.ts', 'test/portal/routes.test.ts'],
  'src/lifecycle': ['test/lifecycle/rules.test.ts', 'test/lifecycle/config.test.ts', 'test/lifecycle/reload-rules.test.ts', 'test/lifecycle/documents.test.ts', 'test/lifecycle/stage.test.ts', 'test/lifecycle/reloader.test.ts'],
  'src/webhooks': ['test/webhooks/rules.test.ts', 'test/webhooks/addresses.test.ts', 'test/webhooks/schedule.test.ts', 'test/webhooks/recovery.test.ts', 'test/webhooks/store.test.ts', 'test/webhooks/worker.test.ts', 'test/webhooks/connections.test.ts', 'test/webhooks/service-failures.test.ts', 'test/webhooks/deliveries-paths.test.ts'],
}

/** The `--testFiles` a run over `modules` adds: their unit tests, when every one of them has some. */
export function unitTestFilesFor(modules: string[]): string[] | undefined {
  const lists = modules.map((m) => UNIT_TEST_FILES[m.replace(/\/+$/, '')])
  if (lists.length === 0 || lists.some((list) => list === undefined)) return undefined
  return [...new Set(lists.flatMap((list) => list ?? []))]
}

/** The key of a mutant in the accepted file. */
export function mutantKey(file: string, mutant: Mutant): string {
  return `${file}:${mutant.location.start.line}:${mutant.location.start.column} ${mutant.mutatorName}`
}

/**
 * `base` with the files of `run` that it mutated (`ran`; all of them by default) in place of its
 * own, and without files that no longer exist. A run's report also carries Stryker's copy of
 * every other file, moved to the sources as they are now; taking it would make the reasons given
 * for those files' survivors point at other mutants.
 */
export function mergeReports(base: Report | undefined, run: Report, exists: (file: string) => boolean, ran: (file: string) => boolean = () => true): Report {
  const taken = Object.fromEntries(Object.entries(run.files).filter(([file]) => ran(file)))
  const files: Report['files'] = {}
  for (const [file, result] of Object.entries(base?.files ?? {})) if (exists(file) && !(file in taken)) files[file] = result
  Object.assign(files, taken)
  const sorted = Object.fromEntries(Object.entries(files).sort(([a], [b]) => a.localeCompare(b)))
  // Its files are named from the project's root; where that root was on the machine that ran it is not the project's.
  const { projectRoot: _where, ...rest } = run
  return { ...rest, files: sorted, testFiles: { ...base?.testFiles, ...run.testFiles } }
}

interface Tally { killed: number; timeout: number; survived: number; noCoverage: number; errors: number; ignored: number }

function tally(mutants: Mutant[]): Tally {
  const t: Tally = { killed: 0, timeout: 0, survived: 0, noCoverage: 0, errors: 0, ignored: 0 }
  for (const m of mutants) {
    if (m.status === 'Killed') t.killed += 1
    else if (m.status === 'Timeout') t.timeout += 1
    else if (m.status === 'Survived') t.survived += 1
    else if (m.status === 'NoCoverage') t.noCoverage += 1
    else if (m.status === 'Ignored') t.ignored += 1
    else t.errors += 1
  }
  return t
}

/** Killed or timed out, of the mutants that ran or that no test reaches: Stryker's score. */
function score(t: Tally): string {
  const valid = t.killed + t.timeout + t.survived + t.noCoverage
  return valid === 0 ? '–' : `${(Math.floor((1000 * (t.killed + t.timeout)) / valid) / 10).toFixed(1)} %`
}

function oneLine(text: string | undefined): string {
  const flat = (text ?? '').replace(/\s+/g, ' ').trim()
  const short = flat.length > 60 ? `${flat.slice(0, 57)}…` : flat
  return `\`${short.replace(/`/g, "'")}\``
}

/** docs/mutation/README.md for a report and the reasons given for its survivors. */
export function mutationSummary(report: Report, accepted: Accepted, modules: string[], sources: Record<string, string[]> = {}): string {
  const lines = [
    '# Mutation testing',
    '',
    'Generated by `npm run mutation` from [mutation.json](mutation.json), the last StrykerJS report, and',
    '[accepted.json](accepted.json), the reason each surviving mutant is left alive: edit those, not this',
    'file (`npm run build && npm run mutation -- --summary` rewrites it). How the run is set up and what',
    'it leaves out, and why: [stryker.config.mjs](../../stryker.config.mjs).',
    '',
    'A mutant is one small change to the code (an operator, a literal, a condition); it is killed when',
    'a test fails with it. The score is the share killed (or timed out) of those that ran or that no',
    'test reaches; mutants in code that runs only outside any test (at load, or in a file-level',
    '`beforeAll`) are ignored (see the config). The target is 80 % per module.',
    '',
    '| module | mutants | killed | timed out | survived | no test reaches | ignored (outside tests) | errors | score |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  const survivors: string[] = []
  for (const module of modules) {
    const files = Object.keys(report.files).filter((file) => file.startsWith(`${module}/`))
    if (files.length === 0) {
      lines.push(`| \`${module}\` | not run | | | | | | | |`)
      continue
    }
    const mutants = files.flatMap((file) => report.files[file]?.mutants ?? [])
    const t = tally(mutants)
    // A module whose runs so far covered some of its files: its score is theirs, not the module's.
    const notRun = (sources[module] ?? []).filter((file) => !files.includes(file))
    const name = notRun.length === 0 ? `\`${module}\`` : `\`${module}\` (${files.length} of ${files.length + notRun.length} files; not run: ${notRun.map((file) => file.slice(module.length + 1)).join(', ')})`
    lines.push(`| ${name} | ${mutants.length} | ${t.killed} | ${t.timeout} | ${t.survived} | ${t.noCoverage} | ${t.ignored} | ${t.errors} | ${score(t)} |`)
    for (const file of files) {
      const alive = (report.files[file]?.mutants ?? [])
        .filter((m) => m.status === 'Survived' || m.status === 'NoCoverage')
        .sort((a, b) => a.location.start.line - b.location.start.line || a.location.start.column - b.location.start.column)
      for (const m of alive) {
        const key = mutantKey(file, m)
        const why = accepted[key] ?? '**not explained yet**'
        const how = m.status === 'NoCoverage' ? ' (no test reaches it)' : ''
        survivors.push(`| \`${key}\` | ${oneLine(m.replacement)}${how} | ${why} |`)
      }
    }
  }
  const testFiles = Object.keys(report.testFiles ?? {}).sort()
  lines.push('', `The runs behind this report used ${testFiles.length} test files; a run narrowed to some (\`--testFiles\`)`,
    'counts as surviving what only the others would kill:', '', ...testFiles.map((file) => `- \`${file}\``))
  lines.push('', '## Surviving mutants', '')
  if (survivors.length === 0) lines.push('None.')
  else lines.push('| where and what | replaced by | why it is left alive |', '|---|---|---|', ...survivors)
  return `${lines.join('\n')}\n`
}

/** Every file under `dir`, as a path from the project's root. */
export function filesUnder(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((file) => `${dir}/${file}`) : []
}

function readJson<T>(file: string): T | undefined {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as T) : undefined
}

async function writeSummary(): Promise<void> {
  const report = readJson<Report>(REPORT_FILE) ?? { files: {} }
  const patterns = await mutatePatterns()
  writeFileSync(SUMMARY_FILE, mutationSummary(report, readJson<Accepted>(ACCEPTED_FILE) ?? {}, modulesOf(patterns), sourcesOf(patterns, filesUnder)))
  console.log(`wrote ${SUMMARY_FILE}`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2)
  const isModule = (arg: string): boolean => arg.startsWith('src/') || arg.startsWith('sdk/')
  const modules = args.filter(isModule)
  const options = args.filter((a) => !isModule(a))
  if (modules.length > 0) options.push('--mutate', patternsFor(await mutatePatterns(), modules).join(','))
  const unitTests = unitTestFilesFor(modules)
  if (unitTests !== undefined && !options.includes('--testFiles')) options.push('--testFiles', unitTests.join(','))
  if (!args.includes('--summary')) {
    mkdirSync(dirname(RUN_FILE), { recursive: true })
    if (existsSync(REPORT_FILE)) copyFileSync(REPORT_FILE, RUN_FILE)
    // Unit tests read nothing from dist/: the tests' global setup need not build it (test/global-setup.ts).
    const env = unitTests === undefined ? process.env : { ...process.env, GATEWAY_TESTS_SKIP_BUILD: '1' }
    const stryker = spawnSync(process.execPath, ['node_modules/@stryker-mutator/core/bin/stryker.js', 'run', '--incrementalFile', RUN_FILE, ...options], { stdio: 'inherit', env })
    if (stryker.status !== 0) process.exit(stryker.status ?? 1)
    const ran = modules.length === 0 ? undefined : (file: string) => modules.some((m) => file.startsWith(`${m.replace(/\/+$/, '')}/`))
    const merged = mergeReports(readJson<Report>(REPORT_FILE), readJson<Report>(RUN_FILE) as Report, existsSync, ran)
    mkdirSync(dirname(REPORT_FILE), { recursive: true })
    writeFileSync(REPORT_FILE, `${JSON.stringify(merged, null, 2)}\n`)
    console.log(`wrote ${REPORT_FILE}`)
  }
  await writeSummary()
}
