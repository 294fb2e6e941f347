import { z } from 'zod'
import { port, positiveInt, type SectionCheck } from '../config/fields.js'
import { parseBlock } from '../net/addresses.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The public listener's section of the configuration (docs/architecture.md, "Configuration"):
// where it listens, the brands its host names select, which proxies it believes, its
// slow-client bounds, load shedding and the drain at shutdown.

const brandSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'lower-case letters, digits and dashes').describe('Brand id, as given to the key tool'),
  chainCode: z.string().min(1).describe('The PMS chain code of this brand'),
  hosts: z.array(z.string().min(1)).min(1).describe('Host names that select this brand (matched lower-cased, port removed)'),
  docsUrl: z.url().optional().describe("This brand's documentation base URL for problem `type` links"),
  portalOrigin: z.url({ protocol: /^https?$/, error: 'must be an http(s) origin such as https://portal.acme-hotels.example' })
    .refine((url) => { const u = new URL(url); return u.pathname === '/' && u.search === '' && u.hash === '' && u.username === '' && u.password === '' }, 'must be an origin: scheme, host and port, no path, query or credentials')
    .optional()
    .describe("Where the partner portal's links of this brand lead (scheme, host and port; its host one of `hosts`); default `https://` and the first host"),
})

export type BrandConfig = z.infer<typeof brandSchema>

// A hop count is one of Fastify's forms, but the installed Fastify ignores it (5.12 believes
// no proxy then: a count cannot tell a proxy from a client that connects directly and sends
// enough hops of its own); test/trust-proxy.test.ts pins that. Taken, it would be ignored in
// silence, so it is refused at start (docs/architecture.md §D46).
const HOP_COUNT_IGNORED = 'a hop count is ignored by Fastify, which then believes no proxy at all: list the addresses or CIDR blocks your proxies connect from instead (e.g. ["10.0.0.0/8"])'

export function normaliseHost(host: string): string {
  const lower = host.trim().toLowerCase()
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1)
  const colon = lower.indexOf(':')
  return colon === -1 ? lower : lower.slice(0, colon)
}

export const httpFileFields = {
  docsUrl: z.url().describe('Documentation base URL; problem `type` links are `{docsUrl}/errors/<code>`'),
  brands: z.array(brandSchema).min(1).describe('Brands, each selected by host name'),
  trustProxy: z.union([
    z.boolean(),
    z.array(z.string().refine((entry) => parseBlock(entry) !== undefined, 'must be an IP address or a CIDR block')).min(1),
    z.number().refine(() => false, HOP_COUNT_IGNORED),
  ], { error: 'must be true, false or a list of proxy addresses and CIDR blocks' }).default(false)
    .describe('Which proxies to believe for `X-Forwarded-Host` and `X-Forwarded-For`, as Fastify does: `false` none, `true` any, or a list of addresses and CIDR blocks the proxies connect from (e.g. `["10.0.0.0/8"]`). A hop count is refused: the installed Fastify would ignore it'),
  loadShedding: z.strictObject({
    maxEventLoopDelayMs: z.number().int().min(0).default(1000).describe('Median event-loop delay of a sample above which the sample counts as overloaded; 0 turns this measure off'),
    maxEventLoopUtilization: z.number().min(0).max(1).default(0).describe('Event-loop utilisation (0-1) of a sample above which it counts as overloaded; 0 turns this measure off'),
    sampleIntervalMs: positiveInt.default(1000).describe('How often the event loop is sampled'),
    sustainedSamples: z.number().int().min(2).max(60).default(3)
      .describe('Consecutive overloaded samples before the API sheds load with 503 (and health is unhealthy); one stall makes one such sample, so it never sheds'),
  }).prefault({}),
  server: z.strictObject({
    headersTimeoutMs: positiveInt.default(10000).describe('A request whose headers are not complete within this is answered 408 REQUEST_TIMEOUT and closed'),
    requestTimeoutMs: positiveInt.default(30000).describe('A request not wholly received (headers and body) within this is answered 408 REQUEST_TIMEOUT and closed'),
    keepAliveTimeoutMs: positiveInt.default(65000).describe('Idle keep-alive connections close after this (above common load balancer idle timeouts)'),
    writeIdleTimeoutMs: positiveInt.default(15000)
      .describe('A connection whose partner takes none of the answer\'s bytes for this long is closed (checked every half of it), and the call it was answering ended (its upstream connection and slots freed)'),
    watchConfig: z.boolean().default(false)
      .describe('Reload the config file when it (or the directory holding it, as a Kubernetes ConfigMap volume changes it) changes, a second after the last change; SIGHUP and POST /admin/v1/config/reload reload it either way'),
    coalesceAnswers: z.boolean().default(true)
      .describe('The answers ready in one turn of the event loop end together at its end, one wake-up of the partner\'s side for many answers; false ends each the moment it is ready'),
  }).prefault({}),
  shutdown: z.strictObject({
    drainMs: z.number().int().min(0).default(5000).describe('After SIGTERM, keep serving (health unhealthy) this long so load balancers move away'),
    timeoutMs: positiveInt.default(10000).describe('Exit before this, whatever is still open'),
  }).prefault({}),
}

