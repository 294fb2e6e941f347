import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { ConfigError, reloadRules, type Config } from '../../src/config.js'
import { configHash, Reloader, RELOADABLE, type ReloadOutcome, type ReloadResult } from '../../src/lifecycle/reload.js'
import { eventually } from '../helpers/redis.js'
import { testConfig } from '../helpers/config.js'

// The reloader without a gateway (docs/architecture.md, "Reloading the configuration"): a
// file of the test's own, a `load` and an `apply` standing in for the gateway's (the edge of
// the unit), and what each reload answers, logs and reports: unchanged, applied, refused for
// every reason a reload can be, one reload at a time, and the file watch.

const dir = mkdtempSync(join(tmpdir(), 'gw-reloader-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const reloaders: Reloader[] = []
afterEach(() => {
  for (const reloader of reloaders.splice(0)) reloader.close()
  vi.useRealTimers()
})

let files = 0

interface World {
  reloader: Reloader
  file: string
  config: Config
  applied: Config[]
  outcomes: [ReloadOutcome, string][]
  logs: Record<string, unknown>[]
  /** What `load` answers next. */
  loads: { next: () => Config }
  /** What `apply` does with the new configuration. */
  applies: { run: (next: Config) => Promise<void> }
}

function world(text: string | Buffer = '{"v":1}', reporting = true): World {
  files += 1
  const file = join(dir, `config-${files}.json`)
  writeFileSync(file, text)
  const config = { ...testConfig(), configFile: file }
  const logs: Record<string, unknown>[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) })
  const applied: Config[] = []
  const outcomes: [ReloadOutcome, string][] = []
  const loads = { next: (): Config => config }
  const applies = { run: async (next: Config): Promise<void> => void applied.push(next) }
  const reloader = new Reloader({
    config, text: text.toString(), logger, load: () => loads.next(), apply: async (next) => applies.run(next),
    ...(reporting ? { onOutcome: (outcome: ReloadOutcome, hash: string) => void outcomes.push([outcome, hash]) } : {}),
  })
  reloaders.push(reloader)
  return { reloader, file, config, applied, outcomes, logs, loads, applies }
}

const logged = (w: World): unknown[] => w.logs.map(({ level, msg, trigger, hash, problems }) => ({ level, msg, trigger, hash, problems }))

describe('the hash of a configuration', () => {
  it('is the first 16 hex digits of its text\'s SHA-256', () => {
    expect(configHash('abc')).toBe('ba7816bf8f01cfea')
  })
})

