import { describe, expect, it } from 'vitest'
import { refusal } from '../helpers/problem.js'
import {
  canonicalId, countedAs, endpointDisabled, feedWindow, recoveryInProgress, recoveryInput, recoveryJobId, recoveryNotFound, recoveryView, tooManyEvents, ulidOfRecoveryJob,
} from '../../src/webhooks/recovery.js'

// The rules of a recovery (docs/partners.md, "After an outage: recover"), without a gateway:
// what a request may ask for, the problems it is refused with, what a recovery looks like,
// the ids of its deliveries and how they count.

const NOW = Date.parse('2026-11-28T12:00:00.000Z')
const DAY = 86_400_000
const RETENTION = 30 * DAY

const bad = (field: string, code: string, detail: string): unknown => ({
  code: 'VALIDATION_FAILED', detail: 'The body has a field with a bad value.', errors: [{ field, code, detail }],
})

describe('what a request may ask for', () => {
  it('takes since, until and include; until defaults to now and include to failed', () => {
    expect(recoveryInput({ since: '2026-11-28T10:00:00Z' }, NOW, RETENTION)).toEqual({ since: Date.parse('2026-11-28T10:00:00Z'), until: NOW, include: 'failed' })
    expect(recoveryInput({ since: '2026-11-28T10:00:00+01:00', until: '2026-11-28T11:00:00.250Z', include: 'all' }, NOW, RETENTION))
      .toEqual({ since: Date.parse('2026-11-28T09:00:00Z'), until: Date.parse('2026-11-28T11:00:00.250Z'), include: 'all' })
    expect(recoveryInput({ since: '2026-11-28T10:00:00Z', include: 'failed' }, NOW, RETENTION).include).toBe('failed')
  })

  it('covers only the whole milliseconds within a range given between two of them', () => {
    expect(recoveryInput({ since: '2026-11-28T10:00:00.0005Z', until: '2026-11-28T11:00:00.0005Z' }, NOW, RETENTION))
      .toEqual({ since: Date.parse('2026-11-28T10:00:00.001Z'), until: Date.parse('2026-11-28T11:00:00.000Z'), include: 'failed' })
  })

  it('accepts the edges: since exactly at the retention, until exactly now, until equal to since', () => {
    const oldest = new Date(NOW - RETENTION).toISOString()
    expect(recoveryInput({ since: oldest }, NOW, RETENTION).since).toBe(NOW - RETENTION)
    const now = new Date(NOW).toISOString()
    expect(recoveryInput({ since: now, until: now }, NOW, RETENTION)).toEqual({ since: NOW, until: NOW, include: 'failed' })
  })

  it('refuses since missing, not RFC 3339, or before the retention', () => {
    expect(refusal(() => recoveryInput({}, NOW, RETENTION))).toEqual(bad('since', 'REQUIRED', 'since is required: the start of the time range to recover.'))
    expect(refusal(() => recoveryInput(undefined, NOW, RETENTION))).toEqual(bad('since', 'REQUIRED', 'since is required: the start of the time range to recover.'))
    const format = 'since must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.'
    // A list holding a date-time is not one (its text would be).
    for (const since of ['2026-11-28', '2026-11-28T10:00:00', 12, '2026-02-30T10:00:00Z', null, ['2026-11-28T10:00:00Z']]) {
      expect(refusal(() => recoveryInput({ since }, NOW, RETENTION))).toEqual(bad('since', 'INVALID_FORMAT', format))
    }
    expect(refusal(() => recoveryInput({ since: new Date(NOW - RETENTION - 1).toISOString() }, NOW, RETENTION)))
      .toEqual(bad('since', 'OUT_OF_RANGE', 'since must be within the events\' retention of 30 days: no earlier than 2026-10-29T12:00:00.000Z.'))
    expect(refusal(() => recoveryInput({ since: new Date(NOW - 2 * DAY - 1).toISOString() }, NOW, 2 * DAY)))
      .toEqual(bad('since', 'OUT_OF_RANGE', 'since must be within the events\' retention of 2 days: no earlier than 2026-11-26T12:00:00.000Z.'))
  })

  it('refuses until not RFC 3339, in the future, or before since', () => {
    const since = '2026-11-28T10:00:00Z'
    expect(refusal(() => recoveryInput({ since, until: 'now' }, NOW, RETENTION)))
      .toEqual(bad('until', 'INVALID_FORMAT', 'until must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.'))
    expect(refusal(() => recoveryInput({ since, until: new Date(NOW + 1).toISOString() }, NOW, RETENTION))).toEqual(bad('until', 'OUT_OF_RANGE', 'until must not be in the future.'))
    expect(refusal(() => recoveryInput({ since, until: '2026-11-28T09:59:59.999Z' }, NOW, RETENTION))).toEqual(bad('until', 'OUT_OF_RANGE', 'until must not be before since.'))
    // A future until is said once, even when since is after it too.
    expect(refusal(() => recoveryInput({ since: new Date(NOW + 2000).toISOString(), until: new Date(NOW + 1000).toISOString() }, NOW, RETENTION)))
      .toEqual(bad('until', 'OUT_OF_RANGE', 'until must not be in the future.'))
  })

  it('refuses an include that is neither failed nor all', () => {
    const since = '2026-11-28T10:00:00Z'
    expect(refusal(() => recoveryInput({ since, include: 'ALL' }, NOW, RETENTION))).toEqual(bad('include', 'INVALID_ENUM_VALUE', 'include must be one of \'failed\', \'all\', not \'ALL\'.'))
    expect(refusal(() => recoveryInput({ since, include: 3 }, NOW, RETENTION))).toEqual(bad('include', 'INVALID_ENUM_VALUE', 'include must be one of \'failed\', \'all\'.'))
  })

  it('names every bad field at once, and an unknown field before any value', () => {
    expect(refusal(() => recoveryInput({ since: 'x', until: 'y', include: 'z' }, NOW, RETENTION))).toEqual({
      code: 'VALIDATION_FAILED', detail: 'The body has fields with a bad value.',
      errors: [
        { field: 'since', code: 'INVALID_FORMAT', detail: 'since must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.' },
        { field: 'until', code: 'INVALID_FORMAT', detail: 'until must be an RFC 3339 date-time with an offset, such as 2026-11-20T08:00:00Z.' },
        { field: 'include', code: 'INVALID_ENUM_VALUE', detail: 'include must be one of \'failed\', \'all\', not \'z\'.' },
      ],
    })
    expect(refusal(() => recoveryInput({ since: 'x', endpointId: 'we_1' }, NOW, RETENTION))).toEqual({
      code: 'UNKNOWN_BODY_FIELD', detail: 'The body has a field this operation does not take: endpointId.',
      errors: [{ field: 'endpointId', code: 'UNKNOWN_PARAMETER', detail: 'Unknown field \'endpointId\'.' }],
    })
  })
})

