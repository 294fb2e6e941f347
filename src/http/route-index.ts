// Fastify answers only "found" or "not found". The contract tells unknown paths apart from
// known paths asked with the wrong method (405 + Allow), with a trailing slash, or in the
// wrong case. This index, filled from `onRoute`, answers those questions for the
// not-found handler.

export type RouteDiagnosis = { brandScoped: boolean } & (
  | { kind: 'methodNotAllowed'; allow: string }
  | { kind: 'trailingSlash' }
  | { kind: 'caseMismatch'; path: string })

interface IndexedRoute {
  url: string
  brandScoped: boolean
  methods: Set<string>
  exact: RegExp
  caseless: RegExp
  /** Static segments in their right case; undefined where the segment is a parameter. */
  segments: (string | undefined)[]
}

function escape(segment: string): string {
  return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

export class RouteIndex {
  private readonly routes = new Map<string, IndexedRoute>()

  add(url: string, methods: string | string[], brandScoped: boolean): void {
    let route = this.routes.get(url)
    if (route === undefined) {
      const segments = url.split('/').map((s) => (s.startsWith(':') ? undefined : s))
      const source = segments.map((s) => (s === undefined ? '[^/]+' : escape(s))).join('/')
      route = { url, brandScoped, methods: new Set(), exact: new RegExp(`^${source}$`), caseless: new RegExp(`^${source}$`, 'i'), segments }
      this.routes.set(url, route)
    }
    for (const method of Array.isArray(methods) ? methods : [methods]) route.methods.add(method)
  }

  private find(path: string, pattern: 'exact' | 'caseless'): IndexedRoute | undefined {
    for (const route of this.routes.values()) if (route[pattern].test(path)) return route
    return undefined
  }

  /** Why `method path` found no route, when it nearly did. */
  diagnose(method: string, path: string): RouteDiagnosis | undefined {
    const exact = this.find(path, 'exact')
    if (exact !== undefined) {
      if (exact.methods.has(method)) return undefined
      return { kind: 'methodNotAllowed', allow: this.allowOf(exact), brandScoped: exact.brandScoped }
    }
    if (path.length > 1 && path.endsWith('/')) {
      const trimmed = path.slice(0, -1)
      const route = this.find(trimmed, 'exact')
      if (route !== undefined) return { kind: 'trailingSlash', brandScoped: route.brandScoped }
    }
    const caseless = this.find(path, 'caseless')
    if (caseless !== undefined) {
      const given = path.split('/')
      const right = caseless.segments.map((s, i) => s ?? given[i]).join('/')
      return { kind: 'caseMismatch', path: right, brandScoped: caseless.brandScoped }
    }
    return undefined
  }

  /** The Allow header of the route at exactly `path`, if there is one. */
  allowFor(path: string): string | undefined {
    const route = this.find(path, 'exact')
    return route === undefined ? undefined : this.allowOf(route)
  }

  private allowOf(route: IndexedRoute): string {
    const methods = [...route.methods]
    if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD')
    const order = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']
    return methods.sort((a, b) => order.indexOf(a) - order.indexOf(b)).join(', ')
  }
}
