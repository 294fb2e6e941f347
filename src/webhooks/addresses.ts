import { lookup as dnsLookup } from 'node:dns'
import { isIP } from 'node:net'
import { buildConnector } from 'undici'
import { isPublicAddress } from '../net/addresses.js'

// No request into our own network (docs/architecture.md, "Webhooks", and §D34): the address a
// delivery actually connects to is checked on every attempt, after DNS, so a name that resolves
// (or re-resolves) to an internal address never gets a request. What is public is
// src/net/addresses.ts's rule (every IPv6 form that carries an IPv4 address is judged by that
// address). Decimal, octal and short IPv4 forms never reach this code as such: the URL parser
// (WHATWG) writes them as dotted quads, and DNS answers only in canonical forms.

export { isPublicAddress }

/** The attempt's address is internal: the attempt fails as `blocked`, and nothing is sent. */
export class BlockedAddressError extends Error {
  readonly code = 'WEBHOOK_ADDRESS_BLOCKED'
  constructor(readonly host: string, readonly address: string) {
    super(`the endpoint's host ${host} is at ${address}, an internal address`)
    this.name = 'BlockedAddressError'
  }
}

export type Lookup = (hostname: string) => Promise<string>

/** The system resolver's first answer, as a connection would use it. */
export const systemLookup: Lookup = (hostname) => new Promise((resolve, reject) => {
  dnsLookup(hostname, { all: false, verbatim: true }, (error, address) => (error === null ? resolve(address) : reject(error)))
})

export interface GuardOptions {
  /** `events.allowPrivateTargets`: no address is refused (tests and the demo only). */
  allowPrivate: boolean
  connectTimeoutMs: number
  /** How host names are resolved (tests give a resolver of their own). */
  lookup?: Lookup
}

/**
 * An undici connector that resolves the host itself, refuses an internal address before
 * connecting, connects to that very address (TLS still names the host), and checks the
 * socket's remote address once connected. undici's own `connect.lookup` hook is skipped for
 * literal-IP hosts; this one is not.
 */
export function guardedConnector(options: GuardOptions): buildConnector.connector {
  const base = buildConnector({ timeout: options.connectTimeoutMs })
  const lookup = options.lookup ?? systemLookup
  return function connect(opts, callback) {
    const host = opts.hostname.replace(/^\[|\]$/g, '')
    const resolved = isIP(host) !== 0 ? Promise.resolve(host) : lookup(host)
    resolved.then((address) => {
      if (!options.allowPrivate && !isPublicAddress(address)) {
        callback(new BlockedAddressError(host, address), null)
        return
      }
      const servername = opts.servername ?? (isIP(host) === 0 ? host : undefined)
      base({ ...opts, hostname: address, ...(servername === undefined ? {} : { servername }) }, (error, socket) => {
        if (error !== null) return callback(error, null)
        const remote = socket.remoteAddress
        if (!options.allowPrivate && (remote === undefined || !isPublicAddress(remote))) {
          socket.destroy()
          return callback(new BlockedAddressError(host, remote ?? 'unknown'), null)
        }
        return callback(null, socket)
      })
    }, (error: unknown) => callback(error as Error, null))
  }
}

export const MAX_URL_CHARS = 2048

/**
 * Why an endpoint URL may not be registered, or undefined (docs/partners.md, "Webhooks"):
 * not https (unless `allowHttp`), userinfo, too long, or a host that is `localhost` or an
 * internal literal address (unless `allowPrivate`). A name is judged when it is connected to.
 */
export function urlProblem(text: string, flags: { allowHttp: boolean; allowPrivate: boolean }): string | undefined {
  if (text.length > MAX_URL_CHARS) return `url must be at most ${MAX_URL_CHARS} characters`
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return 'url must be an absolute https URL'
  }
  if (url.protocol !== 'https:' && !(flags.allowHttp && url.protocol === 'http:')) return 'url must use https'
  if (url.username !== '' || url.password !== '') return 'url must not hold a user name or password'
  if (flags.allowPrivate) return undefined
  const host = url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase()
  if (host === 'localhost' || host.endsWith('.localhost')) return 'url must not point at localhost'
  if (isIP(host) !== 0 && !isPublicAddress(host)) return 'url must not point at an internal address'
  return undefined
}
