import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { chromium, type Page } from 'playwright-core'

// The screenshots of docs/partners.md, "The portal": each screen of a running portal, taken
// in Chromium. Run the demo (npm run demo, with Redis), make a change or two with its curl
// lines so that there is something to show, then, with the portal link it printed:
//
//   node dist/scripts/portal-screenshots.js '<portal link>' [docs/portal]
//
// The link is spent by this run. CHROMIUM names the browser (default /usr/bin/chromium).

const SCREENS = ['Overview', 'Usage', 'Request log', 'Webhooks', 'Events'] as const

/** `docs/portal/<name>.png`: the screen's name in lower case, words joined by hyphens. */
async function shoot(page: Page, dir: string, name: string): Promise<string> {
  const path = join(dir, `${name.toLowerCase().replaceAll(' ', '-')}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}

/** Clicks the first button named `name`, if the screen shows one, and waits for what it loads. */
async function open(page: Page, name: string): Promise<void> {
  const button = page.getByRole('button', { name, exact: true }).first()
  if (await button.count() > 0) {
    await button.click()
    await page.waitForLoadState('networkidle')
  }
}

export async function portalScreenshots(link: string, dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true })
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } })
    await page.goto(link)
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor({ timeout: 20_000 })
    const written: string[] = []
    for (const name of SCREENS) {
      await page.getByRole('navigation', { name: 'Portal' }).getByRole('link', { name, exact: true }).click()
      await page.getByRole('heading', { level: 1, name }).waitFor({ timeout: 20_000 })
      await page.waitForLoadState('networkidle')
      if (name === 'Request log') {
        // The failed requests, and the newest one's detail open, as a person looking into an
        // error would see them.
        await page.getByRole('textbox', { name: 'Status' }).fill('errors')
        await page.getByRole('button', { name: 'Filter', exact: true }).click()
        await page.waitForLoadState('networkidle')
        const details = page.getByRole('button', { name: /^Details of / }).first()
        if (await details.count() > 0) {
          await details.click()
          await page.getByTestId('entry').waitFor({ timeout: 20_000 })
        }
      }
      if (name === 'Webhooks') {
        // An endpoint's deliveries open, as a person checking them would see them; then, on
        // its own picture, the endpoint's recoveries and the form that starts one.
        await open(page, 'Deliveries')
        written.push(await shoot(page, dir, name))
        await open(page, 'Deliveries')
        await open(page, 'Recover')
        written.push(await shoot(page, dir, 'Recover'))
        continue
      }
      written.push(await shoot(page, dir, name))
    }
    return written
  } finally {
    await browser.close()
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [link, dir = 'docs/portal'] = process.argv.slice(2)
  if (link === undefined || !/\/portal\/enter#/.test(link)) {
    console.error('usage: node dist/scripts/portal-screenshots.js <portal link> [directory]')
    process.exit(2)
  }
  for (const path of await portalScreenshots(link, dir)) console.log(path)
}
