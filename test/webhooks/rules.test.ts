import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { refusal } from '../helpers/problem.js'
import type { GrantRecord } from '../../src/keys/grants.js'
import type { KeyRecord } from '../../src/keys/store.js'
import {
  applyChanges, bodyOf, checkDescription, checkStatus, checkTypes, checkUrl, endpointChanges, endpointInput, failed, rotated, ROTATION_OVERLAP_MS,
} from '../../src/webhooks/body.js'
import { webhookEnvFields, webhookFields, webhookKeyProblems, webhookKeys } from '../../src/webhooks/config.js'
import { isManual } from '../../src/webhooks/deliveries.js'
import { secretContext, viewOf, type EndpointRecord } from '../../src/webhooks/endpoints.js'
import { resealed } from '../../src/webhooks/reseal.js'
import {
  afterFailure, afterGone, afterSuccess, attemptsOf, deliveryLifetimeMs, isLastAttempt, LEASE_GRACE_MS, outcomeOfStatus, PARK_SLEEP_MS, parkSleepMs, retryDelayMs,
  unchangedSince, viewerOfCredential, workerTimings,
} from '../../src/webhooks/rules.js'
import { newSecret, SecretBox, SecretUnreadableError, signature, signatureHeader } from '../../src/webhooks/secrets.js'

// The webhooks' rules without a gateway (docs/architecture.md, "Webhooks"): the retry schedule
// and what an answer makes of an attempt, an endpoint's bookkeeping, who receives, the signing
// secrets and signatures, the endpoints API's bodies, and the config's fields. The module's
// mutation run uses these (scripts/mutation.ts).

const T0 = Date.parse('2026-11-28T12:00:00.000Z')
const HOUR = 3_600_000

function endpoint(over: Partial<EndpointRecord> = {}): EndpointRecord {
  return {
    id: 'we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2', credentialId: 'key_1', brand: 'acme', mode: 'live', url: 'https://hooks.example.com/acme',
    eventTypes: ['property.updated'], description: null, status: 'enabled', disabledReason: null,
    createdAt: '2026-11-28T10:00:00.000Z', updatedAt: '2026-11-28T11:00:00.000Z', secrets: [{ sealed: 'v1.current', expiresAt: null }], failingSince: null,
    ...over,
  }
}

describe('the retry schedule', () => {
  const schedule = [5, 300, 1800]

  it('waits the entry of the retry, scaled from 0.9 (random 0) to 1.1 (random 1), rounded to the millisecond', () => {
    expect(retryDelayMs(schedule, 1, () => 0)).toBe(4500)
    expect(retryDelayMs(schedule, 1, () => 0.5)).toBe(5000)
    expect(retryDelayMs(schedule, 1, () => 1)).toBe(5500)
    expect(retryDelayMs(schedule, 2, () => 0.5)).toBe(300_000)
    expect(retryDelayMs(schedule, 3, () => 0.25)).toBe(1_710_000)
    expect(retryDelayMs([0.0004], 1, () => 0.5)).toBe(0)
    expect(retryDelayMs([0.0016], 1, () => 0.5)).toBe(2)
  })

  it('keeps the last entry for a retry past the schedule, and waits nothing before the first', () => {
    expect(retryDelayMs(schedule, 4, () => 0.5)).toBe(1_800_000)
    expect(retryDelayMs(schedule, 40, () => 0)).toBe(1_620_000)
    expect(retryDelayMs(schedule, 0, () => 0.5)).toBe(0)
  })

  it('allows one attempt more than the schedule has entries, the last failing without a retry', () => {
    expect(attemptsOf(schedule)).toBe(4)
    expect(attemptsOf([1])).toBe(2)
    expect(isLastAttempt(2, 4)).toBe(false)
    expect(isLastAttempt(3, 4)).toBe(true)
    expect(isLastAttempt(4, 4)).toBe(true)
    expect(isLastAttempt(0, 1)).toBe(true)
  })

  it('keeps a delivery queued through every retry at its longest, every attempt timing out with its grace, and a day more', () => {
    expect(LEASE_GRACE_MS).toBe(30_000)
    expect(deliveryLifetimeMs([10, 20], 1000)).toBe(10 * 1100 + 20 * 1100 + 3 * (1000 + 30_000) + 86_400_000)
    expect(deliveryLifetimeMs([0.0001], 0)).toBe(2 * 30_000 + 86_400_000)
  })

  it('sleeps a parked delivery 10 to 15 minutes', () => {
    expect(PARK_SLEEP_MS).toBe(600_000)
    expect(parkSleepMs(() => 0)).toBe(600_000)
    expect(parkSleepMs(() => 1)).toBe(900_000)
    expect(parkSleepMs(() => 0.3333333)).toBe(700_000)
  })

  it('locks an attempt for the configured seconds and checks for stalled ones every half lock, never under a millisecond', () => {
    expect(workerTimings(20)).toEqual({ lockDuration: 20_000, stalledInterval: 10_000 })
    expect(workerTimings(1.0003)).toEqual({ lockDuration: 1000, stalledInterval: 500 })
    expect(workerTimings(0.0031)).toEqual({ lockDuration: 3, stalledInterval: 2 })
    expect(workerTimings(0.0001)).toEqual({ lockDuration: 0, stalledInterval: 1 })
  })
})

