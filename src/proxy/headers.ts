import type { FastifyRequest } from 'fastify'
import { callerOf } from '../http/request-state.js'
import { outgoingTraceHeaders } from '../http/trace.js'
import type { Scopes } from '../keys/principal.js'
import { pathParameterNames, placeholders, type RoutePolicy } from '../routes/policy.js'

// The headers of a forwarded call, both ways (docs/architecture.md, "What the service
// receives"; docs/architecture.md, "What the partner receives"). A service behind the gateway
// trusts what it receives, so the request's headers are an allow-list: the few a partner's
// request passes on as they are, then the gateway's own, which no partner can send. Anything
// else (a method override, an X-Original-URL, a Content-Encoding, an Expect, a name with an
// underscore that a CGI-style server reads as X-Service-Brand) never crosses.

/** Partner headers a service receives unchanged (Service-Correlation-Id only once it is valid). */
const PASSED_REQUEST_HEADERS = ['accept', 'accept-language', 'user-agent'] as const

/**
 * The gateway's header naming the credential (API key id) a call is made for. The upstream's
 * in-flight bound counts each credential's share by it (upstream/interceptors.ts).
 */
export const CREDENTIAL_HEADER = 'x-service-key-id'

/** Methods whose Idempotency-Key a service receives. */
const IDEMPOTENCY_KEY_METHODS: ReadonlySet<string> = new Set(['POST', 'PATCH'])

/** How one declared route speaks to its service, fixed when the route is registered. */
export interface ServiceCall {
  /** Where the service reads the gateway's token, if it takes one. */
  tokenHeader: string | undefined
  /** Property-scoped routes tell the service the checked property. */
  propertyScoped: boolean
  /** The routes' scopes, of which a credential's effective ones go in X-Service-Scopes. */
  scopes: ScopesHeader
}

/**
 * The gateway's own headers of a call: every one of them is set here, after the partner's,
 * so a partner can neither send nor replace any.
 */
function addGatewayHeaders(out: Record<string, string>, request: FastifyRequest, call: ServiceCall, token: string | undefined): void {
  const { brand, principal } = callerOf(request)
  if (call.tokenHeader !== undefined && token !== undefined) out[call.tokenHeader] = token
  out['x-request-id'] = request.id
  if (request.trace !== null) Object.assign(out, outgoingTraceHeaders(request.trace))
  out[CREDENTIAL_HEADER] = principal.keyId
  out['x-service-brand'] = brand.id
  out['x-service-mode'] = principal.mode
  out['x-service-scopes'] = call.scopes.of(principal.scopes)
  if (call.propertyScoped && request.propertyId !== null) out['x-service-property-id'] = request.propertyId
  // The client address the gateway determined (through the proxies trustProxy believes).
  out['x-forwarded-for'] = request.ip
  // The answer is streamed to the partner as it comes: never in an encoding of the service's.
  out['accept-encoding'] = 'identity'
}

/** The headers a service receives for `request`, but Host and the body's, which the caller adds. */
export function serviceRequestHeaders(request: FastifyRequest, call: ServiceCall, token: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  const headers = request.headers
  for (const name of PASSED_REQUEST_HEADERS) {
    const value = headers[name]
    if (typeof value === 'string') out[name] = value
  }
  if (request.correlationId !== null) out['service-correlation-id'] = request.correlationId
  // As step 3 read it: a key sent in quotes (an RFC 9651 string) reaches the service bare, as
  // the same key sent bare does.
  const idempotencyKey = request.idempotencyKey
  if (idempotencyKey !== null && IDEMPOTENCY_KEY_METHODS.has(request.method)) out['idempotency-key'] = idempotencyKey
  addGatewayHeaders(out, request, call, token)
  return out
}

/**
 * The size of a request head as it goes on the wire: request line, header lines, blank line.
 * Header values are latin1 strings (as Node reads them) and the target is ASCII: a character
 * is a byte.
 */
export function headSize(method: string, target: string, headers: Record<string, string>): number {
  let size = method.length + target.length + 14 // ' ', ' HTTP/1.1\r\n', and the blank line's '\r\n'
  for (const name in headers) size += name.length + (headers[name] as string).length + 4 // ': ' and '\r\n'
  return size
}

/**
 * `X-Service-Scopes`: the credential's effective scopes among those the routes know, sorted,
 * space-separated; a credential with every scope sends every known scope. Built once per
 * credential's scope set, not per request.
 */
export class ScopesHeader {
  private readonly all: string
  private readonly built = new WeakMap<ReadonlySet<string>, string>()

  constructor(private readonly known: readonly string[]) {
    this.all = known.join(' ')
  }

