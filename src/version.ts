import { readFileSync } from 'node:fs'

// The gateway's version, from package.json: /status reports it and the spans carry it.

function packageVersion(): string {
  // package.json sits one folder above src/ and two above dist/src/.
  for (const relative of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'partner-gateway' && pkg.version !== undefined) return pkg.version
    } catch {
      // Try the next place.
    }
  }
  return 'unknown'
}

export const VERSION = packageVersion()
