import { request } from 'undici'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { Hotel } from '../../mocks/pms/data.js'
import { MockPms } from '../../mocks/pms/server.js'
import { toUtcMillis } from '../../src/properties/mapping.js'
import { PMS_TOKEN, TestGateway, type Answer } from '../helpers/gateway.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'
import { eventually } from '../helpers/redis.js'
import { oneOf, secondsBetween } from '../helpers/window.js'

// The properties facade against the stand-in PMS over real sockets and real Redis: what a key
// may see (docs/architecture.md, "Properties") and every way the PMS fails
// (docs/architecture.md, "Upstream failures").

interface PublicProperty { id: string; status: string; createdAt: string }

// Every answer a test saw, checked at the end for anything internal.
const answers: Answer[] = []
const INTERNAL = ['hotel_uuid', 'chain_code', 'display_name', 'short_code', 'lifecycle', 'tz_name', 'created_epoch_ms', 'last_modified',
  'pms_shard', 'owner_account_ref', 'legacy_property_no', 'billing_plan', 'internal_notes', 'channel_config', 'eu-west-3', 'OA-0',
  'ENTERPRISE', '"ACME"', '"GLBX"', '"LIVE"', 'ONBOARDING', 'NullPointerException', 'HOTEL_NOT_FOUND', 'THROTTLED', 'UNAUTHENTICATED',
  'pms-lb', 'build 9f8e7d', PMS_TOKEN, '127.0.0.1']

function remember(answer: Answer): Answer {
  answers.push(answer)
  return answer
}

const sortPms = (a: Hotel, b: Hotel) => (a.created_epoch_ms as number) - (b.created_epoch_ms as number)
  || (String(a.hotel_uuid) < String(b.hotel_uuid) ? -1 : 1)

function activeIds(pms: MockPms, chain: string, allowed?: Set<string>): string[] {
  return pms.hotels.filter((h) => h.chain_code === chain && h.lifecycle === 'LIVE' && (allowed === undefined || allowed.has(String(h.hotel_uuid))))
    .sort(sortPms).map((h) => String(h.hotel_uuid))
}

function calls(pms: MockPms, fragment: string): number {
  return pms.received.filter((r) => r.path.includes(fragment)).length
}

afterAll(() => {
  expect(answers.length).toBeGreaterThan(50)
  for (const answer of answers) {
    const text = `${JSON.stringify(answer.headers)}\n${answer.body}`
    for (const leak of INTERNAL) expect(text, `answer leaks ${leak}`).not.toContain(leak)
  }
})

describe('names outside ASCII', () => {
  // A gateway of its own: these reads fill its cache, which other tests expect cold.
  let t: TestGateway
  let key: string
  beforeAll(async () => {
    t = await TestGateway.start({ sandbox: true })
    key = await t.key()
  })
  afterAll(async () => t.close())

  it('serves names outside ASCII byte for byte, alone and in a list, cached or not, with their length in bytes', async () => {
    const ids = new Set(activeIds(t.pms, 'ACME'))
    const hotels = t.pms.hotels.filter((h) => ids.has(String(h.hotel_uuid)) && /[東🌋é]/u.test(String(h.display_name)))
    expect(hotels.length).toBeGreaterThan(1)
    for (const hotel of hotels) {
      // The first read fills the cache, the second is answered from it.
      for (const read of [1, 2]) {
        const answer = remember(await t.get(`/v1/properties/${String(hotel.hotel_uuid)}`, key))
        expect(answer.headers['content-length'], `read ${read}`).toBe(String(Buffer.byteLength(answer.body)))
        expect((expectEnvelope(answer) as { name: string }).name).toBe(hotel.display_name)
      }
    }
    const page = remember(await t.get('/v1/properties?perPage=100', key))
    expect(page.headers['content-length']).toBe(String(Buffer.byteLength(page.body)))
    const names = new Map((expectEnvelope(page, { page: 1, perPage: 100, total: ids.size }) as { id: string; name: string }[]).map((p) => [p.id, p.name]))
    for (const hotel of hotels) expect(names.get(String(hotel.hotel_uuid))).toBe(hotel.display_name)
  })
})

