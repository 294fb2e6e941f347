import { randomUUID, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { listen, stop } from '../listen.js'
import { compactJws, generateSigningKey, publicJwk, type Signature, type SigningAlg, type SigningKey } from './jws.js'

// A stand-in for the company's identity provider (an OAuth 2.0 authorization server such as
// Keycloak), for the demo, development and the tests. Its paths are Keycloak's, under one
// realm (`partners` by default):
//
//   GET  /realms/{realm}/.well-known/openid-configuration   issuer, token endpoint, JWKS URI
//   GET  /realms/{realm}/protocol/openid-connect/certs       the JWKS: an RS256 and an ES256 key
//   POST /realms/{realm}/protocol/openid-connect/token       client credentials (RFC 6749 4.4):
//        grant_type=client_credentials, the client's id and secret (HTTP Basic, or
//        client_id/client_secret in the form), optional `scope` (space-separated) and `audience`
//
// Tokens are RFC 9068 access tokens (`typ: at+jwt`, `client_id`), or with the `keycloak`
// profile what Keycloak sends (`typ: JWT`, the client in `azp`, `profile email` in `scope`).
// Controlled over HTTP:
//
//   POST   /__mock/clients   {"clientId", "secret", "scopes"?: [...]}   registers a client (scopes: the most it may ask for)
//   PUT    /__mock/settings  {"alg"?: "RS256"|"ES256", "profile"?: "rfc9068"|"keycloak", "lifetimeSeconds"?: n, "audience"?: "..."}
//   POST   /__mock/rotate    {"alg"?: "RS256"|"ES256", "retire"?: true}   a new signing key (and the old one unpublished with retire)
//   PUT    /__mock/failure   {"mode": "jwks-down"|"jwks-slow", "latencyMs"?: n, "times"?: n}
//   DELETE /__mock/failure   back to healthy
//   POST   /__mock/mint      {"claims"?: {...}, "header"?: {...}, "omit"?: [...], "signature"?: "RS256"|"ES256"|"none"|"HS256-with-public-key", "kid"?: "...", "count"?: n}
//                            tokens as the test needs them: wrong in any way, signed with this provider's keys
//   GET    /__mock/requests  what it received (method, path, time): JWKS fetches are counted from it
//   DELETE /__mock/requests

export type Profile = 'rfc9068' | 'keycloak'
export type FailureMode = 'jwks-down' | 'jwks-slow'

export interface Failure {
  mode: FailureMode
  latencyMs?: number
  /** How many JWKS requests it applies to; unset: until cleared. */
  times?: number
}

export interface Client {
  clientId: string
  secret: string
  /** The most it may ask for; absent: any scope. */
  scopes?: string[]
}

export interface Settings {
  alg: SigningAlg
  profile: Profile
  lifetimeSeconds: number
  audience: string
}

export interface MintRequest {
  claims?: Record<string, unknown>
  header?: Record<string, unknown>
  /** Claims (or header fields) left out: `exp`, `sub`, `typ`, `kid`… */
  omit?: string[]
  signature?: Signature
  /** Sign with the current key of this algorithm, or the key of this id. */
  kid?: string
  /** The payload as this raw text instead of claims (a payload that is not a JSON object). */
  rawPayload?: string
}

export interface ReceivedRequest {
  method: string
  path: string
  at: string
}

export interface MockIdpOptions {
  realm?: string
  /** The `iss` of its tokens; default `http://127.0.0.1:<port>/realms/<realm>`. */
  issuer?: string
  clients?: Client[]
  settings?: Partial<Settings>
}

const LOG_LIMIT = 10_000

export class MockIdp {
  readonly realm: string
  private server: Server | undefined
  private readonly clients = new Map<string, Client>()
  private readonly keys: SigningKey[] = []
  /** Keys still signing, one per algorithm; the others are published until retired. */
  private readonly current = new Map<SigningAlg, SigningKey>()
  private generation = 0
  private failure: Failure | undefined
  settings: Settings
  readonly received: ReceivedRequest[] = []

  constructor(private readonly options: MockIdpOptions = {}) {
    this.realm = options.realm ?? 'partners'
    this.settings = { alg: 'RS256', profile: 'rfc9068', lifetimeSeconds: 300, audience: 'partner-api', ...options.settings }
    for (const client of options.clients ?? []) this.addClient(client)
    this.rotate('RS256')
    this.rotate('ES256')
  }

  get url(): string {
    const address = this.server?.address() as AddressInfo | null | undefined
    if (address === undefined || address === null) throw new Error('stand-in identity provider not listening')
    return `http://127.0.0.1:${address.port}`
  }

  get issuer(): string {
    return this.options.issuer ?? `${this.url}/realms/${this.realm}`
  }

  /** Its own address of the realm (the issuer may name another host, as behind a proxy). */
  get realmUrl(): string {
    return `${this.url}/realms/${this.realm}`
  }

  get jwksUri(): string {
    return `${this.realmUrl}/protocol/openid-connect/certs`
  }

  get tokenUrl(): string {
    return `${this.realmUrl}/protocol/openid-connect/token`
  }

  /** JWKS requests received so far. */
  get jwksFetches(): number {
    return this.received.filter((r) => r.path.endsWith('/protocol/openid-connect/certs')).length
  }

  addClient(client: Client): void {
    this.clients.set(client.clientId, client)
  }

  setFailure(failure: Failure | undefined): void {
    this.failure = failure
  }

  /** A new signing key for `alg`; with `retire`, the keys it replaces leave the JWKS. */
  rotate(alg: SigningAlg = this.settings.alg, retire = false): SigningKey {
    this.generation += 1
    const key = generateSigningKey(alg, `${alg.toLowerCase()}-${this.generation}`)
    if (retire) {
      for (let i = this.keys.length - 1; i >= 0; i -= 1) if (this.keys[i]?.alg === alg) this.keys.splice(i, 1)
    }
    this.keys.push(key)
    this.current.set(alg, key)
    return key
  }

  jwks(): { keys: Record<string, unknown>[] } {
    return { keys: this.keys.map(publicJwk) }
  }

  /** A token as the token endpoint issues it, for `clientId` with `scopes`. */
  issue(clientId: string, scopes: string[], audience = this.settings.audience): string {
    const now = Math.floor(Date.now() / 1000)
    const keycloak = this.settings.profile === 'keycloak'
    const claims: Record<string, unknown> = {
      iss: this.issuer,
      // Keycloak's subject of a client-credentials token is the client's service account.
      sub: keycloak ? `service-account-${clientId}` : clientId,
      aud: audience,
      exp: now + this.settings.lifetimeSeconds,
      iat: now,
      jti: randomUUID(),
      ...(keycloak ? { azp: clientId, typ: 'Bearer' } : { client_id: clientId }),
      scope: (keycloak ? ['profile', 'email', ...scopes] : scopes).join(' '),
    }
    return this.mint({ claims, header: { typ: keycloak ? 'JWT' : 'at+jwt' }, omit: keycloak ? ['client_id'] : [] })
  }

  /** A token exactly as asked: valid claims by default, then `claims` and `header` over them, then `omit`. */
  mint(request: MintRequest = {}): string {
    // A kid of a published key signs with that key; an unknown one with the current key of the algorithm.
    const named = request.kid === undefined ? undefined : this.keys.find((k) => k.kid === request.kid)
    const signature = request.signature ?? named?.alg ?? this.settings.alg
    const key = named ?? this.current.get(signature === 'ES256' ? 'ES256' : 'RS256') as SigningKey
    const now = Math.floor(Date.now() / 1000)
    const alg = signature === 'none' ? 'none' : signature === 'HS256-with-public-key' ? 'HS256' : key.alg
    const header: Record<string, unknown> = { alg, typ: 'at+jwt', kid: request.kid ?? key.kid, ...request.header }
    const claims: Record<string, unknown> = {
      iss: this.issuer, sub: 'test-client', aud: this.settings.audience, exp: now + this.settings.lifetimeSeconds, iat: now,
      jti: randomUUID(), client_id: 'test-client', scope: '', ...request.claims,
    }
    for (const name of request.omit ?? []) {
      delete claims[name]
      delete header[name]
    }
    return compactJws(header, request.rawPayload ?? claims, key, signature)
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = await listen((req, res) => void this.handle(req, res).catch(() => res.destroy()), port, host)
    return this
  }

  async close(): Promise<void> {
    await stop(this.server)
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://idp')
    if (url.pathname.startsWith('/__mock/')) return this.control(req, res, url)
    this.received.push({ method: req.method ?? 'GET', path: url.pathname, at: new Date().toISOString() })
    if (this.received.length > LOG_LIMIT) this.received.shift()
    const realm = `/realms/${this.realm}`
    switch (url.pathname) {
      case `${realm}/.well-known/openid-configuration`:
        return json(res, 200, {
          issuer: this.issuer, token_endpoint: this.tokenUrl, jwks_uri: this.jwksUri,
          grant_types_supported: ['client_credentials'], token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          id_token_signing_alg_values_supported: ['RS256', 'ES256'],
        })
      case `${realm}/protocol/openid-connect/certs`:
        return this.certs(res)
      case `${realm}/protocol/openid-connect/token`:
        if (req.method !== 'POST') return json(res, 405, { error: 'invalid_request', error_description: 'POST only' })
        return this.token(req, res)
      default:
        return json(res, 404, { error: 'not_found' })
    }
  }

  private async certs(res: ServerResponse): Promise<void> {
    const failure = this.failure
    if (failure?.times !== undefined) this.failure = failure.times <= 1 ? undefined : { ...failure, times: failure.times - 1 }
    if (failure?.mode === 'jwks-down') {
      res.writeHead(503, { 'content-type': 'text/html' })
      res.end('<html><body><h1>503 Service Unavailable</h1></body></html>')
      return
    }
    if (failure?.mode === 'jwks-slow') await new Promise((resolve) => setTimeout(resolve, failure.latencyMs ?? 5000))
    json(res, 200, this.jwks())
  }

  // RFC 6749 4.4 and 5.2: client credentials, errors as {error, error_description}.
  private async token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(await readBody(req))
    let clientId = form.get('client_id')
    let secret = form.get('client_secret')
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '')
    if (basic !== null) {
      const decoded = Buffer.from(basic[1] as string, 'base64').toString('utf8')
      const colon = decoded.indexOf(':')
      clientId = decodeURIComponent(decoded.slice(0, colon))
      secret = decodeURIComponent(decoded.slice(colon + 1))
    }
    if (form.get('grant_type') !== 'client_credentials') {
      return json(res, 400, { error: 'unsupported_grant_type', error_description: 'only client_credentials' })
    }
    const client = clientId === null ? undefined : this.clients.get(clientId)
    if (client === undefined || secret === null || !sameSecret(secret, client.secret)) {
      res.setHeader('www-authenticate', `Basic realm="${this.realm}"`)
      return json(res, 401, { error: 'invalid_client', error_description: 'unknown client or wrong secret' })
    }
    const asked = (form.get('scope') ?? '').split(' ').filter((s) => s !== '')
    const scopes = asked.length === 0 ? client.scopes ?? [] : asked
    const refused = client.scopes === undefined ? undefined : scopes.find((s) => !(client.scopes as string[]).includes(s))
    if (refused !== undefined) return json(res, 400, { error: 'invalid_scope', error_description: `scope '${refused}' is not allowed for this client` })
    const token = this.issue(client.clientId, scopes, form.get('audience') ?? undefined)
    res.setHeader('cache-control', 'no-store')
    json(res, 200, { access_token: token, token_type: 'Bearer', expires_in: this.settings.lifetimeSeconds, scope: scopes.join(' ') })
  }

  private async control(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const text = await readBody(req)
    const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>
    const route = `${req.method ?? 'GET'} ${url.pathname}`
    switch (route) {
      case 'POST /__mock/clients':
        this.addClient(body as unknown as Client)
        return json(res, 200, { clientId: body.clientId })
      case 'PUT /__mock/settings':
        this.settings = { ...this.settings, ...(body as Partial<Settings>) }
        return json(res, 200, this.settings)
      case 'POST /__mock/rotate': {
        const key = this.rotate((body.alg as SigningAlg | undefined) ?? this.settings.alg, body.retire === true)
        return json(res, 200, { kid: key.kid, keys: this.jwks().keys.map((k) => k.kid) })
      }
      case 'PUT /__mock/failure':
        this.setFailure(body as unknown as Failure)
        return json(res, 200, { failure: this.failure })
      case 'DELETE /__mock/failure':
        this.setFailure(undefined)
        return json(res, 200, { failure: null })
      case 'POST /__mock/mint': {
        const count = typeof body.count === 'number' ? body.count : undefined
        if (count === undefined) return json(res, 200, { token: this.mint(body as MintRequest) })
        return json(res, 200, { tokens: Array.from({ length: count }, () => this.mint({ ...body as MintRequest, claims: { jti: randomUUID(), ...(body.claims as object | undefined) } })) })
      }
      case 'GET /__mock/requests':
        return json(res, 200, this.received)
      case 'DELETE /__mock/requests':
        this.received.length = 0
        return json(res, 200, [])
      default:
        return json(res, 404, { error: 'unknown control endpoint' })
    }
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  // Headers set before (www-authenticate, cache-control) are merged in by writeHead.
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

// `npm run mock-idp`: MOCK_IDP_PORT (4030), MOCK_IDP_HOST (127.0.0.1), MOCK_IDP_ISSUER (default
// http://127.0.0.1:<port>/realms/partners), and one client: MOCK_IDP_CLIENT_ID (dev-client),
// MOCK_IDP_CLIENT_SECRET (dev-secret).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.MOCK_IDP_PORT ?? 4030)
  const host = process.env.MOCK_IDP_HOST ?? '127.0.0.1'
  const clientId = process.env.MOCK_IDP_CLIENT_ID ?? 'dev-client'
  const idp = await new MockIdp({
    ...(process.env.MOCK_IDP_ISSUER === undefined ? {} : { issuer: process.env.MOCK_IDP_ISSUER }),
    clients: [{ clientId, secret: process.env.MOCK_IDP_CLIENT_SECRET ?? 'dev-secret' }],
  }).listen(port, host)
  console.log(`stand-in identity provider: issuer ${idp.issuer}, JWKS ${idp.jwksUri}, tokens ${idp.tokenUrl} (client '${clientId}')`)
  const stopAll = (): void => void idp.close().then(() => process.exit(0))
  process.on('SIGTERM', stopAll)
  process.on('SIGINT', stopAll)
}