describe('a reload', () => {
  it('of a file as it was changes nothing, and loads nothing', async () => {
    const w = world()
    w.loads.next = () => { throw new Error('not to be loaded') }
    const before = w.reloader.inForce
    expect(before).toEqual({ hash: configHash('{"v":1}'), loadedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) })
    expect(await w.reloader.reload('test')).toEqual({ outcome: 'unchanged', ...before })
    expect(w.outcomes).toEqual([['unchanged', before.hash]])
    expect(logged(w)).toEqual([{ level: 30, msg: 'config reload: the file is unchanged', trigger: 'test', hash: before.hash, problems: undefined }])
    expect(w.reloader.config).toBe(w.config)
  })

  it('of a changed file puts the new configuration in force, then names it', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.parse('2026-03-01T10:00:00Z'))
    const w = world()
    const next = { ...w.config, brands: [...w.config.brands, { ...w.config.brands[0] as Config['brands'][number], id: 'initech', hosts: ['api.initech.example'] }] }
    w.loads.next = () => next
    writeFileSync(w.file, '{"v":2}')
    vi.setSystemTime(Date.parse('2026-03-01T10:05:00Z'))
    const hash = configHash('{"v":2}')
    expect(await w.reloader.reload('test')).toEqual({ outcome: 'applied', hash, loadedAt: '2026-03-01T10:05:00.000Z' })
    expect(w.applied).toEqual([next])
    expect(w.reloader.config).toBe(next)
    expect(w.reloader.inForce).toEqual({ hash, loadedAt: '2026-03-01T10:05:00.000Z' })
    expect(w.outcomes).toEqual([['applied', hash]])
    expect(logged(w)).toEqual([{ level: 30, msg: 'config reloaded', trigger: 'test', hash, problems: undefined }])
    // The file as it is now is the one in force.
    expect((await w.reloader.reload('again')).outcome).toBe('unchanged')
  })

  it('is refused when the file cannot be read, naming it', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(Date.parse('2026-03-01T10:00:00Z'))
    const w = world()
    rmSync(w.file)
    vi.setSystemTime(Date.parse('2026-03-01T10:05:00Z'))
    const inForce = { hash: configHash('{"v":1}'), loadedAt: '2026-03-01T10:00:00.000Z' }
    expect(await w.reloader.reload('test')).toEqual({ outcome: 'refused', problems: [`${w.file}: cannot be read`], ...inForce })
    expect(w.reloader.inForce).toEqual(inForce)
    expect(w.outcomes).toEqual([['refused', inForce.hash]])
    expect(logged(w)).toEqual([{ level: 40, msg: 'config reload refused; the old configuration keeps serving', trigger: 'test', hash: undefined, problems: [`${w.file}: cannot be read`] }])
  })

  it('is refused with every problem of a file that does not validate', async () => {
    const w = world()
    w.loads.next = () => { throw new ConfigError(['a b: one', 'a c: two']) }
    writeFileSync(w.file, '{"v":2}')
    const result = await w.reloader.reload('test')
    expect(result).toEqual({ outcome: 'refused', problems: ['a b: one', 'a c: two'], hash: configHash('{"v":1}'), loadedAt: expect.any(String) })
    expect(w.applied).toEqual([])
    expect(w.reloader.config).toBe(w.config)
    expect(w.outcomes).toEqual([['refused', configHash('{"v":1}')]])
  })

  it('is refused, naming each, for the settings only a restart changes', async () => {
    const w = world()
    const events = { ...w.config.events, unnamed: 1 } as unknown as Config['events']
    w.loads.next = () => ({ ...w.config, docsUrl: 'https://elsewhere.example', events })
    writeFileSync(w.file, '{"v":2}')
    const result = await w.reloader.reload('test')
    expect(result).toEqual({
      outcome: 'refused', hash: configHash('{"v":1}'), loadedAt: expect.any(String),
      problems: [`${w.file} docsUrl: needs a restart: ${reloadRules.restartOnly.docsUrl as string}`, `${w.file} events.unnamed: needs a restart: a reload does not change it`],
    })
    expect(reloadRules.restartOnly.docsUrl).toMatch(/\w/)
    expect(w.applied).toEqual([])
    expect(w.reloader.config).toBe(w.config)
  })

  it('is refused when the new configuration cannot be put in force, and logs why', async () => {
    const w = world()
    writeFileSync(w.file, '{"v":2}')
    w.loads.next = () => ({ ...w.config })
    w.applies.run = async () => { throw new Error('no socket') }
    expect(await w.reloader.reload('test')).toMatchObject({ outcome: 'refused', problems: ['the new configuration could not be put in force: no socket'] })
    w.applies.run = async () => { throw 'a string' as unknown as Error }
    expect(await w.reloader.reload('test')).toMatchObject({ outcome: 'refused', problems: ['the new configuration could not be put in force: a string'] })
    expect(w.reloader.config).toBe(w.config)
    expect(w.reloader.inForce.hash).toBe(configHash('{"v":1}'))
    const failed = w.logs.filter((l) => l.level === 50)
    expect(failed.map(({ msg, trigger, err }) => ({ msg, trigger, message: (err as { message?: string }).message })))
      .toEqual([{ msg: 'config reload failed while building the new configuration; the old one keeps serving', trigger: 'test', message: 'no socket' }, expect.objectContaining({ trigger: 'test' })])
    expect(w.outcomes).toEqual([['refused', configHash('{"v":1}')], ['refused', configHash('{"v":1}')]])
  })

  it('throws what is no problem of the file, and the next reload still runs', async () => {
    const w = world()
    writeFileSync(w.file, '{"v":2}')
    w.loads.next = () => { throw new TypeError('a bug') }
    await expect(w.reloader.reload('test')).rejects.toThrow('a bug')
    w.loads.next = () => ({ ...w.config })
    expect((await w.reloader.reload('test')).outcome).toBe('applied')
  })

  it('runs after the one already asked for, and sees what it put in force', async () => {
    const w = world()
    writeFileSync(w.file, '{"v":2}')
    w.loads.next = () => ({ ...w.config })
    let release = (): void => undefined
    const held = new Promise<void>((resolve) => { release = resolve })
    w.applies.run = async (next) => {
      w.applied.push(next)
      await held
    }
    const first = w.reloader.reload('first')
    const second = w.reloader.reload('second')
    expect(await eventually(async () => w.applied.length === 1, 5000, 5)).toBe(true)
    release()
    const results: ReloadResult[] = await Promise.all([first, second])
    expect(results.map((r) => r.outcome)).toEqual(['applied', 'unchanged'])
    expect(w.applied.length).toBe(1)
  })

  it('needs no one told of its outcome', async () => {
    const w = world('{"v":1}', false)
    expect((await w.reloader.reload('test')).outcome).toBe('unchanged')
    writeFileSync(w.file, '{"v":2}')
    w.loads.next = () => { throw new ConfigError(['a b: one']) }
    expect((await w.reloader.reload('test')).outcome).toBe('refused')
    w.loads.next = () => ({ ...w.config })
    expect((await w.reloader.reload('test')).outcome).toBe('applied')
    expect(w.outcomes).toEqual([])
  })

  it('reads the file as text, as the start did: bytes that are no UTF-8 read as they did then', async () => {
    const w = world(Buffer.from([0x7b, 0xff, 0x7d]))
    w.loads.next = () => { throw new Error('not to be loaded') }
    expect((await w.reloader.reload('test')).outcome).toBe('unchanged')
  })

  it('may change only what the rules name reloadable', () => {
    expect(RELOADABLE).toEqual(Object.keys(reloadRules.reloadable))
    expect(RELOADABLE).toContain('brands')
  })
})