export const checkHttp: SectionCheck<typeof httpFileFields> = (file, ctx) => {
  const owner = new Map<string, string>()
  file.brands.forEach((brand, i) => {
    brand.hosts.forEach((host, j) => {
      const normalised = normaliseHost(host)
      const previous = owner.get(normalised)
      if (previous !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['brands', i, 'hosts', j], message: `host '${normalised}' already belongs to brand '${previous}'` })
      }
      owner.set(normalised, brand.id)
    })
  })
  const ids = new Set<string>()
  const chains = new Map<string, string>()
  file.brands.forEach((brand, i) => {
    if (ids.has(brand.id)) ctx.addIssue({ code: 'custom', path: ['brands', i, 'id'], message: `duplicate brand id '${brand.id}'` })
    ids.add(brand.id)
    // Two brands on one chain would each see the other's properties.
    const chainOwner = chains.get(brand.chainCode)
    if (chainOwner !== undefined) ctx.addIssue({ code: 'custom', path: ['brands', i, 'chainCode'], message: `chainCode '${brand.chainCode}' already belongs to brand '${chainOwner}'` })
    else chains.set(brand.chainCode, brand.id)
    // A portal link must lead to a host that selects its brand, or the portal would not answer there.
    if (brand.portalOrigin !== undefined && !brand.hosts.map(normaliseHost).includes(normaliseHost(new URL(brand.portalOrigin).host))) {
      ctx.addIssue({ code: 'custom', path: ['brands', i, 'portalOrigin'], message: `its host must be one of the brand's hosts (${brand.hosts.join(', ')})` })
    }
  })
  if (file.server.headersTimeoutMs > file.server.requestTimeoutMs) {
    ctx.addIssue({ code: 'custom', path: ['server', 'headersTimeoutMs'], message: 'must not exceed server.requestTimeoutMs' })
  }
}

export const httpEnvFields = {
  PORT: port.default(3000).describe('Public listener port'),
  HOST: z.string().min(1).default('127.0.0.1').describe('Public bind address (containers set 0.0.0.0)'),
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const httpReload: ReloadRules = {
  reloadable: {
    brands: 'the next request: its host selects among the new brands; events published from then on, and the portal\'s links, use them too',
  },
  restartOnly: {
    docsUrl: 'the admin listener, made once at start, links its problems with it too',
    trustProxy: 'which proxies are believed decides the client addresses that the per-address bounds count; it stays as the process started',
    loadShedding: 'the event-loop sampler and the health check it feeds run for the life of the process',
    server: 'the public listener and its timeouts are made at start, and whether the file is watched is decided then',
    shutdown: 'read by the signal handler set up at start',
  },
}
