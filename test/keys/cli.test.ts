import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The key tool as operators run it: `npm run --silent keys -- …`.

const prefix = testPrefix()

function npmKeys(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'keys', '--', ...args], {
      // The audit lines on stderr are left out here (test/credentials/audit.test.ts reads them).
      env: { ...process.env, REDIS_URL, REDIS_PREFIX: prefix, LOG_LEVEL: 'warn', ...env },
    }, (error, stdout, stderr) => resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr }))
  })
}

afterAll(async () => {
  const redis = new Redis(REDIS_URL)
  await removePrefix(redis, prefix)
  redis.disconnect()
})

// Each call starts npm and Node: slow on a loaded machine, which is not what is tested.
describe('npm run keys', { timeout: 120_000 }, () => {
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

describe('npm run keys: clients of access tokens', { timeout: 120_000 }, () => {
  const issuer = 'https://id.example.com/realms/partners'
  const oauthEnv = { OAUTH_ISSUER: issuer, OAUTH_JWKS_URI: `${issuer}/protocol/openid-connect/certs`, OAUTH_AUDIENCE: 'partner-api' }

  it('registers a client with grant-client --json, exactly one object, and refuses a second grant for it', async () => {
    const result = await npmKeys(['grant-client', '--issuer', issuer, '--client-id', 'channel-sync', '--brand', 'acme', '--mode', 'live',
      '--all-properties', '--scopes', 'properties:read,guests:read', '--name', 'Channel sync', '--json'], oauthEnv)
    expect({ code: result.code, stderr: result.stderr, lines: result.stdout.trim().split('\n').length }).toEqual({ code: 0, stderr: '', lines: 1 })
    const grant = JSON.parse(result.stdout) as { id: string }
    expect(grant).toEqual({
      id: expect.stringMatching(/^cli_[0-9A-Za-z]{17}$/), type: 'oauth_client', issuer, clientId: 'channel-sync', brand: 'acme', mode: 'live', properties: '*',
      scopes: ['properties:read', 'guests:read'], status: 'active', name: 'Channel sync', expiresAt: null, rateLimit: null, allowedIps: null,
      previousSecretExpiresAt: null, lastUsedAt: null, createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
    })
    const again = await npmKeys(['grant-client', '--issuer', issuer, '--client-id', 'channel-sync', '--brand', 'acme', '--mode', 'live', '--all-properties'], oauthEnv)
    expect({ code: again.code, stdout: again.stdout, stderr: again.stderr.trim() })
      .toEqual({ code: 2, stdout: '', stderr: `client 'channel-sync' of ${issuer} already has grant ${grant.id}` })
  })

  it('shows, lists, suspends, resumes and revokes a grant by its id', async () => {
    const created = await npmKeys(['grant-client', '--issuer', issuer, '--client-id', 'reporting', '--brand', 'globex', '--mode', 'test', '--all-properties', '--json'], oauthEnv)
    const { id } = JSON.parse(created.stdout) as { id: string }
    const shown = await npmKeys(['show', id, '--json'], oauthEnv)
    expect(JSON.parse(shown.stdout)).toEqual({
      id, type: 'oauth_client', issuer, clientId: 'reporting', brand: 'globex', mode: 'test', properties: '*', scopes: '*', status: 'active', name: null,
      expiresAt: null, rateLimit: null, allowedIps: null, previousSecretExpiresAt: null, lastUsedAt: null, createdAt: expect.any(String),
    })
    const listed = await npmKeys(['list', '--brand', 'globex'], oauthEnv)
    expect(listed.stdout).toContain(`${id}  globex  test  active  all properties  client "reporting" of ${issuer}  rate limit default  scopes *  created `)
    expect((await npmKeys(['suspend', id], oauthEnv)).stdout.trim()).toBe(`suspended ${id}`)
    expect(JSON.parse((await npmKeys(['show', id, '--json'], oauthEnv)).stdout)).toMatchObject({ status: 'suspended' })
    expect((await npmKeys(['resume', id], oauthEnv)).stdout.trim()).toBe(`resumed ${id}`)
    expect((await npmKeys(['revoke', id], oauthEnv)).stdout.trim()).toBe(`revoked ${id}`)
    const gone = await npmKeys(['show', id], oauthEnv)
    expect({ code: gone.code, stderr: gone.stderr.trim() }).toEqual({ code: 2, stderr: `no grant with id '${id}'` })
  })

  it.each([
    [['--issuer', 'https://elsewhere.example', '--client-id', 'x', '--brand', 'acme', '--mode', 'live', '--all-properties'], `unknown issuer 'https://elsewhere.example' (configured: ${issuer})`],
    [['--issuer', issuer, '--brand', 'acme', '--mode', 'live', '--all-properties'], 'grant-client needs --client-id'],
    [['--issuer', issuer, '--client-id', 'has space', '--brand', 'acme', '--mode', 'live', '--all-properties'], '--client-id takes 1 to 255 printable characters without spaces'],
    [['--issuer', issuer, '--client-id', 'x', '--brand', 'acme', '--mode', 'live'], 'grant-client needs exactly one of --properties <uuid,...> and --all-properties'],
    [['--issuer', issuer, '--client-id', 'x', '--brand', 'acme', '--mode', 'live', '--all-properties', '--scopes', 'everything'],
      "unknown scope 'everything' (known: events:read, guests:read, guests:write, properties:read, rooms:read, webhooks:read, webhooks:write)"],
    [['--issuer', issuer, '--client-id', 'x', '--brand', 'acme', '--mode', 'live', '--all-properties', '--expires-at', '2030-01-01T00:00:00Z'], 'grant-client takes no --expires-at'],
  ])('refuses grant-client %j with exit 2 and one line', async (flags, message) => {
    const result = await npmKeys(['grant-client', ...flags], oauthEnv)
    expect({ code: result.code, stdout: result.stdout, stderr: result.stderr.trim() }).toEqual({ code: 2, stdout: '', stderr: message })
  })

  it('refuses grant-client where no issuer is configured', async () => {
    const { oauth: _shipped, ...keysOnly } = JSON.parse(readFileSync('config/default.json', 'utf8')) as Record<string, unknown>
    const file = join(mkdtempSync(join(tmpdir(), 'gw-keys-')), 'config.json')
    writeFileSync(file, JSON.stringify(keysOnly))
    const result = await npmKeys(['grant-client', '--issuer', issuer, '--client-id', 'x', '--brand', 'acme', '--mode', 'live', '--all-properties'], { CONFIG_FILE: file })
    expect({ code: result.code, stderr: result.stderr.trim() }).toEqual({ code: 2, stderr: 'no token issuer is configured (oauth.issuers or OAUTH_ISSUER)' })
  })
})