  of(scopes: Scopes): string {
    if (scopes === 'all') return this.all
    let value = this.built.get(scopes)
    if (value === undefined) {
      value = this.known.filter((scope) => scopes.has(scope)).join(' ')
      this.built.set(scopes, value)
    }
    return value
  }
}

/**
 * Response headers a partner may see as the service sent them; Location and Link are mapped to
 * the public paths (LocationMap, mapLinks); everything else of the service's is dropped.
 */
export const PASSED_RESPONSE_HEADERS = ['content-type', 'content-length', 'content-language'] as const

/** The link-values of a Link header (RFC 8288 3): each target and the parameters after it. */
function linkValues(header: string): { target: string; params: string[] }[] {
  const links: { target: string; params: string[] }[] = []
  let i = 0
  while (i < header.length) {
    while (i < header.length && (header[i] === ',' || header[i] === ' ' || header[i] === '\t')) i += 1
    if (i >= header.length) break
    // A value that does not start with <target> cannot be read: the rest goes with it.
    if (header[i] !== '<') break
    const close = header.indexOf('>', i)
    if (close === -1) break
    const target = header.slice(i + 1, close)
    i = close + 1
    const params: string[] = []
    let param = ''
    let quoted = false
    for (; i < header.length; i += 1) {
      const c = header[i] as string
      if (quoted && c === '\\') {
        param += c + (header[i + 1] ?? '')
        i += 1
        continue
      }
      if (c === '"') quoted = !quoted
      if (!quoted && (c === ',' || c === ';')) {
        if (param.trim() !== '') params.push(param.trim())
        param = ''
        if (c === ',') break
        continue
      }
      param += c
    }
    if (param.trim() !== '') params.push(param.trim())
    links.push({ target, params })
  }
  return links
}

/**
 * A service's Link header with every target mapped as Location is (to the public path of a
 * declared route of the same service); a link whose target maps to none is dropped, and so is
 * an `anchor` parameter (a second URI, the link's context). Undefined when no link is left.
 */
export function mapLinks(value: string | string[], map: LocationMap): string | undefined {
  const kept: string[] = []
  for (const header of Array.isArray(value) ? value : [value]) {
    for (const { target, params } of linkValues(header)) {
      const mapped = map.map(target)
      if (mapped === undefined) continue
      const passed = params.filter((p) => !/^anchor\s*=/i.test(p))
      const link = [`<${mapped}>`, ...passed].join('; ')
      // A parameter may carry a URL too (`title*`, an extension's own).
      if (!map.namesInternalHost(link)) kept.push(link)
    }
  }
  return kept.length === 0 ? undefined : kept.join(', ')
}

interface LocationRule {
  pattern: RegExp
  names: string[]
  publicPath: string
}

/**
 * Maps the service's `Location` (its upstreamPath) back to the public path of a declared
 * route of the same upstream; undefined when it maps to none (the header is then dropped).
 */
/** `%xx` decoded, repeatedly (a second encoding hides a host as well as the first); bad escapes kept as written. */
function percentDecoded(text: string): string {
  let current = text
  for (let round = 0; round < 4; round += 1) {
    const next = current.replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    if (next === current) break
    current = next
  }
  return current
}

export class LocationMap {
  private readonly rules: LocationRule[]
  /** Matches an upstream's host name as a whole name (not inside a longer one); undefined when none is known. */
  private readonly internalHost: RegExp | undefined

  /**
   * `internalHosts`: the host names of every upstream (the PMS and each service, sandboxes
   * included). A mapped Location or link that names one anywhere, after percent-decoding, is
   * dropped like one that maps to no route: a service's query string or parameter must not
   * hand a partner an internal address (docs/architecture.md, "What the partner receives").
   */
  constructor(policies: readonly RoutePolicy[], private readonly origins: readonly string[], internalHosts: readonly string[] = []) {
    const names = [...new Set(internalHosts.map((h) => h.toLowerCase().replace(/^\[(.*)\]$/, '$1')))].filter((h) => h !== '')
    this.internalHost = names.length === 0
      ? undefined
      : new RegExp(`(?:^|[^a-z0-9.-])(?:${names.map((h) => h.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})(?:$|[^a-z0-9.-])`)
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
      const mapped = `${rule.publicPath.replace(/\{([A-Za-z][A-Za-z0-9]*)\}/g, (_m, name: string) => values.get(name) as string)}${search}`
      return this.namesInternalHost(mapped) ? undefined : mapped
    }
    return undefined
  }

  /** Whether `text` names an upstream's host anywhere, once percent-decoded. */
  namesInternalHost(text: string): boolean {
    return this.internalHost !== undefined && this.internalHost.test(percentDecoded(text).toLowerCase())
  }
}