describe('what an answer makes of an attempt', () => {
  it('takes a 2xx as delivered, a 410 as gone, and anything else as failed', () => {
    expect([199, 200, 204, 299, 300, 304, 400, 404, 409, 410, 411, 429, 500, 503].map(outcomeOfStatus)).toEqual([
      'failed', 'delivered', 'delivered', 'delivered', 'failed', 'failed', 'failed', 'failed', 'failed', 'gone', 'failed', 'failed', 'failed', 'failed',
    ])
  })

  it('counts as asked for by the partner every delivery but one fanned out from an event', () => {
    expect(isManual('event')).toBe(false)
    expect(isManual('test')).toBe(true)
    expect(isManual('redeliver')).toBe(true)
    expect(isManual('recovery')).toBe(true)
  })
})

describe('an endpoint\'s bookkeeping', () => {
  const attempt = { url: 'https://hooks.example.com/acme', started: Date.parse('2026-11-28T11:00:00.000Z'), ended: T0 }

  it('applies to the endpoint the attempt was made to: enabled, the same URL, not changed after the attempt began', () => {
    expect(unchangedSince(endpoint(), attempt)).toBe(true)
    expect(unchangedSince(endpoint({ updatedAt: '2026-11-28T11:00:00.001Z' }), attempt)).toBe(false)
    expect(unchangedSince(endpoint({ url: 'https://hooks.example.com/other' }), attempt)).toBe(false)
    expect(unchangedSince(endpoint({ status: 'disabled' }), attempt)).toBe(false)
  })

  it('forgets the failures after a success, and writes nothing when there were none', () => {
    expect(afterSuccess(endpoint({ failingSince: T0 - HOUR }))).toEqual(endpoint())
    expect(afterSuccess(endpoint())).toBeUndefined()
  })

  it('disables an endpoint that answered 410, when it is still the one answered', () => {
    expect(afterGone(endpoint(), attempt)).toEqual(endpoint({ status: 'disabled', disabledReason: 'gone', updatedAt: '2026-11-28T12:00:00.000Z' }))
    expect(afterGone(endpoint({ url: 'https://hooks.example.com/new' }), attempt)).toBeUndefined()
  })

  it('counts failures from the first after the last success, and disables the endpoint once they span the configured time', () => {
    const disableAfter = 2 * HOUR
    expect(afterFailure(endpoint(), attempt, disableAfter)).toEqual(endpoint({ failingSince: attempt.started }))
    // Failing already, not yet long enough: nothing to write.
    expect(afterFailure(endpoint({ failingSince: attempt.started - disableAfter + 1 }), attempt, disableAfter)).toBeUndefined()
    expect(afterFailure(endpoint({ failingSince: attempt.started - disableAfter }), attempt, disableAfter)).toEqual(endpoint({
      failingSince: attempt.started - disableAfter, status: 'disabled', disabledReason: 'failing', updatedAt: '2026-11-28T12:00:00.000Z',
    }))
    // A first failure disables at once when the time is zero.
    expect(afterFailure(endpoint(), attempt, 0)).toEqual(endpoint({ failingSince: attempt.started, status: 'disabled', disabledReason: 'failing', updatedAt: '2026-11-28T12:00:00.000Z' }))
    expect(afterFailure(endpoint({ status: 'disabled', disabledReason: 'partner' }), attempt, 0)).toBeUndefined()
  })
})

