// Generated records of the stand-in internal service: guests per brand (with their messages
// and reservations) and rooms for every hotel of the stand-in PMS. Pure and deterministic for
// a seed, so gateway tests can compute the answers they expect from the same functions.
// The values are awkward on purpose: Unicode names, plus-addressed emails, null phones,
// guests without messages or reservations.

import { generateHotels } from '../pms/data.js'
import { prng, uuid } from '../random.js'

export interface Guest {
  object: 'guest'
  id: string
  firstName: string
  lastName: string
  email: string
  phone: string | null
  createdAt: string
  updatedAt: string
}

export interface Message {
  object: 'message'
  id: string
  body: string
  sentAt: string
}

export type ReservationStatus = 'confirmed' | 'checked-in' | 'checked-out' | 'cancelled'

export interface Reservation {
  object: 'reservation'
  id: string
  propertyId: string
  checkIn: string
  checkOut: string
  status: ReservationStatus
}

export type RoomStatus = 'clean' | 'dirty' | 'out-of-order'

export interface Room {
  object: 'room'
  id: string
  number: string
  name: string
  floor: number
  status: RoomStatus
}

/** How many seeded guests each brand has; any other brand starts with none. */
export const GUEST_COUNTS: Readonly<Record<string, number>> = { acme: 36, globex: 24 }

/** The PMS chain of each brand, for the properties of reservations. */
const BRAND_CHAINS: Readonly<Record<string, string>> = { acme: 'ACME', globex: 'GLBX', initech: 'INIT' }

/** The PMS chain code of a brand (what the service's events name), or undefined for a brand it does not know. */
export function chainOf(brand: string): string | undefined {
  return BRAND_CHAINS[brand]
}

const FIRST_NAMES = ['Zoë', 'José', 'Łukasz', 'Anaïs', '翔太', 'Søren', 'Ngozi', 'Siobhán', 'Олег', 'Mary-Jane', 'Άννα', 'Đức', 'Ælfric', 'محمد', 'Renée', 'Jürgen']
const LAST_NAMES = ["O'Brien", 'Müller', 'García Márquez', '山田', 'Ørsted', 'van der Berg', 'Nguyễn', 'Kowalczyk', 'Smith 🏨', 'Øvergård-Ås', 'Ó Súilleabháin', 'D’Angelo', 'Петров', 'Çelik']
const DOMAINS = ['example.com', 'example.org', 'mail.example.net', 'xn--bcher-kva.example']
const MESSAGE_BODIES = [
  'Could we have a late check-out?',
  'Arriving around 23:30, please keep the room.',
  'Merci beaucoup pour le séjour ! 🙏',
  'Allergic to feathers: hypoallergenic pillows, please.',
  '部屋を禁煙にしてください。',
  'Line one\nline two, with "quotes" and a \\ backslash.',
]
const RESERVATION_STATUSES: readonly ReservationStatus[] = ['confirmed', 'checked-in', 'checked-out', 'cancelled']
const ROOM_STATUSES: readonly RoomStatus[] = ['clean', 'clean', 'clean', 'dirty', 'dirty', 'out-of-order']
const ROOM_KINDS = ['Single', 'Double', 'Twin', 'Deluxe Double', 'Junior Suite', 'Suite Élysée', 'Chambre à deux lits', '和室']

const DAY = 86_400_000

