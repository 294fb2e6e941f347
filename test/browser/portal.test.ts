import { randomUUID } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MockWebhookReceiver } from '../../mocks/webhook-receiver/server.js'
import { buildDirectory } from '../../src/portal/pages.js'
import { accepted, hotelChanged, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { admin, dataOf, makeLink, startPortalGateway, type PortalGateway } from '../helpers/portal.js'
import { Receiver } from '../helpers/receiver.js'
import { createEndpoint } from '../helpers/webhooks.js'

// The partner portal in a real headless browser (Debian's chromium) against a real gateway,
// Redis and the stand-in webhook receiver (docs/partners.md, "The portal"): entering by a
// link once, each screen with the credential's own data, an endpoint made in the portal
// receiving a signed test delivery, a problem shown beside its field, a change refused
// without the CSRF token, a session ended by revoking its credential; axe-core on each screen;
// nothing loaded from anywhere but the gateway, and nothing the page's policy had to block.

const CHROMIUM = '/usr/bin/chromium'
const hasChromium = existsSync(CHROMIUM)
const built = buildDirectory() !== undefined
if (!hasChromium) console.warn(`portal browser suite skipped: ${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`)
if (!built) console.warn('portal browser suite skipped: the portal is not built (npm run build)')

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
/** Long enough for a delivery on a busy machine; each wait ends as soon as what it waits for is there. */
const WAIT_MS = 20_000
/** A test's bound: a browser on two shared cores is slow, and a test waits for several deliveries. */
const TEST_MS = 120_000

describe.skipIf(!hasChromium || !built)('the partner portal in a browser', () => {
  let p: PortalGateway
  let browser: Browser
  let receiver: MockWebhookReceiver
  /** Every URL a page asked for, and every message a page wrote to its console. */
  const requested: string[] = []
  const console: string[] = []

  beforeAll(async () => {
    // Usage is written only when a test flushes it, so the figures a test reads are its own.
    p = await startPortalGateway({ usage: { flushSeconds: 3600, retentionDays: 90 } }, PUBLISHER_TOKENS)
    receiver = await new MockWebhookReceiver([], () => undefined).listen()
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      // Playwright gives each launch a new profile directory of its own.
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await receiver?.close()
    await p?.t.close()
  })

  /** A person's browser: its own cookies, every request and console message recorded. */
  async function person(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext()
    context.on('request', (request) => requested.push(request.url()))
    const page = await context.newPage()
    page.on('console', (message) => console.push(`${message.type()}: ${message.text()}`))
    return { context, page }
  }

  /** Enters a new link of the credential; the page lands on the overview. */
  async function enterPortal(id: string, capabilities: string[] = []): Promise<{ context: BrowserContext; page: Page; token: string }> {
    const link = await makeLink(p, id, { capabilities })
    const { context, page } = await person()
    await page.goto(`${p.t.url}/portal/enter#${link.token}`)
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor({ timeout: WAIT_MS })
    // The overview's reads done: what a test does next is not raced by them.
    await page.getByTestId('today').filter({ hasText: /^\d+ requests$/ }).waitFor({ timeout: WAIT_MS })
    return { context, page, token: link.token }
  }

  /** axe-core in the page: the serious and critical violations, by rule and the elements concerned. */
  async function violations(page: Page): Promise<{ id: string; impact: string; nodes: string[] }[]> {
    // Evaluated by the driver, not as a page script: the portal's policy allows no inline script.
    await page.evaluate(AXE)
    const result = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe
      return axe.run(document, { resultTypes: ['violations'] })
    })
    return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) }))
  }

  async function screen(page: Page, name: string): Promise<void> {
    await page.getByRole('navigation', { name: 'Portal' }).getByRole('link', { name, exact: true }).click()
    await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: WAIT_MS })
  }

  it('enters by a link onto the overview of the credential, and refuses the same link a second time', async () => {
    const { key, id } = await p.t.keyWithId({ name: 'Channel sync', scopes: ['properties:read', 'events:read'] })
    await p.t.get('/v1/credential', key)
    const { context, page, token } = await enterPortal(id)
    // The token has left the address bar.
    expect(page.url()).toBe(`${p.t.url}/portal/`)
    const facts = await page.locator('dl.facts').innerText()
    for (const text of [id, 'API key', 'Channel sync', 'acme', 'Live', 'properties:read, events:read', 'all properties of the brand', '1000 requests per 60 seconds', 'never']) {
      expect(facts).toContain(text)
    }
    expect(await page.getByRole('button', { name: 'Roll key' }).count()).toBe(0)
    expect(await violations(page)).toEqual([])
    // The cookie is the page's only hold on the session; nothing is kept in browser storage.
    expect(await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length }))).toEqual({ local: 0, session: 0 })
    await context.close()

    const second = await person()
    await second.page.goto(`${p.t.url}/portal/enter#${token}`)
    await second.page.getByRole('heading', { level: 1, name: 'This link cannot be used' }).waitFor({ timeout: WAIT_MS })
    expect(await second.page.locator('main').innerText()).toContain('Ask the operator who sent it for a new link.')
    expect(await violations(second.page)).toEqual([])
    await second.context.close()
  }, TEST_MS)

  it('marks a test credential\'s portal as test mode on every screen', async () => {
    const { id } = await p.t.keyWithId({ mode: 'test' })
    const { context, page } = await enterPortal(id)
    expect(await page.locator('dl.facts').innerText()).toContain('Test mode')
    for (const name of ['Overview', 'Usage', 'Request log', 'Webhooks', 'Events']) {
      await screen(page, name)
      expect(await page.locator('.test-banner').innerText()).toBe('Test mode: this credential sees test data only, never a live booking.')
      expect(await page.getByRole('banner').locator('.badge').innerText()).toBe('Test mode')
    }
    expect(await violations(page)).toEqual([])
    await context.close()
  }, TEST_MS)

  it('rolls the key from the overview: the new key shown once, and when the old one stops working', async () => {
    const { key, id } = await p.t.keyWithId()
    const { context, page } = await enterPortal(id, ['roll_credential'])
    await page.getByRole('button', { name: 'Roll key' }).click()
    await page.getByRole('button', { name: 'Yes, roll the key' }).click()
    const secret = await page.locator('[data-secret]').innerText({ timeout: WAIT_MS })
    expect((await p.t.get('/v1/credential', secret)).statusCode).toBe(200)
    const until = dataOf<{ previousSecretExpiresAt: string }>(await p.t.get('/v1/credential', key)).previousSecretExpiresAt
    expect(await page.locator('.secret').innerText()).toContain(`The previous key stops working at ${until.replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC')}`)
    expect(await violations(page)).toEqual([])
    await context.close()
  }, TEST_MS)

  it('shows the usage of the last 30 days as a chart and a table, and per route for a day', async () => {
    const { key, id } = await p.t.keyWithId()
    for (let i = 0; i < 3; i += 1) await p.t.get('/v1/credential', key)
    await p.t.get('/v1/properties?perPage=0', key)
    await p.t.gateway.usage.flush()
    const { context, page } = await enterPortal(id)
    await screen(page, 'Usage')
    const today = new Date().toISOString().slice(0, 10)
    const days = page.getByRole('table', { name: 'Requests per day by status class' })
    await days.waitFor({ timeout: WAIT_MS })
    expect(await days.getByRole('row').nth(1).innerText()).toMatch(new RegExp(`^${today}\\s+3\\s+0\\s+1\\s+0\\s+0\\s+4$`))
    expect(await page.locator('.chart canvas').count()).toBeGreaterThan(0)
    const routes = page.getByRole('table', { name: `Requests on ${today} per route` })
    expect((await routes.getByRole('row').allInnerTexts()).slice(1).map((row) => row.split(/\s+/).join(' '))).toEqual([
      'GET /v1/credential 3 0 0 0 0 3',
      'GET /v1/properties 0 0 1 0 0 1',
    ])
    expect(await violations(page)).toEqual([])
    await context.close()
  }, TEST_MS)

  it('makes an endpoint whose test delivery reaches a loopback receiver; changes, rotates, redelivers, disables and deletes it', async () => {
    const { key, id } = await p.t.keyWithId()
    const { context, page } = await enterPortal(id, ['manage_webhooks', 'replay'])
    await screen(page, 'Webhooks')
    expect(await page.locator('.empty').innerText()).toContain('No webhook endpoints yet.')
    expect(await violations(page)).toEqual([])
    // From the keyboard: the URL typed, a type ticked with the space bar, the form sent with Enter.
    await page.getByRole('textbox', { name: 'URL' }).focus()
    await page.keyboard.type(`${receiver.url}/portal`)
    await page.getByRole('checkbox', { name: 'property.updated' }).focus()
    await page.keyboard.press('Space')
    await page.getByRole('textbox', { name: 'Description (optional)' }).focus()
    await page.keyboard.type('Front desk sync')
    await page.keyboard.press('Enter')
    const secret = await page.locator('[data-secret]').innerText({ timeout: WAIT_MS })
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    receiver.addSecret(secret)
    // The endpoint is the credential's, as the API lists it.
    const endpoints = dataOf<Record<string, unknown>[]>(await p.t.call('GET', '/v1/webhook-endpoints', { key }))
    expect(endpoints.map(({ url, eventTypes, description, status }) => ({ url, eventTypes, description, status })))
      .toEqual([{ url: `${receiver.url}/portal`, eventTypes: ['property.updated'], description: 'Front desk sync', status: 'enabled' }])
    const article = page.getByRole('article', { name: `${receiver.url}/portal` })
    await article.waitFor({ timeout: WAIT_MS })
    expect(await article.innerText()).toContain('Front desk sync')

    await article.getByRole('button', { name: 'Send test event' }).click()
    const sent = await article.getByRole('status').innerText({ timeout: WAIT_MS })
    const eventId = /Test event (evt_\w+) sent/.exec(sent)?.[1] as string
    expect(eventId).toMatch(/^evt_/)
    await expect.poll(() => receiver.received.filter((r) => r.webhookId === eventId).map((r) => ({ verified: r.verified, type: r.event?.type })), { timeout: WAIT_MS })
      .toEqual([{ verified: true, type: 'webhook.test' }])
    await expect.poll(async () => {
      await article.getByRole('button', { name: 'Refresh' }).click()
      return article.getByRole('table').innerText()
    }, { timeout: WAIT_MS }).toContain('delivered')
    // The test delivery sent again from the portal: the same event, to this endpoint.
    await article.getByRole('button', { name: `Redeliver ${eventId}` }).click()
    expect(await article.locator('.deliveries').getByRole('status').innerText({ timeout: WAIT_MS })).toBe(`Event ${eventId} queued again for this endpoint.`)
    await expect.poll(() => receiver.received.filter((r) => r.webhookId === eventId).map((r) => ({ verified: r.verified, type: r.event?.type })), { timeout: WAIT_MS })
      .toEqual([{ verified: true, type: 'webhook.test' }, { verified: true, type: 'webhook.test' }])

    // An event of the log delivered, then sent again from the portal.
    const [published] = accepted(await publish(p.adminUrl, hotelChanged(randomUUID())))
    const changed = published?.eventId as string
    await expect.poll(() => receiver.received.filter((r) => r.webhookId === changed && r.verified).length, { timeout: WAIT_MS }).toBe(1)
    await expect.poll(async () => {
      await article.getByRole('button', { name: 'Refresh' }).click()
      return article.getByRole('button', { name: `Redeliver ${changed}` }).count()
    }, { timeout: WAIT_MS }).toBe(1)
    await article.getByRole('button', { name: `Redeliver ${changed}` }).click()
    await expect.poll(() => article.locator('.deliveries').getByRole('status').innerText(), { timeout: WAIT_MS }).toBe(`Event ${changed} queued again for this endpoint.`)
    await expect.poll(() => receiver.received.filter((r) => r.webhookId === changed && r.verified).length, { timeout: WAIT_MS }).toBe(2)
    expect(await violations(page)).toEqual([])

    await article.getByRole('button', { name: 'Rotate secret' }).click()
    await expect.poll(() => page.locator('[data-secret]').innerText(), { timeout: WAIT_MS }).not.toBe(secret)

    await article.getByRole('button', { name: 'Change' }).click()
    await article.getByRole('textbox', { name: 'Description (optional)' }).fill('Night audit')
    await article.getByRole('button', { name: 'Save changes' }).click()
    await expect.poll(() => article.innerText(), { timeout: WAIT_MS }).toContain('Night audit')

    await article.getByRole('button', { name: 'Disable' }).click()
    await expect.poll(() => article.locator('.badge').innerText(), { timeout: WAIT_MS }).toBe('Disabled')
    expect(await article.innerText()).toContain('because you disabled it')

    await article.getByRole('button', { name: 'Delete' }).click()
    await article.getByRole('button', { name: 'Yes, delete' }).click()
    await page.locator('.empty').waitFor({ timeout: WAIT_MS })
    await context.close()
  }, TEST_MS)

  it('recovers an endpoint\'s events of a time range: a bad time at its field, the progress shown, the recovery cancelled', async () => {
    const { key, id } = await p.t.keyWithId()
    // A receiver that never answers: each attempt holds one of the endpoint's 4 leases until it
    // times out (10 s), and the 12 events published first go before the recovery's, which stays running.
    const down = await new Receiver(() => 'hang').listen()
    const endpoint = await createEndpoint(p.t, key, { url: `${down.url}/down`, eventTypes: ['property.updated'] })
    try {
      const since = new Date(Date.now() - 1000).toISOString()
      const published = accepted(await publish(p.adminUrl, Array.from({ length: 12 }, () => hotelChanged(randomUUID()))))
      expect(published).toHaveLength(12)
      const { context, page } = await enterPortal(id, ['replay'])
      await screen(page, 'Webhooks')
      const article = page.getByRole('article', { name: `${down.url}/down` })
      await article.getByRole('button', { name: 'Recover', exact: true }).click()
      await article.locator('.recoveries .empty').waitFor({ timeout: WAIT_MS })
      expect(await article.locator('.recoveries .empty').innerText()).toBe('No recoveries in the last 7 days. After your receiver was down, choose the time range above to send what it missed.')

      const from = article.getByRole('textbox', { name: 'From' })
      await from.fill('yesterday')
      await article.getByRole('button', { name: 'Start recovery' }).click()
      const sinceError = `#${endpoint.id}-recover-since-error`
      await page.locator(sinceError).waitFor({ timeout: WAIT_MS })
      const refused = JSON.parse((await p.t.call('POST', `/v1/webhook-endpoints/${endpoint.id}/recover`, { key, body: JSON.stringify({ since: 'yesterday' }) })).body) as { errors: { field: string; detail: string }[] }
      expect(refused.errors.map((e) => e.field)).toEqual(['since'])
      expect(await page.locator(sinceError).innerText()).toBe(refused.errors[0]?.detail)
      expect(await from.getAttribute('aria-invalid')).toBe('true')
      expect(await violations(page)).toEqual([])

      // From the keyboard: the time typed, "all" chosen, the form sent with Enter.
      await from.fill('')
      await from.focus()
      await page.keyboard.type(since)
      await article.getByRole('radio', { name: 'All of them, received or not' }).focus()
      await page.keyboard.press('Space')
      await from.focus()
      await page.keyboard.press('Enter')
      const notice = await article.locator('.recoveries').getByRole('status').innerText({ timeout: WAIT_MS })
      const recoveryId = /^Recovery (wr_\w+) started: 12 events to send\.$/.exec(notice)?.[1] as string
      expect(recoveryId).toMatch(/^wr_/)
      const table = article.getByRole('table', { name: 'Recoveries of the last 7 days, newest first' })
      await table.waitFor({ timeout: WAIT_MS })
      const row = table.getByRole('row').nth(1)
      expect((await row.innerText()).split('\t').map((cell) => cell.trim())).toEqual([
        recoveryId, expect.stringMatching(/ to /) as string, 'All', 'Running', '0 of 12 sent: 0 delivered, 0 failed', 'Cancel',
      ])
      expect(await violations(page)).toEqual([])

      await article.getByRole('button', { name: `Cancel recovery ${recoveryId}` }).click()
      await expect.poll(() => article.locator('.recoveries').getByRole('status').innerText(), { timeout: WAIT_MS })
        .toBe(`Recovery ${recoveryId} cancelled: what it had not yet sent will not be sent.`)
      await expect.poll(async () => (await row.innerText()).split('\t').map((cell) => cell.trim())[3], { timeout: WAIT_MS }).toBe('Cancelled')
      // The API says the same.
      expect(dataOf<{ status: string }>(await p.t.get(`/v1/webhook-endpoints/${endpoint.id}/recoveries/${recoveryId}`, key)).status).toBe('cancelled')
      await context.close()
    } finally {
      await p.t.call('DELETE', `/v1/webhook-endpoints/${endpoint.id}`, { key })
      await down.close()
    }
  }, TEST_MS)

  it('shows a problem as a sentence beside the field it concerns', async () => {
    const { id } = await p.t.keyWithId()
    const { context, page } = await enterPortal(id, ['manage_webhooks'])
    await screen(page, 'Webhooks')
    await page.getByRole('textbox', { name: 'URL' }).fill('ftp://hooks.example.com/in')
    await page.getByRole('button', { name: 'Add endpoint' }).click()
    const url = page.getByRole('textbox', { name: 'URL' })
    await expect.poll(() => url.getAttribute('aria-invalid'), { timeout: WAIT_MS }).toBe('true')
    const describedBy = (await url.getAttribute('aria-describedby'))?.split(' ') ?? []
    expect(describedBy).toContain('new-url-error')
    expect(await page.locator('#new-url-error').innerText()).toMatch(/^url .*https/)
    // The missing event types are said at their own group of boxes.
    expect(await page.locator('#new-eventTypes-error').innerText()).toMatch(/^eventTypes /)
    expect(await violations(page)).toEqual([])
    await context.close()
  }, TEST_MS)

  it('shows the events the credential sees, filtered by type and by property; a bad property id at its field', async () => {
    const { key, id } = await p.t.keyWithId({ scopes: ['events:read', 'properties:read'] })
    const property = randomUUID()
    const [event] = accepted(await publish(p.adminUrl, hotelChanged(property)))
    const { context, page } = await enterPortal(id)
    await screen(page, 'Events')
    const table = page.getByRole('table')
    await table.waitFor({ timeout: WAIT_MS })
    expect(await table.innerText()).toContain(event?.eventId as string)
    expect(await violations(page)).toEqual([])

    await page.getByRole('textbox', { name: 'Property id' }).fill('not-a-property')
    await page.getByRole('button', { name: 'Filter' }).click()
    await page.locator('#events-property-error').waitFor({ timeout: WAIT_MS })
    const refused = JSON.parse((await p.t.get('/v1/events?propertyId=not-a-property', key)).body) as { errors: { field: string; detail: string }[] }
    expect(refused.errors.map((e) => e.field)).toEqual(['propertyId'])
    expect(await page.locator('#events-property-error').innerText()).toBe(refused.errors[0]?.detail)
    expect(await page.getByRole('textbox', { name: 'Property id' }).getAttribute('aria-invalid')).toBe('true')

    await page.getByRole('textbox', { name: 'Property id' }).fill(property)
    await page.getByRole('combobox', { name: 'Type' }).selectOption('property.updated')
    await page.getByRole('button', { name: 'Filter' }).click()
    await expect.poll(async () => (await page.getByRole('table').getByRole('row').allInnerTexts()).length, { timeout: WAIT_MS }).toBe(2)
    const row = await page.getByRole('table').getByRole('row').nth(1).innerText()
    expect(row).toContain(event?.eventId as string)
    expect(row).toContain(`/v1/properties/${property}`)
    await context.close()
  }, TEST_MS)

  it('finds a failed API call by its request id: its status and problem code; filters at their fields; no match says what to do', async () => {
    const { key, id } = await p.t.keyWithId()
    const failed = await p.t.get('/v1/properties?perPage=1000', key)
    expect(failed.statusCode).toBe(400)
    const problem = JSON.parse(failed.body) as { code: string }
    const requestId = String(failed.headers['service-request-id'])
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/)
    await p.t.gateway.requestLog?.writer.flush()
    const { context, page } = await enterPortal(id)
    await screen(page, 'Request log')
    await page.getByRole('table').waitFor({ timeout: WAIT_MS })
    expect(await violations(page)).toEqual([])

    // From the keyboard: the id typed into the search box, sent with Enter.
    await page.getByRole('textbox', { name: 'Request id' }).focus()
    await page.keyboard.type(requestId)
    await page.keyboard.press('Enter')
    const entry = page.getByTestId('entry')
    await entry.waitFor({ timeout: WAIT_MS })
    const facts = Object.fromEntries(await entry.locator('dt').evaluateAll((terms) => terms.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent])))
    expect(facts).toMatchObject({ 'Request id': requestId, Request: 'GET /v1/properties', Route: '/v1/properties', 'Query parameters': 'perPage', Status: '400', 'Problem code': problem.code })
    expect(problem.code).toBe('INVALID_QUERY_PARAMETER')
    expect(await page.getByRole('heading', { level: 2, name: `Request ${requestId}` }).evaluate((h) => h === document.activeElement)).toBe(true)
    expect(await violations(page)).toEqual([])

    // An id the log does not hold: said at the search box.
    const unknown = `req_${'0'.repeat(32)}`
    await page.getByRole('textbox', { name: 'Request id' }).fill(unknown)
    await page.getByRole('button', { name: 'Find' }).click()
    await page.locator('#log-request-id-error').waitFor({ timeout: WAIT_MS })
    expect(await page.locator('#log-request-id-error').innerText()).toMatch(new RegExp(`^No request with id '${unknown}' is in the log of this credential\\.`))
    expect(await page.getByRole('textbox', { name: 'Request id' }).getAttribute('aria-invalid')).toBe('true')

    // A filter the API refuses: its sentence at its field, the API's own.
    const refused = JSON.parse((await p.t.get('/v1/request-logs?status=abc', key)).body) as { errors: { field: string; detail: string }[] }
    expect(refused.errors.map((e) => e.field)).toEqual(['status'])
    await page.getByRole('textbox', { name: 'Status' }).fill('abc')
    await page.getByRole('button', { name: 'Filter', exact: true }).click()
    await page.locator('#log-status-error').waitFor({ timeout: WAIT_MS })
    expect(await page.locator('#log-status-error').innerText()).toBe(refused.errors[0]?.detail)
    expect(await page.getByRole('textbox', { name: 'Status' }).getAttribute('aria-invalid')).toBe('true')

    // The errors alone: the failed call, and the filter in the page's address.
    await page.getByRole('textbox', { name: 'Status' }).fill('errors')
    await page.getByRole('button', { name: 'Filter', exact: true }).click()
    await expect.poll(async () => (await page.getByRole('table').getByRole('row').allInnerTexts()).length, { timeout: WAIT_MS }).toBe(2)
    expect((await page.getByRole('table').getByRole('row').nth(1).innerText()).split(/\s+/)).toEqual(expect.arrayContaining(['GET', '/v1/properties', '400', problem.code, requestId]))
    expect(new URL(page.url()).search).toBe('?status=errors')
    await page.getByRole('button', { name: `Details of ${requestId}` }).click()
    await expect.poll(() => entry.locator('dd').first().innerText(), { timeout: WAIT_MS }).toBe(requestId)

    // Nothing matches: the empty state says what to do.
    await page.getByRole('textbox', { name: 'Status' }).fill('5xx')
    await page.getByRole('button', { name: 'Filter', exact: true }).click()
    await expect.poll(() => page.locator('.empty').innerText(), { timeout: WAIT_MS }).toBe('No request matches these filters. Change them, or clear them to see every request.')
    expect(await violations(page)).toEqual([])
    await context.close()

  }, TEST_MS)

  it('refuses a change sent without the CSRF token, and nothing changes', async () => {
    const { key, id } = await p.t.keyWithId()
    const { context, page } = await enterPortal(id, ['manage_webhooks'])
    const answer = await page.evaluate(async () => {
      const res = await fetch('/portal/api/v1/webhook-endpoints', {
        method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ url: 'https://hooks.example.com/csrf', eventTypes: ['property.updated'] }),
      })
      return { status: res.status, body: await res.json() as { code: string } }
    })
    expect({ status: answer.status, code: answer.body.code }).toEqual({ status: 403, code: 'PORTAL_CSRF_FAILED' })
    expect(dataOf<unknown[]>(await p.t.call('GET', '/v1/webhook-endpoints', { key }))).toEqual([])
    await context.close()
  }, TEST_MS)

  it('ends the session when an operator revokes the credential', async () => {
    const { id } = await p.t.keyWithId()
    const { context, page } = await enterPortal(id)
    expect((await admin(p, 'POST', `/admin/v1/credentials/${id}/revoke`)).statusCode).toBe(200)
    await page.getByRole('navigation', { name: 'Portal' }).getByRole('link', { name: 'Usage', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: 'Your portal session has ended' }).waitFor({ timeout: WAIT_MS })
    await page.reload()
    await page.getByRole('heading', { level: 1, name: 'Your portal session has ended' }).waitFor({ timeout: WAIT_MS })
    expect(await violations(page)).toEqual([])
    await context.close()
  }, TEST_MS)

  it('loaded nothing from outside the gateway, and the page\'s policy blocked nothing', () => {
    expect(requested.length).toBeGreaterThan(0)
    expect(requested.filter((url) => !url.startsWith(`${p.t.url}/portal/`))).toEqual([])
    expect(console.filter((line) => /Content Security Policy|Refused to/i.test(line))).toEqual([])
  })
})
