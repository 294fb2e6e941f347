import { hash, randomBytes } from 'node:crypto'
import { crc32 } from 'node:zlib'
import type { KeyMode } from './principal.js'

// API key format: `svc_live_` or `svc_test_`, 22 base62 characters of randomness (131 bits),
// then 6 base62 characters of CRC32 over everything before them. The checksum lets the
// gateway refuse a mistyped or invented key without asking Redis, and lets secret scanners
// recognise a leaked key with few false positives (the scheme GitHub's tokens use;
// docs/architecture.md §D7).

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const SECRET_LENGTH = 22
const CHECKSUM_LENGTH = 6
const KEY_PATTERN = /^svc_(live|test)_[0-9A-Za-z]{28}$/

export const KEY_PREFIXES = { live: 'svc_live_', test: 'svc_test_' } as const
/** Characters in a key: its prefix (both are 9), its secret and its checksum. */
export const KEY_LENGTH = KEY_PREFIXES.live.length + SECRET_LENGTH + CHECKSUM_LENGTH

function base62(value: bigint, width: number): string {
  let out = ''
  let rest = value
  while (rest > 0n) {
    out = ALPHABET[Number(rest % 62n)] + out
    rest /= 62n
  }
  return out.padStart(width, '0')
}

// On every request: a CRC32 fits a double exactly, so no BigInt here.
function checksum(body: string): string {
  let rest = crc32(body)
  let out = ''
  for (let i = 0; i < CHECKSUM_LENGTH; i += 1) {
    out = ALPHABET[rest % 62] + out
    rest = Math.floor(rest / 62)
  }
  return out
}

function randomBase62(length: number): string {
  // 16 random bytes < 62^22, so the fixed width never truncates.
  return base62(BigInt(`0x${randomBytes(16).toString('hex')}`), length)
}

export function generateKey(mode: KeyMode): string {
  const body = `${KEY_PREFIXES[mode]}${randomBase62(SECRET_LENGTH)}`
  return `${body}${checksum(body)}`
}

/** The mode of a well-formed key with a valid checksum; undefined for anything else. */
export function keyMode(key: string): KeyMode | undefined {
  if (!KEY_PATTERN.test(key)) return undefined
  const split = key.length - CHECKSUM_LENGTH
  if (checksum(key.slice(0, split)) !== key.slice(split)) return undefined
  return prefixMode(key)
}

/** The mode a key's prefix names, for a key whose form is known good (checked, or found among the keys issued). */
export function prefixMode(key: string): KeyMode {
  return key.startsWith(KEY_PREFIXES.live) ? 'live' : 'test'
}

/**
 * What Redis stores instead of the key. The key has 131 random bits, so a fast hash is safe.
 * The one-shot `hash` costs a quarter of createHash().update().digest(), which builds a
 * stream object per call; this runs on every request.
 */
export function digestKey(key: string): string {
  return hash('sha256', key, 'hex')
}

/** A public id: `prefix` and 17 base62 characters (96 random bits). */
export function generateId(prefix: string): string {
  return `${prefix}${base62(BigInt(`0x${randomBytes(12).toString('hex')}`), 17)}`
}

export function generateKeyId(): string {
  return generateId('key_')
}
