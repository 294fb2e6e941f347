import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { configFile as file, configProblems, MINIMAL_CONFIG as minimal } from '../helpers/config.js'

// The `events` section of the config file (docs/operations.md, "Events"): checked at start with
// every other setting, one message naming every bad field.

const problemsOf = (env: NodeJS.ProcessEnv): string[] => configProblems(() => loadConfig(env))

const publishers = { pms: { tokenEnv: 'EVENTS_PMS_TOKEN', mode: 'live' }, 'pms-sandbox': { tokenEnv: 'EVENTS_PMS_SANDBOX_TOKEN', mode: 'test' } }
const mapping = {
  type: 'property.updated', publisher: 'pms', internalType: 'com.example.pms.hotel.changed', scope: 'properties:read',
  brand: 'chain_code', property: 'hotel_uuid', object: { type: 'property', id: 'hotel_uuid', path: '/v1/properties/{id}' },
}

describe('the events section', () => {
  it('defaults to no publisher, no type and 30 days, and to the webhook settings of docs/operations.md, "Webhooks"', () => {
    const config = loadConfig({ CONFIG_FILE: file(minimal) })
    expect(config.events).toEqual({
      publishers: {}, types: [], retentionDays: 30, cachedEvents: 20000,
      maxEndpointsPerCredential: 10, maxManualDeliveriesPerEndpoint: 100, maxRecoveryEvents: 10_000, deliveryTimeoutMs: 15_000, retrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000], disableAfterHours: 120,
      endpointConcurrency: 4, deliveryWorkers: 64, deliveryLockSeconds: 20, allowPrivateTargets: false, allowHttp: false, workers: true,
    })
    expect(config.eventsWorker).toBe('on')
    expect(loadConfig({ CONFIG_FILE: file(minimal), EVENTS_WORKER: 'only' }).eventsWorker).toBe('only')
    expect(config.eventPublishers).toEqual([])
  })

  it('reads each publisher\'s token from the variable it names, never from the file', () => {
    const config = loadConfig({ CONFIG_FILE: file({ ...minimal, events: { publishers, types: [mapping], retentionDays: 7 } }), EVENTS_PMS_TOKEN: 'a-token-of-the-pms-publisher' })
    expect(config.eventPublishers).toEqual([
      { name: 'pms', mode: 'live', tokenEnv: 'EVENTS_PMS_TOKEN', token: 'a-token-of-the-pms-publisher' },
      { name: 'pms-sandbox', mode: 'test', tokenEnv: 'EVENTS_PMS_SANDBOX_TOKEN', token: undefined },
    ])
    expect(config.events.retentionDays).toBe(7)
  })

  it('names every bad field of the types at once', () => {
    const types = [
      { ...mapping, type: 'Property.Updated' },
      { ...mapping, type: 'webhook.test', internalType: 'a' },
      { ...mapping, type: 'updated', internalType: 'b' },
      { ...mapping, publisher: 'nobody', internalType: 'c' },
      { ...mapping, scope: 'properties', internalType: 'd' },
      { ...mapping, brand: 'chain code', internalType: 'e' },
      { ...mapping, object: { ...mapping.object, path: 'properties/{id}' }, internalType: 'f' },
      { ...mapping, extra: true, internalType: 'g' },
    ]
    const problems = problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers, types, retentionDays: 0 } }) })
    expect(problems).toEqual([
      expect.stringMatching(/events\.types\[0\]\.type: must be dotted lower-case words, e\.g\. `property\.updated`$/),
      expect.stringMatching(/events\.types\[1\]\.type: is reserved for the gateway's own events$/),
      expect.stringMatching(/events\.types\[2\]\.type: must be dotted lower-case words/),
      expect.stringMatching(/events\.types\[4\]\.scope: must be <resource>:<action>/),
      expect.stringMatching(/events\.types\[5\]\.brand: must be a field of `data`/),
      expect.stringMatching(/events\.types\[7\]: Unrecognized key: "extra"$/),
      expect.stringMatching(/events\.retentionDays: Too small/),
      expect.stringMatching(/events\.types\[3\]\.publisher: no publisher named 'nobody'$/),
      expect.stringMatching(/events\.types\[6\]\.object\.path: must start with \/v1\/$/),
    ])
  })

  it('refuses a mapping of no publisher, twice the same internal type, one public type of two scopes, and a path without {id}', () => {
    const types = [
      mapping,
      { ...mapping, publisher: 'nobody' },
      { ...mapping },
      { ...mapping, publisher: 'pms-sandbox', scope: 'rooms:read', object: { ...mapping.object, type: 'hotel' } },
      { ...mapping, type: 'property.moved', internalType: 'x', object: { ...mapping.object, path: '/v1/properties/{propertyId}' } },
      { ...mapping, type: 'property.gone', internalType: 'y', object: { ...mapping.object, path: 'properties/{id}' } },
    ]
    const problems = problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers, types } }) })
    expect(problems).toEqual([
      expect.stringMatching(/events\.types\[1\]\.publisher: no publisher named 'nobody'$/),
      expect.stringMatching(/events\.types\[2\]\.internalType: 'com\.example\.pms\.hotel\.changed' of 'pms' is mapped twice$/),
      expect.stringMatching(/events\.types\[3\]\.scope: 'property\.updated' needs 'properties:read' in types\[0\]$/),
      expect.stringMatching(/events\.types\[3\]\.object\.type: 'property\.updated' names 'property' objects in types\[0\]$/),
      expect.stringMatching(/events\.types\[4\]\.object\.path: must hold \{id\} once, and no other parameter$/),
      expect.stringMatching(/events\.types\[5\]\.object\.path: must start with \/v1\/$/),
    ])
  })

  it('names an undeclared publisher and every other cross-field mistake even when fields are missing, of the wrong type or unknown', () => {
    const { scope: _scope, ...noScope } = mapping
    const types = [
      { ...mapping, publisher: 'nobody' },
      noScope,
      { ...mapping, internalType: 42 },
      'not a mapping',
      { ...mapping, publisher: 'ghost', internalType: 'b', object: { type: 'property', id: 'hotel_uuid' } },
      { ...mapping, internalType: 'c', scope: 'rooms:read' },
      { ...mapping, internalType: 'd', object: { ...mapping.object, path: '/v1/properties' } },
    ]
    const problems = problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers: { ...publishers, bad: { tokenEnv: 'X', mode: 'sandbox' } }, types, retentionDays: 'long', colour: 'blue' } }) })
    expect(problems).toEqual([
      expect.stringMatching(/events\.publishers\.bad\.mode: /),
      expect.stringMatching(/events\.types\[1\]\.scope: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/events\.types\[2\]\.internalType: Invalid input: expected string, received number$/),
      expect.stringMatching(/events\.types\[3\]: Invalid input: expected object, received string$/),
      expect.stringMatching(/events\.types\[4\]\.object\.path: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/events\.retentionDays: Invalid input: expected number, received string$/),
      expect.stringMatching(/events: Unrecognized key: "colour"$/),
      expect.stringMatching(/events\.types\[0\]\.publisher: no publisher named 'nobody'$/),
      expect.stringMatching(/events\.types\[4\]\.publisher: no publisher named 'ghost'$/),
      expect.stringMatching(/events\.types\[5\]\.scope: 'property\.updated' needs 'properties:read' in types\[0\]$/),
      expect.stringMatching(/events\.types\[6\]\.object\.path: must hold \{id\} once, and no other parameter$/),
    ])
  })

  it('names a field missing or malformed once, with no cross-field mistake made up from it', () => {
    const { publisher: _p, ...noPublisher } = mapping
    const { internalType: _i, ...noInternalType } = mapping
    const { type: _t, ...noType } = mapping
    const { type: _o, ...untypedObject } = mapping.object
    const types = [
      mapping,
      null,
      { ...noPublisher, internalType: 'a' },
      noInternalType,
      noInternalType,
      { ...noType, internalType: 'b', scope: 'rooms:read' },
      { ...noType, internalType: 'c', scope: 'guests:read' },
      { ...mapping, internalType: 'd', scope: ['rooms:read'] },
      { ...mapping, type: 'guest.created', internalType: 'e', object: untypedObject },
      { ...mapping, type: 'guest.created', internalType: 'f', object: { ...mapping.object, type: 'guest' } },
      { ...mapping, internalType: 'g', object: { ...mapping.object, path: '/v1/properties/x{id}' } },
      { ...mapping, internalType: 'h', object: { ...mapping.object, path: '/v1/properties/{id}/rooms/{roomId}' } },
    ]
    const problems = problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers, types } }) })
    expect(problems).toEqual([
      expect.stringMatching(/ events\.types\[1\]: Invalid input: expected object, received null$/),
      expect.stringMatching(/ events\.types\[2\]\.publisher: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/ events\.types\[3\]\.internalType: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/ events\.types\[4\]\.internalType: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/ events\.types\[5\]\.type: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/ events\.types\[6\]\.type: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/ events\.types\[7\]\.scope: Invalid input: expected string, received array$/),
      expect.stringMatching(/ events\.types\[8\]\.object\.type: Invalid input: expected string, received undefined$/),
      expect.stringMatching(/ events\.types\[10\]\.object\.path: segment 'x\{id\}' is neither kebab-case nor a whole \{camelCase\} parameter$/),
      expect.stringMatching(/ events\.types\[11\]\.object\.path: must hold \{id\} once, and no other parameter$/),
    ])
  })

  it('names a list of types that is no list, and nothing else', () => {
    expect(problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers, types: { 0: mapping } } }) }))
      .toEqual([expect.stringMatching(/ events\.types: Invalid input: expected array, received object$/)])
  })

  it('takes a token of 16 characters, the fewest', () => {
    const config = loadConfig({ CONFIG_FILE: file({ ...minimal, events: { publishers } }), EVENTS_PMS_TOKEN: 'sixteen-chars-16' })
    expect(config.eventPublishers[0]).toEqual({ name: 'pms', mode: 'live', tokenEnv: 'EVENTS_PMS_TOKEN', token: 'sixteen-chars-16' })
  })

  it('refuses a publisher of a bad name, a bad variable or another mode', () => {
    expect(problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers: { PMS: { tokenEnv: 'EVENTS_TOKEN', mode: 'live' } } } }) }))
      .toEqual([expect.stringMatching(/events\.publishers\.PMS: Invalid key in record$/)])
    expect(problemsOf({ CONFIG_FILE: file({ ...minimal, events: { publishers: { pms: { tokenEnv: 'events-token', mode: 'sandbox' } } } }) })).toEqual([
      expect.stringMatching(/events\.publishers\.pms\.tokenEnv: must be an environment variable name/),
      expect.stringMatching(/events\.publishers\.pms\.mode: /),
    ])
  })

  it('refuses a token that is short, the admin token, or another publisher\'s', () => {
    const config = file({ ...minimal, events: { publishers: { ...publishers, bookings: { tokenEnv: 'EVENTS_BOOKINGS_TOKEN', mode: 'live' } } } })
    expect(problemsOf({ CONFIG_FILE: config, EVENTS_PMS_TOKEN: 'short', ADMIN_TOKEN: 'the-admin-token-of-this-test', EVENTS_PMS_SANDBOX_TOKEN: 'the-admin-token-of-this-test' })).toEqual([
      'environment EVENTS_PMS_TOKEN: must be at least 16 characters (the token of events.publishers.pms)',
      'environment EVENTS_PMS_SANDBOX_TOKEN: must not be ADMIN_TOKEN (the token of events.publishers.pms-sandbox)',
    ])
    expect(problemsOf({ CONFIG_FILE: config, EVENTS_PMS_TOKEN: 'one-token-for-two-publishers', EVENTS_BOOKINGS_TOKEN: 'one-token-for-two-publishers' })).toEqual([
      'environment EVENTS_BOOKINGS_TOKEN: the same token as events.publishers.pms',
    ])
  })

  it('keeps declared routes off /v1/events', () => {
    const routes = [{ path: '/v1/events/replays', scope: 'brand', upstream: 'bookings', upstreamPath: '/x' }]
    const problems = problemsOf({ CONFIG_FILE: file({ ...minimal, upstreams: { bookings: { url: 'http://127.0.0.1:4020' } }, routes }) })
    expect(problems).toEqual([expect.stringMatching(/routes\[0\]\.path: would shadow a built-in route \(\/v1\/properties…, \/v1\/events…, \/v1\/health\)$/)])
  })

  it('ships publishers and types for the stand-ins: property.updated, guest.created and guest.updated, live and sandbox', () => {
    const config = loadConfig({ CONFIG_FILE: 'config/default.json' })
    expect(config.eventPublishers.map((p) => [p.name, p.mode, p.tokenEnv])).toEqual([
      ['pms', 'live', 'EVENTS_PMS_TOKEN'], ['pms-sandbox', 'test', 'EVENTS_PMS_SANDBOX_TOKEN'],
      ['bookings', 'live', 'EVENTS_BOOKINGS_TOKEN'], ['bookings-sandbox', 'test', 'EVENTS_BOOKINGS_SANDBOX_TOKEN'],
    ])
    expect(config.events.types.map((t) => `${t.type} ${t.publisher} ${t.scope}`)).toEqual([
      'property.updated pms properties:read', 'property.updated pms-sandbox properties:read',
      'guest.created bookings guests:read', 'guest.created bookings-sandbox guests:read',
      'guest.updated bookings guests:read', 'guest.updated bookings-sandbox guests:read',
    ])
  })
})
