import { createHash } from 'node:crypto'
import { watch, type FSWatcher } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError, fileSchema, reloadRules, type Config } from '../config.js'
import { settingsOf } from '../config/reload-rules.js'

// Reloading the configuration without a restart (docs/architecture.md, "Reloading the
// configuration"). A reload reads CONFIG_FILE, validates it as a start does, refuses what only
// a restart can change, and hands a new configuration to `apply`, which builds the public app
// anew and swaps it in at once; nothing is changed until the new one is whole. Reloads run one
// at a time, whoever asks (SIGHUP, the admin route, the file watch).

/** What a reload may change, each capability's rules composed (src/config.ts). */
export const RELOADABLE: readonly string[] = Object.keys(reloadRules.reloadable)

/**
 * The settings `next` changes that a reload may not: each named, to be refused. A setting the
 * rules do not name is refused too: only what a capability says it follows is changed.
 */
export function restartOnlyChanges(current: Config, next: Config): string[] {
  const sections = Object.keys(fileSchema.shape)
  const before = settingsOf(current as unknown as Record<string, unknown>, sections, reloadRules)
  const after = settingsOf(next as unknown as Record<string, unknown>, sections, reloadRules)
  const named = new Set([...Object.keys(before), ...Object.keys(after)])
  return [...named].filter((key) => !RELOADABLE.includes(key) && JSON.stringify(before[key]) !== JSON.stringify(after[key]))
}

/** The content hash that names a configuration in /status and the metrics. */
export function configHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16)
}

export type ReloadOutcome = 'applied' | 'unchanged' | 'refused'
export type ReloadResult =
  | { outcome: 'applied' | 'unchanged'; hash: string; loadedAt: string }
  | { outcome: 'refused'; problems: string[]; hash: string; loadedAt: string }

export interface ReloaderOptions {
  /** The configuration in force at start, and the text of its file. */
  config: Config
  text: string
  /** Reads and validates the environment and CONFIG_FILE as a start does; throws ConfigError. */
  load: () => Config
  /** Puts `next` in force; throws when it cannot, and then changes nothing. */
  apply: (next: Config) => Promise<void>
  logger: Logger
  onOutcome?: (outcome: ReloadOutcome, hash: string) => void
}

export class Reloader {
  private current: Config
  private hash: string
  private loadedAt = new Date().toISOString()
  private queue: Promise<unknown> = Promise.resolve()
  private watcher: FSWatcher | undefined
  private debounce: NodeJS.Timeout | undefined

  constructor(private readonly options: ReloaderOptions) {
    this.current = options.config
    this.hash = configHash(options.text)
  }

  get config(): Config {
    return this.current
  }

  /** What /status and the metrics show: the configuration in force. */
  get inForce(): { hash: string; loadedAt: string } {
    return { hash: this.hash, loadedAt: this.loadedAt }
  }

  /** One reload, after any already asked for; `trigger` names who asked, for the log. */
  reload(trigger: string): Promise<ReloadResult> {
    const run = this.queue.then(() => this.run(trigger))
    this.queue = run.catch(() => undefined)
    return run
  }

  private async run(trigger: string): Promise<ReloadResult> {
    const { logger } = this.options
    let text: string
    try {
      text = await readFile(this.current.configFile, 'utf8')
    } catch {
      return this.refuse(trigger, [`${this.current.configFile}: cannot be read`])
    }
    const hash = configHash(text)
    if (hash === this.hash) {
      logger.info({ trigger, hash }, 'config reload: the file is unchanged')
      this.options.onOutcome?.('unchanged', hash)
      return { outcome: 'unchanged', ...this.inForce }
    }
    let next: Config
    try {
      next = this.options.load()
    } catch (error) {
      if (error instanceof ConfigError) return this.refuse(trigger, error.problems)
      throw error
    }
    const restart = restartOnlyChanges(this.current, next)
    if (restart.length > 0) return this.refuse(trigger, restart.map((key) => `${next.configFile} ${key}: needs a restart: ${reloadRules.restartOnly[key] ?? 'a reload does not change it'}`))
    try {
      await this.options.apply(next)
    } catch (error) {
      logger.error({ err: error, trigger }, 'config reload failed while building the new configuration; the old one keeps serving')
      return this.refuse(trigger, [`the new configuration could not be put in force: ${error instanceof Error ? error.message : String(error)}`])
    }
    this.current = next
    this.hash = hash
    this.loadedAt = new Date().toISOString()
    logger.info({ trigger, hash }, 'config reloaded')
    this.options.onOutcome?.('applied', hash)
    return { outcome: 'applied', ...this.inForce }
  }

  private refuse(trigger: string, problems: string[]): ReloadResult {
    this.options.logger.warn({ trigger, problems }, 'config reload refused; the old configuration keeps serving')
    this.options.onOutcome?.('refused', this.hash)
    return { outcome: 'refused', problems, ...this.inForce }
  }

  /**
   * Reloads when the file changes, a second after the last change. The directory is watched,
   * not the file: a Kubernetes ConfigMap volume swaps a symbolic link beside the file, and an
   * editor may replace the file rather than write it.
   */
  watch(): void {
    const file = basename(this.current.configFile)
    this.watcher = watch(dirname(this.current.configFile), (_event, name) => {
      if (name !== null && name !== file && !name.startsWith('..')) return
      clearTimeout(this.debounce)
      this.debounce = setTimeout(() => void this.reload('file watch'), 1000)
    })
  }

  close(): void {
    clearTimeout(this.debounce)
    this.watcher?.close()
  }
}
