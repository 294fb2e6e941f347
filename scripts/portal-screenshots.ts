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

const SCREENS = ['Overview', 'Usage', 'Webhooks', 'Events'] as const

async function shoot(page: Page, dir: string, name: string): Promise<string> {
  const path = join(dir, `${name.toLowerCase()}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
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
      if (name === 'Webhooks') {
        // An endpoint's deliveries open, as a person checking them would see them.
        const deliveries = page.getByRole('button', { name: 'Deliveries' }).first()
        if (await deliveries.count() > 0) {
          await deliveries.click()
          await page.waitForLoadState('networkidle')
        }
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
