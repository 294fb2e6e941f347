import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import type { FileConfigInput } from '../../src/config.js'
import { NO_LOAD_SHEDDING, NO_OAUTH } from './config.js'

// A config file of a test's own that it rewrites and reloads (docs/operations.md, "Changing
// the configuration").

export const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as Record<string, unknown> & { routes: { path: string }[] }

/** The shipped file with the test's settings on top, token issuer and load shedding off as testConfig has them. */
export function shippedWith(change: Partial<FileConfigInput> | Record<string, unknown> = {}): Record<string, unknown> {
  return { ...shipped, oauth: NO_OAUTH, loadShedding: NO_LOAD_SHEDDING, upstreams: {}, routes: [], ...change }
}

/** The shipped declared routes whose paths are listed. */
export function shippedRoutes(paths: string[]): { path: string }[] {
  return shipped.routes.filter((r) => paths.includes(r.path))
}

export class ConfigFile {
  private readonly dir = mkdtempSync(join(tmpdir(), 'gateway-reload-'))
  readonly path = join(this.dir, 'config.json')

  /** Writes the file; returns the hash it goes by in /status. */
  write(content: Record<string, unknown>): string {
    const text = `${JSON.stringify(content, null, 2)}\n`
    writeFileSync(this.path, text)
    return createHash('sha256').update(text).digest('hex').slice(0, 16)
  }

  get text(): string {
    return readFileSync(this.path, 'utf8')
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** POST /admin/v1/config/reload on the admin listener at `admin`. */
export async function reloadAt(admin: string, headers: Record<string, string> = {}): Promise<{ statusCode: number; body: unknown }> {
  const res = await request(`${admin}/admin/v1/config/reload`, { method: 'POST', headers })
  const text = await res.body.text()
  return { statusCode: res.statusCode, body: text === '' ? undefined : JSON.parse(text) as unknown }
}

/** The configuration in force, as /status shows it. */
export async function configInForce(admin: string, headers: Record<string, string> = {}): Promise<{ hash: string; loadedAt: string }> {
  const res = await request(`${admin}/status`, { headers })
  return (await res.body.json() as { config: { hash: string; loadedAt: string } }).config
}