describe('the file watch', () => {
  it('reloads a second after the file changes, and after a swap beside it', async () => {
    const w = world()
    w.loads.next = () => ({ ...w.config })
    w.reloader.watch()
    writeFileSync(w.file, '{"v":2}')
    expect(await eventually(async () => w.outcomes.length === 1, 10_000, 50)).toBe(true)
    expect(w.outcomes).toEqual([['applied', configHash('{"v":2}')]])
    expect(logged(w).at(-1)).toEqual({ level: 30, msg: 'config reloaded', trigger: 'file watch', hash: configHash('{"v":2}'), problems: undefined })
    writeFileSync(join(dir, '..data'), 'swapped')
    expect(await eventually(async () => w.outcomes.length === 2, 10_000, 50)).toBe(true)
    expect(w.outcomes[1]).toEqual(['unchanged', configHash('{"v":2}')])
  })

  it('ignores other files of the directory, and stops when closed', async () => {
    const w = world()
    w.loads.next = () => ({ ...w.config })
    // The debounce is a second: a reload it would have started has run after two.
    const afterDebounce = (): Promise<unknown> => new Promise((resolve) => setTimeout(resolve, 2000))
    w.reloader.watch()
    writeFileSync(join(dir, 'other.json'), '{}')
    await afterDebounce()
    expect(w.outcomes).toEqual([])
    w.reloader.close()
    writeFileSync(w.file, '{"v":2}')
    await afterDebounce()
    expect(w.outcomes).toEqual([])
  })
})
