import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem } from '../helpers/problem.js'
import { keysUnder, REDIS_URL } from '../helpers/redis.js'
import { webhookConfig } from '../helpers/webhooks.js'

// The webhook endpoints API (docs/partners.md, "Webhooks") over real sockets and Redis: the
// body rules, ownership, the limit, scopes, Idempotency-Key, and no secret in Redis in clear.

const ENDPOINT_ID = /^we_[0-7][0-9A-HJKMNP-TV-Z]{25}$/
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const dataOf = (answer: Answer): Record<string, unknown> => (JSON.parse(answer.body) as { data: Record<string, unknown> }).data

describe('/v1/webhook-endpoints', () => {
  let t: TestGateway
  let key: string
  const redis = new Redis(REDIS_URL)
  const post = (k: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> =>
    t.call('POST', '/v1/webhook-endpoints', { key: k, body: JSON.stringify(body), headers })

  beforeAll(async () => {
    t = await TestGateway.start({ config: webhookConfig({ allowHttp: false, allowPrivateTargets: false, maxEndpointsPerCredential: 2 }) })
    key = await t.key()
  })
  afterAll(async () => {
    await t.close()
    redis.disconnect()
  })

  it('creates an endpoint and shows its secret once; list and show never do', async () => {
    const created = await post(key, { url: 'https://hooks.example.com/acme', eventTypes: ['property.updated', 'guest.created'], description: 'Channel sync' })
    expect(created.statusCode).toBe(201)
    const endpoint = dataOf(created)
    expect(endpoint).toEqual({
      id: expect.stringMatching(ENDPOINT_ID) as string, url: 'https://hooks.example.com/acme', eventTypes: ['property.updated', 'guest.created'], description: 'Channel sync',
      status: 'enabled', disabledReason: null, createdAt: expect.stringMatching(TIME) as string, updatedAt: endpoint.createdAt, secret: expect.stringMatching(SECRET) as string,
    })
    const { secret, ...shown } = endpoint
    expect(dataOf(await t.get(`/v1/webhook-endpoints/${endpoint.id as string}`, key))).toEqual(shown)
    const list = await t.get('/v1/webhook-endpoints', key)
    expect(JSON.parse(list.body)).toMatchObject({ data: [shown], meta: { pagination: { page: 1, perPage: 20, total: 1 } } })
    // Sealed in Redis: the secret is in no key's value.
    for (const name of await keysUnder(redis, t.prefix)) {
      const type = await redis.type(name)
      const values = type === 'hash' ? Object.values(await redis.hgetall(name)) : type === 'string' ? [await redis.get(name)] : []
      for (const value of values) expect(value).not.toContain((secret as string).slice(6))
    }
    // Another credential of the brand does not see it.
    const other = await t.key()
    expectProblem(await t.get(`/v1/webhook-endpoints/${endpoint.id as string}`, other), { code: 'WEBHOOK_ENDPOINT_NOT_FOUND', instance: `/v1/webhook-endpoints/${endpoint.id as string}` })
    expect(dataOf(await t.get('/v1/webhook-endpoints', other))).toEqual([])
    // Updated, disabled by the partner, enabled again, deleted.
    const path = `/v1/webhook-endpoints/${endpoint.id as string}`
    const patched = await t.call('PATCH', path, { key, body: JSON.stringify({ status: 'disabled', description: null }) })
    expect(dataOf(patched)).toMatchObject({ status: 'disabled', disabledReason: 'partner', description: null })
    expect(dataOf(await t.call('PATCH', path, { key, body: JSON.stringify({ status: 'enabled' }) }))).toMatchObject({ status: 'enabled', disabledReason: null })
    const deleted = await t.call('DELETE', path, { key })
    expect({ status: deleted.statusCode, body: deleted.body }).toEqual({ status: 204, body: '' })
    expectProblem(await t.get(path, key), { code: 'WEBHOOK_ENDPOINT_NOT_FOUND', instance: path })
  })

  it('stores and shows the URL as it parsed and checked it (the WHATWG serialization): what is shown is what is called', async () => {
    const k = await t.key()
    const created = await post(k, { url: 'HTTPS://Hooks.Example.COM:443/a/./b/../c d?x=é#top', eventTypes: ['property.updated'] })
    expect(created.statusCode).toBe(201)
    const endpoint = dataOf(created)
    expect(endpoint.url).toBe('https://hooks.example.com/a/c%20d?x=%C3%A9#top')
    const path = `/v1/webhook-endpoints/${endpoint.id as string}`
    expect(dataOf(await t.get(path, k)).url).toBe('https://hooks.example.com/a/c%20d?x=%C3%A9#top')
    const record = JSON.parse(await redis.hget(`${t.prefix}{webhooks}:ep`, endpoint.id as string) as string) as { url: string }
    expect(record.url).toBe('https://hooks.example.com/a/c%20d?x=%C3%A9#top')
    const patched = await t.call('PATCH', path, { key: k, body: JSON.stringify({ url: 'https://HOOKS.example.com./x/%7Ey' }) })
    expect(dataOf(patched).url).toBe('https://hooks.example.com./x/%7Ey')
    // Longer than 2,048 characters once percent-encoded, though not as sent: refused.
    expectProblem(await post(k, { url: `https://hooks.example.com/${'é'.repeat(400)}`, eventTypes: ['property.updated'] }), {
      code: 'VALIDATION_FAILED', instance: '/v1/webhook-endpoints',
      errors: [{ field: 'url', code: 'NOT_ALLOWED', detail: 'url must be at most 2048 characters once normalised (it is 2426).' }],
    })
  })

  it('refuses an unknown field with 400, suggesting the cased name', async () => {
    expectProblem(await post(key, { url: 'https://hooks.example.com/', eventtypes: ['property.updated'] }), {
      code: 'UNKNOWN_BODY_FIELD', instance: '/v1/webhook-endpoints',
      errors: [{ field: 'eventtypes', code: 'UNKNOWN_PARAMETER', detail: "Unknown field 'eventtypes'. Did you mean 'eventTypes'?" }],
    })
  })

  it('answers 422 with one field error per bad field', async () => {
    expectProblem(await post(key, { url: 'http://hooks.example.com/', eventTypes: ['property.updated', 'room.exploded'], description: 7 }), {
      code: 'VALIDATION_FAILED', instance: '/v1/webhook-endpoints',
      errors: [
        { field: 'url', code: 'NOT_ALLOWED', detail: 'url must use https.' },
        { field: 'eventTypes', code: 'INVALID_ENUM_VALUE', detail: expect.stringMatching(/^Unknown event type: 'room\.exploded'; the types are /) as unknown as string },
        { field: 'description', code: 'INVALID_FORMAT', detail: 'description must be a text, or null.' },
      ],
    })
    expectProblem(await post(key, { eventTypes: [] }), {
      code: 'VALIDATION_FAILED', instance: '/v1/webhook-endpoints',
      errors: [
        { field: 'url', code: 'REQUIRED', detail: 'url is required.' },
        { field: 'eventTypes', code: 'REQUIRED', detail: 'eventTypes must name at least one event type.' },
      ],
    })
    expectProblem(await post(key, { url: 'https://user:pw@hooks.example.com/', eventTypes: ['property.updated'] }), {
      code: 'VALIDATION_FAILED', instance: '/v1/webhook-endpoints', errors: [{ field: 'url', code: 'NOT_ALLOWED', detail: 'url must not hold a user name or password.' }],
    })
  })

  it('answers 403 for a type whose scope the credential lacks, and for a credential without webhooks:write', async () => {
    const narrow = await t.key({ scopes: ['webhooks:write', 'properties:read'] })
    expectProblem(await post(narrow, { url: 'https://hooks.example.com/', eventTypes: ['guest.created'] }), {
      code: 'INSUFFICIENT_SCOPE', instance: '/v1/webhook-endpoints', detail: "Subscribing to 'guest.created' needs the scope 'guests:read', which this credential does not have.",
    })
    const readOnly = await t.key({ scopes: ['properties:read'] })
    const refused = await post(readOnly, { url: 'https://hooks.example.com/', eventTypes: ['property.updated'] })
    expect(refused.statusCode).toBe(403)
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'INSUFFICIENT_SCOPE' })
  })

  it('stops at events.maxEndpointsPerCredential with 409', async () => {
    const k = await t.key()
    for (let i = 0; i < 2; i += 1) expect((await post(k, { url: `https://hooks.example.com/${i}`, eventTypes: ['property.updated'] })).statusCode).toBe(201)
    expectProblem(await post(k, { url: 'https://hooks.example.com/3', eventTypes: ['property.updated'] }), {
      code: 'WEBHOOK_ENDPOINT_LIMIT_REACHED', instance: '/v1/webhook-endpoints', detail: 'This credential has 2 webhook endpoints, as many as it may; delete one first.',
    })
  })

  it('replays a POST with the same Idempotency-Key, secret included, and refuses the key on another body', async () => {
    const k = await t.key()
    const body = { url: 'https://hooks.example.com/idem', eventTypes: ['property.updated'] }
    const first = await post(k, body, { 'idempotency-key': 'create-1' })
    const again = await post(k, body, { 'idempotency-key': 'create-1' })
    expect(first.statusCode).toBe(201)
    expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'], data: dataOf(again) }).toEqual({ status: 201, replayed: 'true', data: dataOf(first) })
    expect(dataOf(await t.get('/v1/webhook-endpoints', k))).toHaveLength(1)
    expectProblem(await post(k, { ...body, url: 'https://hooks.example.com/other' }, { 'idempotency-key': 'create-1' }), { code: 'IDEMPOTENCY_KEY_REUSED', instance: '/v1/webhook-endpoints' })
  })

  it('refuses a malformed id with 400 and an unknown event on redeliver with 404', async () => {
    const bad = await t.get('/v1/webhook-endpoints/we_nope', key)
    expect(bad.statusCode).toBe(400)
    expect(JSON.parse(bad.body)).toMatchObject({ code: 'INVALID_PATH_PARAMETER' })
    const created = dataOf(await post(key, { url: 'https://hooks.example.com/r', eventTypes: ['property.updated'] }))
    const path = '/v1/events/evt_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2/redeliver'
    expectProblem(await t.call('POST', path, { key, body: JSON.stringify({ endpointId: created.id }) }), { code: 'EVENT_NOT_FOUND', instance: path })
    expectProblem(await t.call('POST', path, { key, body: JSON.stringify({}) }), {
      code: 'VALIDATION_FAILED', instance: path, errors: [{ field: 'endpointId', code: 'REQUIRED', detail: "endpointId names one of this credential's webhook endpoints." }],
    })
  })
})
