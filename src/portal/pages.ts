import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import { PORTAL_PREFIX } from './http.js'

// The portal's front end as the gateway serves it (docs/architecture.md, "The partner
// portal"): built by `npm run build` into dist/portal-web, read once at start, every file
// served from memory by the gateway itself (no CDN: partners' networks may block one). The
// page is one document for every screen; its script picks the screen from the path.

/** The screens' paths: each serves the page, whose script shows the screen. */
export const PAGE_PATHS = ['/', '/enter', '/usage', '/request-log', '/webhooks', '/events'].map((path) => `${PORTAL_PREFIX}${path}`)

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
}

export interface PortalFile {
  body: Buffer
  type: string
  etag: string
}

export interface PortalBuild {
  index: PortalFile
  /** Under /portal/assets/: their names carry their content's hash, so they never change. */
  assets: ReadonlyMap<string, PortalFile>
}

/**
 * Where the build is: dist/portal-web beside the compiled gateway (dist/src/portal), or, when
 * the gateway runs from its sources (the tests), under the repository's dist/.
 */
export function buildDirectory(): string | undefined {
  const candidates = ['../../portal-web/', '../../dist/portal-web/'].map((path) => fileURLToPath(new URL(path, import.meta.url)))
  return candidates.find((dir) => existsSync(join(dir, 'index.html')))
}

function fileOf(path: string): PortalFile {
  const body = readFileSync(path)
  return { body, type: TYPES[extname(path)] ?? 'application/octet-stream', etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` }
}

export function readBuild(dir: string | undefined): PortalBuild | undefined {
  if (dir === undefined) return undefined
  const assetsDir = join(dir, 'assets')
  const assets = new Map<string, PortalFile>()
  if (existsSync(assetsDir)) {
    for (const name of readdirSync(assetsDir).sort()) assets.set(name, fileOf(join(assetsDir, name)))
  }
  return { index: fileOf(join(dir, 'index.html')), assets }
}

function serve(request: FastifyRequest, reply: FastifyReply, file: PortalFile, cacheControl: string): FastifyReply {
  reply.header('cache-control', cacheControl).header('etag', file.etag)
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send()
  return reply.type(file.type).send(file.body)
}

/** The page and its assets, each a route of its own (step 1 only: the host's brand). */
export function portalPages(build: PortalBuild | undefined) {
  return async function pages(app: FastifyInstance): Promise<void> {
    const page = { config: { portal: { kind: 'page' } } } as const
    for (const path of PAGE_PATHS) {
      app.get(path, page, async (request, reply) => {
        // A gateway started from a checkout never built has no page to serve: say so rather than invent one.
        if (build === undefined) throw new ApiError('SERVICE_UNAVAILABLE', 'The portal\'s pages are not available on this instance.', { retryAfter: 60 })
        // Revalidated each time: a new release's page names its new assets at once.
        return serve(request, reply, build.index, 'no-cache')
      })
    }
    for (const [name, file] of build?.assets ?? []) {
      app.get(`${PORTAL_PREFIX}/assets/${name}`, page, async (request, reply) => serve(request, reply, file, 'public, max-age=31536000, immutable'))
    }
  }
}
