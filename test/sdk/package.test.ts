import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { SDK_TYPES_FILE, SHIPPED_CONFIG, sdkTypes } from '../../scripts/generate-sdk.js'
import { loadConfig } from '../../src/config.js'
import { openApiDocument, type JsonObject } from '../../src/docs/openapi.js'
import { PartnerClient } from '../../sdk/src/index.js'

// The client package (sdk/) against the gateway it is for: its types are generated from the
// OpenAPI document of the shipped config file and must be current, every operation of that
// document has a typed call, and the package that ships (sdk/dist, built by `npm ci`) is the
// one its sources describe.

const document = openApiDocument(loadConfig({ CONFIG_FILE: SHIPPED_CONFIG }))

// Each operation of the document and the client's call for it.
const CALLS: Record<string, string> = {
  getHealth: 'health',
  getCredential: 'credential',
  listEvents: 'events.list',
  getEvent: 'events.get',
  listProperties: 'properties.list',
  getProperty: 'properties.get',
  listGuests: 'guests.list',
  createGuests: 'guests.create',
  getGuestsByGuestId: 'guests.get',
  updateGuestsByGuestId: 'guests.update',
  listRooms: 'rooms.list',
  listWebhookEndpoints: 'webhookEndpoints.list',
  createWebhookEndpoint: 'webhookEndpoints.create',
  getWebhookEndpoint: 'webhookEndpoints.get',
  updateWebhookEndpoint: 'webhookEndpoints.update',
  deleteWebhookEndpoint: 'webhookEndpoints.delete',
  rotateWebhookEndpointSecret: 'webhookEndpoints.rotateSecret',
  testWebhookEndpoint: 'webhookEndpoints.test',
  listWebhookEndpointDeliveries: 'webhookEndpoints.deliveries',
  redeliverEvent: 'webhookEndpoints.redeliver',
  recoverWebhookEndpoint: 'webhookEndpoints.recover',
  listWebhookRecoveries: 'webhookEndpoints.recoveries',
  getWebhookRecovery: 'webhookEndpoints.recovery',
  cancelWebhookRecovery: 'webhookEndpoints.cancelRecovery',
}

describe('the client package', () => {
  it(`has the types of the current OpenAPI document in ${SDK_TYPES_FILE} (else: npm run sdk)`, async () => {
    expect(readFileSync(SDK_TYPES_FILE, 'utf8'), 'the types are not those of the document: run `npm run build && npm run sdk`').toBe(await sdkTypes())
  })

  it('has a typed call for every operation of the document', () => {
    const operations = Object.values(document.paths as Record<string, Record<string, JsonObject>>).flatMap((item) => Object.values(item).map((op) => op.operationId as string))
    expect(operations.sort(), 'an operation without a call in sdk/src/client.ts (and in CALLS here)').toEqual(Object.keys(CALLS).sort())
    const client = new PartnerClient({ baseUrl: 'https://api.acme-hotels.example', apiKey: 'svc_live_unused' }) as unknown as Record<string, unknown>
    for (const call of Object.values(CALLS)) {
      const method = call.split('.').reduce<unknown>((object, name) => (object as Record<string, unknown>)[name], client)
      expect(typeof method, call).toBe('function')
    }
  })

  it('is built to sdk/dist by npm ci, with declarations, exporting what its sources export', async () => {
    expect(existsSync('sdk/dist/index.js') && existsSync('sdk/dist/index.d.ts')).toBe(true)
    const built = await import('@partner-gateway/sdk')
    const source = await import('../../sdk/src/index.js')
    expect(Object.keys(built).sort(), 'sdk/dist is older than sdk/src: npm run build -w @partner-gateway/sdk').toEqual(Object.keys(source).sort())
    expect(new built.PartnerClient({ baseUrl: 'https://api.acme-hotels.example', apiKey: 'svc_live_unused' })).toBeInstanceOf(built.PartnerClient)
  })

  it('is an ESM package for Node 20+ that depends on openapi-fetch and standardwebhooks only', () => {
    const pkg = JSON.parse(readFileSync('sdk/package.json', 'utf8')) as Record<string, unknown>
    expect(pkg).toMatchObject({
      name: '@partner-gateway/sdk', type: 'module', engines: { node: '>=20' },
      exports: { '.': { types: './dist/index.d.ts', import: './dist/index.js' } },
    })
    expect(Object.keys(pkg.dependencies as object).sort()).toEqual(['openapi-fetch', 'standardwebhooks'])
    const root = JSON.parse(readFileSync('package.json', 'utf8')) as { workspaces: string[] }
    expect(root.workspaces).toEqual(['sdk'])
  })
})
