import { execFile } from 'node:child_process'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { errorCatalog, kebabCode, type ErrorCode } from '../contract/errors.js'
import { whenItHappens } from './error-text.js'
import { eventTypesOf, exampleProblem, openApiDocument, type DocumentSource } from './openapi.js'
import { errorCodesOf, publicRoutes } from './responses.js'

// The partner documentation site: openapi.json, the API reference rendered from it into one
// self-contained page (no request leaves the site), and a page per error code, the page a
// problem's `type` URL names. Any static server that maps /errors/<code> to
// errors/<code>.html can host it under `docsUrl`.

const run = promisify(execFile)

function escape(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;')
}

/** `code` spans and nothing else of Markdown, for the catalog's texts. */
function inline(text: string): string {
  return escape(text).replace(/`([^`]+)`/g, '<code>$1</code>')
}

const STYLE = `
  body { font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1c2430; margin: 0; background: #f7f8fa; }
  main { max-width: 52rem; margin: 0 auto; padding: 2rem 1.25rem 4rem; background: #fff; min-height: 100vh; box-sizing: border-box; }
  nav { font-size: .9rem; margin-bottom: 1.5rem; } nav a { color: #2451b7; }
  h1 { font-size: 1.6rem; margin: .2rem 0 1rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
  code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; }
  pre { background: #0f1722; color: #e6edf3; padding: 1rem; border-radius: 6px; overflow-x: auto; }
  .status { display: inline-block; font-weight: 600; padding: .1rem .5rem; border-radius: 4px; background: #fde8e8; color: #9b1c1c; }
  .status.s5 { background: #fff4e5; color: #8a4b00; }
  .code { font-family: ui-monospace, monospace; font-size: 1rem; color: #4a5568; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid #e2e8f0; vertical-align: top; }
  ul.ops { padding-left: 1.2rem; } ul.ops code { white-space: nowrap; }
`

function page(title: string, body: string, home: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
<nav><a href="${home}index.html">API reference</a> · <a href="${home}errors/index.html">Error codes</a></nav>
${body}
</main>
</body>
</html>
`
}

function statusBadge(status: number): string {
  return `<span class="status${status >= 500 ? ' s5' : ''}" data-status="${status}">${status}</span>`
}

/** Operations that can answer `code`, as `METHOD /path` lines. */
function operationsOf(code: ErrorCode, source: DocumentSource): string[] {
  const lines: string[] = []
  for (const policy of publicRoutes(source.routes, eventTypesOf(source).map((t) => t.type), source.builtinRoutes)) {
    for (const method of policy.methods) if (errorCodesOf(policy, method).includes(code)) lines.push(`${method} ${policy.path}`)
  }
  return lines
}

export function errorPage(code: ErrorCode, source: DocumentSource): string {
  const spec = errorCatalog[code]
  const when = whenItHappens[code] ?? spec.title
  const operations = operationsOf(code, source)
  const example = JSON.stringify(exampleProblem(code, source.docsUrl, operations[0]?.split(' ')[1] ?? '/v1/properties'), null, 2)
  return page(`${code} · ${spec.title}`, `
<p class="code" id="code">${code}</p>
<h1>${statusBadge(spec.status)} ${escape(spec.title)}</h1>
<h2>When it happens</h2>
<p>${inline(when)}</p>
<h2>What to do</h2>
<p>${inline(spec.tip)}</p>
<p>Every problem carries a <code>requestId</code> (also in the <code>Service-Request-Id</code> header): quote it when you contact partner support.</p>
<h2>Which endpoints answer it</h2>
${operations.length === 0 ? '<p>Any request, before it reaches an endpoint.</p>' : `<ul class="ops">${operations.map((op) => `<li><code>${escape(op)}</code></li>`).join('')}</ul>`}
<h2>Example</h2>
<p><code>HTTP ${spec.status}</code>, <code>Content-Type: application/problem+json</code>; branch on <code>code</code>, not on <code>title</code> or <code>detail</code>.</p>
<pre>${escape(example)}</pre>
`, '../')
}

export function errorIndexPage(): string {
  const codes = Object.keys(errorCatalog) as ErrorCode[]
  const rows = codes.map((code) => {
    const spec = errorCatalog[code]
    return `<tr><td>${statusBadge(spec.status)}</td><td><a href="${kebabCode(code)}.html"><code>${code}</code></a></td><td>${escape(spec.title)}</td></tr>`
  })
  return page('Error codes', `
<h1>Error codes</h1>
<p>Every error is <code>application/problem+json</code> (RFC 9457). Its <code>type</code> is the page of its code; branch on <code>code</code>.
Field errors (<code>errors[].code</code>) are <code>INVALID_FORMAT</code>, <code>INVALID_ENUM_VALUE</code>, <code>REQUIRED</code>, <code>OUT_OF_RANGE</code>, <code>UNKNOWN_PARAMETER</code> and <code>NOT_ALLOWED</code>.</p>
<table>
<thead><tr><th>status</th><th>code</th><th>title</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>
`, '../')
}

// Redoc's footer shows the Redocly logo from its CDN; the page must load nothing from outside,
// so the logo becomes the word, drawn inline. The policy below stops any other request out.
const REDOC_LOGOS = /https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini(?:-full)?\.svg/g
const LOGO_INLINE = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='64' height='18'%3E%3Ctext x='0' y='14' font-family='sans-serif' font-size='13' fill='%23555'%3ERedocly%3C/text%3E%3C/svg%3E"
const POLICY = `<meta http-equiv="Content-Security-Policy" content="default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'">`

/** Renders the reference with Redocly's CLI, its scripts inlined: the page needs no network. */
async function renderReference(specFile: string, outFile: string): Promise<void> {
  const require = createRequire(import.meta.url)
  const cli = join(dirname(require.resolve('@redocly/cli/package.json')), 'bin', 'cli.js')
  await run(process.execPath, [cli, 'build-docs', specFile, '--inlineBundle', '--title', 'Partner API reference', '-o', outFile], {
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    maxBuffer: 16 * 1024 * 1024,
  })
  const html = (await readFile(outFile, 'utf8')).replace(REDOC_LOGOS, LOGO_INLINE).replace('<head>', `<head>\n  ${POLICY}`)
  // A newer renderer that loads its code from a CDN again must stop the build, not ship.
  const remote = /<(?:script|link)\b[^>]*\b(?:src|href)="https?:\/\//.exec(html)
  if (remote !== null || !html.includes(POLICY)) throw new Error(`the rendered reference would load from outside the site: ${remote?.[0] ?? 'no policy'}`)
  await writeFile(outFile, html)
}

/** Writes the whole site into `dir` (emptied first); returns the files written, relative to it. */
export async function buildSite(dir: string, source: DocumentSource): Promise<string[]> {
  await rm(dir, { recursive: true, force: true })
  await mkdir(join(dir, 'errors'), { recursive: true })
  const files: string[] = []
  const write = async (name: string, content: string): Promise<void> => {
    await writeFile(join(dir, name), content)
    files.push(name)
  }
  await write('openapi.json', `${JSON.stringify(openApiDocument(source), null, 2)}\n`)
  await renderReference(join(dir, 'openapi.json'), join(dir, 'index.html'))
  files.push('index.html')
  await write('errors/index.html', errorIndexPage())
  for (const code of Object.keys(errorCatalog) as ErrorCode[]) await write(`errors/${kebabCode(code)}.html`, errorPage(code, source))
  return files
}
