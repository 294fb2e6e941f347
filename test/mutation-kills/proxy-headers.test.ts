import { createServer } from 'node:net'
import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { generateGuests, type Guest } from '../../mocks/service/data.js'
import { MockService, type Failure } from '../../mocks/service/server.js'
import type { FileConfigInput } from '../../src/config.js'
import { Services } from '../../src/proxy/services.js'
import { testConfig } from '../helpers/config.js'
import { SANDBOX_SERVICE_TOKEN, SERVICE_TOKEN, shipped, startWithService, type Setup } from '../helpers/declared.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'

// Rules of declared routes that mutation testing found undefended, in what a service receives
// and what a partner receives back (docs/architecture.md, "What the service receives" and
// "What the partner receives"): the service's token goes in its tokenHeader only when the
// upstream has both (never a header named 'undefined'), and the sandbox's token to the sandbox;
// X-Service-Scopes holds the credential's own scopes among the known ones, space-separated;
// X-Service-Property-Id goes on property-scoped routes only; a service's Location and Link
// targets are mapped to public paths (a target that maps to none is dropped, and a Link header
// is read as RFC 8288 writes it: links apart by commas or tabs, quoted strings with escapes,
// parameters without white space or `anchor`, and nothing after a value that cannot be read);
// every service's sandbox is an upstream of its own, `<name>Sandbox`, on the admin port; and
// the set of services names each one, refuses an unknown name and closes them all.
//
// Each test builds its own gateway (and stand-ins) and closes it at its end: the services,
// the Location rules and the scopes header are made when a gateway is built, and code run in a
// file-level beforeAll counts as static for the mutation run (stryker.config.mjs), so it would
// be tested against no test of this file.

const UA = 'proxy-headers-test/1.0'

/** Every scope of the shipped routes and the built-in ones, sorted. */
const SHIPPED_SCOPES = 'events:read guests:read guests:write properties:read request-logs:read rooms:read webhooks:read webhooks:write'

/** A route of the `open` upstream, which has no tokenHeader (served by the stand-in's guest list). */
const OPEN_ROUTE = { path: '/v1/notes', methods: ['GET'], scope: 'brand', upstream: 'open', upstreamPath: '/partner/v1/guests', pathParams: {}, query: {} }

/** The gateway and its stand-ins as a test body gets them: the bookings sandbox is always there. */
interface Stands {
  t: TestGateway
  live: MockService
  sandbox: MockService
}

/**
 * A gateway with the shipped routes (and `routes` before them) in front of a live and a sandbox
 * stand-in service for `bookings`, run for `body` and closed after it.
 */
async function withGateway(body: (s: Stands) => Promise<void>, options: { routes?: unknown[]; open?: MockService; liveUrl?: string } = {}): Promise<void> {
  const s = await startWithService({
    sandbox: true,
    upstreams: options.open === undefined ? {} : { open: { url: options.open.url } },
    routesBefore: options.routes ?? [],
    routes: options.open === undefined ? [] : [OPEN_ROUTE],
    env: options.liveUrl === undefined ? {} : { UPSTREAM_BOOKINGS_URL: options.liveUrl },
  })
  try {
    await body({ t: s.t, live: s.service, sandbox: s.sandbox as MockService })
  } finally {
    await s.close()
  }
}

/**
 * A service that answers every request with the stand-in's first page and a Link header written
 * byte for byte as latin1: Node's own server writes header values as UTF-8, so it cannot send a
 * lone byte 0xA0 (a no-break space to the gateway, which reads header bytes as latin1).
 */