/** FNV-1a of a string mixed with the seed: each brand, guest and property gets its own stream. */
function streamSeed(seed: number, key: string): number {
  let hash = 0x811c9dc5 ^ (seed >>> 0)
  for (const char of key) {
    hash ^= char.codePointAt(0) ?? 0
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

function pick<T>(random: () => number, values: readonly T[]): T {
  return values[Math.floor(random() * values.length)] as T
}

/** A UUID v4 in lower case. */
function asciiLocal(name: string): string {
  const plain = name.normalize('NFKD').replace(/[^A-Za-z]/g, '').toLowerCase()
  return plain === '' ? 'guest' : plain
}

/** The public order of guests: createdAt, then id. */
export function guestOrder(a: Guest, b: Guest): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? -1 : 1
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}

/** The seeded guests of a brand, in the public order. */
export function generateGuests(brand: string, seed = 1): Guest[] {
  const random = prng(streamSeed(seed, `guests:${brand}`))
  const start = Date.UTC(2021, 0, 1)
  const guests: Guest[] = []
  for (let i = 0; i < (GUEST_COUNTS[brand] ?? 0); i += 1) {
    const firstName = pick(random, FIRST_NAMES)
    const lastName = pick(random, LAST_NAMES)
    // Some guests share a creation time, so the id decides their order.
    const created = start + Math.floor(random() * 900) * DAY + (i % 6 === 0 ? 0 : Math.floor(random() * DAY))
    const updated = i % 3 === 0 ? created : created + Math.floor(random() * 200 * DAY)
    const tag = i % 4 === 0 ? `+${brand}` : ''
    guests.push({
      object: 'guest',
      id: uuid(random),
      firstName,
      lastName,
      email: `${asciiLocal(firstName)}.${asciiLocal(lastName)}${tag}.${i}@${pick(random, DOMAINS)}`,
      phone: i % 3 === 1 ? null : `+${33 + (i % 5)} ${String(600000000 + Math.floor(random() * 99999999))}`,
      createdAt: new Date(created).toISOString(),
      updatedAt: new Date(updated).toISOString(),
    })
  }
  return guests.sort(guestOrder)
}

/** A seeded guest's messages, oldest first; none for some guests and every created one. */
export function messagesOf(guest: Guest, seed = 1): Message[] {
  const random = prng(streamSeed(seed, `messages:${guest.id}`))
  const count = Math.floor(random() * 4) // 0 to 3
  const created = Date.parse(guest.createdAt)
  const messages: Message[] = []
  for (let i = 0; i < count; i += 1) {
    messages.push({
      object: 'message',
      id: uuid(random),
      body: pick(random, MESSAGE_BODIES),
      sentAt: new Date(created + Math.floor(random() * 300 * DAY)).toISOString(),
    })
  }
  return messages.sort((a, b) => (a.sentAt < b.sentAt ? -1 : a.sentAt > b.sentAt ? 1 : 0))
}

/**
 * A seeded guest's reservations, earliest check-in first, at hotels of the brand's chain in
 * the stand-in PMS's data for the same seed.
 */
export function reservationsOf(guest: Guest, brand: string, seed = 1): Reservation[] {
  const random = prng(streamSeed(seed, `reservations:${guest.id}`))
  const count = Math.floor(random() * 4) // 0 to 3
  const chain = BRAND_CHAINS[brand]
  const hotels = hotelIds(seed).filter((h) => chain === undefined || h.chain === chain)
  const created = Date.parse(guest.createdAt)
  const reservations: Reservation[] = []
  for (let i = 0; i < count && hotels.length > 0; i += 1) {
    const checkIn = created + Math.floor(random() * 500) * DAY
    reservations.push({
      object: 'reservation',
      id: uuid(random),
      propertyId: pick(random, hotels).id,
      checkIn: new Date(checkIn).toISOString().slice(0, 10),
      checkOut: new Date(checkIn + (1 + Math.floor(random() * 10)) * DAY).toISOString().slice(0, 10),
      status: pick(random, RESERVATION_STATUSES),
    })
  }
  return reservations.sort((a, b) => (a.checkIn < b.checkIn ? -1 : a.checkIn > b.checkIn ? 1 : a.id < b.id ? -1 : 1))
}

const hotelCache = new Map<number, { id: string; chain: string }[]>()

function hotelIds(seed: number): { id: string; chain: string }[] {
  let hotels = hotelCache.get(seed)
  if (hotels === undefined) {
    hotels = generateHotels(seed).map((h) => ({ id: String(h.hotel_uuid), chain: String(h.chain_code) }))
    hotelCache.set(seed, hotels)
  }
  return hotels
}

/**
 * The rooms of a hotel of the stand-in PMS (same seed), ordered by number: 5 to 40 rooms,
 * some floors, statuses clean, dirty or out-of-order. Undefined for an id the PMS does not know.
 */
export function roomsOf(propertyId: string, seed = 1): Room[] | undefined {
  if (!hotelIds(seed).some((h) => h.id === propertyId)) return undefined
  const random = prng(streamSeed(seed, `rooms:${propertyId}`))
  const count = 5 + Math.floor(random() * 36) // 5 to 40
  const perFloor = 4 + Math.floor(random() * 9)
  const rooms: Room[] = []
  for (let i = 0; i < count; i += 1) {
    const floor = Math.floor(i / perFloor) + (perFloor > 10 ? 0 : 1) // some hotels have rooms on the ground floor
    const number = `${floor}${String((i % perFloor) + 1).padStart(2, '0')}`
    rooms.push({
      object: 'room',
      id: uuid(random),
      number,
      name: `${pick(random, ROOM_KINDS)} ${number}`,
      floor,
      status: pick(random, ROOM_STATUSES),
    })
  }
  return rooms
}
