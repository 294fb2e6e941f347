import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { freePort } from '../ports.js'

// Highly available Redis on this machine, from the one redis-server binary: a Sentinel group
// (a master, a replica, three sentinels) or a Cluster (three masters, a replica each), on
// free ports of its own and in a temporary folder, with fast failover settings. Used by the
// failover tests and by `npm run chaos`.

const run = promisify(execFile)

/** Why HA Redis cannot run here, or undefined when it can. */
export function haRedisMissing(): string | undefined {
  for (const binary of ['redis-server', 'redis-cli']) {
    const found = spawnSync(binary, ['--version'], { stdio: 'ignore' })
    if (found.error !== undefined || found.status !== 0) return `${binary} is not installed (Debian: apt-get install redis-server)`
  }
  return undefined
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

/** Polls `probe` until it returns true; throws `what` after `withinMs`, or at once when `hopeless` says so. */
export async function until(what: string, probe: () => Promise<boolean>, withinMs: number, everyMs = 50, hopeless: () => string | undefined = () => undefined): Promise<void> {
  const deadline = Date.now() + withinMs
  for (;;) {
    try {
      if (await probe()) return
    } catch {
      // Not yet.
    }
    const why = hopeless()
    if (why !== undefined) throw new Error(`gave up waiting for ${what}: ${why}`)
    if (Date.now() > deadline) throw new Error(`timed out after ${withinMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

/**
 * Boots a topology on ports picked free, again on new ports if it fails: a port is free when
 * picked but only bound when its server starts, and on a busy machine another process can take
 * it in between (the server then exits at once).
 */
async function bootWithFreshPorts<T extends { boot(): Promise<void>; stop(): Promise<void> }>(make: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const topology = await make()
    try {
      await topology.boot()
      return topology
    } catch (error) {
      await topology.stop()
      if (attempt >= attempts) throw error
    }
  }
}

/** One question to one node; a fresh connection so that no client state leaks into the scenario. */
export async function ask(port: number, ...args: (string | number)[]): Promise<unknown> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 1000 })
  client.on('error', () => undefined)
  try {
    await client.connect()
    return await client.call(String(args[0]), ...args.slice(1).map(String))
  } finally {
    client.disconnect()
  }
}

export interface HaTopology {
  readonly mode: 'sentinel' | 'cluster'
  /** The gateway's environment for this Redis. */
  readonly env: Record<string, string>
  /** Kills (SIGKILL) the master that holds `key`; returns its port. */
  killMasterOf(key: string): Promise<number>
  /** Whether a replica has taken over from the killed master and serves writes. */
  failedOver(): Promise<boolean>
  /** The port of the master that holds `key` now. */
  masterOf(key: string): Promise<number>
  stop(): Promise<void>
}

abstract class Processes {
  protected readonly dir = mkdtempSync(join(tmpdir(), 'gw-redis-ha-'))
  protected readonly children = new Map<number, ChildProcess>()

  /** A server that exited (a port taken between being picked and being bound): its port. */
  protected exited(): number | undefined {
    for (const [port, child] of this.children) if (child.exitCode !== null || child.signalCode !== null) return port
    return undefined
  }

  protected spawnServer(port: number, args: string[]): void {
    const child = spawn('redis-server', args, { cwd: this.dir, stdio: 'ignore' })
    this.children.set(port, child)
  }

  protected async kill(port: number): Promise<void> {
    const child = this.children.get(port)
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve())
      child.kill('SIGKILL')
    })
  }

  async stop(): Promise<void> {
    await Promise.all([...this.children.keys()].map((port) => this.kill(port)))
    rmSync(this.dir, { recursive: true, force: true })
  }
}

const BASE = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no']

export class SentinelGroup extends Processes implements HaTopology {
  readonly mode = 'sentinel'
  static readonly MASTER_NAME = 'gwmaster'
  /** The master before the failover. */
  private killed: number | undefined

  private constructor(private master: number, private readonly replica: number, private readonly sentinels: number[]) {
    super()
  }

  static async start(): Promise<SentinelGroup> {
    return bootWithFreshPorts(async () => new SentinelGroup(await freePort(), await freePort(), [await freePort(), await freePort(), await freePort()]))
  }

  async boot(): Promise<void> {
    this.spawnServer(this.master, ['--port', String(this.master), ...BASE])
    this.spawnServer(this.replica, ['--port', String(this.replica), ...BASE, '--replicaof', '127.0.0.1', String(this.master)])
    await until('the replica to sync', async () => String(await ask(this.replica, 'INFO', 'replication')).includes('master_link_status:up'), 30_000, 50, () => {
      const gone = this.exited()
      return gone === undefined ? undefined : `the server on port ${gone} exited`
    })
    for (const port of this.sentinels) {
      const file = join(this.dir, `sentinel-${port}.conf`)
      writeFileSync(file, [
        `port ${port}`,
        'bind 127.0.0.1',
        'protected-mode no',
        `sentinel monitor ${SentinelGroup.MASTER_NAME} 127.0.0.1 ${this.master} 2`,
        `sentinel down-after-milliseconds ${SentinelGroup.MASTER_NAME} 1000`,
        `sentinel failover-timeout ${SentinelGroup.MASTER_NAME} 3000`,
        `sentinel parallel-syncs ${SentinelGroup.MASTER_NAME} 1`,
        '',
      ].join('\n'))
      this.spawnServer(port, [file, '--sentinel'])
    }
    // Sentinels find the replica and each other through the master; a failover needs both.
    for (const port of this.sentinels) {
      await until(`sentinel ${port} to know its peers and the replica`, async () => {
        const fields = await ask(port, 'SENTINEL', 'MASTER', SentinelGroup.MASTER_NAME) as string[]
        const get = (name: string) => fields[fields.indexOf(name) + 1]
        return get('num-other-sentinels') === '2' && get('num-slaves') === '1'
      }, 20_000, 100)
    }
  }

  get env(): Record<string, string> {
    return {
      REDIS_URL: 'redis://127.0.0.1:6379',
      REDIS_SENTINELS: this.sentinels.map((port) => `127.0.0.1:${port}`).join(','),
      REDIS_SENTINEL_MASTER: SentinelGroup.MASTER_NAME,
    }
  }

  async masterOf(): Promise<number> {
    for (const port of this.sentinels) {
      try {
        const [, masterPort] = await ask(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SentinelGroup.MASTER_NAME) as [string, string]
        return Number(masterPort)
      } catch {
        // Ask the next one.
      }
    }
    throw new Error('no sentinel answers')
  }

  async killMasterOf(): Promise<number> {
    this.killed = this.master
    await this.kill(this.master)
    return this.killed
  }

  /** A planned failover (SENTINEL FAILOVER): the master is demoted to a replica, not killed. */
  async switchMaster(): Promise<number> {
    this.killed = await this.masterOf()
    await ask(this.sentinels[0] as number, 'SENTINEL', 'FAILOVER', SentinelGroup.MASTER_NAME)
    return this.killed
  }

  async failedOver(): Promise<boolean> {
    if (this.killed === undefined) return false
    const master = await this.masterOf()
    if (master === this.killed) return false
    const [role] = await ask(master, 'ROLE') as [string]
    return role === 'master'
  }
}

export class RedisCluster extends Processes implements HaTopology {
  readonly mode = 'cluster'
  private killed: number | undefined

  private constructor(private readonly ports: number[]) {
    super()
  }

  static async start(): Promise<RedisCluster> {
    return bootWithFreshPorts(async () => {
      const ports: number[] = []
      // Each node needs a client port and a bus port; both are picked free (cluster-port).
      for (let i = 0; i < 12; i += 1) ports.push(await freePort())
      return new RedisCluster(ports)
    })
  }

  private get nodes(): number[] {
    return this.ports.slice(0, 6)
  }

  async boot(): Promise<void> {
    this.nodes.forEach((port, i) => {
      this.spawnServer(port, [
        '--port', String(port), ...BASE,
        '--cluster-enabled', 'yes', '--cluster-port', String(this.ports[6 + i]),
        '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '1000',
      ])
    })
    for (const port of this.nodes) {
      await until(`node ${port} to start`, async () => (await ask(port, 'PING')) === 'PONG', 30_000, 50, () => {
        const gone = this.exited()
        return gone === undefined ? undefined : `the server on port ${gone} exited`
      })
    }
    await run('redis-cli', ['--cluster', 'create', ...this.nodes.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], { timeout: 30_000 })
    for (const port of this.nodes) {
      await until(`node ${port} to see the whole cluster`, async () => {
        const info = String(await ask(port, 'CLUSTER', 'INFO'))
        return info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:6')
      }, 20_000, 100)
    }
    // Every replica must be in sync with its master before anything can fail over to it.
    for (const port of this.nodes) {
      await until(`node ${port} to finish syncing`, async () => {
        const info = String(await ask(port, 'INFO', 'replication'))
        return info.includes('role:master') || info.includes('master_link_status:up')
      }, 20_000, 100)
    }
  }

  get env(): Record<string, string> {
    return { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: this.nodes.slice(0, 3).map((p) => `127.0.0.1:${p}`).join(',') }
  }

  private alive(): number[] {
    return this.nodes.filter((port) => port !== this.killed)
  }

  async masterOf(key: string): Promise<number> {
    const [port] = this.alive()
    const slot = Number(await ask(port as number, 'CLUSTER', 'KEYSLOT', key))
    const ranges = await ask(port as number, 'CLUSTER', 'SLOTS') as [number, number, [string, number]][]
    const range = ranges.find(([from, to]) => slot >= from && slot <= to)
    if (range === undefined) throw new Error(`slot ${slot} is not served`)
    return Number(range[2][1])
  }

  async killMasterOf(key: string): Promise<number> {
    const port = await this.masterOf(key)
    this.killed = port
    await this.kill(port)
    return port
  }

  async failedOver(): Promise<boolean> {
    if (this.killed === undefined) return false
    for (const port of this.alive()) {
      const info = String(await ask(port, 'CLUSTER', 'INFO'))
      if (!info.includes('cluster_state:ok')) return false
      const nodes = String(await ask(port, 'CLUSTER', 'NODES'))
      const killedLine = nodes.split('\n').find((line) => line.includes(`:${this.killed}@`))
      if (killedLine === undefined || !/[ ,]fail[ ,]/.test(killedLine) || /\d-\d/.test(killedLine)) return false
    }
    return true
  }
}