describe('the problems of a recovery', () => {
  it('says what each refusal is', () => {
    expect(refusal(() => { throw tooManyEvents(10_000) })).toEqual(bad('since', 'OUT_OF_RANGE',
      'The time range holds more than 10000 events to send, as many as one recovery may; choose a later since (or an earlier until), and recover the rest in another recovery once this one is done.'))
    expect(refusal(() => { throw endpointDisabled('we_A') })).toEqual({
      code: 'VALIDATION_FAILED', detail: 'Webhook endpoint \'we_A\' is disabled; enable it (PATCH with status \'enabled\') before recovering events to it.',
      errors: [{ field: 'endpointId', code: 'NOT_ALLOWED', detail: 'A recovery needs an enabled endpoint.' }],
    })
    expect(refusal(() => { throw recoveryInProgress('we_A', 'wr_B') })).toEqual({
      code: 'WEBHOOK_RECOVERY_IN_PROGRESS', detail: 'Webhook endpoint \'we_A\' is running recovery \'wr_B\'; wait until it is done, or cancel it, before asking for another.', errors: [],
    })
    expect(refusal(() => { throw recoveryNotFound('wr_b') })).toEqual({ code: 'WEBHOOK_RECOVERY_NOT_FOUND', detail: 'No recovery with id \'wr_b\' exists for this webhook endpoint.', errors: [] })
  })
})

describe('ids, counts and views', () => {
  it('keeps an id as its prefix and the ULID upper-cased', () => {
    expect(canonicalId('wr_01jdz8q3w4x5y6z7a8b9c0d1e2')).toBe('wr_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2')
    expect(canonicalId('we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2')).toBe('we_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2')
  })

  it('names a recovery delivery by its recovery and event, and reads the event back', () => {
    const id = recoveryJobId('wr_01JDZ8Q3W4X5Y6Z7A8B9C0D1E2', '01JDZ8Q3W4X5Y6Z7A8B9C0D1E3')
    expect(id).toBe('r.01JDZ8Q3W4X5Y6Z7A8B9C0D1E2.01JDZ8Q3W4X5Y6Z7A8B9C0D1E3')
    expect(ulidOfRecoveryJob(id)).toBe('01JDZ8Q3W4X5Y6Z7A8B9C0D1E3')
    expect(recoveryJobId('wr_X', '')).toBe('r.X.')
  })

  it('queues as many at once as the endpoint has leases', () => {
    expect(feedWindow(1)).toBe(1)
    expect(feedWindow(4)).toBe(4)
  })

  it('counts a delivery as delivered only when its attempt was', () => {
    expect(countedAs('delivered')).toBe('delivered')
    for (const result of ['failed', 'endpoint deleted', 'endpoint disabled', 'event not visible', 'credential sees nothing', undefined]) expect(countedAs(result)).toBe('failed')
  })

  it('shows a stored recovery with its times in UTC milliseconds and its counts as numbers', () => {
    expect(recoveryView({
      id: 'wr_A', endpointId: 'we_B', brand: 'acme', mode: 'live', since: String(Date.parse('2026-11-27T10:00:00Z')), until: String(NOW), include: 'all',
      status: 'running', queued: '5', delivered: '2', failed: '1', cursor: '4', createdAt: String(NOW + 5),
    })).toEqual({
      id: 'wr_A', endpointId: 'we_B', since: '2026-11-27T10:00:00.000Z', until: '2026-11-28T12:00:00.000Z', include: 'all',
      status: 'running', queued: 5, delivered: 2, failed: 1, createdAt: '2026-11-28T12:00:00.005Z',
    })
    expect(recoveryView({ id: 'wr_A', endpointId: 'we_B', since: '0', until: '0', include: 'failed', status: 'done', queued: '0', createdAt: '0' }))
      .toMatchObject({ queued: 0, delivered: 0, failed: 0 })
  })
})
