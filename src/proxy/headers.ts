import type { IncomingHttpHeaders } from 'node:http'
import { pathParameterNames, placeholders, type RoutePolicy } from '../routes/policy.js'

// The headers of a forwarded call, both ways (routes.md, "What the service receives" and
// "What the partner receives"). Partners cannot speak for the gateway: whatever they send in
// the gateway's own headers is removed before the gateway adds its own.

// RFC 9110 7.6.1 hop-by-hop headers, the partner's credentials, and Accept-Encoding (the
// answer is streamed as it comes and Content-Encoding is not passed back).
const DROPPED_REQUEST_HEADERS = new Set([
  'authorization', 'cookie', 'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te',
  'trailer', 'transfer-encoding', 'upgrade', 'accept-encoding', 'traceparent', 'tracestate', 'x-request-id', 'forwarded',
  'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'service-request-id',
  // The gateway passes the checked property on as X-Service-Property-Id.
  'service-property-id',
])

/** The partner's headers fit to go on: credentials, hop-by-hop and anything of the gateway's own removed. */
export function forwardableHeaders(headers: IncomingHttpHeaders, tokenHeader: string | undefined): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || DROPPED_REQUEST_HEADERS.has(name) || name.startsWith('x-service-') || name === tokenHeader) continue
    kept[name] = value
  }
  return kept
}

/** Response headers a partner may see; everything else of the service's is dropped. */
export const PASSED_RESPONSE_HEADERS = ['content-type', 'content-length', 'content-language', 'link'] as const

interface LocationRule {
  pattern: RegExp
  names: string[]
  publicPath: string
}

/**
 * Maps the service's `Location` (its upstreamPath) back to the public path of a declared
 * route of the same upstream; undefined when it maps to none (the header is then dropped).
 */
export class LocationMap {
  private readonly rules: LocationRule[]

  constructor(policies: readonly RoutePolicy[], private readonly origins: readonly string[]) {
    this.rules = policies.flatMap((policy) => {
      if (policy.forward === undefined) return []
      const names = placeholders(policy.forward.path)
      const source = policy.forward.path.split(/\{[A-Za-z][A-Za-z0-9]*\}/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('([^/?#]+)')
      return [{ pattern: new RegExp(`^${source}$`), names, publicPath: policy.path }]
    })
  }

  map(location: string): string | undefined {
    let path = location
    if (/^[a-z][a-z0-9+.-]*:/i.test(location)) {
      let url: URL
      try {
        url = new URL(location)
      } catch {
        return undefined
      }
      if (!this.origins.includes(url.origin)) return undefined
      path = `${url.pathname}${url.search}`
    }
    const query = path.indexOf('?')
    const pathname = query === -1 ? path : path.slice(0, query)
    const search = query === -1 ? '' : path.slice(query)
    for (const rule of this.rules) {
      const match = rule.pattern.exec(pathname)
      if (match === null) continue
      const values = new Map(rule.names.map((name, i) => [name, match[i + 1] as string]))
      const needed = pathParameterNames(rule.publicPath)
      if (!needed.every((name) => values.has(name))) continue
      return `${rule.publicPath.replace(/\{([A-Za-z][A-Za-z0-9]*)\}/g, (_m, name: string) => values.get(name) as string)}${search}`
    }
    return undefined
  }
}
