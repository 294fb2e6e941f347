// Generated hotel records for the stand-in PMS: several chains, every lifecycle, and the
// awkward values the PMS allows (empty, null and absent short codes, any Unicode in names,
// RFC 3339 times with any offset and 0 to 9 fraction digits, unknown lifecycles, internal
// fields). Deterministic for a seed, so tests and the demo see the same data every run.

import { prng, uuid } from '../random.js'

export type Hotel = Record<string, unknown>

const CHAINS = [
  { code: 'ACME', prefix: 'Acme', count: 60 },
  { code: 'GLBX', prefix: 'Globex', count: 30 },
  { code: 'INIT', prefix: 'Initech Inn', count: 12 },
]
const CITIES = [
  ['Paris Opéra', 'Europe/Paris', 'PAR'], ['Lisboa Alfama', 'Europe/Lisbon', 'LIS'], ['München Zentrum', 'Europe/Berlin', 'MUC'],
  ['New York Midtown', 'America/New_York', 'NYC'], ['São Paulo Paulista', 'America/Sao_Paulo', 'SAO'], ['東京 銀座', 'Asia/Tokyo', 'TYO'],
  ['Kraków Stare Miasto', 'Europe/Warsaw', 'KRK'], ['Reykjavík Harbour 🌋', 'Atlantic/Reykjavik', 'REK'], ['Kolkata', 'Asia/Kolkata', 'CCU'],
  ['Adelaide', 'Australia/Adelaide', 'ADL'], ['Kathmandu', 'Asia/Kathmandu', 'KTM'], ['Honolulu', 'Pacific/Honolulu', 'HNL'],
] as const
const LIFECYCLES = ['LIVE', 'LIVE', 'LIVE', 'LIVE', 'LIVE', 'ONBOARDING', 'SUSPENDED', 'OFFBOARDED', 'PAUSED_FOR_RENOVATION'] as const
const OFFSETS = ['Z', '+02:00', '-05:00', '+05:30', '+00:00', '-09:30', 'z', '+14:00']

function rfc3339(epochMs: number, random: () => number): string {
  const offset = OFFSETS[Math.floor(random() * OFFSETS.length)] as string
  const minutes = offset.toUpperCase() === 'Z' ? 0 : (offset.startsWith('-') ? -1 : 1) * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6)))
  const local = new Date(epochMs + minutes * 60_000).toISOString().slice(0, 19)
  const digits = Math.floor(random() * 10) // 0 to 9 fraction digits
  const fraction = digits === 0 ? '' : `.${`${String(epochMs % 1000).padStart(3, '0')}123456`.slice(0, digits)}`
  return `${local}${fraction}${offset}`
}

export function generateHotels(seed = 1, scale = 1): Hotel[] {
  const random = prng(seed)
  const hotels: Hotel[] = []
  const start = Date.UTC(2019, 0, 1)
  for (const chain of CHAINS) {
    for (let i = 0; i < chain.count * scale; i += 1) {
      const [city, tz, cityCode] = CITIES[Math.floor(random() * CITIES.length)] as (typeof CITIES)[number]
      // Some hotels share a creation time, so the id decides their order.
      const created = start + Math.floor(random() * 40) * 86_400_000 * 30 + (i % 7 === 0 ? 0 : Math.floor(random() * 86_400_000))
      const modified = created + Math.floor(random() * 400 * 86_400_000)
      const shortCodeKind = i % 5
      const hotel: Hotel = {
        hotel_uuid: uuid(random),
        chain_code: chain.code,
        display_name: `${chain.prefix} ${city}${i >= CITIES.length ? ` ${i}` : ''}`,
        lifecycle: LIFECYCLES[Math.floor(random() * LIFECYCLES.length)],
        tz_name: tz,
        created_epoch_ms: created,
        last_modified: rfc3339(modified, random),
        pms_shard: ['eu-west-3', 'us-east-1', 'ap-northeast-1'][i % 3],
        owner_account_ref: `OA-${String(10000 + i).padStart(5, '0')}`,
        legacy_property_no: 1000 + i,
        billing_plan: ['ENTERPRISE', 'GROWTH', 'STARTER'][i % 3],
        internal_notes: i % 4 === 0 ? 'VIP owner, call before changes' : '',
        channel_config: { ota: ['x', 'y'], sync: i % 2 === 0 },
      }
      // short_code: a value, "", null, or absent: all but the first mean "none".
      if (shortCodeKind <= 1) hotel.short_code = `${chain.code.slice(0, 3)}${cityCode}${i}`
      else if (shortCodeKind === 2) hotel.short_code = ''
      else if (shortCodeKind === 3) hotel.short_code = null
      hotels.push(hotel)
    }
  }
  return hotels
}

/** The PMS's own order: created_epoch_ms, then hotel_uuid. */
export function pmsOrder(a: Hotel, b: Hotel): number {
  const ca = a.created_epoch_ms as number
  const cb = b.created_epoch_ms as number
  if (ca !== cb) return ca - cb
  const ia = String(a.hotel_uuid)
  const ib = String(b.hotel_uuid)
  return ia < ib ? -1 : ia > ib ? 1 : 0
}
