import { writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { configProblems, MINIMAL_CONFIG } from '../helpers/config.js'

// REDIS_SENTINELS, REDIS_SENTINEL_MASTER and REDIS_CLUSTER_NODES (operations: environment).

const file = join(tmpdir(), `gw-redis-ha-config-${process.pid}.json`)
writeFileSync(file, JSON.stringify(MINIMAL_CONFIG))

const problemsOf = (env: Record<string, string>): string[] => configProblems(() => loadConfig({ CONFIG_FILE: file, ...env }))

describe('Redis through Sentinel or Cluster: settings', () => {
  it('uses one server when neither is set', () => {
    expect(loadConfig({ CONFIG_FILE: file })).toMatchObject({ redisUrl: 'redis://127.0.0.1:6379', redisSentinel: undefined, redisClusterNodes: undefined })
  })

  it('reads the sentinels and the master name, with REDIS_URL for credentials and database', () => {
    const config = loadConfig({
      CONFIG_FILE: file, REDIS_URL: 'redis://:secret@ignored:6379/2',
      REDIS_SENTINELS: 'sentinel-0.redis:26379, 10.0.0.7:26380,[fd00::1]:26381', REDIS_SENTINEL_MASTER: 'gateway',
    })
    expect(config).toMatchObject({
      redisUrl: 'redis://:secret@ignored:6379/2',
      redisSentinel: {
        master: 'gateway',
        sentinels: [{ host: 'sentinel-0.redis', port: 26379 }, { host: '10.0.0.7', port: 26380 }, { host: 'fd00::1', port: 26381 }],
      },
      redisClusterNodes: undefined,
    })
  })

  it('reads the Cluster seed nodes', () => {
    expect(loadConfig({ CONFIG_FILE: file, REDIS_CLUSTER_NODES: 'redis-0:6379,redis-1:6379' }).redisClusterNodes)
      .toEqual([{ host: 'redis-0', port: 6379 }, { host: 'redis-1', port: 6379 }])
  })

  it('names every bad Redis setting at once', () => {
    expect(problemsOf({ REDIS_SENTINELS: 'sentinel-0', REDIS_CLUSTER_NODES: 'redis-0:6379', REDIS_URL: 'redis://redis:6379/3' })).toEqual([
      'environment REDIS_SENTINELS: a comma-separated list of host:port',
      'environment REDIS_SENTINEL_MASTER: required when REDIS_SENTINELS is set',
      'environment REDIS_CLUSTER_NODES: cannot be combined with REDIS_SENTINELS',
      'environment REDIS_URL: a Redis Cluster has no database but 0',
    ])
  })
})
