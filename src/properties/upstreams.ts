import type { Dispatcher } from 'undici'
import type { Config, UpstreamTarget } from '../config.js'
import type { UpstreamOutcome } from '../upstream/errors.js'
import type { Interceptor } from '../upstream/interceptors.js'
import { PmsClient } from '../upstream/pms-client.js'
import { Upstream } from '../upstream/upstream.js'
import { ReadCache, type CacheResult } from './cache.js'
import type { PmsUpstream } from './pms-source.js'

// The PMS as one named upstream: `svc_live_` keys read from PMS_URL (`pms`); `svc_test_` keys
// from PMS_SANDBOX_URL (`pmsSandbox`) with its own token, pool, breaker and cache. Without a
// sandbox, test keys never get here: they are refused with 403 TEST_MODE_UNAVAILABLE.

export interface UpstreamHooks {
  dispatcher?: Dispatcher
  onCall?: (upstream: string, outcome: UpstreamOutcome, seconds: number) => void
  onCache?: (cache: string, result: CacheResult) => void
  /** With tracing on: the interceptor that makes a client span of each call to the named upstream. */
  clientSpans?: (upstream: string) => Interceptor
}

export interface NamedPms extends PmsUpstream {
  name: 'pms' | 'pmsSandbox'
  /** How /status and the metrics name its read cache. */
  cacheName: 'properties' | 'propertiesSandbox'
}

export interface PmsSet {
  /** No `test` entry without a sandbox: live data is never read for a test key. */
  byMode: { live: PmsUpstream; test?: PmsUpstream }
  all: NamedPms[]
}

function build(name: NamedPms['name'], target: UpstreamTarget, config: Config, hooks: UpstreamHooks): NamedPms {
  const cacheName = name === 'pms' ? 'properties' : 'propertiesSandbox'
  const upstream = new Upstream({
    name, url: target.url, ...config.upstream, breaker: config.breaker, buffered: true, clientSpans: hooks.clientSpans?.(name),
    ...(hooks.dispatcher === undefined ? {} : { dispatcher: hooks.dispatcher }),
  })
  return {
    name,
    cacheName,
    client: new PmsClient({ upstream, token: target.token, observe: (outcome, seconds) => hooks.onCall?.(name, outcome, seconds) }),
    cache: new ReadCache({ ...config.cache, observe: (result) => hooks.onCache?.(cacheName, result) }),
  }
}

export function createPmsUpstreams(config: Config, hooks: UpstreamHooks = {}): PmsSet {
  if (config.pms === undefined) throw new Error('PMS_URL is not configured')
  const live = build('pms', config.pms, config, hooks)
  const sandbox = config.pmsSandbox === undefined ? undefined : build('pmsSandbox', config.pmsSandbox, config, hooks)
  return sandbox === undefined ? { byMode: { live }, all: [live] } : { byMode: { live, test: sandbox }, all: [live, sandbox] }
}