describe('who receives', () => {
  const key: KeyRecord = {
    id: 'key_1', digest: 'd', brand: 'acme', mode: 'live', properties: ['p1', 'p2'], scopes: ['properties:read'], status: 'active', name: null,
    expiresAt: null, rateLimit: null, allowedIps: null, previousDigest: null, previousSecretExpiresAt: null, rolledAt: null, createdAt: '2026-01-01T00:00:00.000Z',
  }
  const grant: GrantRecord = {
    id: 'grant_1', digest: 'd', issuer: 'https://idp.example.com', clientId: 'c', brand: 'globex', mode: 'test', properties: '*', scopes: '*',
    status: 'active', name: null, rateLimit: null, allowedIps: null, createdAt: '2026-01-01T00:00:00.000Z',
  }

  it('sees as its active credential does: brand, mode, properties and scopes', () => {
    expect(viewerOfCredential(key, T0)).toEqual({ brand: 'acme', mode: 'live', properties: new Set(['p1', 'p2']), scopes: new Set(['properties:read']) })
    expect(viewerOfCredential(grant, T0)).toEqual({ brand: 'globex', mode: 'test', properties: 'all', scopes: 'all' })
    expect(viewerOfCredential({ ...key, expiresAt: '2026-11-28T12:00:00.001Z' }, T0)).toEqual({ brand: 'acme', mode: 'live', properties: new Set(['p1', 'p2']), scopes: new Set(['properties:read']) })
  })

  it('sees nothing for a credential gone (revoked), suspended or expired', () => {
    expect(viewerOfCredential(null, T0)).toBeUndefined()
    expect(viewerOfCredential({ ...key, status: 'suspended' }, T0)).toBeUndefined()
    expect(viewerOfCredential({ ...grant, status: 'suspended' }, T0)).toBeUndefined()
    expect(viewerOfCredential({ ...key, expiresAt: '2026-11-28T12:00:00.000Z' }, T0)).toBeUndefined()
  })
})

