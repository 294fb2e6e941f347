import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { describe, expect, it } from 'vitest'

// A comment that gives a reason from a document must let the reader follow it: the document
// is in this repository and the section exists. The matching is deliberately plain:
//
// - Every file under the scanned folders (and the Dockerfile and compose file) is read whole (but Markdown files, images and the
//   bench's result files), and a comment that wraps is joined first: a line break followed
//   by `//`, `*` or `#` becomes one space.
// - A citation is a path ending in `.md` (or `README` alone, meaning README.md), relative to
//   the repository's root, optionally followed by `, "<heading>"` or by ` §D<n>`. The file
//   must exist; the heading must be one of its headings, word for word; `§D<n>` must begin
//   one of its headings (docs/architecture.md numbers its choices so).
// - A document that is not in the repository may not be cited at all: one of the contract's
//   decisions by number, the bare name of one of the contract's documents (those FOREIGN
//   lists, anywhere but under docs/), or a Markdown file by an absolute path or one that
//   climbs out with `../`.
//
// This file names the patterns it looks for, so it leaves itself out of the scan.

const SCANNED = ['src', 'sdk', 'mocks', 'test', 'bench', 'scripts', '.ci', 'deploy', 'config', 'Dockerfile', 'docker-compose.yml']
const SKIPPED = [/^bench\/results\//, /^sdk\/dist\//, /\.(md|png|jpg|svg)$/, /(^|\/)node_modules\//, /^test\/docs-references\.test\.ts$/]

/** A citation: a path ending in .md (or README), then `, "<heading>"` or ` §D<n>`, either optional. */
const CITATION = /(?<![\w./-])((?:[\w-]+\/)*[\w.-]+\.md|README)(?:,\s*"([^"]+)"|\s+(§D\d+))?/g
/** Documents outside the repository, cited by number or by name. */
const FOREIGN = [
  /\bdecisions\s+§?\s*\d+/gi,
  /(?<![\w./-])(?:decisions|routes|operations|access|idempotency|pms-api|partner-api-v1)\.md\b/g,
  /(?<![\w.:/])(?:\/|(?:\.\.\/)+)(?:[\w.-]+\/)*[\w.-]+\.md\b/g,
]

export interface Problem { file: string; citation: string; problem: string }

