import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { envSchema, loadConfig, upstreamEnvPrefix } from '../src/config.js'

// Docker cannot run here: the container files are kept right by reading them against the
// project (the files their commands name exist in dist/, the variables they set exist).

const dockerfile = readFileSync('Dockerfile', 'utf8')
const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as {
  services: Record<string, { build?: string; image?: string; command?: string[]; entrypoint?: string[]; environment?: Record<string, string>
    healthcheck?: { test: string[] }; depends_on?: Record<string, { condition: string }>; ports?: string[]; profiles?: string[] }>
}
const instructions = dockerfile.split('\n').filter((l) => /^[A-Z]+ /.test(l))
const MOCK_VARIABLES = ['MOCK_PMS_HOST', 'MOCK_PMS_PORT', 'MOCK_PMS_TOKEN', 'MOCK_PMS_SEED',
  'MOCK_SERVICE_HOST', 'MOCK_SERVICE_PORT', 'MOCK_SERVICE_TOKEN', 'MOCK_SERVICE_SEED']
// The variables of the upstreams the shipped config file declares.
const UPSTREAM_VARIABLES = Object.keys(loadConfig({}).upstreams)
  .flatMap((name) => ['URL', 'TOKEN', 'SANDBOX_URL', 'SANDBOX_TOKEN'].map((suffix) => `${upstreamEnvPrefix(name)}${suffix}`))

describe('Dockerfile', () => {
  it('builds in one stage and runs Node 24 LTS from another', () => {
    expect(instructions.filter((l) => l.startsWith('FROM '))).toEqual(['FROM node:24-bookworm-slim AS build', 'FROM node:24-bookworm-slim AS runtime'])
  })

  it('installs only production dependencies in the runtime stage, and runs as a non-root user', () => {
    const runtime = instructions.slice(instructions.indexOf('FROM node:24-bookworm-slim AS runtime'))
    expect(runtime.some((l) => l.includes('npm ci --omit=dev --ignore-scripts'))).toBe(true)
    expect(runtime.some((l) => l.startsWith('COPY --from=build /app/dist ./dist'))).toBe(true)
    expect(runtime).toContain('USER node')
    expect(runtime.indexOf('USER node')).toBeLessThan(runtime.findIndex((l) => l.startsWith('CMD ')))
  })

  it('starts the built server with node itself, so SIGTERM reaches it', () => {
    const cmd = instructions.find((l) => l.startsWith('CMD '))
    expect(cmd).toBe('CMD ["node", "dist/src/server.js"]')
    expect(existsSync('dist/src/server.js')).toBe(true)
  })

  it('exposes the public port only, so `docker run -P` never publishes the admin port', () => {
    expect(instructions.filter((l) => l.startsWith('EXPOSE '))).toEqual(['EXPOSE 3000'])
  })

  it('copies every folder the build compiles', () => {
    const include = (JSON.parse(readFileSync('tsconfig.build.json', 'utf8')) as { include: string[] }).include
    for (const folder of include) expect(dockerfile).toContain(`COPY ${folder} ./${folder}`)
  })
})

describe('docker-compose.yml', () => {
  it('runs Redis with a health check, the stand-in PMS, the gateway and a one-shot key tool', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['gateway', 'keys', 'pms', 'redis', 'service', 'service-sandbox'])
    expect(compose.services.redis?.healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping'])
    expect(compose.services.gateway?.depends_on).toEqual({
      redis: { condition: 'service_healthy' }, pms: { condition: 'service_healthy' },
      service: { condition: 'service_healthy' }, 'service-sandbox': { condition: 'service_healthy' },
    })
    // The admin port on the host's loopback only.
    expect(compose.services.gateway?.ports).toEqual(['3000:3000', '127.0.0.1:9464:9464'])
    expect(compose.services.keys?.profiles).toEqual(['tools'])
  })

  it('names only built files and known variables', () => {
    const known = new Set([...Object.keys(envSchema.shape), ...MOCK_VARIABLES, ...UPSTREAM_VARIABLES])
    for (const [name, service] of Object.entries(compose.services)) {
      for (const variable of Object.keys(service.environment ?? {})) expect(known, `${name}: ${variable}`).toContain(variable)
      for (const part of [...(service.command ?? []), ...(service.entrypoint ?? [])]) {
        if (part.startsWith('dist/')) expect(existsSync(part), `${name}: ${part}`).toBe(true)
      }
    }
  })

  it('gives the gateway a WEBHOOKS_SECRET_KEY, without which it would not start', () => {
    const gateway = compose.services.gateway?.environment ?? {}
    expect(gateway.WEBHOOKS_SECRET_KEY?.length).toBeGreaterThanOrEqual(32)
    const { WEBHOOKS_SECRET_KEY: _key, ...others } = gateway
    expect(() => loadConfig({ ...others, CONFIG_FILE: 'config/default.json' }, { requireTokens: true })).toThrow(/environment WEBHOOKS_SECRET_KEY: required/)
  })

  it('gives the PMS the token the gateway sends', () => {
    expect(compose.services.pms?.environment?.MOCK_PMS_TOKEN).toBe(compose.services.gateway?.environment?.PMS_TOKEN)
    expect(compose.services.gateway?.environment?.PMS_URL).toBe(`http://pms:${compose.services.pms?.environment?.MOCK_PMS_PORT}`)
  })

  it('gives the gateway every variable its declared upstreams need, pointing at the stand-in services', () => {
    const gateway = compose.services.gateway?.environment ?? {}
    const env = { ...gateway, CONFIG_FILE: 'config/default.json' }
    // What `npm start` checks: a start with these variables must not fail on the upstreams.
    expect(() => loadConfig(env, { requireTokens: true })).not.toThrow()
    for (const [host, variables] of [['service', ['UPSTREAM_BOOKINGS_URL', 'UPSTREAM_BOOKINGS_TOKEN']], ['service-sandbox', ['UPSTREAM_BOOKINGS_SANDBOX_URL', 'UPSTREAM_BOOKINGS_SANDBOX_TOKEN']]] as const) {
      const own = compose.services[host]?.environment ?? {}
      expect(gateway[variables[0]]).toBe(`http://${host}:${own.MOCK_SERVICE_PORT}`)
      expect(gateway[variables[1]]).toBe(own.MOCK_SERVICE_TOKEN)
    }
  })
})
