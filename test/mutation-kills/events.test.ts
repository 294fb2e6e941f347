import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { FileConfigInput } from '../../src/config.js'
import { Redis } from 'ioredis'
import { MemoryKeyStore } from '../../src/keys/store.js'
import { REDIS_URL } from '../helpers/redis.js'
import { accepted, listenAdmin, publish, PUBLISHER_TOKENS } from '../helpers/events.js'
import { TestGateway } from '../helpers/gateway.js'
import { expectEnvelope, expectProblem } from '../helpers/problem.js'

// Rules of the event log set when a gateway is built (docs/architecture.md, "Events"): the
// publishers' tokens, each publisher's own mappings and their `data` paths, the public types
// `GET /v1/events` filters by, the retention, and the memory store of a gateway without Redis.
// Each test builds its gateway inside itself, so that mutation testing runs these rules
// against it (stryker.config.mjs).

const TOKEN_A = 'publisher-a-token-0001'
const TOKEN_B = 'publisher-b-token-0002'
const HOTEL = '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'

/** Two publishers of one internal type; only `a`'s is mapped, with nested fields of `data`. */
const EVENTS: FileConfigInput['events'] = {
  publishers: { a: { tokenEnv: 'EVENTS_A_TOKEN', mode: 'live' }, b: { tokenEnv: 'EVENTS_B_TOKEN', mode: 'live' }, c: { tokenEnv: 'EVENTS_C_TOKEN', mode: 'test' } },
  types: [{
    type: 'thing.changed', publisher: 'a', internalType: 'com.example.thing', scope: 'properties:read',
    brand: 'owner.chain', property: 'where.hotel', object: { type: 'thing', id: 'thing.key', path: '/v1/things/{id}' },
  }],
  retentionDays: 2,
}

function thing(source: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specversion: '1.0', id: randomUUID(), source, type: 'com.example.thing',
    data: { owner: { chain: 'ACME' }, where: { hotel: HOTEL.toUpperCase() }, thing: { key: 'Thing-7' } }, ...overrides,
  }
}

async function start(options: { events?: FileConfigInput['events']; now?: () => number; memory?: boolean } = {}): Promise<{ t: TestGateway; admin: string; key: string }> {
  const t = await TestGateway.start({
    config: { events: options.events ?? EVENTS },
    env: { EVENTS_A_TOKEN: TOKEN_A, EVENTS_B_TOKEN: TOKEN_B, ...PUBLISHER_TOKENS },
    gateway: options.now === undefined ? {} : { eventsClock: options.now },
    ...(options.memory === true ? { keyStore: () => new MemoryKeyStore() } : {}),
  })
  const key = (await t.gateway.keyStore.create({ brand: 'acme', mode: 'live', properties: '*' })).key
  return { t, admin: await listenAdmin(t.gateway), key }
}

