import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { serveDocs, type DocsServer } from '../../scripts/docs-server.js'
import { loadConfig } from '../../src/config.js'
import { errorCatalog, kebabCode, type ErrorCode } from '../../src/contract/errors.js'
import { openApiDocument, type JsonObject } from '../../src/docs/openapi.js'
import { TestGateway } from '../helpers/gateway.js'

// The documentation site in a real headless browser (Debian's chromium): the reference
// renders every operation, each error page shows its code and status, a real problem's
// `type` link opens its page, and no page asks for anything outside the site.

const CHROMIUM = '/usr/bin/chromium'
const hasChromium = existsSync(CHROMIUM)
if (!hasChromium) {
  console.warn(`browser suite skipped: ${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`)
}

const source = loadConfig({ CONFIG_FILE: 'config/default.json' })

// A browser renders whole pages here: slow on a loaded machine, which is not what is tested.
describe.skipIf(!hasChromium)('the documentation site in a browser', { timeout: 120_000 }, () => {
  let dir: string
  let docs: DocsServer
  let browser: Browser
  let context: BrowserContext
  /** Every URL any page of the context asked for. */
  const requested: string[] = []

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'docs-site-'))
    docs = await serveDocs(source, { dir, port: 0 })
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    })
    context = await browser.newContext()
    context.on('request', (request) => requested.push(request.url()))
  }, 60_000)

  afterAll(async () => {
    await context?.close()
    await browser?.close()
    await docs?.close()
    if (dir !== undefined) await rm(dir, { recursive: true, force: true })
  })

  /** What no page may do: fetch from anywhere but the site (inline data is not a request out). */
  function outside(): string[] {
    return requested.filter((url) => !url.startsWith(`${docs.url}/`) && !url.startsWith('data:') && !url.startsWith('blob:'))
  }

  it('renders the API reference with every operation, loading nothing from outside', async () => {
    const paths = openApiDocument(source).paths as Record<string, Record<string, JsonObject>>
    const operations = Object.entries(paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ method, path, id: String(op.operationId), tag: String((op.tags as string[])[0]) })))
    const page = await context.newPage()
    // The reference renders only what its window can show (a virtual list): a window tall
    // enough for every operation, so that each is on the page to be counted.
    await page.setViewportSize({ width: 1280, height: 600 * operations.length })
    const answer = await page.goto(`${docs.url}/`)
    expect(answer?.status()).toBe(200)
    // The page is rendered on the server side and then hydrated: wait for the navigation.
    await page.locator('a[href^="#/"]').first().waitFor({ timeout: 60_000 })
    expect(operations.length).toBeGreaterThanOrEqual(8)
    for (const op of operations) {
      // The operation's entry (method and path) and its link in the navigation.
      const entry = page.locator(`button:has(.tag-${op.method}):has(span:text-is("${op.path}"))`)
      const link = page.locator(`a[href="#/${op.tag.toLowerCase().replaceAll(' ', '-')}/${op.id.toLowerCase()}"]`)
      expect({ op: `${op.method} ${op.path}`, entries: await entry.count(), links: await link.count() })
        .toEqual({ op: `${op.method} ${op.path}`, entries: 1, links: 1 })
    }
    // One operation opened: its summary and an error code of its responses are on the page.
    await page.locator('a[href="#/properties/listproperties"]').click()
    await expect.poll(async () => page.locator('body').innerText(), { timeout: 60_000 }).toContain('List properties')
    expect(outside()).toEqual([])
    await page.close()
  })

  it('shows each operation\'s scope under both security schemes', async () => {
    const page = await context.newPage()
    await page.goto(`${docs.url}/`)
    await page.locator('a[href^="#/"]').first().waitFor({ timeout: 60_000 })
    await page.locator('a[href="#/properties/listproperties"]').click()
    await expect.poll(async () => (await page.locator('body').innerText()).replace(/\s+/g, ' '), { timeout: 60_000 })
      .toContain('apiKey(Required scopes: properties:read ) or oauth2(Required scopes: properties:read )')
    expect(await page.locator('body').innerText()).toContain('Needs the scope properties:read')
    expect(outside()).toEqual([])
    await page.close()
  })

  it('renders each error page with its code and status, at /errors/<code>', async () => {
    const page = await context.newPage()
    for (const code of Object.keys(errorCatalog) as ErrorCode[]) {
      const answer = await page.goto(`${docs.url}/errors/${kebabCode(code)}`)
      expect(answer?.status(), code).toBe(200)
      expect({
        code: await page.locator('#code').innerText(),
        status: await page.locator('h1 [data-status]').innerText(),
        title: await page.locator('h1').innerText(),
      }).toEqual({ code, status: String(errorCatalog[code].status), title: `${errorCatalog[code].status} ${errorCatalog[code].title}` })
    }
    expect(await page.goto(`${docs.url}/errors/`).then((a) => a?.status())).toBe(200)
    expect(await page.locator('tbody tr').count()).toBe(Object.keys(errorCatalog).length)
    expect(outside()).toEqual([])
    await page.close()
  })

  it("opens the page of a real problem's `type` from a gateway whose docsUrl is the site", async () => {
    const t = await TestGateway.start({ config: { docsUrl: docs.url } })
    try {
      const res = await t.get('/v1/properties', undefined)
      const problem = JSON.parse(res.body) as { type: string; code: string; status: number }
      expect(problem).toMatchObject({ type: `${docs.url}/errors/missing-auth-header`, code: 'MISSING_AUTH_HEADER', status: 401 })
      const page = await context.newPage()
      expect((await page.goto(problem.type))?.status()).toBe(200)
      expect(await page.locator('#code').innerText()).toBe('MISSING_AUTH_HEADER')
      expect(await page.locator('h1').innerText()).toBe('401 Missing Authorization header')
      // From the page, the way back to the reference.
      await page.click('nav >> text=API reference')
      await page.waitForLoadState('networkidle')
      expect(page.url()).toBe(`${docs.url}/index.html`)
      await page.close()
    } finally {
      await t.close()
    }
    expect(outside()).toEqual([])
  })
})
