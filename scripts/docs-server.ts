import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import fastifyStatic from '@fastify/static'
import Fastify from 'fastify'
import { buildSite } from '../src/docs/site.js'
import type { DocumentSource } from '../src/docs/openapi.js'

// The documentation site (npm run docs) on its own port, as a static host would serve it:
// `/errors/<code>` answers errors/<code>.html, so a problem's `type` URL opens its page
// once `docsUrl` points here. `npm run demo` starts it.

export interface DocsServer {
  /** Base URL of the site: what `docsUrl` is set to. */
  url: string
  close(): Promise<void>
}

export async function serveDocs(source: DocumentSource, options: { dir?: string; port?: number } = {}): Promise<DocsServer> {
  const dir = resolve(options.dir ?? 'site')
  // A fresh clone has no site yet: build it once (npm run docs rebuilds it).
  if (!existsSync(resolve(dir, 'index.html'))) await buildSite(dir, source)
  const app = Fastify({ logger: false })
  await app.register(fastifyStatic, { root: dir, extensions: ['html'] })
  const listen = (port: number): Promise<string> => app.listen({ port, host: '127.0.0.1' })
  try {
    await listen(options.port ?? 4080)
  } catch {
    // The usual port is taken (another demo?): any free one will do.
    await listen(0)
  }
  const port = (app.server.address() as { port: number }).port
  return { url: `http://localhost:${port}`, close: () => app.close() }
}
