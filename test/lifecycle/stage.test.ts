import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { ApiError, errorCatalog } from '../../src/contract/errors.js'
import { reasonOf, reloadRoute, RELOAD_PATH } from '../../src/lifecycle/admin.js'
import type { ReloadResult } from '../../src/lifecycle/reload.js'
import { deprecationStage } from '../../src/lifecycle/stage.js'
import type { Deprecation } from '../../src/routes/policy.js'
import { expectedError } from '../helpers/catalog.js'
import { TIMESTAMP } from '../helpers/problem.js'

// A route's life as a request meets it, without a gateway: the deprecation stage on a bare
// Fastify route (its phase from the clock, its headers, its 410, the count it reports), and the
// admin port's reload route with a reload of the test's own (its 200, its 422 naming every
// reason as a field error).

const apps: FastifyInstance[] = []
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

/** A route of `path` behind the stage; what the stage counted. */
async function routeWith(path: string, deprecation: Deprecation, counting = true): Promise<{ app: FastifyInstance; counted: string[] }> {
  const counted: string[] = []
  const app = Fastify()
  apps.push(app)
  // The gateway's error handler writes the problem; here, what was thrown and the headers set before.
  app.setErrorHandler((error: ApiError, _request, reply) => reply.code(error.status).send({ code: error.code, detail: error.detail }))
  const stage = deprecationStage(path, deprecation, counting ? (route) => void counted.push(route) : undefined)
  // The pipeline runs it as one of its checks; here, a hook of its own.
  app.get(path, { onRequest: async (request, reply) => stage(request, reply) }, async () => ({ served: true }))
  await app.ready()
  return { app, counted }
}

const YEAR_MS = 365 * 86_400_000
const iso = (ms: number): string => new Date(ms).toISOString()