async function rawService(link: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((socket) => {
    let head = ''
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      const guests = generateGuests('acme')
      const requestId = /^x-request-id: ([^\r]*)$/im.exec(head)?.[1]
      const body = Buffer.from(JSON.stringify({ data: guests.slice(0, 2), meta: { requestId, timestamp: new Date().toISOString(), pagination: { page: 1, perPage: 2, total: guests.length } } }))
      const answer = `HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${body.length}\r\nlink: ${link}\r\nconnection: close\r\n\r\n`
      socket.end(Buffer.concat([Buffer.from(answer, 'latin1'), body]))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** The first page of two guests the stand-in answers, as the partner receives it. */
function expectFirstPage(answer: Answer, seed = 1): void {
  const guests = generateGuests('acme', seed)
  expect(answer.statusCode).toBe(200)
  expect(JSON.parse(answer.body)).toEqual({
    data: guests.slice(0, 2),
    meta: { requestId: answer.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP), pagination: { page: 1, perPage: 2, total: guests.length } },
  })
}

describe('what the service receives', () => {
  it('sends the live token to the live service and the sandbox token to the sandbox, each in the tokenHeader', async () => {
    await withGateway(async ({ t, live, sandbox }) => {
      const liveKey = await t.key()
      const testKey = await t.key({ mode: 'test' })
      expectFirstPage(await t.call('GET', '/v1/guests?perPage=2', { key: liveKey, userAgent: UA }))
      // The sandbox's own data (seed 99): a test key never reaches the live service.
      expectFirstPage(await t.call('GET', '/v1/guests?perPage=2', { key: testKey, userAgent: UA }), 99)
      expect(live.received.map((r) => [r.path, r.headers['x-service-token'], r.headers['x-service-mode']])).toEqual([['/partner/v1/guests?perPage=2', SERVICE_TOKEN, 'live']])
      expect(sandbox.received.map((r) => [r.path, r.headers['x-service-token'], r.headers['x-service-mode']])).toEqual([['/partner/v1/guests?perPage=2', SANDBOX_SERVICE_TOKEN, 'test']])
    })
  })

  it('sends no token header at all to an upstream without tokenHeader, nor to one with a tokenHeader but no token', async () => {
    const open = await new MockService({}).listen()
    let s: Setup | undefined
    try {
      // bookings keeps its tokenHeader; no UPSTREAM_BOOKINGS_TOKEN is set.
      s = await startWithService({ token: false, upstreams: { open: { url: open.url } }, routes: [OPEN_ROUTE] })
      const { t, key, keyId: id, service: tokenless } = s
      const expected = (service: MockService, answer: Answer) => ({
        host: new URL(service.url).host, connection: 'keep-alive', 'user-agent': UA, 'x-request-id': answer.headers['service-request-id'],
        traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/), 'x-service-key-id': id, 'x-service-brand': 'acme', 'x-service-mode': 'live',
        'x-service-scopes': 'events:read guests:read guests:write notes:read properties:read request-logs:read rooms:read webhooks:read webhooks:write', 'x-forwarded-for': '127.0.0.1', 'accept-encoding': 'identity',
      })
      const viaOpen = await t.call('GET', '/v1/notes', { key, userAgent: UA })
      expect(viaOpen.statusCode).toBe(200)
      expect(open.received.map((r) => r.headers)).toEqual([expected(open, viaOpen)])
      const viaTokenless = await t.call('GET', '/v1/guests?perPage=2', { key, userAgent: UA })
      expectFirstPage(viaTokenless)
      expect(tokenless.received.map((r) => r.headers)).toEqual([expected(tokenless, viaTokenless)])
    } finally {
      await s?.close()
      await open.close()
    }
  })

  it('sends X-Service-Property-Id, the checked property, on a property-scoped route only', async () => {
    await withGateway(async ({ t, live }) => {
      const key = await t.key()
      const property = String(t.pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'LIVE')?.hotel_uuid).toUpperCase()
      const rooms = await t.call('GET', '/v1/rooms?perPage=1', { key, userAgent: UA, headers: { 'service-property-id': property } })
      expect(rooms.statusCode).toBe(200)
      expectFirstPage(await t.call('GET', '/v1/guests?perPage=2', { key, userAgent: UA }))
      expect(live.received.map((r) => [r.path, r.headers['x-service-property-id']])).toEqual([
        [`/partner/v1/properties/${property.toLowerCase()}/rooms?perPage=1`, property.toLowerCase()],
        ['/partner/v1/guests?perPage=2', undefined],
      ])
    })
  })

  it('sends in X-Service-Scopes every known scope for a key with all, and a key\'s own scopes sorted, again on its next call', async () => {
    await withGateway(async ({ t, live }) => {
      const all = await t.key()
      const two = await t.key({ scopes: ['rooms:read', 'guests:read'] })
      const one = await t.key({ scopes: ['guests:read'] })
      for (const key of [all, two, one, two]) expectFirstPage(await t.call('GET', '/v1/guests?perPage=2', { key, userAgent: UA }))
      expect(live.received.map((r) => r.headers['x-service-scopes'])).toEqual([SHIPPED_SCOPES, 'guests:read rooms:read', 'guests:read', 'guests:read rooms:read'])
    })
  })
})

