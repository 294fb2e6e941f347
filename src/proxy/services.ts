import type { Dispatcher } from 'undici'
import type { Config } from '../config.js'
import type { ServiceUpstream } from './config.js'
import type { KeyMode } from '../keys/principal.js'
import type { Interceptor } from '../upstream/interceptors.js'
import { Upstream } from '../upstream/upstream.js'
import { CREDENTIAL_HEADER } from './headers.js'

// The services behind declared routes: for each, a live upstream and, when configured, a
// sandbox for `svc_test_` keys, each with its own pool, breaker and in-flight bound.

export interface ServiceTarget {
  upstream: Upstream
  /** `http://host:port` of the upstream's URL, worked out once. */
  origin: string
  /** The Host header of its calls (`host:port`). */
  host: string
  /** Sent in the service's `tokenHeader`, when it has one. */
  token: string | undefined
}

export interface Service {
  settings: ServiceUpstream
  live: ServiceTarget
  sandbox: ServiceTarget | undefined
}

export class Services {
  private readonly byName = new Map<string, Service>()
  /**
   * The host name of every upstream, the PMS and its sandbox included: no answer a partner gets
   * may name one (proxy/headers.ts, LocationMap).
   */
  readonly internalHosts: readonly string[]

  /** `clientSpans`, with tracing on, makes the interceptor of each upstream's client spans. */
  constructor(config: Config, dispatcher?: Dispatcher, clientSpans?: (upstream: string) => Interceptor) {
    for (const settings of Object.values(config.upstreams)) {
      const target = (name: string, url: string, token: string | undefined): ServiceTarget => ({
        // A stream passed on to a partner is never held back (no buffering).
        upstream: new Upstream({
          ...settings, name, url, buffered: false, clientSpans: clientSpans?.(name),
          credentialShare: { perCredential: settings.maxInFlightPerCredential, credentialHeader: CREDENTIAL_HEADER },
          ...(dispatcher === undefined ? {} : { dispatcher }),
        }),
        origin: new URL(url).origin,
        host: new URL(url).host,
        token,
      })
      this.byName.set(settings.name, {
        settings,
        live: target(settings.name, settings.url, settings.token),
        sandbox: settings.sandbox === undefined ? undefined : target(`${settings.name}Sandbox`, settings.sandbox.url, settings.sandbox.token),
      })
    }
    const urls = [config.pms?.url, config.pmsSandbox?.url, ...Object.values(config.upstreams).flatMap((u) => [u.url, u.sandbox?.url])]
    this.internalHosts = urls.filter((url) => url !== undefined).map((url) => new URL(url).hostname)
  }

  get(name: string): Service {
    const service = this.byName.get(name)
    if (service === undefined) throw new Error(`no upstream named '${name}'`)
    return service
  }

  /** Where a key of `mode` is sent; undefined for a test key of a service without a sandbox. */
  target(name: string, mode: KeyMode): ServiceTarget | undefined {
    const service = this.get(name)
    return mode === 'live' ? service.live : service.sandbox
  }

  /** Every upstream, sandboxes included: /status, metrics, closing. */
  get all(): Upstream[] {
    return [...this.byName.values()].flatMap((s) => [s.live.upstream, ...(s.sandbox === undefined ? [] : [s.sandbox.upstream])])
  }
}
