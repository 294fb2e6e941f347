import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { ApiError } from '../../src/contract/errors.js'
import { PAGE_PATHS, portalPages, readBuild, type PortalBuild } from '../../src/portal/pages.js'

// The portal's page as pages.ts serves it, without a gateway: a build read once from its
// directory, the document at every screen's path, each asset at its own path with its type,
// ETag and cache rule, and a checkout never built answered as such.

// The build is read and served inside each test: what runs while the file loads (a
// `beforeAll` included) runs outside every test, where the mutation run tests none of it.
let dir: string
const apps: FastifyInstance[] = []

/** An app serving `build`, answering an error with what was thrown (the gateway's error handler writes the problem); the GET routes it registered. */
async function served(build: PortalBuild | undefined): Promise<{ app: FastifyInstance; routes: string[] }> {
  const app = Fastify()
  apps.push(app)
  const routes: string[] = []
  app.addHook('onRoute', (route) => {
    if (route.method === 'GET') routes.push(route.url)
  })
  app.setErrorHandler((error: ApiError, _request, reply) => reply.code(error.status).send({ code: error.code, detail: error.detail, retryAfter: error.retryAfter }))
  await app.register(portalPages(build))
  return { app, routes }
}

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'portal-build-'))
  await mkdir(join(dir, 'assets'))
  await writeFile(join(dir, 'index.html'), '<!doctype html><title>Portal</title><script type="module" src="/portal/assets/index-abc.js"></script>')
  await writeFile(join(dir, 'assets', 'index-abc.js'), 'console.log("portal")')
  await writeFile(join(dir, 'assets', 'index-abc.css'), 'body{margin:0}')
  await writeFile(join(dir, 'assets', 'logo-abc.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>')
  await writeFile(join(dir, 'assets', 'data-abc.bin'), 'raw')
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('a build', () => {
  it('is its document and its assets by name, each with its type and an ETag of its content', () => {
    const build = readBuild(dir) as PortalBuild
    expect(build.index.body.toString()).toBe('<!doctype html><title>Portal</title><script type="module" src="/portal/assets/index-abc.js"></script>')
    expect(build.index.type).toBe('text/html; charset=utf-8')
    expect([...build.assets].map(([name, file]) => [name, file.type, file.body.toString()])).toEqual([
      ['data-abc.bin', 'application/octet-stream', 'raw'],
      ['index-abc.css', 'text/css; charset=utf-8', 'body{margin:0}'],
      ['index-abc.js', 'text/javascript; charset=utf-8', 'console.log("portal")'],
      ['logo-abc.svg', 'image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg"/>'],
    ])
    const etags = [build.index, ...build.assets.values()].map((file) => file.etag)
    expect(etags.every((etag) => /^"[A-Za-z0-9_-]{22}"$/.test(etag))).toBe(true)
    expect(new Set(etags).size).toBe(etags.length)
  })

  it('is nothing where no directory was found', () => {
    expect(readBuild(undefined)).toBeUndefined()
  })

  it('is its document alone where the build has no assets', async () => {
    const bare = await mkdtemp(join(tmpdir(), 'portal-build-'))
    try {
      await writeFile(join(bare, 'index.html'), '<!doctype html>')
      const build = readBuild(bare) as PortalBuild
      expect({ index: build.index.body.toString(), assets: [...build.assets.keys()] }).toEqual({ index: '<!doctype html>', assets: [] })
    } finally {
      await rm(bare, { recursive: true, force: true })
    }
  })
})

describe('serving it', () => {
  it('answers the document at every screen\'s path, revalidated on each load', async () => {
    const build = readBuild(dir) as PortalBuild
    const { app, routes } = await served(build)
    expect(routes).toEqual([...PAGE_PATHS, '/portal/assets/data-abc.bin', '/portal/assets/index-abc.css', '/portal/assets/index-abc.js', '/portal/assets/logo-abc.svg'])
    expect(PAGE_PATHS).toEqual(['/portal/', '/portal/enter', '/portal/usage', '/portal/request-log', '/portal/webhooks', '/portal/events'])
    for (const url of PAGE_PATHS) {
      const res = await app.inject({ url })
      expect({ url, status: res.statusCode, type: res.headers['content-type'], cache: res.headers['cache-control'], etag: res.headers.etag, body: res.body })
        .toEqual({ url, status: 200, type: 'text/html; charset=utf-8', cache: 'no-cache', etag: build.index.etag, body: build.index.body.toString() })
    }
  })

  it('answers each asset for a year, and 304 with no body to a browser holding the same', async () => {
    const build = readBuild(dir) as PortalBuild
    const { app } = await served(build)
    const res = await app.inject({ url: '/portal/assets/index-abc.js' })
    expect({ status: res.statusCode, type: res.headers['content-type'], cache: res.headers['cache-control'], body: res.body })
      .toEqual({ status: 200, type: 'text/javascript; charset=utf-8', cache: 'public, max-age=31536000, immutable', body: 'console.log("portal")' })
    const again = await app.inject({ url: '/portal/assets/index-abc.js', headers: { 'if-none-match': String(res.headers.etag) } })
    expect({ status: again.statusCode, body: again.body, etag: again.headers.etag }).toEqual({ status: 304, body: '', etag: res.headers.etag })
    const other = await app.inject({ url: '/portal/assets/index-abc.js', headers: { 'if-none-match': build.index.etag } })
    expect(other.statusCode).toBe(200)
    expect((await app.inject({ url: '/portal/assets/missing.js' })).statusCode).toBe(404)
  })

  it('answers 503 at the page\'s paths of a checkout never built, and serves no asset', async () => {
    const { app: bare, routes } = await served(undefined)
    expect(routes).toEqual(PAGE_PATHS)
    const res = await bare.inject({ url: '/portal/' })
    expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown })
      .toEqual({ status: 503, body: { code: 'SERVICE_UNAVAILABLE', detail: 'The portal\'s pages are not available on this instance.', retryAfter: 60 } })
    expect((await bare.inject({ url: '/portal/assets/index-abc.js' })).statusCode).toBe(404)
  })
})