describe('Location: mapped to the public path', () => {
  const redirect = async (t: TestGateway, service: MockService, key: string, location: string) => {
    service.setFailure({ mode: 'redirect', location, times: 1 })
    const answer = await t.call('GET', '/v1/guests', { key, userAgent: UA })
    return { status: answer.statusCode, location: answer.headers.location, body: answer.body }
  }

  it('maps a created guest\'s Location to its public path', async () => {
    await withGateway(async ({ t, live }) => {
      const answer = await t.call('POST', '/v1/guests', { key: await t.key(), userAgent: UA, body: '{"firstName":"Ann","lastName":"Lee","email":"ann.lee@example.com"}' })
      const created = live.guestsOf('acme').find((g) => g.email === 'ann.lee@example.com') as Guest
      expect({ status: answer.statusCode, location: answer.headers.location, body: JSON.parse(answer.body) as unknown }).toEqual({
        status: 201, location: `/v1/guests/${created.id}`,
        body: { data: created, meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP) } },
      })
    })
  })

  it('reads a relative Location with a colon in it as a path, and drops an absolute one that is no URL', async () => {
    await withGateway(async ({ t, live }) => {
      const key = await t.key()
      expect(await redirect(t, live, key, '/partner/v1/guests/guest:1')).toEqual({ status: 302, location: '/v1/guests/guest:1', body: '' })
      expect(await redirect(t, live, key, 'http://bookings internal/partner/v1/guests')).toEqual({ status: 302, location: undefined, body: '' })
      expect(await redirect(t, live, key, `${live.url}/partner/v1/guests?page=2`)).toEqual({ status: 302, location: '/v1/guests?page=2', body: '' })
    })
  })

  it('maps a sandbox\'s Location, its own absolute URL included, for a test key', async () => {
    await withGateway(async ({ t, sandbox }) => {
      const key = await t.key({ mode: 'test' })
      expect(await redirect(t, sandbox, key, `${sandbox.url}/partner/v1/guests?page=2`)).toEqual({ status: 302, location: '/v1/guests?page=2', body: '' })
      expect(await redirect(t, sandbox, key, '/partner/v1/guests/guest-7')).toEqual({ status: 302, location: '/v1/guests/guest-7', body: '' })
    })
  })

  it('maps a Location only to a route whose path parameters it fills: it skips one whose parameter the service path lacks', async () => {
    // Declared first, so its rule is tried first: the service path fills no {listId}.
    const lists = { path: '/v1/guest-lists/{listId}', methods: ['GET'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests', pathParams: { listId: { type: 'uuid' } }, query: {} }
    await withGateway(async ({ t, live }) => {
      expect(await redirect(t, live, await t.key(), '/partner/v1/guests?page=2')).toEqual({ status: 302, location: '/v1/guests?page=2', body: '' })
    }, { routes: [lists] })
  })
})

describe('Link: each target mapped, the links that map to none dropped', () => {
  /** The Link the partner receives when the service answers the first page with `link`. */
  const linkOf = async (t: TestGateway, service: MockService, key: string, link: Failure['link']) => {
    service.setFailure({ mode: 'links', link, times: 1 })
    const answer = await t.call('GET', '/v1/guests', { key, userAgent: UA })
    expectFirstPage(answer)
    return answer.headers.link
  }

  it('maps several links over several lines, apart by a comma and spaces or a tab, and drops the anchor parameter only', async () => {
    await withGateway(async ({ t, live }) => {
      const link = await linkOf(t, live, await t.key(), [
        '</partner/v1/guests?page=2>; rel="next",\t</partner/v1/guests?page=9>; rel="last"',
        `</internal/admin>; rel="admin", <${live.url}/partner/v1/guests/g:1>; rel="item"; anchor = "http://bookings.internal/x"; anchors=1; title="see anchor=top", </partner/v1/guests/g:2>; ANCHOR="#x"`,
      ])
      expect(link).toBe('</v1/guests?page=2>; rel="next", </v1/guests?page=9>; rel="last", </v1/guests/g:1>; rel="item"; anchors=1; title="see anchor=top", </v1/guests/g:2>')
    })
  })

  it('stops reading a Link line at a value that does not start with a <target>, or whose target is not closed', async () => {
    await withGateway(async ({ t, live }) => {
      const key = await t.key()
      expect(await linkOf(t, live, key, '</partner/v1/guests?page=2>; rel="next", X/partner/v1/guests?page=3>; rel="last", </partner/v1/guests?page=4>; rel="more"'))
        .toBe('</v1/guests?page=2>; rel="next"')
      expect(await linkOf(t, live, key, ['</partner/v1/guests?page=2>; rel="next"', '</partner/v1/guests?page=3; rel="last"'])).toBe('</v1/guests?page=2>; rel="next"')
      expect(await linkOf(t, live, key, '</partner/v1/guests?page=3; rel="last"')).toBeUndefined()
    })
  })

  it('keeps an escaped quote and the comma after it inside a quoted string, and a backslash at the very end', async () => {
    await withGateway(async ({ t, live }) => {
      const key = await t.key()
      expect(await linkOf(t, live, key, '</partner/v1/guests?page=2>; rel="next"; title="a \\"b, c", </partner/v1/guests?page=3>; rel="last"'))
        .toBe('</v1/guests?page=2>; rel="next"; title="a \\"b, c", </v1/guests?page=3>; rel="last"')
      expect(await linkOf(t, live, key, '</partner/v1/guests?page=5>; title="x\\')).toBe('</v1/guests?page=5>; title="x\\')
    })
  })

  it('passes no empty parameter: white space between separators is no parameter', async () => {
    await withGateway(async ({ t, live }) => {
      const key = await t.key()
      expect(await linkOf(t, live, key, '</partner/v1/guests?page=6> ; rel="next" ;  ; title="six"')).toBe('</v1/guests?page=6>; rel="next"; title="six"')
    })
  })

  it('passes no empty parameter at the end of a line either, where only a no-break space is left after HTTP\'s parser', async () => {
    // HTTP's parser strips spaces and tabs at the end of a header line, not a no-break space (0xA0).
    const raw = await rawService('</partner/v1/guests?page=7>; rel="next";\u00a0')
    try {
      await withGateway(async ({ t }) => {
        const answer = await t.call('GET', '/v1/guests', { key: await t.key(), userAgent: UA })
        expectFirstPage(answer)
        expect(answer.headers.link).toBe('</v1/guests?page=7>; rel="next"')
      }, { liveUrl: raw.url })
    } finally {
      await raw.close()
    }
  })
})

