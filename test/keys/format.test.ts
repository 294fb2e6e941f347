import { describe, expect, it } from 'vitest'
import { digestKey, generateKey, generateKeyId, keyMode } from '../../src/keys/format.js'

describe('API key format', () => {
  it('makes live and test keys with 28 base62 characters after the prefix', () => {
    expect(generateKey('live')).toMatch(/^svc_live_[0-9A-Za-z]{28}$/)
    expect(generateKey('test')).toMatch(/^svc_test_[0-9A-Za-z]{28}$/)
  })

  it('recognises its own keys by their checksum', () => {
    for (let i = 0; i < 200; i += 1) {
      const key = generateKey(i % 2 === 0 ? 'live' : 'test')
      expect(keyMode(key)).toBe(i % 2 === 0 ? 'live' : 'test')
    }
  })

  it('refuses every single-character typo', () => {
    const key = generateKey('live')
    const alphabet = 'aZ09'
    for (let i = 'svc_live_'.length; i < key.length; i += 1) {
      for (const c of alphabet) {
        if (key[i] === c) continue
        expect(keyMode(`${key.slice(0, i)}${c}${key.slice(i + 1)}`)).toBeUndefined()
      }
    }
  })

  it('refuses a live key relabelled as a test key', () => {
    expect(keyMode(generateKey('live').replace('svc_live_', 'svc_test_'))).toBeUndefined()
  })

  it('never repeats a key or an id', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => generateKey('live')))
    const ids = new Set(Array.from({ length: 1000 }, () => generateKeyId()))
    expect([keys.size, ids.size]).toEqual([1000, 1000])
  })

  it('digests with SHA-256', () => {
    expect(digestKey('svc_live_x')).toMatch(/^[0-9a-f]{64}$/)
    expect(digestKey('svc_live_x')).not.toBe(digestKey('svc_live_y'))
  })
})
