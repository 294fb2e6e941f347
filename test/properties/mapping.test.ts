import { describe, expect, it } from 'vitest'
import { propertySchema } from '../../src/contract/property.js'
import { toProperty, toUtcMillis } from '../../src/properties/mapping.js'
import { ContractError } from '../../src/upstream/errors.js'
import { parseHotel } from '../../src/upstream/pms-record.js'

const RECORD = {
  hotel_uuid: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10',
  chain_code: 'ACME',
  display_name: 'Acme Paris Opéra',
  short_code: 'ACMPAR',
  lifecycle: 'LIVE',
  tz_name: 'Europe/Paris',
  created_epoch_ms: 1699999999123,
  last_modified: '2024-05-01T14:03:12.5+02:00',
  pms_shard: 'eu-west-3',
  owner_account_ref: 'OA-00123',
  legacy_property_no: 1234,
  billing_plan: 'ENTERPRISE',
  internal_notes: 'VIP owner, call before changes',
  channel_config: { ota: ['x', 'y'], sync: true },
}

const map = (overrides: Record<string, unknown> = {}) => toProperty(parseHotel('pms', { ...RECORD, ...overrides }))

describe('PMS record -> Property (docs/architecture.md, "The PMS")', () => {
  it('maps the example record field by field, in the public order, and nothing else', () => {
    const property = map()
    expect(JSON.stringify(property)).toBe(JSON.stringify({
      object: 'property',
      id: '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10',
      name: 'Acme Paris Opéra',
      code: 'ACMPAR',
      status: 'active',
      timezone: 'Europe/Paris',
      createdAt: '2023-11-14T22:13:19.123Z',
      updatedAt: '2024-05-01T12:03:12.500Z',
    }))
    expect(propertySchema.parse(property)).toEqual(property)
  })

  it('lets no internal field or value through, whatever the PMS adds', () => {
    const text = JSON.stringify(map({ secret_new_field: 'TOP-SECRET', chain_code: 'ACME' }))
    for (const leak of ['chain_code', 'ACME"', 'pms_shard', 'eu-west-3', 'OA-00123', 'ENTERPRISE', 'VIP owner', 'channel_config', 'TOP-SECRET', 'lifecycle', 'LIVE']) {
      expect(text).not.toContain(leak)
    }
  })

  it.each([['', null], [null, null], [undefined, null], ['X1', 'X1']])('maps short_code %j to code %j', (shortCode, code) => {
    const record: Record<string, unknown> = { ...RECORD, short_code: shortCode }
    if (shortCode === undefined) delete record.short_code
    expect(toProperty(parseHotel('pms', record)).code).toBe(code)
  })

  it.each([['LIVE', 'active'], ['ONBOARDING', 'inactive'], ['SUSPENDED', 'inactive'], ['OFFBOARDED', 'inactive'], ['SOMETHING_NEW', 'inactive'], ['live', 'inactive']])(
    'maps lifecycle %s to %s', (lifecycle, status) => {
      expect(map({ lifecycle }).status).toBe(status)
    })

  it.each([
    ['2024-05-01T14:03:12+02:00', '2024-05-01T12:03:12.000Z'],
    ['2024-05-01T14:03:12.1Z', '2024-05-01T14:03:12.100Z'],
    ['2024-05-01T14:03:12.123456789-05:30', '2024-05-01T19:33:12.123Z'],
    ['2024-05-01t00:00:00.999999999z', '2024-05-01T00:00:00.999Z'],
    ['2024-01-01T00:30:00+01:00', '2023-12-31T23:30:00.000Z'],
    ['2024-02-29T23:59:59.9999-00:00', '2024-02-29T23:59:59.999Z'],
  ])('converts last_modified %s to %s', (input, output) => {
    expect(toUtcMillis(input)).toBe(output)
    expect(map({ last_modified: input }).updatedAt).toBe(output)
  })

  it.each(['2024-02-30T00:00:00Z', '2024-13-01T00:00:00Z', '2024-05-01T24:00:00Z', '2024-05-01 14:03:12Z', '2024-05-01T14:03:12.1234567890Z', '2024-05-01T14:03:12',
    '2024-05-01T14:03:12.Z', '2024-05-01T14:03:12+24:00', '2024-05-01T14:03:12+05:60', '2024-05-01T14:03:12+0530', '2024-05-01T14:03:12Z ', '2024-5-01T14:03:12Z'])(
    'refuses last_modified %s', (input) => {
      expect(toUtcMillis(input)).toBeUndefined()
    })

  it.each([
    ['tz_name', { tz_name: 'CEST' }],
    ['tz_name', { tz_name: '+02:00' }],
    ['tz_name', { tz_name: 'Mars/Olympus_Mons' }],
    ['tz_name', { tz_name: undefined }],
    ['created_epoch_ms', { created_epoch_ms: '1699999999123' }],
    ['created_epoch_ms', { created_epoch_ms: 1.5 }],
    ['display_name', { display_name: 42 }],
    ['hotel_uuid', { hotel_uuid: '3F0C6F2E-8F0A-4A57-9D0E-2D6F5D1B7A10' }],
    ['last_modified', { last_modified: 'yesterday' }],
    ['lifecycle', { lifecycle: undefined }],
  ])('refuses a record whose %s breaks the contract, naming record and field', (field, overrides) => {
    const record: Record<string, unknown> = { ...RECORD, ...overrides }
    for (const [k, v] of Object.entries(overrides)) if (v === undefined) delete record[k]
    let error: unknown
    try {
      parseHotel('pms', record)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ContractError)
    expect(error).toMatchObject({ field, record: typeof record.hotel_uuid === 'string' ? record.hotel_uuid : '(no hotel_uuid)' })
  })

  it('refuses a last_modified that looks right but is not a date', () => {
    expect(() => map({ last_modified: '2023-02-29T10:00:00Z' })).toThrow(ContractError)
  })

  it('accepts IANA aliases and Etc zones', () => {
    expect(map({ tz_name: 'UTC' }).timezone).toBe('UTC')
    expect(map({ tz_name: 'Etc/GMT+5' }).timezone).toBe('Etc/GMT+5')
    expect(map({ tz_name: 'America/Argentina/Buenos_Aires' }).timezone).toBe('America/Argentina/Buenos_Aires')
  })
})