describe('services and their sandboxes', () => {
  it('shows each service and its sandbox, <name>Sandbox, as upstreams of their own on the admin port', async () => {
    const open = await new MockService({}).listen()
    try {
      await withGateway(async ({ t }) => {
        await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
        const admin = `http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}`
        const status = await request(`${admin}/status`)
        expect(status.statusCode).toBe(200)
        const upstreams = (await status.body.json() as { upstreams: Record<string, { breaker: string }> }).upstreams
        expect(Object.keys(upstreams)).toEqual(['pms', 'bookings', 'bookingsSandbox', 'open'])
        expect(Object.values(upstreams).map((u) => u.breaker)).toEqual(['closed', 'closed', 'closed', 'closed'])
        const metrics = await (await request(`${admin}/metrics`)).body.text()
        expect(metrics.split('\n').filter((line) => line.startsWith('gateway_circuit_breaker_state{')).sort()).toEqual([
          'gateway_circuit_breaker_state{upstream="bookings"} 0',
          'gateway_circuit_breaker_state{upstream="bookingsSandbox"} 0',
          'gateway_circuit_breaker_state{upstream="open"} 0',
          'gateway_circuit_breaker_state{upstream="pms"} 0',
        ])
      }, { open })
    } finally {
      await open.close()
    }
  })

  it('names each service\'s targets, sandboxes as <name>Sandbox, and refuses an unknown name', async () => {
    const live = await new MockService({ token: SERVICE_TOKEN }).listen()
    const sandbox = await new MockService({ token: SANDBOX_SERVICE_TOKEN }).listen()
    const services = new Services(testConfig({
      upstreams: { bookings: shipped.upstreams.bookings, open: { url: 'http://127.0.0.1:9' } } as FileConfigInput['upstreams'],
    }, { UPSTREAM_BOOKINGS_URL: live.url, UPSTREAM_BOOKINGS_SANDBOX_URL: sandbox.url, UPSTREAM_BOOKINGS_TOKEN: SERVICE_TOKEN, UPSTREAM_BOOKINGS_SANDBOX_TOKEN: SANDBOX_SERVICE_TOKEN }))
    try {
      expect(() => services.get('billing')).toThrow(new Error("no upstream named 'billing'"))
      const targets = [services.target('bookings', 'live'), services.target('bookings', 'test'), services.target('open', 'live'), services.target('open', 'test')]
      expect(targets.map((target) => target === undefined ? undefined : { name: target.upstream.name, origin: target.origin, host: target.host, token: target.token })).toEqual([
        { name: 'bookings', origin: live.url, host: new URL(live.url).host, token: SERVICE_TOKEN },
        { name: 'bookingsSandbox', origin: sandbox.url, host: new URL(sandbox.url).host, token: SANDBOX_SERVICE_TOKEN },
        { name: 'open', origin: 'http://127.0.0.1:9', host: '127.0.0.1:9', token: undefined },
        undefined,
      ])
      expect(services.all.map((u) => u.name)).toEqual(['bookings', 'bookingsSandbox', 'open'])
    } finally {
      await Promise.all(services.all.map((u) => u.close()))
      await live.close()
      await sandbox.close()
    }
  })
})