describe('signing secrets', () => {
  it('makes a secret of whsec_ and the base64 of 32 random bytes, each new', () => {
    const secret = newSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32)
    expect(newSecret()).not.toBe(secret)
  })

  it('signs as Standard Webhooks does: v1, and the HMAC-SHA256 of id, timestamp and body under the decoded secret', () => {
    // The Standard Webhooks reference vector.
    expect(signature('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}'))
      .toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=')
  })

  it('gives one signature per live secret, space-separated', () => {
    const a = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
    const b = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
    const header = signatureHeader([a, b], 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')
    expect(header).toBe(`v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= ${signature(b, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')}`)
    expect(header.split(' ')[1]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
    expect(header.split(' ')[1]).not.toBe(header.split(' ')[0])
    expect(signatureHeader([], 'id', 1, '')).toBe('')
  })

  it('seals under the current key, bound to its context, and opens with it only', () => {
    const box = new SecretBox('k'.repeat(32))
    const sealed = box.seal(Buffer.from('whsec_x'), 'webhook-endpoint:we_A')
    expect(sealed).toMatch(/^v1\.[A-Za-z0-9+/]+=*$/)
    expect(Buffer.from(sealed.slice(3), 'base64')).toHaveLength(12 + 16 + 7)
    expect(sealed).not.toContain('whsec_x')
    expect(box.seal(Buffer.from('whsec_x'), 'webhook-endpoint:we_A')).not.toBe(sealed)
    expect(box.open(sealed, 'webhook-endpoint:we_A')).toEqual({ plain: Buffer.from('whsec_x'), current: true })
    expect(() => box.open(sealed, 'webhook-endpoint:we_B')).toThrow(new SecretUnreadableError('webhook-endpoint:we_B'))
    expect(() => new SecretBox('other'.repeat(8)).open(sealed, 'webhook-endpoint:we_A')).toThrow(SecretUnreadableError)
  })

  it('opens what a previous key sealed, saying it is not current; and what was sealed before contexts were bound, with any context', () => {
    const old = new SecretBox('old'.repeat(11))
    const box = new SecretBox('new'.repeat(11), ['other'.repeat(8), 'old'.repeat(11)])
    expect(box.open(old.seal(Buffer.from('s'), 'c'), 'c')).toEqual({ plain: Buffer.from('s'), current: false })
    // The format before contexts: the base64 of iv, tag and body, without `v1.`, and no associated data.
    const unbound = Buffer.from(new SecretBox('new'.repeat(11)).seal(Buffer.from('s'), '').slice(3), 'base64').toString('base64')
    expect(box.open(unbound, 'anything')).toEqual({ plain: Buffer.from('s'), current: false })
    expect(() => box.open('v1.', 'c')).toThrow(SecretUnreadableError)
    expect(() => box.open(`v1.${Buffer.alloc(27).toString('base64')}`, 'c')).toThrow(SecretUnreadableError)
  })

  it('opens an empty secret sealed whole (28 bytes: iv and tag only), and not one cut short', () => {
    const box = new SecretBox('k'.repeat(32))
    const sealed = box.seal(Buffer.alloc(0), 'c')
    expect(box.open(sealed, 'c')).toEqual({ plain: Buffer.alloc(0), current: true })
    // Node's GCM checks a tag cut to as few as 4 bytes, and a cut tag of an empty body still matches: only a whole 16-byte tag is taken.
    const bytes = Buffer.from(sealed.slice(3), 'base64')
    for (const length of [16, 27]) expect(() => box.open(`v1.${bytes.subarray(0, length).toString('base64')}`, 'c')).toThrow(SecretUnreadableError)
  })

  it('seals again under the current key each secret a previous key sealed, and leaves alone what no key opens', () => {
    const old = new SecretBox('old'.repeat(11))
    const box = new SecretBox('new'.repeat(11), ['old'.repeat(11)])
    const record = endpoint()
    const context = secretContext(record.id)
    expect(context).toBe('webhook-endpoint:we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2')
    const current = box.seal(Buffer.from('whsec_a'), context)
    expect(resealed(endpoint({ secrets: [{ sealed: current, expiresAt: null }] }), box)).toBeUndefined()
    const lost = new SecretBox('lost'.repeat(8)).seal(Buffer.from('whsec_c'), context)
    const after = resealed(endpoint({ secrets: [{ sealed: old.seal(Buffer.from('whsec_b'), context), expiresAt: null }, { sealed: lost, expiresAt: T0 }] }), box)
    expect(after?.secrets[1]).toEqual({ sealed: lost, expiresAt: T0 })
    expect(after?.secrets[0]?.expiresAt).toBeNull()
    expect(box.open(after?.secrets[0]?.sealed as string, context)).toEqual({ plain: Buffer.from('whsec_b'), current: true })
    expect({ ...after, secrets: [] }).toEqual({ ...endpoint(), secrets: [] })
  })
})

describe('the endpoints API\'s bodies', () => {
  const flags = { allowHttp: false, allowPrivate: false }
  const types = ['property.updated', 'guest.created']

  it('takes no body as an empty one, and refuses one that is not an object', () => {
    expect(bodyOf(undefined, ['a'])).toEqual({})
    expect(bodyOf(null, ['a'])).toEqual({})
    const notObject = { code: 'VALIDATION_FAILED', detail: 'The body must be a JSON object.', errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }] }
    expect(refusal(() => bodyOf([], ['a']))).toEqual(notObject)
    expect(refusal(() => bodyOf('x', ['a']))).toEqual(notObject)
    expect(refusal(() => bodyOf(1, ['a']))).toEqual(notObject)
  })

  it('names every field an operation does not take, with the known name that matches ignoring case', () => {
    expect(bodyOf({ url: 'u' }, ['url', 'eventTypes'])).toEqual({ url: 'u' })
    expect(refusal(() => bodyOf({ URL: 1 }, ['url']))).toEqual({
      code: 'UNKNOWN_BODY_FIELD', detail: 'The body has a field this operation does not take: URL.',
      errors: [{ field: 'URL', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'URL\'. Did you mean \'url\'?' }],
    })
    expect(refusal(() => bodyOf({ url: 'u', a: 1, b: 2 }, ['url']))).toEqual({
      code: 'UNKNOWN_BODY_FIELD', detail: 'The body has fields this operation does not take: a, b.',
      errors: [
        { field: 'a', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'a\'.' },
        { field: 'b', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'b\'.' },
      ],
    })
  })

  it('says how many fields are bad', () => {
    expect(failed([{ field: 'a', code: 'REQUIRED', detail: 'a.' }]).detail).toBe('The body has a field with a bad value.')
    expect(failed([{ field: 'a', code: 'REQUIRED', detail: 'a.' }, { field: 'b', code: 'REQUIRED', detail: 'b.' }]).detail).toBe('The body has fields with a bad value.')
  })

  it('keeps a URL as the gateway parsed it, or says why it may not be one', () => {
    const errors: unknown[] = []
    expect(checkUrl('HTTPS://Hooks.Example.COM:443/a b?x=ü', flags, errors as never)).toBe('https://hooks.example.com/a%20b?x=%C3%BC')
    expect(checkUrl(undefined, flags, errors as never)).toBeUndefined()
    expect(checkUrl(42, flags, errors as never)).toBeUndefined()
    expect(checkUrl('http://hooks.example.com/', flags, errors as never)).toBeUndefined()
    expect(checkUrl('http://hooks.example.com/', { allowHttp: true, allowPrivate: false }, errors as never)).toBe('http://hooks.example.com/')
    // 2,048 characters as sent, longer once percent-encoded.
    const long = `https://hooks.example.com/${'é'.repeat(2022)}`
    expect(long).toHaveLength(2048)
    expect(checkUrl(long, flags, errors as never)).toBeUndefined()
    const exact = `https://hooks.example.com/${'a'.repeat(2022)}`
    expect(checkUrl(exact, flags, errors as never)).toBe(exact)
    expect(errors).toEqual([
      { field: 'url', code: 'REQUIRED', detail: 'url is required.' },
      { field: 'url', code: 'INVALID_FORMAT', detail: 'url must be a string: an absolute https URL.' },
      { field: 'url', code: 'NOT_ALLOWED', detail: 'url must use https.' },
      { field: 'url', code: 'NOT_ALLOWED', detail: `url must be at most 2048 characters once normalised (it is ${26 + 2022 * 6}).` },
    ])
  })

  it('keeps each event type once, in the order given, and refuses none, a list that is not of texts or too long, and unknown types', () => {
    const errors: unknown[] = []
    expect(checkTypes(['guest.created', 'property.updated', 'guest.created'], types, errors as never)).toEqual(['guest.created', 'property.updated'])
    expect(checkTypes(Array.from({ length: 100 }, () => 'guest.created'), types, errors as never)).toEqual(['guest.created'])
    for (const value of [undefined, [], 'guest.created', [1], ['guest.created', 1], Array.from({ length: 101 }, () => 'guest.created'), ['x'], ['x', 'guest.created', 'y']]) {
      expect(checkTypes(value, types, errors as never)).toBeUndefined()
    }
    const required = { field: 'eventTypes', code: 'REQUIRED', detail: 'eventTypes must name at least one event type.' }
    const format = { field: 'eventTypes', code: 'INVALID_FORMAT', detail: 'eventTypes must be a list of 1 to 100 event types.' }
    expect(errors).toEqual([
      required, required, format, format, format, format,
      { field: 'eventTypes', code: 'INVALID_ENUM_VALUE', detail: 'Unknown event type: \'x\'; the types are property.updated, guest.created.' },
      { field: 'eventTypes', code: 'INVALID_ENUM_VALUE', detail: 'Unknown event types: \'x\', \'y\'; the types are property.updated, guest.created.' },
    ])
  })

  it('takes a description of up to 500 characters, or null to clear it', () => {
    const errors: unknown[] = []
    expect(checkDescription(undefined, errors as never)).toBeUndefined()
    expect(checkDescription(null, errors as never)).toBeNull()
    expect(checkDescription('', errors as never)).toBe('')
    expect(checkDescription('d'.repeat(500), errors as never)).toBe('d'.repeat(500))
    expect(checkDescription('d'.repeat(501), errors as never)).toBeUndefined()
    expect(checkDescription(5, errors as never)).toBeUndefined()
    expect(errors).toEqual([
      { field: 'description', code: 'OUT_OF_RANGE', detail: 'description must be at most 500 characters.' },
      { field: 'description', code: 'INVALID_FORMAT', detail: 'description must be a text, or null.' },
    ])
  })

  it('takes a status of enabled or disabled', () => {
    const errors: unknown[] = []
    expect(checkStatus(undefined, errors as never)).toBeUndefined()
    expect(checkStatus('enabled', errors as never)).toBe('enabled')
    expect(checkStatus('disabled', errors as never)).toBe('disabled')
    expect(checkStatus('Enabled', errors as never)).toBeUndefined()
    expect(errors).toEqual([{ field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is "enabled" or "disabled".' }])
  })

  it('makes a new endpoint of url, eventTypes and description, naming every bad field at once', () => {
    expect(endpointInput({ url: 'https://hooks.example.com/x', eventTypes: ['guest.created'] }, types, flags))
      .toEqual({ url: 'https://hooks.example.com/x', eventTypes: ['guest.created'], description: null })
    expect(endpointInput({ url: 'https://hooks.example.com/x', eventTypes: ['guest.created'], description: 'd' }, types, flags))
      .toEqual({ url: 'https://hooks.example.com/x', eventTypes: ['guest.created'], description: 'd' })
    expect(refusal(() => endpointInput({ description: 1 }, types, flags))).toEqual({
      code: 'VALIDATION_FAILED', detail: 'The body has fields with a bad value.',
      errors: [
        { field: 'url', code: 'REQUIRED', detail: 'url is required.' },
        { field: 'eventTypes', code: 'REQUIRED', detail: 'eventTypes must name at least one event type.' },
        { field: 'description', code: 'INVALID_FORMAT', detail: 'description must be a text, or null.' },
      ],
    })
    expect(refusal(() => endpointInput({ url: 'https://hooks.example.com/x', eventTypes: ['guest.created'], status: 'enabled' }, types, flags)).code).toBe('UNKNOWN_BODY_FIELD')
  })

  it('changes only the fields a PATCH names, naming every bad field at once', () => {
    // Strictly: a field not sent is absent from the changes, not there as undefined.
    expect(endpointChanges({}, types, flags)).toStrictEqual({})
    expect(endpointChanges(undefined, types, flags)).toStrictEqual({})
    expect(endpointChanges({ url: 'https://hooks.example.com/y', eventTypes: ['guest.created'], description: null, status: 'disabled' }, types, flags))
      .toEqual({ url: 'https://hooks.example.com/y', eventTypes: ['guest.created'], description: null, status: 'disabled' })
    expect(endpointChanges({ description: 'd' }, types, flags)).toStrictEqual({ description: 'd' })
    expect(refusal(() => endpointChanges({ url: 'ftp://x', eventTypes: [], description: 2, status: 'on' }, types, flags))).toEqual({
      code: 'VALIDATION_FAILED', detail: 'The body has fields with a bad value.',
      errors: [
        { field: 'url', code: 'NOT_ALLOWED', detail: 'url must use https.' },
        { field: 'eventTypes', code: 'REQUIRED', detail: 'eventTypes must name at least one event type.' },
        { field: 'description', code: 'INVALID_FORMAT', detail: 'description must be a text, or null.' },
        { field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is "enabled" or "disabled".' },
      ],
    })
    expect(refusal(() => endpointChanges({ status: 'on' }, types, flags))).toEqual({
      code: 'VALIDATION_FAILED', detail: 'The body has a field with a bad value.', errors: [{ field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is "enabled" or "disabled".' }],
    })
  })

  it('applies a partner\'s changes: enabling clears the reason and the failures, disabling says the partner did it', () => {
    const updatedAt = '2026-11-28T12:00:00.000Z'
    expect(applyChanges(endpoint(), {}, T0)).toEqual(endpoint({ updatedAt }))
    expect(applyChanges(endpoint(), { url: 'https://hooks.example.com/y', eventTypes: ['guest.created'], description: 'd' }, T0))
      .toEqual(endpoint({ url: 'https://hooks.example.com/y', eventTypes: ['guest.created'], description: 'd', updatedAt }))
    expect(applyChanges(endpoint({ description: 'd' }), { description: null }, T0)).toEqual(endpoint({ updatedAt }))
    expect(applyChanges(endpoint({ status: 'disabled', disabledReason: 'failing', failingSince: T0 - HOUR }), { status: 'enabled' }, T0)).toEqual(endpoint({ updatedAt }))
    expect(applyChanges(endpoint({ failingSince: T0 - HOUR }), { status: 'disabled' }, T0))
      .toEqual(endpoint({ status: 'disabled', disabledReason: 'partner', failingSince: T0 - HOUR, updatedAt }))
    expect(applyChanges(endpoint({ status: 'disabled', disabledReason: 'gone' }), { status: 'disabled' }, T0))
      .toEqual(endpoint({ status: 'disabled', disabledReason: 'gone', updatedAt }))
  })

  it('rotates a secret: the current one signs beside the new one for 24 hours, older ones end, one that cannot sign ends now', () => {
    expect(ROTATION_OVERLAP_MS).toBe(86_400_000)
    const record = endpoint({ secrets: [{ sealed: 'v1.b', expiresAt: null }, { sealed: 'v1.a', expiresAt: T0 + HOUR }] })
    expect(rotated(record, 'v1.c', T0)).toEqual(endpoint({ secrets: [{ sealed: 'v1.c', expiresAt: null }, { sealed: 'v1.b', expiresAt: T0 + 86_400_000 }], updatedAt: '2026-11-28T12:00:00.000Z' }))
    expect(rotated(record, 'v1.c', T0, (s) => s.sealed !== 'v1.b')).toEqual(endpoint({ secrets: [{ sealed: 'v1.c', expiresAt: null }], updatedAt: '2026-11-28T12:00:00.000Z' }))
    expect(rotated(endpoint({ secrets: [] }), 'v1.c', T0)).toEqual(endpoint({ secrets: [{ sealed: 'v1.c', expiresAt: null }], updatedAt: '2026-11-28T12:00:00.000Z' }))
  })

  it('shows a partner its endpoint without the secrets, the credential or the failures', () => {
    expect(viewOf(endpoint({ failingSince: T0 }))).toEqual({
      id: 'we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2', url: 'https://hooks.example.com/acme', eventTypes: ['property.updated'], description: null,
      status: 'enabled', disabledReason: null, createdAt: '2026-11-28T10:00:00.000Z', updatedAt: '2026-11-28T11:00:00.000Z',
    })
  })
})

describe('the webhooks\' config', () => {
  const events = z.object(webhookFields)
  const env = z.object(webhookEnvFields)

  it('has the documented defaults', () => {
    expect(events.parse({})).toEqual({
      maxEndpointsPerCredential: 10, maxManualDeliveriesPerEndpoint: 100, maxRecoveryEvents: 10_000, deliveryTimeoutMs: 15_000,
      retrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000], disableAfterHours: 120, endpointConcurrency: 4, deliveryWorkers: 64,
      deliveryLockSeconds: 20, allowPrivateTargets: false, allowHttp: false, workers: true,
    })
  })

  it('takes each field at its bounds and refuses it past them', () => {
    const edges: [string, unknown, unknown][] = [
      ['maxEndpointsPerCredential', [1, 1000], [0, 1001, 1.5]],
      ['maxManualDeliveriesPerEndpoint', [1, 100_000], [0, 100_001]],
      ['maxRecoveryEvents', [1, 100_000], [0, 100_001]],
      ['deliveryTimeoutMs', [100, 60_000], [99, 60_001]],
      ['retrySchedule', [[0.5], Array.from({ length: 20 }, () => 604_800)], [[], [0], [604_801], Array.from({ length: 21 }, () => 1)]],
      ['disableAfterHours', [0.5, 2160], [0, 2161]],
      ['endpointConcurrency', [1, 100], [0, 101]],
      ['deliveryWorkers', [1, 1000], [0, 1001]],
      ['deliveryLockSeconds', [0.5, 600], [0, 601]],
    ]
    for (const [field, good, bad] of edges) {
      for (const value of good as unknown[]) expect(events.safeParse({ [field]: value }).success, `${field} ${JSON.stringify(value)}`).toBe(true)
      for (const value of bad as unknown[]) expect(events.safeParse({ [field]: value }).success, `${field} ${JSON.stringify(value)}`).toBe(false)
    }
  })

  it('takes keys of 32 characters or more, the previous ones comma-separated', () => {
    const k = 'k'.repeat(32)
    expect(env.parse({ EVENTS_WORKER: 'only', WEBHOOKS_SECRET_KEY: k, WEBHOOKS_SECRET_KEY_PREVIOUS: `${k}, ${'p'.repeat(32)}` }))
      .toEqual({ EVENTS_WORKER: 'only', WEBHOOKS_SECRET_KEY: k, WEBHOOKS_SECRET_KEY_PREVIOUS: `${k}, ${'p'.repeat(32)}` })
    expect(env.safeParse({ WEBHOOKS_SECRET_KEY: 'k'.repeat(31) }).error?.issues.map((i) => i.message)).toEqual(['must be at least 32 characters'])
    // The spaces around a previous key are not part of it, so they do not count towards its 32 characters.
    for (const previous of [`${k},short`, `${k}, ${'p'.repeat(31)} `]) {
      expect(env.safeParse({ WEBHOOKS_SECRET_KEY_PREVIOUS: previous }).error?.issues.map((i) => i.message))
        .toEqual(['must be a comma-separated list of keys of at least 32 characters each'])
    }
    expect(env.safeParse({ EVENTS_WORKER: 'yes' }).success).toBe(false)
    expect(webhookKeys({ WEBHOOKS_SECRET_KEY: k, WEBHOOKS_SECRET_KEY_PREVIOUS: ` ${k} ,${'p'.repeat(32)}` })).toEqual({ webhooksSecretKey: k, webhooksPreviousKeys: [k, 'p'.repeat(32)] })
    expect(webhookKeys({})).toEqual({ webhooksSecretKey: undefined, webhooksPreviousKeys: [] })
  })

  it('needs a key of its own when the config declares events', () => {
    expect(webhookKeyProblems(0, {})).toEqual([])
    expect(webhookKeyProblems(2, { WEBHOOKS_SECRET_KEY: 'k'.repeat(32) })).toEqual([])
    expect(webhookKeyProblems(1, {})).toEqual([
      'environment WEBHOOKS_SECRET_KEY: required when events.types declares events (webhook signing secrets are sealed with it); at least 32 characters',
    ])
  })
})
