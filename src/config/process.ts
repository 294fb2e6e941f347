import { z } from 'zod'

// The process's own settings (docs/architecture.md, "Configuration"): where the config file
// is, the log level, and where Redis is, which every capability that keeps state shares.

const hostPortList = z.string().regex(/^\s*(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}\s*(,\s*(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}\s*)*$/,
  'a comma-separated list of host:port')

export const redisEnvFields = {
  REDIS_URL: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379').describe('Key store and rate-limit counters; a `/N` database suffix is honoured'),
  REDIS_SENTINELS: hostPortList.optional()
    .describe('Redis through Sentinel: comma-separated `host:port` of the sentinels; `REDIS_URL` then gives only credentials and database'),
  REDIS_SENTINEL_MASTER: z.string().min(1).optional().describe('The master name the sentinels monitor (required with `REDIS_SENTINELS`)'),
  REDIS_CLUSTER_NODES: hostPortList.optional()
    .describe('Redis Cluster: comma-separated `host:port` of seed nodes; `REDIS_URL` then gives only credentials'),
  REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9:_-]*$/).default('gw:').describe('Namespace of every Redis key and channel the gateway uses'),
}

export const processEnvFields = {
  CONFIG_FILE: z.string().min(1).default('config/default.json').describe('Path of the JSON config file'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('pino log level'),
}

// Checked on the raw values, so that they are reported even when another variable is bad
// (zod skips refinements of an object whose fields failed).
export function redisEnvProblems(env: Record<string, string>): string[] {
  const problems: string[] = []
  if (env.REDIS_SENTINELS !== undefined && env.REDIS_SENTINEL_MASTER === undefined) {
    problems.push('environment REDIS_SENTINEL_MASTER: required when REDIS_SENTINELS is set')
  }
  if (env.REDIS_SENTINELS !== undefined && env.REDIS_CLUSTER_NODES !== undefined) {
    problems.push('environment REDIS_CLUSTER_NODES: cannot be combined with REDIS_SENTINELS')
  }
  // A Cluster has database 0 only.
  if (env.REDIS_CLUSTER_NODES !== undefined && /^rediss?:\/\/[^/]*\/[1-9]/.test(env.REDIS_URL ?? '')) {
    problems.push('environment REDIS_URL: a Redis Cluster has no database but 0')
  }
  return problems
}

export interface HostPort { host: string; port: number }

/** `host:port,host:port` (IPv6 hosts in brackets) as a list. */
export function parseHostPorts(list: string): HostPort[] {
  return list.split(',').map((entry) => {
    const trimmed = entry.trim()
    const colon = trimmed.lastIndexOf(':')
    return { host: trimmed.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(trimmed.slice(colon + 1)) }
  })
}

/** Where Redis is, as the environment says. */
export interface RedisSettings {
  redisUrl: string
  /** Set with REDIS_SENTINELS: Redis is the master these sentinels name. */
  redisSentinel: { sentinels: HostPort[]; master: string } | undefined
  /** Set with REDIS_CLUSTER_NODES: the Cluster's seed nodes. */
  redisClusterNodes: HostPort[] | undefined
  redisPrefix: string
}

export function redisSettings(e: z.infer<z.ZodObject<typeof redisEnvFields>>): RedisSettings {
  return {
    redisUrl: e.REDIS_URL,
    redisSentinel: e.REDIS_SENTINELS !== undefined && e.REDIS_SENTINEL_MASTER !== undefined
      ? { sentinels: parseHostPorts(e.REDIS_SENTINELS), master: e.REDIS_SENTINEL_MASTER }
      : undefined,
    redisClusterNodes: e.REDIS_CLUSTER_NODES !== undefined ? parseHostPorts(e.REDIS_CLUSTER_NODES) : undefined,
    redisPrefix: e.REDIS_PREFIX,
  }
}
