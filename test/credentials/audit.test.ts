import { userInfo } from 'node:os'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { digestKey } from '../../src/keys/format.js'
import { grantDigest } from '../../src/keys/grants.js'
import { keyTool, type ToolRun } from '../helpers/oauth.js'
import { keysUnder, REDIS_URL, removePrefix, testPrefix } from '../helpers/redis.js'

// The audit trail (docs/architecture.md, "The audit trail"): every change to a credential from
// the key tool (create, grant-client, update, roll, an overlap ended early, suspend, resume,
// revoke) with its time, actor, action, credential and the fields changed, old and new, in
// Redis and as a log line (the tool's stderr); never a secret nor its digest.
// (test/credentials/admin-api.test.ts has the credentials API's entries.)

const prefix = testPrefix()
const redis = new Redis(REDIS_URL)
const ISSUER = 'https://id.example.com/realms/partners'
const env = { REDIS_URL, REDIS_PREFIX: prefix, LOG_LEVEL: 'info', OAUTH_ISSUER: ISSUER, OAUTH_JWKS_URI: `${ISSUER}/certs`, OAUTH_AUDIENCE: 'partner-api' }
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

afterAll(async () => {
  await removePrefix(redis, prefix)
  redis.disconnect()
})

const runs: ToolRun[] = []
async function tool(...argv: string[]): Promise<ToolRun> {
  const run = await keyTool(env, ...argv)
  runs.push(run)
  return run
}

/** The one JSON line on stdout, and the audit lines the change wrote on stderr (one per entry). */
async function change(...argv: string[]): Promise<{ out: Record<string, unknown>; logged: Record<string, unknown>[] }> {
  const run = await tool(...argv)
  expect(run.code).toBe(0)
  const lines = run.err.map((l) => JSON.parse(l) as Record<string, unknown>)
  for (const line of lines) expect(line).toMatchObject({ level: 30, msg: 'credential changed', tool: 'keys' })
  return { out: argv.includes('--json') ? JSON.parse(run.out[0] as string) as Record<string, unknown> : {}, logged: lines.map((l) => l.audit as Record<string, unknown>) }
}

async function trail(...flags: string[]): Promise<Record<string, unknown>[]> {
  const run = await tool('audit', '--json', ...flags)
  expect({ code: run.code, err: run.err }).toEqual({ code: 0, err: [] })
  return JSON.parse(run.out[0] as string) as Record<string, unknown>[]
}

const entry = (action: string, credentialId: string, actor: string, changes: Record<string, unknown>) => ({
  id: expect.stringMatching(/^aud_[0-9a-z]{11}[0-9a-f]{8}$/), time: expect.stringMatching(ISO), actor, action, credentialId, changes,
})