describe('event rules set when the gateway is built', () => {
  it('maps an internal type of its own publisher only, reading nested fields of data', async () => {
    const { t, admin, key } = await start()
    try {
      const [fromB] = accepted(await publish(admin, thing('b'), { token: TOKEN_B }))
      expect(fromB?.eventId).toBeNull()
      const [fromA] = accepted(await publish(admin, thing('a'), { token: TOKEN_A }))
      const read = expectEnvelope(await t.get('/v1/events', key), { page: 1, perPage: 20, total: 1 }) as { createdAt: string }[]
      expect(read).toEqual([{
        id: fromA?.eventId, type: 'thing.changed', createdAt: read[0]?.createdAt, mode: 'live', propertyId: HOTEL,
        object: { type: 'thing', id: 'Thing-7', path: '/v1/things/Thing-7' },
      }])
      // A token names its publisher: b's token cannot publish as a.
      expectProblem(await publish(admin, thing('a'), { token: TOKEN_B }), {
        code: 'INVALID_EVENT', instance: '/events', errors: [{ field: 'source', code: 'NOT_ALLOWED', detail: "Must be 'b', the name of the publisher whose token was sent." }],
      })
      expectProblem(await publish(admin, thing('a', { data: { owner: { chain: 'ACME' }, where: {}, thing: { key: 'x' } } }), { token: TOKEN_A }), {
        code: 'INVALID_EVENT', instance: '/events',
        errors: [{ field: 'data.where.hotel', code: 'REQUIRED', detail: "Events of type 'com.example.thing' name their property here." }],
      })
    } finally {
      await t.close()
    }
  })

  it('refuses a publisher whose token variable is unset, and no other', async () => {
    const { t, admin } = await start()
    try {
      // c's variable is unset: no token is c's, not even the text of an unset value.
      for (const token of ['undefined', 'null']) {
        expectProblem(await publish(admin, thing('c'), { token }), { code: 'INVALID_AUTH_HEADER', instance: '/events', headers: { 'www-authenticate': 'Bearer realm="events"' } })
      }
      accepted(await publish(admin, thing('a'), { token: TOKEN_A }))
    } finally {
      await t.close()
    }
  })

  it('filters by the public types of its config, and takes no type where there is none', async () => {
    const typed = await start()
    try {
      expectEnvelope(await typed.t.get('/v1/events?type=thing.changed', typed.key), { page: 1, perPage: 20, total: 0 })
      expectProblem(await typed.t.get('/v1/events?type=property.updated', typed.key), {
        code: 'INVALID_QUERY_PARAMETER', instance: '/v1/events', errors: [{ field: 'type', code: 'INVALID_ENUM_VALUE', detail: "Must be one of 'thing.changed'." }],
      })
    } finally {
      await typed.t.close()
    }
    const none = await start({ events: { publishers: {}, types: [] } })
    try {
      expectProblem(await none.t.get('/v1/events?type=thing.changed', none.key), {
        code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/events',
        errors: [{ field: 'type', code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter; this endpoint accepts 'page', 'perPage', 'propertyId', 'createdAfter', 'createdBefore'." }],
      })
      expectEnvelope(await none.t.get('/v1/events', none.key), { page: 1, perPage: 20, total: 0 })
    } finally {
      await none.t.close()
    }
  })

  it('keeps events events.retentionDays days, to the millisecond', async () => {
    let now = Date.now()
    const { t, admin, key } = await start({ now: () => now })
    try {
      const start = now
      const [event] = accepted(await publish(admin, thing('a'), { token: TOKEN_A }))
      now = start + 2 * 86_400_000
      expectEnvelope(await t.get('/v1/events', key), { page: 1, perPage: 20, total: 1 })
      expect(expectEnvelope(await t.get(`/v1/events/${event?.eventId ?? ''}`, key))).toMatchObject({ id: event?.eventId })
      now = start + 2 * 86_400_000 + 1
      expectEnvelope(await t.get('/v1/events', key), { page: 1, perPage: 20, total: 0 })
      expectProblem(await t.get(`/v1/events/${event?.eventId ?? ''}`, key), { code: 'EVENT_NOT_FOUND', instance: `/v1/events/${event?.eventId ?? ''}` })
    } finally {
      await t.close()
    }
  })

  it('keeps the JSON of events.cachedEvents events it read, and reads the others from Redis each time', async () => {
    for (const cachedEvents of [2, 0]) {
      const { t, admin, key } = await start({ events: { ...EVENTS, cachedEvents } })
      try {
        const ids = accepted(await publish(admin, [thing('a'), thing('a'), thing('a')], { token: TOKEN_A })).map((e) => e.eventId)
        const listed = async (): Promise<unknown[]> => (expectEnvelope(await t.get('/v1/events', key), { page: 1, perPage: 20, total: 3 }) as { id: string }[]).map((e) => e.id)
        expect(await listed()).toEqual(ids)
        // The records go (as they do past the retention); the indexes stay.
        const redis = new Redis(REDIS_URL)
        await redis.del(...ids.map((id) => `${t.prefix}ev:{acme:live}:e:${(id as string).slice(4)}`))
        redis.disconnect()
        // Kept: the last two read (the cache holds two); not kept: none.
        expect(await listed()).toEqual(cachedEvents === 2 ? ids.slice(1) : [])
      } finally {
        await t.close()
      }
    }
  })

  it('keeps its event log in memory when it has no Redis (the demo\'s fallback)', async () => {
    const { t, admin, key } = await start({ memory: true })
    try {
      expect(t.gateway.redis).toBeUndefined()
      const [kept] = accepted(await publish(admin, thing('a'), { token: TOKEN_A }))
      expect(accepted(await publish(admin, { ...thing('a'), id: 'same' }, { token: TOKEN_A }))[0]?.duplicate).toBe(false)
      expect(accepted(await publish(admin, { ...thing('a'), id: 'same' }, { token: TOKEN_A }))[0]?.duplicate).toBe(true)
      const read = expectEnvelope(await t.get('/v1/events?perPage=1', key), { page: 1, perPage: 1, total: 2 }) as { id: string }[]
      expect(read.map((e) => e.id)).toEqual([kept?.eventId])
      expect(expectEnvelope(await t.get(`/v1/events/${kept?.eventId ?? ''}`, key))).toMatchObject({ id: kept?.eventId, propertyId: HOTEL })
      expectEnvelope(await t.get(`/v1/events?propertyId=${randomUUID()}`, key), { page: 1, perPage: 20, total: 0 })
    } finally {
      await t.close()
    }
  })
})