/** Comment lines that wrap, joined into one line, so a citation split over two lines is whole. */
export function joinComments(text: string): string {
  return text.replace(/\n[ \t]*(?:\/\/|\*|#)[ \t]*/g, ' ')
}

/** The headings of a Markdown text, as written (outside fenced code blocks). */
export function headingsOf(markdown: string): string[] {
  const headings: string[] = []
  let fenced = false
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced
    else if (!fenced && /^#{1,6} /.test(line)) headings.push(line.replace(/^#+ /, '').trim())
  }
  return headings
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
export function anchorOf(heading: string): string {
  return heading.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
}

/** What is wrong with the citations of `text` (a file at `file`), read against the repository's files by `read`. */
export function citationProblems(file: string, text: string, read: (path: string) => string | undefined): Problem[] {
  const problems: Problem[] = []
  const joined = joinComments(text)
  for (const pattern of FOREIGN) {
    for (const match of joined.matchAll(pattern)) {
      problems.push({ file, citation: match[0], problem: 'cites a document outside the repository; cite docs/… instead' })
    }
  }
  for (const match of joined.matchAll(CITATION)) {
    const [citation, name, heading, numbered] = match as unknown as [string, string, string | undefined, string | undefined]
    const path = name === 'README' ? 'README.md' : name
    if (FOREIGN.some((pattern) => new RegExp(pattern.source, pattern.flags.replace('g', '')).test(citation))) continue
    const markdown = read(path)
    if (markdown === undefined) {
      problems.push({ file, citation, problem: `${path} does not exist` })
      continue
    }
    const headings = headingsOf(markdown)
    if (heading !== undefined && !headings.includes(heading)) problems.push({ file, citation, problem: `${path} has no heading "${heading}"` })
    if (numbered !== undefined && !headings.some((h) => new RegExp(`^${numbered}\\b`).test(h))) problems.push({ file, citation, problem: `${path} has no heading ${numbered}` })
  }
  return problems
}

/** What is wrong with the relative links of a Markdown file: a missing file, or an anchor that is no heading. */
export function linkProblems(file: string, markdown: string, read: (path: string) => string | undefined): Problem[] {
  const problems: Problem[] = []
  for (const match of markdown.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1] as string
    if (/^[a-z]+:/.test(target)) continue
    const [path, anchor] = target.split('#') as [string, string | undefined]
    const resolved = path === '' ? file : normalize(join(dirname(file), path))
    if (!existsSync(resolved)) {
      problems.push({ file, citation: target, problem: `${resolved} does not exist` })
      continue
    }
    if (anchor === undefined) continue
    const text = read(resolved)
    if (text === undefined || !headingsOf(text).map(anchorOf).includes(anchor)) problems.push({ file, citation: target, problem: `${resolved} has no heading #${anchor}` })
  }
  return problems
}

function readIfFile(path: string): string | undefined {
  return existsSync(path) && statSync(path).isFile() ? readFileSync(path, 'utf8') : undefined
}

function scannedFiles(): string[] {
  return SCANNED.flatMap((path) => (statSync(path).isDirectory() ? readdirSync(path, { recursive: true, encoding: 'utf8' }).map((name) => join(path, name)) : [path]))
    .filter((path) => !SKIPPED.some((pattern) => pattern.test(path)) && statSync(path).isFile())
    .sort()
}

describe('citations of documents in code (the matching at the top of this file)', () => {
  const markdown = new Map([
    ['README.md', '# Gateway\n\n## Quick start\n\n```sh\n# not a heading\n```\n'],
    ['docs/architecture.md', '# Architecture\n\n## Order of checks\n\n### §D1 Page size\n\n### §D12 Breakers\n'],
  ])
  const read = (path: string): string | undefined => markdown.get(path)

  it('passes a citation of an existing file, heading or numbered choice, also across wrapped comment lines', () => {
    const text = [
      '// The order (docs/architecture.md, "Order of checks"), the page size (docs/architecture.md §D1),',
      '// a breaker (docs/architecture.md §D12) and the start (README, "Quick',
      '// start"); see README.md.',
      ' * and (docs/architecture.md,',
      ' * "Order of checks")',
    ].join('\n')
    expect(citationProblems('src/a.ts', text, read)).toEqual([])
  })

  it('reports a missing file, a missing heading, a missing numbered choice and a heading inside a code block', () => {
    const text = [
      '// (docs/missing.md) (docs/architecture.md, "Order of check") (docs/architecture.md §D2)',
      '// (README, "not a heading")',
    ].join('\n')
    expect(citationProblems('src/a.ts', text, read)).toEqual([
      { file: 'src/a.ts', citation: 'docs/missing.md', problem: 'docs/missing.md does not exist' },
      { file: 'src/a.ts', citation: 'docs/architecture.md, "Order of check"', problem: 'docs/architecture.md has no heading "Order of check"' },
      { file: 'src/a.ts', citation: 'docs/architecture.md §D2', problem: 'docs/architecture.md has no heading §D2' },
      { file: 'src/a.ts', citation: 'README, "not a heading"', problem: 'README.md has no heading "not a heading"' },
    ])
  })

  it('reports every citation of a document outside the repository', () => {
    // The foreign names are put together here, so that this file, which the scan of the whole
    // project leaves out, cites none of them to a reader either.
    const decision = (number: string): string => `${'decisions'} ${number}`
    const doc = (name: string): string => `${name}.md`
    const text = `// (${decision('5')}) (${decision('§10')}) (${doc('routes')}, step 7) (${doc('operations')}) ${doc('pms-api')} ../notes/plan.md /srv/notes/plan.md https://example.com/a.md`
    const outside = 'cites a document outside the repository; cite docs/… instead'
    expect(citationProblems('test/a.test.ts', text, read)).toEqual([
      { file: 'test/a.test.ts', citation: decision('5'), problem: outside },
      { file: 'test/a.test.ts', citation: decision('§10'), problem: outside },
      { file: 'test/a.test.ts', citation: doc('routes'), problem: outside },
      { file: 'test/a.test.ts', citation: doc('operations'), problem: outside },
      { file: 'test/a.test.ts', citation: doc('pms-api'), problem: outside },
      { file: 'test/a.test.ts', citation: '../notes/plan.md', problem: outside },
      { file: 'test/a.test.ts', citation: '/srv/notes/plan.md', problem: outside },
    ])
  })

  it('takes the anchors of headings as GitHub writes them', () => {
    expect(['Config file (`CONFIG_FILE`)', "§D3 Health is this instance's health", 'What npm run abuse attacks'].map(anchorOf))
      .toEqual(['config-file-config_file', 'd3-health-is-this-instances-health', 'what-npm-run-abuse-attacks'])
  })
})

describe('the project', () => {
  it('scans the folders it names, this file left out', () => {
    const files = scannedFiles()
    expect(files).toEqual(expect.arrayContaining(['src/app.ts', 'mocks/pms/server.ts', 'test/docs.test.ts', 'bench/run.ts', 'scripts/generate-docs.ts', '.ci/run',
      'deploy/prometheus/alerts.yml', 'config/default.json', 'Dockerfile', 'docker-compose.yml']))
    expect(files).not.toContain('test/docs-references.test.ts')
    expect(files.filter((f) => f.startsWith('bench/results/'))).toEqual([])
  })

  it('cites only documents and sections that exist in the repository', () => {
    const problems = scannedFiles().flatMap((file) => citationProblems(file, readFileSync(file, 'utf8'), readIfFile))
    expect(problems).toEqual([])
  })

  it('links, from the READMEs and docs/, only to files and headings that exist', () => {
    const documents = ['README.md', ...readdirSync('docs').filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`), 'bench/README.md', 'sdk/README.md']
    const problems = documents.flatMap((file) => linkProblems(file, readFileSync(file, 'utf8'), readIfFile))
    expect(problems).toEqual([])
  })
})