describe('the deprecation stage', () => {
  it('shows nothing before since, and counts nothing', async () => {
    const { app, counted } = await routeWith('/v1/old', { since: iso(Date.now() + YEAR_MS), sunset: iso(Date.now() + 2 * YEAR_MS), link: 'https://docs.example.com/m' })
    const res = await app.inject({ url: '/v1/old' })
    expect({ status: res.statusCode, body: res.body, deprecation: res.headers.deprecation, sunset: res.headers.sunset, link: res.headers.link })
      .toEqual({ status: 200, body: '{"served":true}', deprecation: undefined, sunset: undefined, link: undefined })
    expect(counted).toEqual([])
  })

  it('from since, serves the route with its headers and counts each answer', async () => {
    const deprecation = { since: '2020-01-01T00:00:00Z', sunset: '2999-01-01T00:00:00Z', link: 'https://docs.example.com/m' }
    const { app, counted } = await routeWith('/v1/old', deprecation)
    for (let i = 0; i < 2; i += 1) {
      const res = await app.inject({ url: '/v1/old' })
      expect({ status: res.statusCode, body: res.body, deprecation: res.headers.deprecation, sunset: res.headers.sunset, link: res.headers.link }).toEqual({
        status: 200, body: '{"served":true}', deprecation: '@1577836800', sunset: 'Tue, 01 Jan 2999 00:00:00 GMT', link: '<https://docs.example.com/m>; rel="deprecation"; type="text/html"',
      })
    }
    expect(counted).toEqual(['/v1/old', '/v1/old'])
  })

  it('without a sunset stays deprecated', async () => {
    const { app, counted } = await routeWith('/v1/old', { since: '2020-01-01T00:00:00Z' })
    const res = await app.inject({ url: '/v1/old' })
    expect({ status: res.statusCode, deprecation: res.headers.deprecation, sunset: res.headers.sunset }).toEqual({ status: 200, deprecation: '@1577836800', sunset: undefined })
    expect(counted).toEqual(['/v1/old'])
  })

  it('from the sunset, answers 410 ROUTE_RETIRED with the headers, before the route runs', async () => {
    const { app, counted } = await routeWith('/v1/old', { since: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z', replacement: '/v1/new' })
    const res = await app.inject({ url: '/v1/old' })
    expect({ status: res.statusCode, body: JSON.parse(res.body) as unknown, deprecation: res.headers.deprecation, sunset: res.headers.sunset }).toEqual({
      status: 410,
      body: { code: 'ROUTE_RETIRED', detail: '/v1/old was retired at 2021-01-01T00:00:00.000Z. Use /v1/new instead.' },
      deprecation: '@1577836800', sunset: 'Fri, 01 Jan 2021 00:00:00 GMT',
    })
    expect(counted).toEqual(['/v1/old'])
  })

  it('needs no counter', async () => {
    const { app } = await routeWith('/v1/old', { since: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z' }, false)
    expect((await app.inject({ url: '/v1/old' })).statusCode).toBe(410)
  })
})

describe('a reload refused, as field errors', () => {
  it('names the setting as the field, a restart-only one NOT_ALLOWED', () => {
    expect(reasonOf('config/default.json routes[0].upstream: no upstream named \'bookings\''))
      .toEqual({ field: 'routes[0].upstream', code: 'INVALID_FORMAT', detail: 'no upstream named \'bookings\'' })
    expect(reasonOf('config/default.json docsUrl: needs a restart: the admin listener is made once'))
      .toEqual({ field: 'docsUrl', code: 'NOT_ALLOWED', detail: 'needs a restart: the admin listener is made once' })
  })

  it('names the file as the field of a problem of no setting', () => {
    // Whole lines only: a problem that does not start with the file, or runs on past a line's end, is the file's.
    for (const problem of [
      'config/default.json: cannot be read', 'the new configuration could not be put in force: no socket: listen EADDRINUSE',
      ' x: y', 'a b:c', 'a b: ', ' config/default.json a: b', 'config/default.json a: b\nc',
    ]) {
      expect(reasonOf(problem), problem).toEqual({ field: 'CONFIG_FILE', code: 'INVALID_FORMAT', detail: problem })
    }
  })
})

describe('POST /admin/v1/config/reload', () => {
  const DOCS = 'https://docs.example.com'

  async function adminWith(result: ReloadResult): Promise<{ app: FastifyInstance; triggers: string[] }> {
    const triggers: string[] = []
    const app = Fastify()
    apps.push(app)
    const route = reloadRoute(async (trigger) => {
      triggers.push(trigger)
      return result
    }, DOCS)
    expect(route.paths).toBe('/admin/v1/config/reload')
    await app.register(route.routes)
    return { app, triggers }
  }

  it('answers what is in force, changed when the reload applied a new file', async () => {
    for (const outcome of ['applied', 'unchanged'] as const) {
      const { app, triggers } = await adminWith({ outcome, hash: 'abc', loadedAt: '2026-01-01T00:00:00.000Z' })
      const res = await app.inject({ method: 'POST', url: '/admin/v1/config/reload' })
      expect({ status: res.statusCode, type: res.headers['content-type'], body: JSON.parse(res.body) as unknown }).toEqual({
        status: 200, type: 'application/json; charset=utf-8',
        body: { data: { changed: outcome === 'applied', hash: 'abc', loadedAt: '2026-01-01T00:00:00.000Z' }, meta: { requestId: expect.any(String), timestamp: expect.stringMatching(TIMESTAMP) } },
      })
      expect(triggers).toEqual(['admin route'])
    }
  })

  it('answers 422 naming every reason, and the configuration that keeps serving', async () => {
    const loadedAt = '2026-01-01T00:00:00.000Z'
    const cases = [
      [['config/default.json docsUrl: needs a restart: made at start', 'config/default.json: cannot be read'], '2 reasons'],
      [['config/default.json: cannot be read'], '1 reason'],
    ] as const
    for (const [problems, counted] of cases) {
      const { app } = await adminWith({ outcome: 'refused', problems: [...problems], hash: 'abc', loadedAt })
      const res = await app.inject({ method: 'POST', url: '/admin/v1/config/reload' })
      const spec = expectedError('VALIDATION_FAILED')
      expect({ status: res.statusCode, type: res.headers['content-type'], body: JSON.parse(res.body) as unknown }).toEqual({
        status: spec.status, type: 'application/problem+json; charset=utf-8',
        body: {
          type: `${DOCS}/errors/validation-failed`, title: spec.title, status: spec.status, code: 'VALIDATION_FAILED',
          detail: `The configuration was not reloaded (${counted}); the one loaded at ${loadedAt} keeps serving.`,
          moreInfo: errorCatalog.VALIDATION_FAILED.tip, instance: RELOAD_PATH, errors: problems.map(reasonOf),
          requestId: expect.any(String), timestamp: expect.stringMatching(TIMESTAMP),
        },
      })
    }
  })
})