describe('what a key may see (docs/architecture.md, "Properties")', () => {
  let t: TestGateway
  let allKey: string
  beforeAll(async () => {
    t = await TestGateway.start({ sandbox: true })
    allKey = await t.key()
  })
  afterAll(async () => t.close())

  it("lists the brand's active properties in createdAt, id order with the exact total", async () => {
    const expected = activeIds(t.pms, 'ACME')
    const seen: string[] = []
    for (let page = 1; page <= Math.ceil(expected.length / 7) + 1; page += 1) {
      const res = remember(await t.get(`/v1/properties?perPage=7&page=${page}`, allKey))
      const data = expectEnvelope(res, { page, perPage: 7, total: expected.length }) as PublicProperty[]
      seen.push(...data.map((p) => p.id))
      expect(data.every((p) => p.status === 'active')).toBe(true)
    }
    expect(seen).toEqual(expected)
  })

  it('maps a single property exactly, whatever its status', async () => {
    const hotel = t.pms.hotels.find((h) => h.chain_code === 'ACME' && h.lifecycle === 'PAUSED_FOR_RENOVATION') as Hotel
    const data = expectEnvelope(remember(await t.get(`/v1/properties/${String(hotel.hotel_uuid).toUpperCase()}`, allKey)))
    expect(data).toEqual({
      object: 'property',
      id: hotel.hotel_uuid,
      name: hotel.display_name,
      code: hotel.short_code === '' || hotel.short_code === undefined ? null : hotel.short_code,
      status: 'inactive',
      timezone: hotel.tz_name,
      createdAt: new Date(hotel.created_epoch_ms as number).toISOString(),
      updatedAt: toUtcMillis(hotel.last_modified as string),
    })
  })

  it("answers another brand's property and an unknown id with 404", async () => {
    const globex = t.pms.hotels.find((h) => h.chain_code === 'GLBX') as Hotel
    for (const id of [String(globex.hotel_uuid), '00000000-0000-4000-8000-000000000000']) {
      expectProblem(remember(await t.get(`/v1/properties/${id}`, allKey)), {
        code: 'PROPERTY_NOT_FOUND', instance: `/v1/properties/${id}`, detail: `No property with id '${id}' exists for this brand.`,
      })
    }
    // An allow-list naming another brand's property does not reveal it either.
    const key = await t.key({ properties: [String(globex.hotel_uuid)] })
    expectProblem(remember(await t.get(`/v1/properties/${String(globex.hotel_uuid)}`, key)), { code: 'PROPERTY_NOT_FOUND', instance: `/v1/properties/${String(globex.hotel_uuid)}` })
    expectEnvelope(remember(await t.get('/v1/properties', key)), { page: 1, perPage: 20, total: 0 })
  })

  it('limits an allow-listed key: 403 for a property of the brand outside its list', async () => {
    const [mine, other] = activeIds(t.pms, 'ACME') as [string, string]
    const key = await t.key({ properties: [mine] })
    const data = expectEnvelope(remember(await t.get('/v1/properties', key)), { page: 1, perPage: 20, total: 1 }) as PublicProperty[]
    expect(data.map((p) => p.id)).toEqual([mine])
    expectProblem(remember(await t.get(`/v1/properties/${other}`, key)), {
      code: 'PROPERTY_ACCESS_DENIED', instance: `/v1/properties/${other}`, detail: `Your API key is not authorised for property '${other}'.`,
    })
  })

  it('reads test keys from the sandbox PMS and live keys from the live one', async () => {
    const testKey = await t.key({ mode: 'test' })
    const sandbox = t.sandbox as MockPms
    const expected = activeIds(sandbox, 'ACME')
    const data = expectEnvelope(remember(await t.get('/v1/properties?perPage=100', testKey)), { page: 1, perPage: 100, total: expected.length }) as PublicProperty[]
    expect(data.map((p) => p.id)).toEqual(expected)
    expect(expected).not.toEqual(activeIds(t.pms, 'ACME'))
  })

  it('pages an allow-list of thousands, 100 ids per PMS call, cached per chunk', async () => {
    const extra: Hotel[] = Array.from({ length: 2500 }, (_, i) => ({
      hotel_uuid: `aaaaaaaa-0000-4000-8000-${String(i).padStart(12, '0')}`, chain_code: 'ACME', display_name: `Acme Extra ${i}`,
      short_code: null, lifecycle: i % 3 === 0 ? 'ONBOARDING' : 'LIVE', tz_name: 'Europe/Paris',
      created_epoch_ms: Date.UTC(2025, 0, 1) + (i % 50) * 1000, last_modified: '2025-06-01T00:00:00Z', pms_shard: 'eu-west-3',
    }))
    t.pms.hotels.push(...extra)
    t.pms.hotels.sort(sortPms)
    const allowed = new Set([...extra.map((h) => String(h.hotel_uuid)), ...activeIds(t.pms, 'ACME').slice(0, 5), '99999999-0000-4000-8000-000000000000'])
    const key = await t.key({ properties: [...allowed] })
    const expected = activeIds(t.pms, 'ACME', allowed)
    t.pms.received.length = 0
    const seen: string[] = []
    for (let page = 1; page <= Math.ceil(expected.length / 100); page += 1) {
      const data = expectEnvelope(await t.get(`/v1/properties?perPage=100&page=${page}`, key), { page, perPage: 100, total: expected.length }) as PublicProperty[]
      seen.push(...data.map((p) => p.id))
    }
    expect(seen).toEqual(expected)
    // One call per 100 ids on the first page; every later page is served from the cache.
    expect(calls(t.pms, '/internal/v3/hotels?')).toBe(Math.ceil(allowed.size / 100))
    expect(t.pms.received.every((r) => (new URL(r.path, 'http://x').searchParams.get('hotel_uuid')?.split(',').length ?? 0) <= 100)).toBe(true)
  })

  it('carries the request id and the trace to the PMS', async () => {
    const id = activeIds(t.pms, 'ACME')[3] as string
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
    t.pms.received.length = 0
    const res = remember(await t.get(`/v1/properties/${id}`, allKey, { traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'partner=1' }))
    expectEnvelope(res)
    const sent = t.pms.received.find((r) => r.path.includes(id))
    expect(sent).toEqual({
      path: `/internal/v3/hotels/${id}`, requestId: res.headers['service-request-id'],
      traceparent: expect.stringMatching(new RegExp(`^00-${traceId}-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$`)), tracestate: 'partner=1',
    })
    // A malformed traceparent starts a fresh trace that the PMS sees too.
    const fresh = remember(await t.get(`/v1/properties/${activeIds(t.pms, 'ACME')[4] as string}`, allKey, { traceparent: 'garbage', tracestate: 'partner=1' }))
    expectEnvelope(fresh)
    const sentFresh = t.pms.received.at(-1)
    expect(sentFresh?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    expect(sentFresh?.tracestate).toBeUndefined()
    const line = t.logs.records().find((r) => r.reqId === fresh.headers['service-request-id'] && r.msg === 'request')
    expect(sentFresh?.traceparent).toContain(`-${String(line?.traceId)}-`)
  })

  it('writes the line and the count of a request whose partner left before its answer: 499', async () => {
    const id = activeIds(t.pms, 'ACME')[12] as string
    t.pms.received.length = 0
    t.pms.setFailure({ mode: 'latency', latencyMs: 800, times: 1 })
    const controller = new AbortController()
    const gone = request(`${t.url}/v1/properties/${id}`, {
      signal: controller.signal, headers: { host: 'api.acme-hotels.example', 'user-agent': 'facade-test/1.0', authorization: `Bearer ${allKey}` },
    }).then(() => 'answered', () => 'closed')
    expect(await eventually(async () => calls(t.pms, id) === 1, 10_000)).toBe(true)
    controller.abort()
    expect(await gone).toBe('closed')
    const line = (): Record<string, unknown> | undefined => t.logs.records().find((r) => r.msg === 'request' && r.status === 499)
    expect(await eventually(async () => line() !== undefined, 10_000)).toBe(true)
    expect(line()).toMatchObject({ method: 'GET', route: '/v1/properties/:propertyId', status: 499, code: null, brand: 'acme', keyId: expect.any(String) })
    await t.gateway.admin.ready()
    expect((await t.gateway.admin.inject({ url: '/metrics' })).body)
      .toMatch(/^gateway_http_requests_total\{route="\/v1\/properties\/:propertyId",method="GET",status="499",code=""\} 1$/m)
    // The PMS's late answer is cached and served to the next partner; the first gets no second line.
    expectEnvelope(remember(await t.get(`/v1/properties/${id}`, allKey)))
    expect(t.logs.records().filter((r) => r.msg === 'request' && r.status === 499)).toHaveLength(1)
  })

  it('shares one PMS call among twenty concurrent cold reads', async () => {
    const id = activeIds(t.pms, 'ACME')[10] as string
    t.pms.received.length = 0
    t.pms.setFailure({ mode: 'latency', latencyMs: 150 })
    const results = await Promise.all(Array.from({ length: 20 }, async () => t.get(`/v1/properties/${id}`, allKey)))
    t.pms.setFailure(undefined)
    for (const res of results) expect((expectEnvelope(remember(res)) as PublicProperty).id).toBe(id)
    expect(calls(t.pms, id)).toBe(1)
  })
})

describe('a 404 for denied access (accessDeniedStatus: 404)', () => {
  let t: TestGateway
  beforeAll(async () => { t = await TestGateway.start({ config: { accessDeniedStatus: 404 } }) })
  afterAll(async () => t.close())

  it('answers PROPERTY_NOT_FOUND without asking the PMS', async () => {
    const [mine, other] = activeIds(t.pms, 'ACME') as [string, string]
    const key = await t.key({ properties: [mine] })
    t.pms.received.length = 0
    expectProblem(remember(await t.get(`/v1/properties/${other}`, key)), { code: 'PROPERTY_NOT_FOUND', instance: `/v1/properties/${other}` })
    expect(t.pms.received.map((r) => r.path)).toEqual([])
  })
})

describe('upstream failures (docs/architecture.md, "Upstream failures")', () => {
  let t: TestGateway
  let key: string
  let n = 0
  // A fresh id per request, so the read cache is never what answers.
  const nextId = () => `00000000-0000-4000-8000-${String((n += 1)).padStart(12, '0')}`
  beforeAll(async () => {
    t = await TestGateway.start({
      config: {
        upstream: { timeoutMs: 300, connections: 8, retries: 1, maxInFlight: 2 },
        breaker: { errorThresholdPercentage: 50, volumeThreshold: 1000, resetTimeoutMs: 1000, rollingCountTimeoutMs: 10_000 },
      },
    })
    key = await t.key()
  })
  afterEach(() => t.pms.setFailure(undefined))
  afterAll(async () => t.close())

  const unavailable = async (retryAfter: string) => {
    const id = nextId()
    expectProblem(remember(await t.get(`/v1/properties/${id}`, key)), {
      code: 'SERVICE_UNAVAILABLE', instance: `/v1/properties/${id}`, headers: { 'retry-after': retryAfter },
      detail: `Property data is temporarily unavailable; retry in ${retryAfter} second${retryAfter === '1' ? '' : 's'}.`,
    })
  }
  const internal = async () => {
    const id = nextId()
    const res = remember(await t.get(`/v1/properties/${id}`, key))
    expectProblem(res, { code: 'INTERNAL_ERROR', instance: `/v1/properties/${id}`, detail: 'An unexpected error occurred; it has been logged.' })
    return res
  }

  it('answers a timeout with 503', async () => {
    t.pms.setFailure({ mode: 'latency', latencyMs: 1000, times: 1 })
    await unavailable('1')
  })

  it.each([502, 503, 504])('answers an HTML %i with 503', async (status) => {
    t.pms.setFailure({ mode: 'html-5xx', status, times: 1 })
    await unavailable('1')
  })

  it('answers a JSON 500 with 503, quoting nothing', async () => {
    t.pms.setFailure({ mode: 'json-500', times: 1 })
    await unavailable('1')
  })

  it("answers a 429 with 503 and the PMS's Retry-After", async () => {
    t.pms.setFailure({ mode: 'throttle', retryAfter: 7, times: 1 })
    await unavailable('7')
  })

  it("answers a 503 with the PMS's Retry-After, and ignores a Retry-After on other 5xx", async () => {
    t.pms.setFailure({ mode: 'html-5xx', status: 503, retryAfter: 9, times: 1 })
    await unavailable('9')
    // Capped at a minute.
    t.pms.setFailure({ mode: 'html-5xx', status: 503, retryAfter: 3600, times: 1 })
    await unavailable('60')
    t.pms.setFailure({ mode: 'html-5xx', status: 502, retryAfter: 9, times: 1 })
    await unavailable('1')
  })

  it('answers every request that shared one failing PMS call with 503, not only the first', async () => {
    const id = nextId()
    t.pms.setFailure({ mode: 'latency', latencyMs: 1000 })
    const answers = await Promise.all(Array.from({ length: 5 }, async () => remember(await t.get(`/v1/properties/${id}`, key))))
    for (const res of answers) {
      expectProblem(res, {
        code: 'SERVICE_UNAVAILABLE', instance: `/v1/properties/${id}`, headers: { 'retry-after': '1' },
        detail: 'Property data is temporarily unavailable; retry in 1 second.',
      })
    }
  })

  it('retries a reset connection once, then answers 503', async () => {
    t.pms.setFailure({ mode: 'reset', times: 1 })
    const id = activeIds(t.pms, 'ACME')[0] as string
    expectEnvelope(remember(await t.get(`/v1/properties/${id}`, key)))
    t.pms.setFailure({ mode: 'reset', times: 2 })
    await unavailable('1')
  })

  it('answers a non-JSON 200 with 500', async () => {
    t.pms.setFailure({ mode: 'non-json', times: 1 })
    await internal()
  })

  it("answers a 401 to the gateway's token with 500", async () => {
    t.pms.setFailure({ mode: 'unauthorized', times: 1 })
    await internal()
  })

  it('answers a contract-breaking record with 500 and logs the record and the field', async () => {
    const id = activeIds(t.pms, 'ACME')[1] as string
    t.pms.setFailure({ mode: 'broken-record', times: 1 })
    const res = remember(await t.get(`/v1/properties/${id}`, key))
    expectProblem(res, { code: 'INTERNAL_ERROR', instance: `/v1/properties/${id}` })
    const line = t.logs.records().find((r) => r.reqId === res.headers['service-request-id'] && r.level === 'error')
    expect(line).toMatchObject({ err: { record: id, field: 'tz_name', upstream: 'pms' } })
  })

  it('answers a list with a broken record with 500', async () => {
    t.pms.setFailure({ mode: 'broken-record', times: 1 })
    const res = remember(await t.get('/v1/properties?perPage=3&page=5', key))
    expectProblem(res, { code: 'INTERNAL_ERROR', instance: '/v1/properties' })
  })

  it('answers a refused connection with 503', async () => {
    const closed = await new MockPms({ token: PMS_TOKEN }).listen()
    const url = closed.url
    await closed.close()
    const down = await TestGateway.start({ pmsUrl: url })
    try {
      const id = nextId()
      expectProblem(remember(await down.get(`/v1/properties/${id}`, await down.key())), {
        code: 'SERVICE_UNAVAILABLE', instance: `/v1/properties/${id}`, headers: { 'retry-after': '1' },
      })
    } finally {
      await down.close()
    }
  })
})

describe('calls in flight', () => {
  let t: TestGateway
  let key: string
  let n = 0
  const nextId = () => `00000000-0000-4000-8000-1${String((n += 1)).padStart(11, '0')}`
  // A deadline far above the PMS's delay: what is tested is the bound, not a race with the clock.
  beforeAll(async () => {
    t = await TestGateway.start({ config: { upstream: { timeoutMs: 10_000, connections: 8, retries: 1, maxInFlight: 2 } } })
    key = await t.key()
  })
  afterAll(async () => t.close())

  it('answers too many calls in flight with 503 at once', async () => {
    t.pms.setFailure({ mode: 'latency', latencyMs: 1500 })
    // Two calls reach the PMS and wait there; the next two find the bound full.
    const first = [t.get(`/v1/properties/${nextId()}`, key), t.get(`/v1/properties/${nextId()}`, key)]
    expect(await eventually(async () => t.pms.received.length === 2, 10_000)).toBe(true)
    const refused = await Promise.all([t.get(`/v1/properties/${nextId()}`, key), t.get(`/v1/properties/${nextId()}`, key)])
    const answersNow = [...await Promise.all(first), ...refused]
    t.pms.setFailure(undefined)
    const statuses = answersNow.map((a) => remember(a).statusCode).sort()
    expect(statuses).toEqual([404, 404, 503, 503])
  })
})

describe('the circuit breaker', () => {
  // Long enough that a stalled second between opening and asking again does not half-open it.
  const RESET_MS = 3000
  let t: TestGateway
  let key: string
  beforeAll(async () => {
    t = await TestGateway.start({
      config: { breaker: { errorThresholdPercentage: 50, volumeThreshold: 4, resetTimeoutMs: RESET_MS, rollingCountTimeoutMs: 10_000 } },
    })
    key = await t.key()
  })
  afterAll(async () => t.close())

  it('opens after failures, fails fast with the time to half-open, and recovers', async () => {
    const id = activeIds(t.pms, 'ACME')[2] as string
    t.pms.setFailure({ mode: 'html-5xx', status: 503 })
    const failed = []
    for (let i = 0; i < 3; i += 1) failed.push(remember(await t.get(`/v1/properties/${id}`, key)))
    // The fourth failure opens the circuit, at some instant between these two readings.
    const opening = Date.now()
    failed.push(remember(await t.get(`/v1/properties/${id}`, key)))
    const opened = Date.now()
    const client = t.gateway.upstreams?.all[0]?.client.upstream
    expect({ state: client?.state, statuses: failed.map((r) => r.statusCode), stats: client?.breaker.stats })
      .toMatchObject({ state: 'open', statuses: [503, 503, 503, 503] })
    const before = t.pms.received.length
    const asking = Date.now()
    const open = remember(await t.get(`/v1/properties/${id}`, key))
    const answered = Date.now()
    // Retry-After: the whole seconds until the circuit half-opens, RESET_MS after it opened.
    expectProblem(open, {
      code: 'SERVICE_UNAVAILABLE', instance: `/v1/properties/${id}`,
      headers: { 'retry-after': oneOf(secondsBetween(opening + RESET_MS - answered, opened + RESET_MS - asking)) },
    })
    // Failing fast: the PMS was not asked.
    expect(t.pms.received.length).toBe(before)

    t.pms.setFailure(undefined)
    expect(await eventually(async () => remember(await t.get(`/v1/properties/${id}`, key)).statusCode === 200, RESET_MS + 5000, 100)).toBe(true)
    expect(t.gateway.upstreams?.all[0]?.client.upstream.state).toBe('closed')
  })
})

describe('stale-if-error', () => {
  let t: TestGateway
  let key: string
  beforeAll(async () => {
    t = await TestGateway.start({ config: { cache: { ttlMs: 100, staleIfErrorMs: 1000, maxEntries: 100 } } })
    key = await t.key()
  })
  afterAll(async () => t.close())

  it('serves the stale copy while the PMS fails, within the window only', async () => {
    const id = activeIds(t.pms, 'ACME')[5] as string
    const fresh = expectEnvelope(remember(await t.get(`/v1/properties/${id}`, key)))
    await new Promise((r) => setTimeout(r, 150))
    t.pms.setFailure({ mode: 'html-5xx', status: 502 })
    expect(expectEnvelope(remember(await t.get(`/v1/properties/${id}`, key)))).toEqual(fresh)
    const line = t.logs.records().filter((r) => r.msg === 'request').at(-1)
    expect(line).toMatchObject({ cache: 'stale', status: 200 })
    await new Promise((r) => setTimeout(r, 1100))
    expectProblem(remember(await t.get(`/v1/properties/${id}`, key)), { code: 'SERVICE_UNAVAILABLE', instance: `/v1/properties/${id}` })
    t.pms.setFailure(undefined)
  })
})

describe('test keys without a sandbox (docs/architecture.md, "Test mode")', () => {
  let t: TestGateway
  beforeAll(async () => { t = await TestGateway.start() })
  afterAll(async () => t.close())

  it('are refused with 403 TEST_MODE_UNAVAILABLE on every route that reads the PMS, and never reach it', async () => {
    const testKey = await t.key({ mode: 'test' })
    const id = activeIds(t.pms, 'ACME')[0] as string
    await fetch(`${t.pms.url}/__mock/requests`, { method: 'DELETE' })
    for (const path of ['/v1/properties?perPage=100', `/v1/properties/${id}`]) {
      expectProblem(remember(await t.get(path, testKey)), {
        code: 'TEST_MODE_UNAVAILABLE', instance: path.split('?')[0] as string,
        detail: 'This endpoint has no sandbox: test keys (svc_test_) cannot use it; use a live key.',
      })
    }
    // The stand-in PMS's own request log: not one call.
    expect(await (await fetch(`${t.pms.url}/__mock/requests`)).json()).toEqual([])
    // A live key on the same gateway reads it, so the log above could have shown calls.
    expectEnvelope(remember(await t.get(`/v1/properties/${id}`, await t.key())))
    expect((await (await fetch(`${t.pms.url}/__mock/requests`)).json() as unknown[]).length).toBe(1)
  })
})
