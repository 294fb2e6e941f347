import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { benchTracing } from '../../bench/tracing.js'
import { MockOtlp } from '../../mocks/otlp/server.js'
import { eventually } from '../helpers/redis.js'

// `npm run bench` ends with this micro-bench; it once crashed there, after every other row had
// run, on a request without the Host that a traced brand's span names.

let collector: MockOtlp
beforeAll(async () => {
  collector = await new MockOtlp().listen()
})
afterAll(async () => collector.close())

describe('the tracing micro-bench', () => {
  it('runs its three modes to the end and exports the traced requests as a brand\'s spans', async () => {
    const result = await benchTracing(`${collector.url}`, 2000)
    expect(result).toEqual({
      untracedHooksMakeNoSpan: true,
      offNs: expect.any(Number) as number,
      ratio1Ns: expect.any(Number) as number,
      ratio100Ns: expect.any(Number) as number,
    })
    for (const ns of [result.offNs, result.ratio1Ns, result.ratio100Ns]) expect(Number.isFinite(ns)).toBe(true)
    // The hooks close their exporters before returning: what was traced has been sent.
    expect(await eventually(async () => collector.spans.length > 0, 15_000)).toBe(true)
    expect(collector.spans[0]).toMatchObject({
      kind: 'server',
      name: 'GET /v1/properties/{propertyId}',
      attributes: expect.objectContaining({ 'server.address': 'api.acme-hotels.example', 'gateway.brand': 'acme', 'http.response.status_code': 200 }) as unknown,
    })
  })
})
