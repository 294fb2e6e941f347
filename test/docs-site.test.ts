import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../src/config.js'
import { errorCatalog, kebabCode, type ErrorCode } from '../src/contract/errors.js'
import { whenItHappens } from '../src/docs/error-text.js'
import { buildSite, errorPage } from '../src/docs/site.js'

// The site `npm run docs` writes: a page for every code of the catalog, with what the
// partner needs on it. (test/browser renders it in a real browser.)

const source = loadConfig({ CONFIG_FILE: 'config/default.json' })
const codes = Object.keys(errorCatalog) as ErrorCode[]

describe('the documentation site', () => {
  it('says when every code of the catalog happens (a new code needs its text)', () => {
    expect(codes.filter((code) => (whenItHappens[code] ?? '').length < 30)).toEqual([])
  })

  it('writes openapi.json, the reference and one page per code, nothing else', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'site-'))
    try {
      const files = await buildSite(dir, source)
      const written = [...await readdir(dir), ...(await readdir(join(dir, 'errors'))).map((f) => `errors/${f}`)].filter((f) => f !== 'errors').sort()
      const expected = ['openapi.json', 'index.html', 'errors/index.html', ...codes.map((c) => `errors/${kebabCode(c)}.html`)].sort()
      expect({ files: [...files].sort(), written }).toEqual({ files: expected, written: expected })
      const reference = await readFile(join(dir, 'index.html'), 'utf8')
      expect(reference).not.toMatch(/<(?:script|link)\b[^>]*\b(?:src|href)="https?:/)
      expect(reference).not.toContain('cdn.redoc.ly/redoc/logo')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it.each(codes)('%s: its page has the status, title, when, what to do and an example', (code) => {
    const spec = errorCatalog[code]
    const html = errorPage(code, source)
    expect(html).toContain(`<p class="code" id="code">${code}</p>`)
    expect(html).toContain(`data-status="${spec.status}">${spec.status}</span>`)
    expect(html).toContain(`</span> ${spec.title}</h1>`)
    expect(html).toContain(spec.tip.split('`')[0] as string)
    expect(html).toContain('When it happens')
    expect(html).toContain('What to do')
    expect(html).toContain(`&quot;type&quot;: &quot;${source.docsUrl}/errors/${kebabCode(code)}&quot;`)
    expect(html).toContain(`&quot;code&quot;: &quot;${code}&quot;`)
    expect(html).not.toMatch(/(?:src|href)="https?:/)
  })
})
