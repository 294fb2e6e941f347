import { describe, expect, it } from 'vitest'
import { isLoopbackOrTls, loadConfig } from '../src/config.js'
import { configFile as file, configProblems as problemsOf, MINIMAL_CONFIG as minimal } from './helpers/config.js'

describe('configuration (operations: environment and config file)', () => {
  it('fills every optional setting with its documented default', () => {
    const config = loadConfig({ CONFIG_FILE: file(minimal) })
    expect(config).toMatchObject({
      port: 3000, host: '127.0.0.1', adminPort: 9464, adminHost: '127.0.0.1', redisUrl: 'redis://127.0.0.1:6379', logLevel: 'info',
      accessDeniedStatus: 403, trustProxy: false, pms: undefined, pmsSandbox: undefined,
      upstream: { timeoutMs: 2000, connections: 64, retries: 1 },
      breaker: { errorThresholdPercentage: 50, volumeThreshold: 10, resetTimeoutMs: 10000, rollingCountTimeoutMs: 10000 },
      cache: { ttlMs: 30000, staleIfErrorMs: 300000, maxEntries: 10000 },
      keyCache: { ttlMs: 10000 },
      rateLimit: { enabled: true, limit: 1000, windowSeconds: 60 },
      shutdown: { drainMs: 5000, timeoutMs: 10000 },
      server: { headersTimeoutMs: 10000, requestTimeoutMs: 30000, keepAliveTimeoutMs: 65000 },
      abuse: { authFailuresPerMinute: 600, trackedAddresses: 100000, unknownKeys: 10000 },
      loadShedding: { maxEventLoopDelayMs: 1000, maxEventLoopUtilization: 0, sampleIntervalMs: 1000, sustainedSamples: 3 },
      adminToken: undefined,
    })
  })

  it('reads the environment', () => {
    const config = loadConfig({
      CONFIG_FILE: file(minimal), PORT: '8080', HOST: '0.0.0.0', REDIS_URL: 'redis://cache:6379/3',
      PMS_URL: 'http://pms:4010', PMS_TOKEN: 't0k3n', LOG_LEVEL: 'warn',
    })
    expect(config).toMatchObject({ port: 8080, host: '0.0.0.0', redisUrl: 'redis://cache:6379/3', logLevel: 'warn', pms: { url: 'http://pms:4010', token: 't0k3n' } })
  })

  it('names every bad field at once', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file({ ...minimal, accessDeniedStatus: 401, cache: { ttlMs: -1 }, upstrem: {} }),
      PORT: 'eighty', PMS_URL: 'http://pms:4010',
    }))
    expect(problems).toEqual([
      expect.stringMatching(/^environment PORT: /),
      expect.stringMatching(/^environment PMS_TOKEN: required when PMS_URL is set$/),
      expect.stringMatching(/config\.json accessDeniedStatus: must be 403 or 404$/),
      expect.stringMatching(/config\.json cache\.ttlMs: Too small: expected number to be >=0$/),
      expect.stringMatching(/config\.json: Unrecognized key: "upstrem"$/),
    ])
  })

  it('refuses a host claimed by two brands', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file({ ...minimal, brands: [...minimal.brands, { id: 'globex', chainCode: 'GLBX', hosts: ['API.acme.example:443'] }] }),
    }))
    expect(problems).toEqual([expect.stringMatching(/brands\[1\]\.hosts\[0\]: host 'api\.acme\.example' already belongs to brand 'acme'$/)])
  })

  it('refuses two brands with one chainCode', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file({ ...minimal, brands: [...minimal.brands, { id: 'acme-eu', chainCode: 'ACME', hosts: ['api.acme.example.eu'] }] }),
    }))
    expect(problems).toEqual([expect.stringMatching(/brands\[1\]\.chainCode: chainCode 'ACME' already belongs to brand 'acme'$/)])
  })

  it.each([
    [false], [true], [['10.0.0.0/8', '192.168.1.7', 'fd00::/8', '::1']],
  ])('takes trustProxy %j: none, any, or proxy addresses and CIDR blocks (a hop count: test/trust-proxy.test.ts)', (trustProxy) => {
    expect(loadConfig({ CONFIG_FILE: file({ ...minimal, trustProxy }) }).trustProxy).toEqual(trustProxy)
  })

  it.each([[0], ['10.0.0.0/8'], [['10.0.0.0/33']], [['proxy.internal']], [[]]])('refuses trustProxy %j', (trustProxy) => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, trustProxy }) })))
      .toEqual([expect.stringMatching(/config\.json trustProxy(\[0\])?: /)])
  })

  it('refuses a header deadline beyond the request deadline', () => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, server: { headersTimeoutMs: 40000 } }) })))
      .toEqual([expect.stringMatching(/server\.headersTimeoutMs: must not exceed server\.requestTimeoutMs$/)])
  })

  it('reads ADMIN_TOKEN, and refuses a short one', () => {
    expect(loadConfig({ CONFIG_FILE: file(minimal), ADMIN_TOKEN: 'a-long-enough-admin-token' }).adminToken).toBe('a-long-enough-admin-token')
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file(minimal), ADMIN_TOKEN: 'short' })))
      .toEqual(['environment ADMIN_TOKEN: must be at least 16 characters'])
  })

  it('tells plain http: to another host from loopback and https:', () => {
    expect(['http://pms.internal:4010', 'http://10.1.2.3', 'http://[fd00::1]:80'].map(isLoopbackOrTls)).toEqual([false, false, false])
    expect(['https://pms.internal', 'http://127.0.0.1:4010', 'http://localhost:4010', 'http://[::1]:4010'].map(isLoopbackOrTls)).toEqual([true, true, true, true])
  })

  it('reports a file that is not JSON', () => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file('{ nope') }))).toEqual([expect.stringMatching(/not valid JSON/)])
  })

  it('requires PMS_URL when asked to start the gateway', () => {
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: file(minimal) }, { requirePms: true })))
      .toEqual(['environment PMS_URL: required to start the gateway'])
  })

  it('loads the shipped config/default.json', () => {
    expect(loadConfig({}).brands.map((b) => b.id)).toEqual(['acme', 'globex'])
  })

  describe('oauth (access tokens)', () => {
    const issuer = { issuer: 'https://id.example.com/realms/partners', jwksUri: 'https://id.example.com/realms/partners/protocol/openid-connect/certs', audience: 'partner-api' }

    it('fills an issuer\'s defaults and the JWKS settings', () => {
      const config = loadConfig({ CONFIG_FILE: file({ ...minimal, oauth: { issuers: [issuer] } }) })
      expect(config.oauth).toEqual({
        issuers: [{ ...issuer, algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'], types: ['at+jwt', 'JWT'], scopes: 'token' }],
        clockToleranceSeconds: 60, jwksRefreshSeconds: 300, jwksCooldownSeconds: 30, jwksTimeoutMs: 2000, verifiedTokens: 100000, maxTokenLifetimeSeconds: 86400,
      })
      expect(loadConfig({ CONFIG_FILE: file(minimal) }).oauth.issuers).toEqual([])
    })

    it('refuses none and the HS* family, which a published key cannot verify', () => {
      expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, oauth: { issuers: [{ ...issuer, algorithms: ['RS256', 'none', 'HS256'] }] } }) })))
        .toEqual([
          expect.stringMatching(/config\.json oauth\.issuers\[0\]\.algorithms\[1\]: none and HS\* cannot be verified with published keys \(RFC 8725\)$/),
          expect.stringMatching(/config\.json oauth\.issuers\[0\]\.algorithms\[2\]: none and HS\* cannot be verified with published keys \(RFC 8725\)$/),
        ])
    })

    it('names every missing field of an issuer, a second listing of one issuer, and an unknown key', () => {
      expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, oauth: { issuers: [{ issuer: 'x' }, issuer, issuer], jwksRefreshSecs: 5 } }) })))
        .toEqual([
          expect.stringMatching(/oauth\.issuers\[0\]\.jwksUri: /),
          expect.stringMatching(/oauth\.issuers\[0\]\.audience: /),
          expect.stringMatching(/oauth: Unrecognized key: "jwksRefreshSecs"$/),
        ])
      expect(problemsOf(() => loadConfig({ CONFIG_FILE: file({ ...minimal, oauth: { issuers: [issuer, issuer] } }) })))
        .toEqual([expect.stringMatching(/oauth\.issuers\[1\]\.issuer: issuer 'https:\/\/id\.example\.com\/realms\/partners' is listed twice$/)])
    })

    it('replaces the file\'s issuers with one from OAUTH_ISSUER, OAUTH_JWKS_URI, OAUTH_AUDIENCE and OAUTH_TOKEN_URL', () => {
      const config = loadConfig({
        CONFIG_FILE: file({ ...minimal, oauth: { issuers: [issuer], jwksCooldownSeconds: 5 } }),
        OAUTH_ISSUER: 'https://login.example.net/tenant', OAUTH_JWKS_URI: 'https://login.example.net/tenant/keys', OAUTH_AUDIENCE: 'api://partner',
        OAUTH_TOKEN_URL: 'https://login.example.net/tenant/token',
      })
      expect(config.oauth).toMatchObject({
        issuers: [{
          issuer: 'https://login.example.net/tenant', jwksUri: 'https://login.example.net/tenant/keys', audience: 'api://partner',
          tokenUrl: 'https://login.example.net/tenant/token', algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'], types: ['at+jwt', 'JWT'], scopes: 'token',
        }],
        jwksCooldownSeconds: 5,
      })
    })

    it('needs the three OAUTH_ variables together', () => {
      expect(problemsOf(() => loadConfig({ CONFIG_FILE: file(minimal), OAUTH_ISSUER: 'https://login.example.net/tenant' }))).toEqual([
        'environment OAUTH_JWKS_URI: required with OAUTH_ISSUER',
        'environment OAUTH_AUDIENCE: required with OAUTH_ISSUER',
      ])
    })
  })
})

