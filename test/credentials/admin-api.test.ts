import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { adminOpenApiDocument } from '../../src/credentials/admin-openapi.js'
import { checkAdminAnswer } from '../helpers/admin-contract.js'
import { TestGateway } from '../helpers/gateway.js'
import { keyTool } from '../helpers/oauth.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'
import { eventually, REDIS_URL } from '../helpers/redis.js'

// The credentials API of the admin port (docs/operations.md, "The credentials API"): the key
// tool's commands over HTTP, through the same service, so that the two cannot disagree; only
// with ADMIN_TOKEN set, and only with it. Every answer is checked against the admin port's
// OpenAPI document; the credentials it makes are used on the public port.

const TOKEN = 'admin-token-0123456789'
const PROPERTY = 'c0ffee00-0000-4000-8000-00000000000a'
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
let t: TestGateway
let open: TestGateway
let adminUrl: string
let openAdminUrl: string

async function listen(gateway: TestGateway): Promise<string> {
  await gateway.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(gateway.gateway.admin.server.address() as { port: number }).port}`
}

beforeAll(async () => {
  t = await TestGateway.start({ env: { ADMIN_TOKEN: TOKEN }, config: { keyCache: { ttlMs: 60_000, graceMs: 60_000, maxEntries: 1000 } } })
  open = await TestGateway.start()
  adminUrl = await listen(t)
  openAdminUrl = await listen(open)
})

afterAll(async () => {
  await t.close()
  await open.close()
})

interface Answer { statusCode: number; headers: Record<string, string | string[] | undefined>; body: string }

async function admin(method: string, path: string, options: { body?: unknown; raw?: string; token?: string | null; type?: string; base?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {}
  if (options.token !== null) headers.authorization = `Bearer ${options.token ?? TOKEN}`
  const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
  if (body !== undefined) headers['content-type'] = options.type ?? 'application/json'
  const res = await request(`${options.base ?? adminUrl}${path}`, { method: method as 'GET', headers, body })
  const answer = { statusCode: res.statusCode, headers: res.headers as Answer['headers'], body: await res.body.text() }
  checkAdminAnswer(method, path, answer)
  return answer
}

/** A success's `data`, its envelope checked. */
function data<T = Record<string, unknown>>(answer: Answer, status = 200): T {
  expect({ status: answer.statusCode, body: answer.body }).toMatchObject({ status })
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8')
  const parsed = JSON.parse(answer.body) as { data: T; meta: Record<string, unknown> }
  expect(Object.keys(parsed)).toEqual(['data', 'meta'])
  expect(parsed.meta).toMatchObject({ requestId: answer.headers['service-request-id'], timestamp: expect.stringMatching(TIMESTAMP) })
  return parsed.data
}

const tool = (...argv: string[]) => keyTool({ REDIS_URL, REDIS_PREFIX: t.prefix }, ...argv)

async function newKey(body: Record<string, unknown> = {}) {
  return data<Record<string, unknown> & { id: string; secret: string }>(await admin('POST', '/admin/v1/credentials', {
    body: { type: 'api_key', brand: 'acme', mode: 'live', properties: '*', ...body },
  }), 201)
}

describe('the credentials API, only with ADMIN_TOKEN', () => {
  it('is not there without ADMIN_TOKEN: 404, as any unknown admin path', async () => {
    for (const path of ['/admin/v1/credentials', '/admin/v1/audit', '/admin/v1/credentials/key_00000000000000000']) {
      expectProblem(await admin('GET', path, { base: openAdminUrl, token: null }), {
        code: 'ROUTE_NOT_FOUND', instance: path, detail: `There is no admin route at ${path}; the admin port serves /metrics, /status, /events, /admin/v1/openapi.json, /admin/v1/config/reload and /livez.`,
      })
    }
  })

  it('needs the token: none is 401 MISSING_AUTH_HEADER, another 401 INVALID_AUTH_HEADER', async () => {
    const challenge = { 'www-authenticate': 'Bearer realm="admin"' }
    expectProblem(await admin('GET', '/admin/v1/credentials', { token: null }), { code: 'MISSING_AUTH_HEADER', instance: '/admin/v1/credentials', headers: challenge })
    expectProblem(await admin('POST', '/admin/v1/credentials', { token: 'admin-token-9876543210', body: { type: 'api_key' } }), {
      code: 'INVALID_AUTH_HEADER', instance: '/admin/v1/credentials', headers: challenge,
    })
    expect((await t.gateway.credentials.list()).length).toBe(0)
  })

  it('serves its OpenAPI document, a valid OpenAPI 3.1 document, generated from the schemas', async () => {
    const answer = await admin('GET', '/admin/v1/openapi.json')
    expect(answer.statusCode).toBe(200)
    expect(JSON.parse(answer.body)).toEqual(adminOpenApiDocument())
    const dir = await mkdtemp(join(tmpdir(), 'admin-openapi-'))
    try {
      await writeFile(join(dir, 'openapi.json'), answer.body)
      const validator = new Validator()
      expect(await validator.validate(join(dir, 'openapi.json'))).toEqual({ valid: true })
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('the credentials API', () => {
  it('creates a key (201, the secret once) that works on the public port, and shows it as the key tool does', async () => {
    const created = await newKey({ name: 'Portal key', scopes: ['properties:read'], rateLimit: 50, allowedIps: ['127.0.0.1'], expiresAt: '2031-01-01T00:00:00+01:00' })
    expect(created).toEqual({
      id: expect.stringMatching(/^key_/), type: 'api_key', brand: 'acme', mode: 'live', properties: '*', scopes: ['properties:read'], status: 'active',
      name: 'Portal key', expiresAt: '2030-12-31T23:00:00.000Z', rateLimit: 50, allowedIps: ['127.0.0.1'], previousSecretExpiresAt: null, lastUsedAt: null,
      createdAt: expect.stringMatching(ISO), secret: expect.stringMatching(/^svc_live_[0-9A-Za-z]{28}$/),
    })
    expect((await t.get('/v1/properties', created.secret)).statusCode).toBe(200)
    const { secret: _secret, ...view } = created
    const shown = data(await admin('GET', `/admin/v1/credentials/${created.id}`))
    expect(shown).toEqual(view)
    // The tool and the API show the same record.
    expect(JSON.parse((await tool('show', created.id, '--json')).out[0] as string)).toEqual(shown)
    expect(JSON.stringify(shown)).not.toContain(created.secret)
  })

  it('registers a client\'s grant', async () => {
    const issuer = t.gateway.app.gatewayConfig.oauth.issuers[0]?.issuer
    expect(issuer).toBeUndefined()
    const refused = await admin('POST', '/admin/v1/credentials', { body: { type: 'oauth_client', issuer: 'https://id.example.com', clientId: 'portal', brand: 'acme', mode: 'live', properties: '*' } })
    expectProblem(refused, {
      code: 'VALIDATION_FAILED', instance: '/admin/v1/credentials', detail: 'The request has a field with a bad value.',
      errors: [{ field: 'issuer', code: 'INVALID_ENUM_VALUE', detail: 'no token issuer is configured (oauth.issuers or OAUTH_ISSUER)' }],
    })
  })

  it('lists credentials by brand and status, a page at a time', async () => {
    const a = await newKey({ brand: 'globex' })
    const b = await newKey({ brand: 'globex' })
    const c = await newKey({ brand: 'globex' })
    data(await admin('POST', `/admin/v1/credentials/${b.id}/suspend`))
    const page = await admin('GET', '/admin/v1/credentials?brand=globex&perPage=2&page=1')
    expect((data<{ id: string }[]>(page)).map((v) => v.id)).toEqual([a.id, b.id])
    expect(JSON.parse(page.body).meta.pagination).toEqual({ page: 1, perPage: 2, total: 3 })
    expect(data<{ id: string }[]>(await admin('GET', '/admin/v1/credentials?brand=globex&page=2&perPage=2')).map((v) => v.id)).toEqual([c.id])
    expect(data<{ id: string }[]>(await admin('GET', '/admin/v1/credentials?brand=globex&status=suspended')).map((v) => v.id)).toEqual([b.id])
    expectProblem(await admin('GET', '/admin/v1/credentials?brand=globex&stauts=active'), {
      code: 'UNKNOWN_QUERY_PARAMETER', instance: '/admin/v1/credentials', errors: [{ field: 'stauts', code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter 'stauts'." }],
    })
    expectProblem(await admin('GET', '/admin/v1/credentials?status=gone&perPage=0'), {
      code: 'INVALID_QUERY_PARAMETER', instance: '/admin/v1/credentials', errors: [
        { field: 'perPage', code: 'OUT_OF_RANGE', detail: 'perPage must be a whole number from 1 to 100.' },
        { field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is active or suspended.' },
      ],
    })
  })

  it('changes fields with PATCH, null lifting a limit, effective on the public port at once', async () => {
    const { id, secret } = await newKey({ rateLimit: 5, allowedIps: ['10.0.0.0/8'] })
    expectProblem(await t.get('/v1/properties', secret), { code: 'IP_NOT_ALLOWED', instance: '/v1/properties', detail: 'This API key may not be used from the address 127.0.0.1.' })
    const patched = data(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: { allowedIps: null, rateLimit: null, name: 'Renamed', properties: [PROPERTY.toUpperCase()] } }))
    expect(patched).toMatchObject({ id, allowedIps: null, rateLimit: null, name: 'Renamed', properties: [PROPERTY] })
    expect(await eventually(async () => (await t.get('/v1/properties', secret)).statusCode === 200, 1000)).toBe(true)
    expect((await t.get('/v1/properties', secret)).headers['ratelimit-limit']).toBe('1000')
    expect(JSON.parse((await tool('show', id, '--json')).out[0] as string)).toEqual(patched)
  })

  it('answers bad values 422 VALIDATION_FAILED with one field error per field, and changes nothing', async () => {
    const { id } = await newKey()
    const before = data(await admin('GET', `/admin/v1/credentials/${id}`))
    expectProblem(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: { rateLimit: 0, scopes: ['everything'], properties: ['nope'], expiresAt: 'soon', allowedIps: ['10.0.0.1/8'], name: 7 } }), {
      code: 'VALIDATION_FAILED', instance: `/admin/v1/credentials/${id}`, detail: 'The request has fields with a bad value.',
      errors: [
        { field: 'name', code: 'INVALID_FORMAT', detail: 'name is a text of at most 100 characters, with no control or bidirectional-control character, or null for none' },
        { field: 'rateLimit', code: 'OUT_OF_RANGE', detail: 'rateLimit takes a whole number of requests above 0' },
        // This gateway declares no routes: its known scopes are those of the properties.
        { field: 'scopes', code: 'INVALID_ENUM_VALUE', detail: "unknown scope 'everything' (known: events:read, properties:read, request-logs:read, webhooks:read, webhooks:write)" },
        { field: 'properties', code: 'INVALID_FORMAT', detail: "malformed property UUID 'nope'" },
        { field: 'allowedIps', code: 'INVALID_FORMAT', detail: "allowedIps: '10.0.0.1/8' has bits set past its prefix; the block is 10.0.0.0/8" },
        { field: 'expiresAt', code: 'INVALID_FORMAT', detail: "expiresAt 'soon' is not a date-time that exists, with an offset (e.g. 2027-06-30T00:00:00Z)" },
      ],
    })
    expectProblem(await admin('POST', '/admin/v1/credentials', { body: { type: 'api_key', mode: 'prod' } }), {
      code: 'VALIDATION_FAILED', instance: '/admin/v1/credentials', errors: [
        { field: 'brand', code: 'REQUIRED', detail: 'brand is required' },
        { field: 'mode', code: 'INVALID_ENUM_VALUE', detail: 'mode is "live" or "test"' },
        { field: 'properties', code: 'REQUIRED', detail: 'properties is required' },
      ],
    })
    expectProblem(await admin('POST', '/admin/v1/credentials', { body: { brand: 'acme' } }), {
      code: 'VALIDATION_FAILED', instance: '/admin/v1/credentials', errors: [{ field: 'type', code: 'REQUIRED', detail: 'type is required: "api_key" or "oauth_client"' }],
    })
    expectProblem(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: [] }), {
      code: 'VALIDATION_FAILED', instance: `/admin/v1/credentials/${id}`, detail: 'The body must be a JSON object.', errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }],
    })
    expect(data(await admin('GET', `/admin/v1/credentials/${id}`))).toEqual(before)
  })

  it('refuses a day that does not exist and a name with a control or bidirectional character, 422 with a field error each', async () => {
    const { id } = await newKey()
    const before = data(await admin('GET', `/admin/v1/credentials/${id}`))
    const nameRule = 'name is a text of at most 100 characters, with no control or bidirectional-control character, or null for none'
    const notAnInstant = (text: string) => `expiresAt '${text}' is not a date-time that exists, with an offset (e.g. 2027-06-30T00:00:00Z)`
    for (const [expiresAt, name] of [['2026-02-30', 'Evil\u202Egnp.exe'], ['2026-02-30T00:00:00Z', 'Line\nbreak'], ['2027-04-31T12:00:00+02:00', 'Tab\there'], ['2027-06-30T00:00:00', 'Mark\u200Fed']] as const) {
      expectProblem(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: { expiresAt, name } }), {
        code: 'VALIDATION_FAILED', instance: `/admin/v1/credentials/${id}`, detail: 'The request has fields with a bad value.',
        errors: [{ field: 'name', code: 'INVALID_FORMAT', detail: nameRule }, { field: 'expiresAt', code: 'INVALID_FORMAT', detail: notAnInstant(expiresAt) }],
      })
    }
    expectProblem(await admin('POST', '/admin/v1/credentials', { body: { type: 'api_key', brand: 'acme', mode: 'live', properties: '*', name: 'x'.repeat(101) } }), {
      code: 'VALIDATION_FAILED', instance: '/admin/v1/credentials', errors: [{ field: 'name', code: 'OUT_OF_RANGE', detail: nameRule }],
    })
    expect(data(await admin('GET', `/admin/v1/credentials/${id}`))).toEqual(before)
    // A date that exists is its midnight UTC; a name in any script, of 100 characters, is taken.
    expect(data(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: { expiresAt: '2028-02-29', name: `Zürich ${'é'.repeat(93)}` } })))
      .toMatchObject({ expiresAt: '2028-02-29T00:00:00.000Z', name: `Zürich ${'é'.repeat(93)}` })
  })

  it('answers a field it does not take 400 UNKNOWN_BODY_FIELD, with "Did you mean" where a known one matches ignoring case', async () => {
    const { id } = await newKey()
    expectProblem(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: { ExpiresAt: null, colour: 'blue', name: 'x' } }), {
      code: 'UNKNOWN_BODY_FIELD', instance: `/admin/v1/credentials/${id}`, detail: 'The body has fields this operation does not take: ExpiresAt, colour.',
      errors: [
        { field: 'ExpiresAt', code: 'UNKNOWN_PARAMETER', detail: "Unknown field 'ExpiresAt'. Did you mean 'expiresAt'?" },
        { field: 'colour', code: 'UNKNOWN_PARAMETER', detail: "Unknown field 'colour'." },
      ],
    })
    expectProblem(await admin('POST', '/admin/v1/credentials', { body: { type: 'oauth_client', issuer: 'x', clientId: 'y', brand: 'acme', mode: 'live', properties: '*', expiresAt: null } }), {
      code: 'UNKNOWN_BODY_FIELD', instance: '/admin/v1/credentials', errors: [{ field: 'expiresAt', code: 'UNKNOWN_PARAMETER', detail: "Unknown field 'expiresAt'." }],
    })
    expectProblem(await admin('POST', `/admin/v1/credentials/${id}/roll`, { body: { Overlap: '1h' } }), {
      code: 'UNKNOWN_BODY_FIELD', instance: `/admin/v1/credentials/${id}/roll`, errors: [{ field: 'Overlap', code: 'UNKNOWN_PARAMETER', detail: "Unknown field 'Overlap'. Did you mean 'overlap'?" }],
    })
  })

  it('answers a body that is not JSON 400 MALFORMED_JSON, or 415 in another type', async () => {
    const { id } = await newKey()
    expectProblem(await admin('PATCH', `/admin/v1/credentials/${id}`, { raw: '{"name":' }), { code: 'MALFORMED_JSON', instance: `/admin/v1/credentials/${id}`, detail: 'The body is not one well-formed JSON document.' })
    expectProblem(await admin('PATCH', `/admin/v1/credentials/${id}`, { raw: 'name=x', type: 'application/x-www-form-urlencoded' }), {
      code: 'UNSUPPORTED_MEDIA_TYPE', instance: `/admin/v1/credentials/${id}`, detail: 'Send the body as JSON with `Content-Type: application/json`.',
    })
  })

  it('answers an id no credential has 404 CREDENTIAL_NOT_FOUND', async () => {
    for (const [method, path] of [
      ['GET', '/admin/v1/credentials/key_00000000000000000'], ['PATCH', '/admin/v1/credentials/cli_00000000000000000'],
      ['POST', '/admin/v1/credentials/key_00000000000000000/roll'], ['POST', '/admin/v1/credentials/key_00000000000000000/suspend'],
      ['POST', '/admin/v1/credentials/key_00000000000000000/revoke'], ['GET', '/admin/v1/credentials/nonsense/usage'],
    ] as const) {
      const id = path.split('/')[4] as string
      expectProblem(await admin(method, path, method === 'PATCH' ? { body: { name: 'x' } } : {}), {
        code: 'CREDENTIAL_NOT_FOUND', instance: path, detail: `No API key or client grant has the id '${id}'.`,
      })
    }
  })

  it('rolls, suspends, resumes and revokes, each reaching the public port', async () => {
    const { id, secret } = await newKey()
    expect((await t.get('/v1/properties', secret)).statusCode).toBe(200)
    const rolled = data<{ id: string; secret: string; previousSecretExpiresAt: string }>(await admin('POST', `/admin/v1/credentials/${id}/roll`, { body: { overlap: '30m' } }))
    expect(rolled).toEqual({ id, secret: expect.stringMatching(/^svc_live_/), previousSecretExpiresAt: expect.stringMatching(ISO) })
    expect((await t.get('/v1/properties', rolled.secret)).statusCode).toBe(200)
    expect((await t.get('/v1/properties', secret)).statusCode).toBe(200)
    expect(data(await admin('POST', `/admin/v1/credentials/${id}/end-overlap`))).toMatchObject({ id, previousSecretExpiresAt: expect.stringMatching(ISO) })
    expect(await eventually(async () => (await t.get('/v1/properties', secret)).statusCode === 401, 1000)).toBe(true)
    expectProblem(await admin('POST', `/admin/v1/credentials/${id}/roll`, { body: { overlap: '2w' } }), {
      code: 'VALIDATION_FAILED', instance: `/admin/v1/credentials/${id}/roll`,
      errors: [{ field: 'overlap', code: 'INVALID_FORMAT', detail: 'overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once' }],
    })

    expect(data(await admin('POST', `/admin/v1/credentials/${id}/suspend`))).toMatchObject({ id, status: 'suspended' })
    expect(await eventually(async () => (await t.get('/v1/properties', rolled.secret)).statusCode === 403, 1000)).toBe(true)
    expect(data(await admin('POST', `/admin/v1/credentials/${id}/resume`, { body: {} }))).toMatchObject({ id, status: 'active' })
    expect(await eventually(async () => (await t.get('/v1/properties', rolled.secret)).statusCode === 200, 1000)).toBe(true)
    expect(data(await admin('POST', `/admin/v1/credentials/${id}/revoke`))).toEqual({ id, status: 'revoked' })
    expect(await eventually(async () => (await t.get('/v1/properties', rolled.secret)).statusCode === 401, 1000)).toBe(true)
    expectProblem(await admin('GET', `/admin/v1/credentials/${id}`), { code: 'CREDENTIAL_NOT_FOUND', instance: `/admin/v1/credentials/${id}` })
  })

  it('reads usage as keys usage does', async () => {
    const { id, secret } = await newKey()
    expect((await t.get('/v1/properties', secret)).statusCode).toBe(200)
    await t.gateway.usage.flush()
    const usage = data<{ rows: unknown[] }>(await admin('GET', `/admin/v1/credentials/${id}/usage?days=2`))
    expect(usage).toEqual(JSON.parse((await tool('usage', id, '--days', '2', '--json')).out[0] as string))
    expect(usage.rows).toEqual([{ date: new Date().toISOString().slice(0, 10), route: 'GET /v1/properties', '2xx': 1, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0, total: 1 }])
    expectProblem(await admin('GET', `/admin/v1/credentials/${id}/usage?days=91`), {
      code: 'INVALID_QUERY_PARAMETER', instance: `/admin/v1/credentials/${id}/usage`, errors: [{ field: 'days', code: 'OUT_OF_RANGE', detail: 'days must be a whole number from 1 to 90.' }],
    })
  })

  it('records every change with the actor admin-api, and reads the audit trail as keys audit does, newest first', async () => {
    const { id } = await newKey()
    data(await admin('PATCH', `/admin/v1/credentials/${id}`, { body: { name: 'Audited' } }))
    data(await admin('POST', `/admin/v1/credentials/${id}/suspend`))
    const trail = await admin('GET', `/admin/v1/audit?id=${id}`)
    const entries = data<{ actor: string; action: string; credentialId: string }[]>(trail)
    expect(entries.map((e) => [e.action, e.actor, e.credentialId])).toEqual([['suspend', 'admin-api', id], ['update', 'admin-api', id], ['create', 'admin-api', id]])
    expect(JSON.parse(trail.body).meta.pagination).toEqual({ page: 1, perPage: 20, total: 3 })
    expect(entries).toEqual(JSON.parse((await tool('audit', '--id', id, '--json')).out[0] as string))
    expect(data<unknown[]>(await admin('GET', `/admin/v1/audit?id=${id}&perPage=1&page=3`))).toEqual([entries[2]])
    expect(data<unknown[]>(await admin('GET', `/admin/v1/audit?id=${id}&since=2999-01-01T00:00:00Z`))).toEqual([])
    // The gateway's log has a line per change.
    const lines = t.logs.records().filter((r) => r.msg === 'credential changed' && (r.audit as { credentialId: string }).credentialId === id)
    expect(lines.map((r) => (r.audit as { action: string }).action)).toEqual(['create', 'update', 'suspend'])
    expect(REQUEST_ID.test(String((await admin('GET', '/admin/v1/audit')).headers['service-request-id']))).toBe(true)
  })
})
