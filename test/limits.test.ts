import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ReceivedRequest } from '../mocks/pms/server.js'
import { TestGateway } from './helpers/gateway.js'
import { expectEnvelope, expectProblem } from './helpers/problem.js'

// docs/security.md, "Big inputs": no answer, and nothing sent upstream, grows with the caller's
// input.

let t: TestGateway
let key: string
beforeAll(async () => {
  t = await TestGateway.start()
  key = await t.key()
})
afterAll(async () => t.close())

describe('bounded answers and upstream calls (docs/security.md, "Big inputs")', () => {
  it('lists at most 20 field errors and says how many more there were', async () => {
    const names = Array.from({ length: 1500 }, (_, i) => `x${i.toString(36)}`)
    const res = await t.get(`/v1/health?${names.join('&')}`, undefined)
    const shown = names.slice(0, 20)
    expectProblem(res, {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/health',
      detail: `Unknown query parameters ${shown.map((n) => `'${n}'`).join(', ')} and 1480 more. 1480 more field errors are not listed.`,
      errors: shown.map((field) => ({ field, code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter; this endpoint accepts none.' })),
    })
    expect(res.body.length).toBeLessThan(4096)
  })

  it('quotes at most 200 characters of what the partner sent in any detail', async () => {
    const cut = (text: string): string => `${text.slice(0, 200)}…`
    const longPath = `/v1/${'a'.repeat(5000)}`
    expectProblem(await t.get(longPath, key), { code: 'ROUTE_NOT_FOUND', instance: longPath, detail: `There is no endpoint at ${cut(longPath)}.` })
    const slash = `/v1/properties/${'b'.repeat(3000)}/`
    expectProblem(await t.get(slash, key), { code: 'TRAILING_SLASH_NOT_ALLOWED', instance: slash, detail: `Remove the trailing slash: request ${cut(slash.slice(0, -1))}.` })
    const cased = `/v1/Properties/${'C'.repeat(3000)}`
    expectProblem(await t.get(cased, key), { code: 'PATH_CASE_MISMATCH', instance: cased, detail: `Paths are case-sensitive: request ${cut(`/v1/properties/${'C'.repeat(3000)}`)}.` })
    const host = `${'h'.repeat(4000)}.example`
    expectProblem(await t.get('/v1/properties', key, { host }), { code: 'ROUTE_NOT_FOUND', instance: '/v1/properties', detail: `No API is served at host '${cut(host)}'.` })
    const accept = `text/html;level=${'1'.repeat(6000)}`
    expectProblem(await t.get('/v1/properties', key, { accept }), {
      code: 'NOT_ACCEPTABLE', instance: '/v1/properties', detail: `This API produces application/json only; the Accept header '${cut(accept)}' does not admit it.`,
    })
    // Unknown names share one budget: the first is cut, the rest are counted.
    const names = ['n'.repeat(150), 'm'.repeat(150), 'per_page']
    const res = await t.get(`/v1/properties?${names.join('=1&')}=1`, key)
    expectProblem(res, {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/properties',
      detail: `Unknown query parameters '${names[0] as string}', '${'m'.repeat(50)}…' and 1 more.`,
      errors: names.map((field) => ({
        field, code: 'UNKNOWN_PARAMETER', detail: field === 'per_page' ? "Did you mean 'perPage'?" : "Unknown parameter; this endpoint accepts 'page', 'perPage'.",
      })),
    })
  })

  it('refuses page beyond 10,000 before any PMS call', async () => {
    const before = t.pms.received.length
    expectProblem(await t.get('/v1/properties?page=10001', key), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/v1/properties', detail: "Invalid query parameter 'page'.",
      errors: [{ field: 'page', code: 'OUT_OF_RANGE', detail: 'Must be between 1 and 10000.' }],
    })
    expect(t.pms.received.length).toBe(before)
  })

  it('passes a well-formed tracestate to the PMS and drops a 12 kB one with markup and bytes over 0x7F', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const hostile = Array.from({ length: 30 }, (_, i) => `k${i}=<img src=x onerror=alert(1)>${'\u00e9'.repeat(380)}`).join(',')
    const ids = t.pms.hotels.filter((h) => h.chain_code === 'ACME').slice(0, 2).map((h) => String(h.hotel_uuid))
    await fetch(`${t.pms.url}/__mock/requests`, { method: 'DELETE' })
    expectEnvelope(await t.get(`/v1/properties/${ids[0] as string}`, key, { traceparent, tracestate: 'congo=t61rcWkgMzE' }))
    // Node takes header bytes over 0x7F as latin1 characters; undici sends them as such.
    expectEnvelope(await t.get(`/v1/properties/${ids[1] as string}`, key, { traceparent, tracestate: hostile }))
    const received = await (await fetch(`${t.pms.url}/__mock/requests`)).json() as ReceivedRequest[]
    expect(received.map((r) => ({ path: r.path, tracestate: r.tracestate ?? null, traced: r.traceparent?.slice(3, 35) }))).toEqual([
      { path: expect.stringContaining(ids[0] as string) as string, tracestate: 'congo=t61rcWkgMzE', traced: '4bf92f3577b34da6a3ce929d0e0e4736' },
      { path: expect.stringContaining(ids[1] as string) as string, tracestate: null, traced: '4bf92f3577b34da6a3ce929d0e0e4736' },
    ])
  })
})
