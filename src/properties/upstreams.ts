import type { Dispatcher } from 'undici'
import type { Config, UpstreamTarget } from '../config.js'
import type { UpstreamOutcome } from '../upstream/errors.js'
import { PmsClient } from '../upstream/pms-client.js'
import { ReadCache, type CacheResult } from './cache.js'
import type { Upstream } from './pms-source.js'
import type { KeyMode } from './source.js'

// `svc_live_` keys read from PMS_URL; `svc_test_` keys from PMS_SANDBOX_URL with its own
// token, pool, breaker and cache, or from PMS_URL when no sandbox is configured.

export interface UpstreamHooks {
  dispatcher?: Dispatcher
  onCall?: (upstream: string, outcome: UpstreamOutcome, seconds: number) => void
  onCache?: (upstream: string, result: CacheResult) => void
}

export interface NamedUpstream extends Upstream {
  name: 'pms' | 'pmsSandbox'
}

export interface UpstreamSet {
  byMode: Record<KeyMode, Upstream>
  all: NamedUpstream[]
}

function build(name: NamedUpstream['name'], target: UpstreamTarget, config: Config, hooks: UpstreamHooks): NamedUpstream {
  return {
    name,
    client: new PmsClient({
      name,
      url: target.url,
      token: target.token,
      ...config.upstream,
      breaker: config.breaker,
      ...(hooks.dispatcher === undefined ? {} : { dispatcher: hooks.dispatcher }),
      observe: (outcome, seconds) => hooks.onCall?.(name, outcome, seconds),
    }),
    cache: new ReadCache({ ...config.cache, observe: (result) => hooks.onCache?.(name, result) }),
  }
}

export function createUpstreams(config: Config, hooks: UpstreamHooks = {}): UpstreamSet {
  if (config.pms === undefined) throw new Error('PMS_URL is not configured')
  const live = build('pms', config.pms, config, hooks)
  const sandbox = config.pmsSandbox === undefined ? undefined : build('pmsSandbox', config.pmsSandbox, config, hooks)
  return { byMode: { live, test: sandbox ?? live }, all: sandbox === undefined ? [live] : [live, sandbox] }
}