describe('tracing settings (docs/operations.md, "Tracing")', () => {
  it('exports nothing without an endpoint, or with OTEL_SDK_DISABLED=true', () => {
    expect(loadConfig({ CONFIG_FILE: file(minimal), OTEL_TRACES_SAMPLER: 'always_on' }).tracing).toBeUndefined()
    expect(loadConfig({ CONFIG_FILE: file(minimal), OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined()
  })

  it('posts to <endpoint>/v1/traces with the defaults of the SDK specification and ours', () => {
    expect(loadConfig({ CONFIG_FILE: file(minimal), OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      url: 'http://collector:4318/v1/traces', protocol: 'http/protobuf', headers: {}, timeoutMs: 10000, serviceName: 'partner-gateway',
      resourceAttributes: {}, sampler: 'parentbased_traceidratio', ratio: 0.01,
      batch: { scheduledDelayMs: 5000, maxQueueSize: 2048, maxExportBatchSize: 512, exportTimeoutMs: 30000 },
    })
  })

  it('takes the traces endpoint as given, and reads every variable', () => {
    expect(loadConfig({
      CONFIG_FILE: file(minimal), OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/otlp/spans',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant = eu', OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
      OTEL_SERVICE_NAME: 'gateway-eu', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,k8s.pod.name=gw-1',
      OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: '0.5',
      OTEL_BSP_SCHEDULE_DELAY: '1000', OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_EXPORT_TIMEOUT: '5000',
    }).tracing).toEqual({
      url: 'https://collector.example/otlp/spans', protocol: 'http/json', headers: { authorization: 'Bearer abc', 'x-tenant': 'eu' }, timeoutMs: 2500,
      serviceName: 'gateway-eu', resourceAttributes: { 'deployment.environment.name': 'prod', 'k8s.pod.name': 'gw-1' }, sampler: 'always_on', ratio: 0.5,
      // A smaller queue set alone takes the batch size down with it.
      batch: { scheduledDelayMs: 1000, maxQueueSize: 100, maxExportBatchSize: 100, exportTimeoutMs: 5000 },
    })
  })

  it('refuses what the gateway cannot do, without quoting a header value', () => {
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: file(minimal), OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization: Bearer s3cr3t', OTEL_TRACES_SAMPLER: 'jaeger_remote', OTEL_TRACES_SAMPLER_ARG: '2',
      OTEL_BSP_MAX_QUEUE_SIZE: '10', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '20',
    }))
    expect(problems).toEqual([
      expect.stringMatching(/^environment OTEL_EXPORTER_OTLP_ENDPOINT: /),
      'environment OTEL_EXPORTER_OTLP_PROTOCOL: must be http/protobuf or http/json (grpc is not supported)',
      'environment OTEL_EXPORTER_OTLP_HEADERS: must be a list of key=value separated by commas',
      'environment OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
      expect.stringMatching(/^environment OTEL_TRACES_SAMPLER_ARG: Too big: expected number to be <=1$/),
      'environment OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE',
    ])
    expect(problems.join('\n')).not.toContain('s3cr3t')
  })
})

describe('declared routes and their upstreams', () => {
  const bookings = { url: 'http://bookings.internal:4020', sandboxUrl: 'http://bookings-sandbox.internal:4021' }
  const route = { path: '/v1/guests', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests' }
  const withUpstreams = (upstreams: unknown, routes: unknown[] = [route]) => file({ ...minimal, upstreams, routes })

  it('takes a sandbox on another server, and URLs that are a server alone', () => {
    const config = loadConfig({ CONFIG_FILE: withUpstreams({ bookings: { ...bookings, url: 'http://bookings.internal:4020/' } }), PMS_URL: 'http://pms.internal:4010', PMS_TOKEN: 't' })
    expect(config.upstreams.bookings).toMatchObject({ url: 'http://bookings.internal:4020/', sandbox: { url: 'http://bookings-sandbox.internal:4021' } })
  })

  it.each([
    ['the same URL', 'http://bookings.internal'],
    ['another case and the default port', 'HTTP://Bookings.INTERNAL:80'],
  ])('refuses a sandboxUrl that is its own url under %s', (_name, sandboxUrl) => {
    const upstreams = { bookings: { url: 'http://bookings.internal', sandboxUrl } }
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: withUpstreams(upstreams) })))
      .toEqual([expect.stringMatching(/config\.json upstreams\.bookings\.sandboxUrl: is \S+config\.json upstreams\.bookings\.url under another name; a test key would reach live data$/)])
  })

  it('refuses a sandbox that is any upstream\'s live URL, loopback names as one host, the environment\'s overrides and the PMS included', () => {
    const upstreams = {
      bookings: { url: 'http://localhost:4020', sandboxUrl: 'http://localhost:4021' },
      notes: { url: 'http://notes.internal', sandboxUrl: 'http://[::1]:4020' },
      files: { url: 'https://files.internal', sandboxUrl: 'https://files-sandbox.internal:8443' },
    }
    const problems = problemsOf(() => loadConfig({
      CONFIG_FILE: withUpstreams(upstreams), UPSTREAM_FILES_SANDBOX_URL: 'https://127.0.0.1', UPSTREAM_BOOKINGS_URL: 'https://127.0.0.1:443',
      PMS_URL: 'http://127.0.0.1:4021', PMS_TOKEN: 't', PMS_SANDBOX_URL: 'http://LOCALHOST:4021/', PMS_SANDBOX_TOKEN: 't',
    }))
    // notes' sandbox is bookings' file url, which the environment overrides: no longer a live URL.
    expect(problems).toEqual([
      'environment PMS_SANDBOX_URL: is environment PMS_URL under another name; a test key would reach live data',
      expect.stringMatching(/config\.json upstreams\.bookings\.sandboxUrl: is environment PMS_URL under another name; a test key would reach live data$/),
      'environment UPSTREAM_FILES_SANDBOX_URL: is environment UPSTREAM_BOOKINGS_URL under another name; a test key would reach live data',
    ])
  })

  it.each(['http://bookings.internal:4020/partner', 'http://bookings.internal:4020/?x=1', 'http://bookings.internal:4020/#top', 'http://user:secret@bookings.internal:4020'])(
    'refuses an upstream url with more than a server: %s',
    (url) => {
      expect(problemsOf(() => loadConfig({ CONFIG_FILE: withUpstreams({ bookings: { url } }) })))
        .toEqual([expect.stringMatching(/config\.json upstreams\.bookings\.url: must be a server alone \(scheme, host, port\), with no path, query, fragment or credentials$/)])
    },
  )

  it('refuses a path in an overriding variable and in the PMS URLs', () => {
    expect(problemsOf(() => loadConfig({
      CONFIG_FILE: withUpstreams({ bookings }), UPSTREAM_BOOKINGS_SANDBOX_URL: 'http://sandbox.internal/v2', PMS_URL: 'http://pms.internal/api', PMS_TOKEN: 't',
    }))).toEqual([
      'environment PMS_URL: must be a server alone (scheme, host, port), with no path, query, fragment or credentials',
      'environment UPSTREAM_BOOKINGS_SANDBOX_URL: must be a server alone (scheme, host, port), with no path, query, fragment or credentials',
    ])
  })

  it('refuses a path parameter named propertyId and a dot segment in upstreamPath, with every other bad field', () => {
    const routes = [
      { path: '/v1/stays/{propertyId}', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/properties/{propertyId}/stays', pathParams: { propertyId: { type: 'uuid' } } },
      { path: '/v1/files/{fileId}', scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/files/../{fileId}', pathParams: { fileId: { type: 'string' } } },
    ]
    expect(problemsOf(() => loadConfig({ CONFIG_FILE: withUpstreams({ bookings: { ...bookings, sandboxUrl: bookings.url } }, routes) }))).toEqual([
      expect.stringMatching(/config\.json routes\[0\]: path parameter \{propertyId\} is not allowed: the property comes from the Service-Property-Id header$/),
      expect.stringMatching(/config\.json routes\[1\]: upstreamPath has a dot segment$/),
      expect.stringMatching(/config\.json upstreams\.bookings\.sandboxUrl: is \S+config\.json upstreams\.bookings\.url under another name; a test key would reach live data$/),
    ])
  })
})
