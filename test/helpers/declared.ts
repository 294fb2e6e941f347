// Gateways with the shipped declared routes in front of the stand-in bookings service (and,
// for test keys, its sandbox): the setup of the tests of declared routes, each of which builds
// its own gateway.

import { readFileSync } from 'node:fs'
import { MockService } from '../../mocks/service/server.js'
import type { FileConfig, FileConfigInput } from '../../src/config.js'
import type { KeyStore } from '../../src/keys/store.js'
import { TestGateway } from './gateway.js'

/** The upstreams and routes of the config file the project ships. */
export const shipped = JSON.parse(readFileSync('config/default.json', 'utf8')) as Pick<FileConfig, 'upstreams' | 'routes'>

export const SERVICE_TOKEN = 'svc-declared-token'
export const SANDBOX_SERVICE_TOKEN = 'svc-declared-sandbox-token'

export interface Setup {
  t: TestGateway
  service: MockService
  /** The bookings service's sandbox, when the test asked for one. */
  sandbox: MockService | undefined
  /** A live key of acme for every property, and its id. */
  key: string
  keyId: string
  /** Closes the gateway and the stand-in services it started. */
  close: () => Promise<void>
}

export interface StartOptions {
  /** The token the service expects and the gateway sends; false: the service expects none and the gateway has none. */
  token?: string | false
  /** The bookings service has a sandbox for test keys. */
  sandbox?: boolean
  /** The PMS has a sandbox for test keys. */
  pmsSandbox?: boolean
  /** Settings of the bookings upstream over the shipped ones (whose sandbox is left out unless `sandbox`). */
  bookings?: Record<string, unknown>
  /** More upstreams besides bookings. */
  upstreams?: Record<string, unknown>
  /** Routes of the test's own, after the shipped ones. */
  routes?: unknown[]
  /** Routes of the test's own, before the shipped ones. */
  routesBefore?: unknown[]
  /** Settings of the gateway besides its upstreams and routes. */
  config?: Partial<FileConfigInput>
  /** Environment over the one that points bookings at the stand-ins. */
  env?: NodeJS.ProcessEnv
  keyStore?: (prefix: string) => KeyStore
}

/** Starts the stand-in bookings service (and its sandbox) and a gateway with the shipped routes in front of it. */
export async function startWithService(options: StartOptions = {}): Promise<Setup> {
  const token = options.token ?? SERVICE_TOKEN
  const service = await new MockService(token === false ? {} : { token }).listen()
  let sandbox: MockService | undefined
  let t: TestGateway
  try {
    sandbox = options.sandbox === true ? await new MockService({ token: SANDBOX_SERVICE_TOKEN, seed: 99 }).listen() : undefined
    t = await TestGateway.start({
      sandbox: options.pmsSandbox === true,
      config: {
        ...options.config,
        upstreams: {
          bookings: { ...shipped.upstreams.bookings, sandboxUrl: undefined, ...options.bookings },
          ...options.upstreams,
        } as FileConfigInput['upstreams'],
        routes: [...(options.routesBefore ?? []), ...shipped.routes, ...(options.routes ?? [])] as FileConfigInput['routes'],
      },
      env: {
        UPSTREAM_BOOKINGS_URL: service.url,
        ...(token === false ? {} : { UPSTREAM_BOOKINGS_TOKEN: token }),
        ...(sandbox === undefined ? {} : { UPSTREAM_BOOKINGS_SANDBOX_URL: sandbox.url, UPSTREAM_BOOKINGS_SANDBOX_TOKEN: SANDBOX_SERVICE_TOKEN }),
        ...options.env,
      },
      ...(options.keyStore === undefined ? {} : { keyStore: options.keyStore }),
    })
  } catch (error) {
    await service.close()
    await sandbox?.close()
    throw error
  }
  const gateway = t
  const close = async (): Promise<void> => {
    await gateway.close()
    await service.close()
    await sandbox?.close()
  }
  try {
    const { key, id } = await gateway.keyWithId()
    return { t: gateway, service, sandbox, key, keyId: id, close }
  } catch (error) {
    await close()
    throw error
  }
}