describe('the audit trail of the key tool', () => {
  it('records every action, newest first, with the actor, the fields changed old and new, and a log line each', async () => {
    const created = await change('create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--name', 'Sync', '--actor', 'alice', '--json')
    const id = created.out.id as string
    const key = created.out.key as string
    const os = userInfo().username
    await change('update', id, '--scopes', 'properties:read', '--allow-ips', '10.0.0.0/8', '--rate-limit', '40')
    const first = await change('roll', id, '--overlap', '1h', '--actor', 'bob', '--json')
    const second = await change('roll', id, '--json')
    const ended = await tool('end-overlap', id, '--actor', 'carol')
    await change('suspend', id)
    await change('resume', id, '--actor', 'dave')
    const grant = await change('grant-client', '--issuer', ISSUER, '--client-id', 'audited', '--brand', 'globex', '--mode', 'test', '--properties',
      'c0ffee00-0000-4000-8000-00000000000a', '--actor', 'erin', '--json')
    const grantId = grant.out.id as string
    await change('revoke', grantId)
    await change('revoke', id, '--actor', 'frank')
    // The second roll ended the first overlap: two entries, two lines; the end-overlap after it, one.
    expect(second.logged.map((e) => e.action)).toEqual(['end-overlap', 'roll'])
    expect(ended.err.length).toBe(1)

    const entries = await trail('--id', id)
    const rolledSecond = entries.find((e) => e.action === 'roll' && e.actor === os) as { changes: { previousSecretExpiresAt: { new: string } } }
    expect(entries).toEqual([
      entry('revoke', id, 'frank', { status: { old: 'active', new: 'revoked' } }),
      entry('resume', id, 'dave', { status: { old: 'suspended', new: 'active' } }),
      entry('suspend', id, os, { status: { old: 'active', new: 'suspended' } }),
      entry('end-overlap', id, 'carol', { previousSecretExpiresAt: { old: second.out.previousSecretExpiresAt, new: expect.stringMatching(ISO) } }),
      entry('roll', id, os, { previousSecretExpiresAt: { old: first.out.previousSecretExpiresAt, new: second.out.previousSecretExpiresAt } }),
      entry('end-overlap', id, os, { previousSecretExpiresAt: { old: first.out.previousSecretExpiresAt, new: expect.stringMatching(ISO) } }),
      entry('roll', id, 'bob', { previousSecretExpiresAt: { old: null, new: first.out.previousSecretExpiresAt } }),
      entry('update', id, os, { scopes: { old: '*', new: ['properties:read'] }, rateLimit: { old: null, new: 40 }, allowedIps: { old: null, new: ['10.0.0.0/8'] } }),
      entry('create', id, 'alice', {
        brand: { old: null, new: 'acme' }, mode: { old: null, new: 'live' }, name: { old: null, new: 'Sync' }, scopes: { old: null, new: '*' },
        properties: { old: null, new: '*' }, status: { old: null, new: 'active' },
      }),
    ])
    expect(rolledSecond.changes.previousSecretExpiresAt.new).toBe(second.out.previousSecretExpiresAt)
    // Each log line is the entry kept.
    expect(second.logged).toEqual([entries[5], entries[4]])
    expect(await trail('--id', grantId)).toEqual([
      entry('revoke', grantId, os, { status: { old: 'active', new: 'revoked' } }),
      entry('grant-client', grantId, 'erin', {
        issuer: { old: null, new: ISSUER }, clientId: { old: null, new: 'audited' }, brand: { old: null, new: 'globex' }, mode: { old: null, new: 'test' },
        scopes: { old: null, new: '*' }, properties: { old: null, new: ['c0ffee00-0000-4000-8000-00000000000a'] }, status: { old: null, new: 'active' },
      }),
    ])
    // Every credential's entries in the trail of all, newest first.
    const all = await trail()
    expect(all.map((e) => e.id)).toEqual([...all].sort((a, b) => String(b.time).localeCompare(String(a.time)) || String(b.id).localeCompare(String(a.id))).map((e) => e.id))
    expect(all.length).toBe(11)
    // Since a time: the entries at or after it.
    const since = entries[2]?.time as string
    expect((await trail('--id', id, '--since', since)).map((e) => e.action)).toEqual(['revoke', 'resume', 'suspend'])
    // The text form: one line per entry.
    const text = await tool('audit', '--id', id)
    expect(text.out[0]).toMatch(new RegExp(`^${ISO.source.slice(1, -1)}  frank  revoke  ${id}  status active → revoked$`))
    expect(text.out.at(-2)).toMatch(new RegExp(`  ${os}  update  ${id}  scopes \\* → \\["properties:read"\\]; rateLimit none → 40; allowedIps none → \\["10\\.0\\.0\\.0/8"\\]$`))

    // No secret and no digest anywhere but where a key is looked up by its digest.
    const secrets = [key, first.out.secret, second.out.secret] as string[]
    const digests = [...secrets.map(digestKey), grantDigest(ISSUER, 'audited')]
    const said = JSON.stringify(runs.map((r) => [r.out.filter((l) => !l.includes('"key":"svc_') && !l.includes('"secret":"svc_')), r.err]))
    for (const text of [said, JSON.stringify(entries), JSON.stringify(all)]) for (const forbidden of [...secrets, ...digests]) expect(text).not.toContain(forbidden)
    for (const name of await keysUnder(redis, prefix)) {
      for (const secret of secrets) expect(name).not.toContain(secret)
      const type = await redis.type(name)
      const values = type === 'zset' ? await redis.zrange(name, '0', '-1') : type === 'hash' ? Object.entries(await redis.hgetall(name)).flat() : type === 'set' ? await redis.smembers(name) : [await redis.get(name) ?? '']
      for (const value of values) for (const secret of secrets) expect(value).not.toContain(secret)
      if (name.includes(':audit') || name.includes(':usage:') || name.includes(':lastused:')) for (const value of values) for (const digest of digests) expect(value).not.toContain(digest)
    }
  })

  it('says so when nothing is recorded, and refuses a bad --since', async () => {
    expect(await keyTool(env, 'audit', '--id', 'key_00000000000000000')).toEqual({ code: 0, out: ['no changes recorded'], err: [] })
    expect(await keyTool(env, 'audit', '--since', 'yesterday')).toEqual({ code: 2, out: [], err: ["--since 'yesterday' is not an ISO 8601 date-time"] })
  })

  it('records nothing for a refused change, and nothing for a change that changes nothing', async () => {
    const made = await keyTool({ ...env, LOG_LEVEL: 'warn' }, 'create', '--brand', 'acme', '--mode', 'live', '--all-properties', '--json')
    const { id } = JSON.parse(made.out[0] as string) as { id: string }
    expect((await keyTool(env, 'update', id, '--rate-limit', '0')).code).toBe(2)
    expect(await keyTool(env, 'resume', id)).toEqual({ code: 0, out: [`resumed ${id}`], err: [] })
    expect(await keyTool(env, 'update', id, '--all-properties')).toMatchObject({ code: 0, err: [] })
    expect((await trail('--id', id)).map((e) => e.action)).toEqual(['create'])
  })
})
