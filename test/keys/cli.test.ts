import { execFile } from 'node:child_process'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The key tool as operators run it: `npm run --silent keys -- …`.

const prefix = testPrefix()

function npmKeys(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'keys', '--', ...args], {
      env: { ...process.env, REDIS_URL, REDIS_PREFIX: prefix, ...env },
    }, (error, stdout, stderr) => resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr }))
  })
}

afterAll(async () => {
  const redis = new Redis(REDIS_URL)
  await removePrefix(redis, prefix)
  redis.disconnect()
})

describe('npm run keys', () => {
  it('prints one JSON object for create --json and exits 0', async () => {
    const result = await npmKeys(['create', '--brand', 'acme', '--mode', 'test', '--all-properties', '--json'])
    expect(result.code).toBe(0)
    expect(result.stdout.trim().split('\n')).toHaveLength(1)
    expect(JSON.parse(result.stdout)).toMatchObject({ brand: 'acme', mode: 'test', properties: '*', status: 'active', name: null, expiresAt: null })
  })

  it('exits 2 with one line on stderr for a usage error', async () => {
    const result = await npmKeys(['show', 'key_missing'])
    expect(result.code).toBe(2)
    expect(result.stdout).toBe('')
    expect(result.stderr.trim()).toBe("no key with id 'key_missing'")
  })

  it('exits 1 when Redis cannot be reached', async () => {
    const result = await npmKeys(['list'], { REDIS_URL: 'redis://127.0.0.1:1' })
    expect(result.code).toBe(1)
    expect(result.stderr.trim()).toBe('cannot reach Redis at redis://127.0.0.1:1')
  })
})
