import { z } from 'zod'
import type { BrandConfig, EventTypeConfig, IssuerConfig } from '../config.js'
import { errorCatalog, fieldErrorCodes, kebabCode, type ErrorCode } from '../contract/errors.js'
import { problemJsonSchema, type ProblemDetails } from '../contract/problem.js'
import { partnerCredentialSchema } from '../contract/credential.js'
import { propertySchema, UTC_MILLIS } from '../contract/property.js'
import { OK, UNHEALTHY } from '../health.js'
import { CORRELATION_ID_PATTERN } from '../http/request-context.js'
import { USER_AGENT, UUID } from '../pipeline/headers.js'
import { ulidPattern } from '../pipeline/parameters.js'
import { BODY_METHODS, builtInRoutes, ENDPOINT_ID_PREFIX, EVENT_ID_PREFIX, RECOVERY_ID_PREFIX, webhookRoutes, requestLogRoutes, idempotencyOf, PLAIN_STRING, knownScopes, scopeOf, type Deprecation, type IdempotencyRule, type Method, type PathParamRule, type QueryRule, type RoutePolicy } from '../routes/policy.js'
import { errorStatusesOf, publicRoutes, successOf } from './responses.js'
import { whenItHappens } from './error-text.js'
import { ENTRY_FIELDS, MAX_PATH, MAX_USER_AGENT } from '../request-log/entry.js'

// The OpenAPI 3.1 document of the public API, built from the code: the route policies (the
// built-in ones and the config file's declared routes), the error catalog, the Property zod
// schema and the problem body's schema. `npm run docs` writes it to site/openapi.json; the
// contract test checks every answer the integration tests receive against it.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
export type JsonObject = { [key: string]: Json }

export interface DocumentSource {
  docsUrl: string
  brands: readonly Pick<BrandConfig, 'id' | 'hosts'>[]
  /** The declared routes of the config file (built-in routes are always in). */
  routes: readonly RoutePolicy[]
  /** The token issuers; the first one's `tokenUrl` is the client-credentials flow's. */
  oauth?: { readonly issuers: readonly Pick<IssuerConfig, 'tokenUrl'>[] }
  /** The public event types of the config file, each with its scope. */
  events?: { readonly types: readonly Pick<EventTypeConfig, 'type' | 'scope'>[] }
  /** The config file's deprecations of built-in routes, by path. */
  builtinRoutes?: Readonly<Record<string, { deprecated: Deprecation; replacement?: string | undefined }>>
}

/** The public event types of a source and the scope of each, sorted by type. */
export function eventTypesOf(source: DocumentSource): { type: string; scope: string }[] {
  const scopes = new Map<string, string>()
  for (const entry of source.events?.types ?? []) scopes.set(entry.type, entry.scope)
  return [...scopes].sort(([a], [b]) => (a < b ? -1 : 1)).map(([type, scope]) => ({ type, scope }))
}

/** The public routes of a source: the built-in ones (events filtered by its types), then its declared ones. */
function routesOf(source: DocumentSource): RoutePolicy[] {
  return publicRoutes(source.routes, eventTypesOf(source).map((t) => t.type), source.builtinRoutes)
}

const ref = (kind: string, name: string): JsonObject => ({ $ref: `#/components/${kind}/${name}` })
const schemaRef = (name: string): JsonObject => ref('schemas', name)

/** zod's nullable scalars (`anyOf` of a type and null) as type lists: the 3.1 way, no `nullable`. */
function typeLists(schema: JsonObject): JsonObject {
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$schema') continue
    if (key === 'properties' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      out.properties = Object.fromEntries(Object.entries(value).map(([name, property]) => [name, typeLists(property as JsonObject)]))
      continue
    }
    // Only a type and null: merging other branches would apply one's keywords (a `const`) to the other.
    if (key === 'anyOf' && Array.isArray(value) && value.every((b) => b !== null && typeof b === 'object' && !Array.isArray(b) && typeof b.type === 'string')
      && value.some((b) => JSON.stringify(b) === '{"type":"null"}')) {
      const branches = value as JsonObject[]
      const merged: JsonObject = {}
      for (const branch of branches) Object.assign(merged, branch)
      merged.type = branches.map((b) => b.type as string)
      Object.assign(out, merged)
      continue
    }
    out[key] = value
  }
  return out
}

export function propertyJsonSchema(): JsonObject {
  return typeLists(z.toJSONSchema(propertySchema, { target: 'draft-2020-12', io: 'output' }) as JsonObject)
}

function problemSchema(): JsonObject {
  const base = JSON.parse(JSON.stringify(problemJsonSchema)) as JsonObject & { properties: Record<string, JsonObject> }
  const errorsItems = base.properties.errors?.items as JsonObject & { properties: Record<string, JsonObject> }
  return {
    ...base,
    description: 'RFC 9457 problem details; every field is always present. Branch on `code`.',
    additionalProperties: false,
    properties: {
      ...base.properties,
      type: { type: 'string', format: 'uri', description: '`{docsUrl}/errors/<code in kebab-case>`: the page that explains the code' },
      title: { type: 'string', description: 'The fixed title of the code' },
      status: { type: 'integer', minimum: 400, maximum: 599 },
      detail: { type: 'string', description: 'What went wrong with this request' },
      moreInfo: { type: 'string', description: 'What to do about it' },
      instance: { type: 'string', description: 'The request path, without the query string' },
      code: { type: 'string', pattern: '^[A-Z][A-Z0-9_]*$', description: 'The error code (see the error pages)' },
      errors: {
        type: 'array', maxItems: 20, description: 'One entry per bad field, header or parameter',
        items: { ...errorsItems, additionalProperties: false, properties: { ...errorsItems.properties, code: { type: 'string', enum: [...fieldErrorCodes] } } },
      },
      requestId: { type: 'string', description: 'The same value as the `Service-Request-Id` header' },
      timestamp: { type: 'string', pattern: UTC_MILLIS.source, description: 'UTC, with milliseconds' },
    },
  }
}

const ACTIONS: Record<string, string> = { read: 'Read', write: 'Create, change and delete' }

/** Each scope the routes need, with what it opens: its action on its resource, and the operations. */
export function scopeDescriptions(routes: readonly RoutePolicy[], eventTypes: readonly { type: string; scope: string }[] = []): Record<string, string> {
  const operations = new Map<string, string[]>()
  for (const policy of publicRoutes(routes)) {
    for (const method of policy.methods) {
      const scope = scopeOf(policy, method)
      if (scope !== undefined) operations.set(scope, [...(operations.get(scope) ?? []), `${method} ${policy.path}`])
    }
  }
  return Object.fromEntries(knownScopes(routes).map((scope) => {
    const [resource = '', action = ''] = scope.split(':')
    const verb = ACTIONS[action] ?? `${action.charAt(0).toUpperCase()}${action.slice(1)}`
    const events = eventTypes.filter((t) => t.scope === scope).map((t) => t.type)
    return [scope, `${verb} ${resource}: ${(operations.get(scope) ?? []).join(', ')}${events.length === 0 ? '' : `; events ${events.join(', ')}`}`]
  }))
}

/** The client-credentials flow's token endpoint: the first issuer's, when it names one. */
function tokenUrlOf(source: DocumentSource): string | undefined {
  return source.oauth?.issuers[0]?.tokenUrl
}

function securitySchemes(source: DocumentSource): JsonObject {
  const tokenUrl = tokenUrlOf(source)
  return {
    apiKey: { type: 'http', scheme: 'bearer', description: 'Your API key (`svc_live_…` or `svc_test_…`) as a Bearer token.' },
    ...(tokenUrl === undefined ? {} : {
      oauth2: {
        type: 'oauth2',
        description: 'An OAuth 2.0 access token from the identity provider (client-credentials grant), sent as `Authorization: Bearer <token>`. '
          + 'Your client must be registered for this API; the token\'s scopes, within those of your registration, decide what it may do.',
        flows: { clientCredentials: { tokenUrl, scopes: scopeDescriptions(source.routes, eventTypesOf(source)) } },
      },
    }),
  }
}

/** An entry of the request log (docs/partners.md, "The request log"): what the gateway knew of a request, never a body, a query value or a secret. */
export function requestLogEntrySchema(): JsonObject {
  const text = (description: string, extra: JsonObject = {}): JsonObject => ({ type: 'string', description, ...extra })
  const maybe = (type: string, description: string, extra: JsonObject = {}): JsonObject => ({ type: [type, 'null'], description, ...extra })
  return {
    type: 'object', additionalProperties: false, required: [...ENTRY_FIELDS],
    description: 'One request made with your credential, as the gateway answered it. Ignore fields you do not know: more may come.',
    properties: {
      id: text('The `Service-Request-Id` the request was answered with.'),
      at: text('When the request arrived: UTC, with milliseconds.', { pattern: UTC_MILLIS.source }),
      credentialId: text('The API key id (`key_…`) or the client grant id (`cli_…`) it was made with.'),
      secret: maybe('string', 'Which secret of an API key was sent: `previous` while a rolled key\'s old secret still works, else `current`; null for an access token.', { enum: ['current', 'previous', null] }),
      mode: { type: 'string', enum: ['live', 'test'], description: 'The credential\'s mode.' },
      method: text('The HTTP method.'),
      route: maybe('string', 'The template of the route it matched, as this reference writes it.'),
      path: text(`The path as sent, without the query; at most ${MAX_PATH} characters.`, { maxLength: MAX_PATH }),
      queryParameters: { type: 'array', items: { type: 'string' }, description: 'The names of the query parameters sent, in order; never their values.' },
      status: { type: 'integer', description: 'The status answered; 499 when you closed the connection before the answer.' },
      code: maybe('string', 'The problem\'s `code`; null for a success.'),
      durationMs: { type: 'number', minimum: 0, description: 'From the request\'s arrival to its last byte written, in milliseconds (one decimal).' },
      cache: maybe('string', 'Whether the answer came from the gateway\'s cache: `hit`, `miss`, `stale`; null where there is none.', { enum: ['hit', 'miss', 'stale', null] }),
      idempotencyKey: maybe('string', 'The `Idempotency-Key` sent, if any.'),
      replayed: { type: 'boolean', description: 'Whether the answer was the replay of an earlier one with the same `Idempotency-Key`.' },
      clientIp: maybe('string', 'The address the request came from.'),
      userAgent: maybe('string', `The \`User-Agent\` sent, at most ${MAX_USER_AGENT} characters.`, { maxLength: MAX_USER_AGENT }),
      traceId: maybe('string', 'The trace id: of your `traceparent`, or the one the gateway started.'),
    },
  }
}

/** A thin event (docs/partners.md, "Events"): what changed, never the changed data. */
function eventSchema(types: readonly { type: string; scope: string }[]): JsonObject {
  const string = (description: string, extra: JsonObject = {}): JsonObject => ({ type: 'string', description, ...extra })
  return {
    type: 'object', additionalProperties: false, required: ['id', 'type', 'createdAt', 'mode', 'propertyId', 'object'],
    description: 'A thin event: what changed, never the changed data; read the resource at `object.path`. Ignore fields you do not know: more may come.',
    properties: {
      id: string('Unique; ids sort as the events\' times do.', { pattern: ulidPattern(EVENT_ID_PREFIX).source }),
      type: string(`The public type, each with the scope a credential needs to see it: ${types.map((t) => `\`${t.type}\` (\`${t.scope}\`)`).join(', ') || 'none configured'}.`,
        types.length === 0 ? {} : { enum: types.map((t) => t.type) }),
      createdAt: string('When the API accepted the event: UTC, with milliseconds.', { pattern: UTC_MILLIS.source }),
      mode: { type: 'string', enum: ['live', 'test'], description: 'Live events are read with live credentials, test events with test credentials.' },
      propertyId: { type: ['string', 'null'], pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', description: 'The property it concerns, or null.' },
      object: {
        type: 'object', additionalProperties: false, required: ['type', 'id', 'path'], description: 'The changed resource.',
        properties: {
          type: string('What changed, e.g. `property`.'),
          id: string('Its id.'),
          path: string('The path to read it with, under your credential\'s checks.', { pattern: '^/v1/' }),
        },
      },
    },
  }
}

/** The bodies of the webhook endpoints API, by `<method> <path>`. */
const WEBHOOK_BODIES: Record<string, { schema: string; required: boolean }> = {
  [`POST ${webhookRoutes.webhookEndpoints.path}`]: { schema: 'WebhookEndpointCreate', required: true },
  [`PATCH ${webhookRoutes.webhookEndpoint.path}`]: { schema: 'WebhookEndpointUpdate', required: true },
  [`POST ${webhookRoutes.rotateWebhookSecret.path}`]: { schema: 'NoFields', required: false },
  [`POST ${webhookRoutes.testWebhookEndpoint.path}`]: { schema: 'NoFields', required: false },
  [`POST ${webhookRoutes.redeliverEvent.path}`]: { schema: 'WebhookRedelivery', required: true },
  [`POST ${webhookRoutes.recoverWebhookEndpoint.path}`]: { schema: 'WebhookRecoveryCreate', required: true },
}

function webhookSchemas(types: readonly string[]): JsonObject {
  const envelope = (data: JsonObject, collection = false): JsonObject => ({
    type: 'object', additionalProperties: false, required: ['data', 'meta'], properties: { data, meta: schemaRef(collection ? 'CollectionMeta' : 'Meta') },
  })
  const endpointId = { type: 'string', pattern: ulidPattern(ENDPOINT_ID_PREFIX).source, description: 'The endpoint\'s id.' }
  const eventTypes = { type: 'array', minItems: 1, maxItems: 100, items: { type: 'string', ...(types.length === 0 ? {} : { enum: [...types] }) }, description: 'The event types to deliver; your credential needs the scope of each.' }
  const url = { type: 'string', maxLength: 2048, description: 'An https URL, without user name or password, that is not an internal address.' }
  const description = { type: ['string', 'null'], maxLength: 500 }
  const endpoint: JsonObject = {
    type: 'object', additionalProperties: false, required: ['id', 'url', 'eventTypes', 'description', 'status', 'disabledReason', 'createdAt', 'updatedAt'],
    properties: {
      id: endpointId, url: { type: 'string' }, eventTypes: { type: 'array', items: { type: 'string' } }, description,
      status: { type: 'string', enum: ['enabled', 'disabled'] },
      disabledReason: { type: ['string', 'null'], enum: ['gone', 'failing', 'partner', null], description: '`gone`: it answered 410; `failing`: its attempts failed throughout; `partner`: you disabled it.' },
      createdAt: { type: 'string', pattern: UTC_MILLIS.source }, updatedAt: { type: 'string', pattern: UTC_MILLIS.source },
    },
  }
  const withSecret: JsonObject = {
    ...endpoint,
    required: [...(endpoint.required as string[]), 'secret'],
    properties: { ...(endpoint.properties as JsonObject), secret: { type: 'string', pattern: '^whsec_[A-Za-z0-9+/]{43}=$', description: 'The signing secret: verify each delivery\'s `webhook-signature` with it.' } },
  }
  return {
    WebhookEndpoint: endpoint,
    WebhookEndpointWithSecret: withSecret,
    WebhookEndpointResponse: envelope(schemaRef('WebhookEndpoint')),
    WebhookEndpointWithSecretResponse: envelope(schemaRef('WebhookEndpointWithSecret')),
    WebhookEndpointListResponse: envelope({ type: 'array', items: schemaRef('WebhookEndpoint') }, true),
    WebhookAttempt: {
      type: 'object', additionalProperties: false, required: ['eventId', 'attempt', 'at', 'status', 'outcome', 'durationMs'],
      properties: {
        eventId: { type: 'string', pattern: ulidPattern(EVENT_ID_PREFIX).source }, attempt: { type: 'integer', minimum: 1 },
        at: { type: 'string', pattern: UTC_MILLIS.source }, status: { type: ['integer', 'null'], description: 'The HTTP status received (a 3xx included), or null.' },
        outcome: { type: 'string', enum: ['delivered', 'failed', 'blocked', 'gone', 'timeout'] }, durationMs: { type: 'integer', minimum: 0 },
      },
    },
    WebhookAttemptListResponse: envelope({ type: 'array', items: schemaRef('WebhookAttempt') }, true),
    WebhookTestQueued: envelope({ type: 'object', additionalProperties: false, required: ['eventId'], properties: { eventId: { type: 'string', pattern: ulidPattern(EVENT_ID_PREFIX).source } } }),
    WebhookRedeliveryQueued: envelope({
      type: 'object', additionalProperties: false, required: ['eventId', 'endpointId'],
      properties: { eventId: { type: 'string', pattern: ulidPattern(EVENT_ID_PREFIX).source }, endpointId },
    }),
    WebhookEndpointCreate: { type: 'object', additionalProperties: false, required: ['url', 'eventTypes'], properties: { url, eventTypes, description } },
    WebhookEndpointUpdate: {
      type: 'object', additionalProperties: false,
      properties: { url, eventTypes, description, status: { type: 'string', enum: ['enabled', 'disabled'], description: '`enabled` turns a disabled endpoint on again.' } },
    },
    WebhookRedelivery: { type: 'object', additionalProperties: false, required: ['endpointId'], properties: { endpointId } },
    WebhookRecovery: {
      type: 'object', additionalProperties: false, required: ['id', 'endpointId', 'since', 'until', 'include', 'status', 'queued', 'delivered', 'failed', 'createdAt'],
      properties: {
        id: { type: 'string', pattern: ulidPattern(RECOVERY_ID_PREFIX).source, description: 'The recovery\'s id.' }, endpointId,
        since: { type: 'string', pattern: UTC_MILLIS.source, description: 'The start of the time range (included).' },
        until: { type: 'string', pattern: UTC_MILLIS.source, description: 'The end of the time range (included).' },
        include: { type: 'string', enum: ['failed', 'all'], description: '`failed`: the events whose delivery did not succeed; `all`: every event the endpoint was subscribed to.' },
        status: { type: 'string', enum: ['running', 'done', 'cancelled'] },
        queued: { type: 'integer', minimum: 0, description: 'The events it sends, chosen when it was asked for.' },
        delivered: { type: 'integer', minimum: 0, description: 'Sent and answered 2xx so far.' },
        failed: { type: 'integer', minimum: 0, description: 'Sent (once each) without a 2xx, or not sent because the endpoint was deleted or disabled, or its credential may not see the event any more.' },
        createdAt: { type: 'string', pattern: UTC_MILLIS.source },
      },
    },
    WebhookRecoveryResponse: envelope(schemaRef('WebhookRecovery')),
    WebhookRecoveryListResponse: envelope({ type: 'array', items: schemaRef('WebhookRecovery') }, true),
    WebhookRecoveryCreate: {
      type: 'object', additionalProperties: false, required: ['since'],
      properties: {
        since: { type: 'string', format: 'date-time', description: 'RFC 3339; within the events\' retention (30 days unless your operator set otherwise).' },
        until: { type: 'string', format: 'date-time', description: 'RFC 3339, not in the future; default: the time of the request.' },
        include: { type: 'string', enum: ['failed', 'all'], description: '`failed` (the default): the events the endpoint did not receive; `all`: every event it was subscribed to.' },
      },
    },
    NoFields: { type: 'object', additionalProperties: false, properties: {} },
  }
}

function components(source: DocumentSource): JsonObject {
  const meta = {
    requestId: { type: 'string', description: 'The same value as the `Service-Request-Id` header' },
    timestamp: { type: 'string', pattern: UTC_MILLIS.source, description: 'UTC, with milliseconds' },
  }
  const health = (body: string): JsonObject => {
    const status = (JSON.parse(body) as { status: string }).status
    return { type: 'object', properties: { status: { const: status } }, required: ['status'], additionalProperties: false, example: JSON.parse(body) as Json }
  }
  const header = (description: string, schema: JsonObject): JsonObject => ({ description, schema })
  return {
    schemas: {
      Property: propertyJsonSchema(),
      ProblemDetails: problemSchema(),
      Pagination: {
        type: 'object', additionalProperties: false, required: ['page', 'perPage', 'total'],
        properties: { page: { type: 'integer', minimum: 1 }, perPage: { type: 'integer', minimum: 1 }, total: { type: 'integer', minimum: 0, description: 'Every item of the collection, on all pages' } },
      },
      Meta: { type: 'object', additionalProperties: false, required: ['requestId', 'timestamp'], properties: meta },
      CollectionMeta: {
        type: 'object', additionalProperties: false, required: ['requestId', 'timestamp', 'pagination'],
        properties: { ...meta, pagination: schemaRef('Pagination') },
      },
      PropertyResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: schemaRef('Property'), meta: schemaRef('Meta') },
      },
      PropertyListResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: { type: 'array', items: schemaRef('Property') }, meta: schemaRef('CollectionMeta') },
      },
      Event: eventSchema(eventTypesOf(source)),
      EventResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: schemaRef('Event'), meta: schemaRef('Meta') },
      },
      EventListResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: { type: 'array', items: schemaRef('Event') }, meta: schemaRef('CollectionMeta') },
      },
      ...webhookSchemas(eventTypesOf(source).map((t) => t.type)),
      RequestLogEntry: requestLogEntrySchema(),
      RequestLogEntryResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: schemaRef('RequestLogEntry'), meta: schemaRef('Meta') },
      },
      RequestLogEntryListResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: { type: 'array', items: schemaRef('RequestLogEntry') }, meta: schemaRef('CollectionMeta') },
      },
      ServiceResponse: {
        type: 'object',
        description: "The service's own answer, passed on unchanged: an envelope of `data` and `meta`",
      },
      Credential: typeLists(z.toJSONSchema(partnerCredentialSchema, { target: 'draft-2020-12', io: 'output' }) as JsonObject),
      CredentialResponse: {
        type: 'object', additionalProperties: false, required: ['data', 'meta'],
        properties: { data: schemaRef('Credential'), meta: schemaRef('Meta') },
      },
      HealthOk: health(OK),
      HealthUnhealthy: health(UNHEALTHY),
    },
    headers: {
      ServiceCorrelationId: header('Your `Service-Correlation-Id`, echoed on successes when you sent one.', { type: 'string', pattern: CORRELATION_ID_PATTERN.source }),
      RateLimitLimit: header('Requests allowed per window for this key.', { type: 'string', pattern: '^[0-9]+$' }),
      RateLimitRemaining: header('Requests left in the current window.', { type: 'string', pattern: '^[0-9]+$' }),
      RateLimitReset: header('Seconds until the window resets.', { type: 'string', pattern: '^[0-9]+$' }),
      RateLimitPolicy: header('The quota as an RFC 9651 structured field (draft-ietf-httpapi-ratelimit-headers-11): `"default";q=<requests>;w=<window seconds>`.', {
        type: 'string', pattern: '^"default";q=[0-9]+;w=[0-9]+$',
      }),
      RateLimit: header('What is left of the quota as an RFC 9651 structured field (draft-ietf-httpapi-ratelimit-headers-11): `"default";r=<requests left>;t=<seconds to reset>`.', {
        type: 'string', pattern: '^"default";r=[0-9]+;t=[0-9]+$',
      }),
      ServiceCredentialExpires: header('When the credential used stops working (RFC 3339, UTC), on every answer once that is within a warning period (14 days by default); for a rolled key\'s previous secret, the end of its overlap.', {
        type: 'string', pattern: UTC_MILLIS.source,
      }),
    },
    parameters: {
      UserAgent: {
        name: 'User-Agent', in: 'header', required: true,
        description: 'Names your integration and its version, e.g. `acme-channel-sync/2.3`: 3 to 255 printable ASCII characters.',
        schema: { type: 'string', pattern: USER_AGENT.source },
      },
      ServiceCorrelationId: {
        name: 'Service-Correlation-Id', in: 'header', required: false,
        description: 'Your own id for this request; echoed on successes.',
        schema: { type: 'string', pattern: CORRELATION_ID_PATTERN.source },
      },
      ServicePropertyId: {
        name: 'Service-Property-Id', in: 'header', required: true,
        description: 'The property this request is about (an id from `GET /v1/properties`, any case).',
        schema: { type: 'string', pattern: UUID.source },
      },
      Traceparent: {
        name: 'traceparent', in: 'header', required: false,
        description: 'W3C Trace Context: a valid one continues your trace; anything else starts a new one (never an error).',
        schema: { type: 'string' },
      },
      Tracestate: {
        name: 'tracestate', in: 'header', required: false,
        description: 'W3C Trace Context vendor state; passed along with a valid `traceparent`.',
        schema: { type: 'string' },
      },
    },
    securitySchemes: securitySchemes(source),
  }
}

/** The key of `Idempotency-Key`, bare or as an RFC 9651 string: 1 to 255 visible ASCII characters but `"` and `\`. */
const IDEMPOTENCY_KEY_PATTERN = '^([\\x21\\x23-\\x5B\\x5D-\\x7E]{1,255}|"[\\x21\\x23-\\x5B\\x5D-\\x7E]{1,255}")$'

function idempotencyParameter(rule: IdempotencyRule): JsonObject {
  return {
    name: 'Idempotency-Key', in: 'header', required: rule === 'required',
    description: [
      rule === 'required' ? 'Required on this operation.' : 'Optional; send one to make retries safe.',
      'A key you choose for this request (a UUID is a good one), sent again unchanged with every retry of the same request:',
      'the first answer is kept and replayed to the retries (with `Idempotent-Replayed: true`) instead of the request being done twice.',
      'Bare or in double quotes (an RFC 9651 string); 1 to 255 visible ASCII characters but `"` and `\\`; sent once.',
    ].join(' '),
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN },
  }
}

const IDEMPOTENT_REPLAYED: JsonObject = {
  description: '`true` on an answer replayed from an earlier request with the same `Idempotency-Key` (same status, body and passed-on headers; the gateway\'s own headers are fresh).',
  required: false, schema: { const: 'true' },
}

export function queryParameter(name: string, rule: QueryRule): JsonObject {
  const base = { name, in: 'query', required: false }
  switch (rule.type) {
    case 'integer':
      return {
        ...base, description: 'Digits only.',
        schema: { type: 'integer', minimum: rule.min, maximum: rule.max, ...(rule.default === undefined ? {} : { default: rule.default }) },
      }
    case 'string':
      return { ...base, schema: { type: 'string', minLength: 1, maxLength: rule.maxLength } }
    case 'enum':
      return { ...base, schema: { type: 'string', enum: [...rule.values] } }
    case 'list':
      return {
        ...base, style: 'form', explode: false, description: 'Comma-separated, each value at most once.',
        schema: { type: 'array', items: { type: 'string', enum: [...rule.values] }, minItems: 1, uniqueItems: true },
      }
    case 'boolean':
      return { ...base, schema: { type: 'boolean' } }
    case 'uuid':
      return { ...base, description: 'A UUID (any case).', schema: { type: 'string', pattern: UUID.source } }
    case 'timestamp':
      return {
        ...base, description: 'An RFC 3339 date-time with an offset, such as `2026-11-26T12:00:00Z`; send the `+` of an offset as `%2B`.',
        schema: { type: 'string', format: 'date-time' },
      }
  }
}

function pathParameter(name: string, rule: PathParamRule): JsonObject {
  switch (rule.type) {
    case 'uuid':
      return { name, in: 'path', required: true, description: 'A UUID (any case).', schema: { type: 'string', pattern: UUID.source } }
    case 'string':
      return { name, in: 'path', required: true, description: '1 to 128 characters of A-Z a-z 0-9 . _ ~ -', schema: { type: 'string', pattern: PLAIN_STRING.source } }
    case 'ulid':
      return { name, in: 'path', required: true, description: `\`${rule.prefix}\` and 26 characters.`, schema: { type: 'string', pattern: ulidPattern(rule.prefix).source } }
  }
}

/** An example problem body of `code`, as the gateway writes it. */
export function exampleProblem(code: ErrorCode, docsUrl: string, instance: string): ProblemDetails {
  const spec = errorCatalog[code]
  return {
    type: `${docsUrl}/errors/${kebabCode(code)}`,
    title: spec.title,
    status: spec.status,
    detail: whenItHappens[code] ?? spec.title,
    moreInfo: spec.tip,
    // A path template's parameters filled in, as a real request's path would be.
    instance: instance.replace(/\{[^}]+\}/g, '3f0c6f2e-8f0a-4a57-9d0e-2d6f5d1b7a10'),
    code,
    errors: [],
    requestId: 'req_0b1e6c8f5d2a4e7f9a3c1b2d4e6f8a0c',
    timestamp: '2026-11-21T09:30:00.000Z',
  }
}

function headersOf(policy: RoutePolicy, status: number): JsonObject {
  // A reference takes no `required` beside it: headers every answer carries are written inline.
  const headers: JsonObject = {
    'Service-Request-Id': { description: 'Unique id of this request; quote it to support.', required: true, schema: { type: 'string', minLength: 1 } },
    'X-Content-Type-Options': { description: 'Always `nosniff`.', required: true, schema: { const: 'nosniff' } },
    'Cache-Control': { description: 'Always `no-store`.', required: true, schema: { const: 'no-store' } },
  }
  if (status < 300) headers['Service-Correlation-Id'] = ref('headers', 'ServiceCorrelationId')
  if (policy.auth) {
    headers['Service-Credential-Expires'] = ref('headers', 'ServiceCredentialExpires')
    headers['RateLimit-Limit'] = ref('headers', 'RateLimitLimit')
    headers['RateLimit-Remaining'] = ref('headers', 'RateLimitRemaining')
    headers['RateLimit-Reset'] = ref('headers', 'RateLimitReset')
    headers['RateLimit-Policy'] = ref('headers', 'RateLimitPolicy')
    headers.RateLimit = ref('headers', 'RateLimit')
  }
  if (status === 429 || status === 503) headers['Retry-After'] = { description: 'Seconds to wait before trying again.', required: true, schema: { type: 'string', pattern: '^[0-9]+$' } }
  if (status === 401) {
    headers['WWW-Authenticate'] = {
      description: 'The Bearer challenge (RFC 6750): `Bearer` alone for a missing header or an API key; `Bearer error="invalid_token", error_description="…"` for a refused access token.',
      required: true, schema: { type: 'string', pattern: '^Bearer' },
    }
  }
  if (status === 403 && policy.auth && policy.noScope !== true) {
    headers['WWW-Authenticate'] = {
      description: 'With `INSUFFICIENT_SCOPE` only: `Bearer error="insufficient_scope", scope="<the scope>"` (RFC 6750).',
      required: false, schema: { type: 'string', pattern: '^Bearer error="insufficient_scope", scope="[^"]+"$' },
    }
  }
  if (status === 405) headers.Allow = { description: 'The methods the path takes.', required: true, schema: { type: 'string' } }
  if (policy.deprecation !== undefined) {
    // Sent from `since` on (RFC 9745, RFC 8594): not yet on the answers before it.
    headers.Deprecation = { description: `When this operation was deprecated, \`@\` and Unix seconds (RFC 9745): ${policy.deprecation.since}.`, required: false, schema: { type: 'string', pattern: '^@-?[0-9]+$' } }
    if (policy.deprecation.sunset !== undefined) {
      headers.Sunset = { description: `When this operation stops answering (RFC 8594), an HTTP-date: ${policy.deprecation.sunset}.`, required: false, schema: { type: 'string' } }
    }
  }
  if (policy.deprecation?.link !== undefined) {
    headers.Link = { description: `Links (RFC 8288), among them the migration guide: \`<${policy.deprecation.link}>; rel="deprecation"; type="text/html"\`.`, required: false, schema: { type: 'string' } }
  }
  return headers
}

function errorLink(code: ErrorCode): string {
  return `[\`${code}\`](errors/${kebabCode(code)}.html)`
}

function errorResponse(policy: RoutePolicy, status: number, codes: ErrorCode[], docsUrl: string, passesOn: boolean): JsonObject {
  const lines = codes.map((code) => `- ${errorLink(code)}: ${errorCatalog[code].title}`)
  // On a declared route the service may answer this status with a problem of its own.
  const serviceToo = passesOn && status >= 400 && status < 500 && status !== 401
  const schema: JsonObject = serviceToo
    ? schemaRef('ProblemDetails')
    : { allOf: [schemaRef('ProblemDetails'), { properties: { status: { const: status }, code: { enum: codes } } }] }
  const examples = Object.fromEntries(codes.map((code) => [code, { summary: errorCatalog[code].title, value: exampleProblem(code, docsUrl, policy.path) as unknown as Json }]))
  return {
    description: [...lines, ...(serviceToo ? ['- or a problem of the service behind this route, passed on'] : [])].join('\n'),
    headers: headersOf(policy, status),
    content: { 'application/problem+json': { schema, examples } },
  }
}

function successResponse(policy: RoutePolicy, method: Method): [string, JsonObject][] {
  const success = successOf(policy, method)
  const json = (schema: JsonObject): JsonObject => ({ 'application/json': { schema } })
  switch (success.kind) {
    case 'health':
      return [['200', { description: 'This instance can serve.', headers: headersOf(policy, 200), content: json(schemaRef('HealthOk')) }]]
    case 'property':
      return [['200', { description: 'The property.', headers: headersOf(policy, 200), content: json(schemaRef('PropertyResponse')) }]]
    case 'properties':
      return [['200', { description: 'One page of the properties, with the pagination.', headers: headersOf(policy, 200), content: json(schemaRef('PropertyListResponse')) }]]
    case 'credential':
      return [['200', { description: 'The credential this request was made with.', headers: headersOf(policy, 200), content: json(schemaRef('CredentialResponse')) }]]
    case 'event':
      return [['200', { description: 'The event.', headers: headersOf(policy, 200), content: json(schemaRef('EventResponse')) }]]
    case 'events':
      return [['200', { description: 'One page of the events, oldest first, with the pagination.', headers: headersOf(policy, 200), content: json(schemaRef('EventListResponse')) }]]
    case 'requestLog':
      return [['200', { description: 'The entry.', headers: headersOf(policy, 200), content: json(schemaRef('RequestLogEntryResponse')) }]]
    case 'requestLogs':
      return [['200', { description: 'One page of your credential\'s requests, newest first, with the pagination.', headers: headersOf(policy, 200), content: json(schemaRef('RequestLogEntryListResponse')) }]]
    case 'webhookEndpoint':
      return [[String(success.status), {
        description: success.secret ? 'The endpoint, with its signing `secret`: shown only now; keep it.' : 'The endpoint.',
        headers: headersOf(policy, success.status), content: json(schemaRef(success.secret ? 'WebhookEndpointWithSecretResponse' : 'WebhookEndpointResponse')),
      }]]
    case 'webhookEndpoints':
      return [['200', { description: 'One page of your credential\'s endpoints, oldest first, with the pagination.', headers: headersOf(policy, 200), content: json(schemaRef('WebhookEndpointListResponse')) }]]
    case 'webhookDeliveries':
      return [['200', { description: 'One page of the endpoint\'s attempts of the last 7 days, newest first, with the pagination.', headers: headersOf(policy, 200), content: json(schemaRef('WebhookAttemptListResponse')) }]]
    case 'webhookQueued':
      return [['202', { description: 'The delivery is queued.', headers: headersOf(policy, 202), content: json(schemaRef(success.schema)) }]]
    case 'webhookRecovery':
      return [[String(success.status), {
        description: success.status === 202 ? 'The recovery, running: its events are being sent, oldest first.' : 'The recovery, with its counts so far.',
        headers: headersOf(policy, success.status), content: json(schemaRef('WebhookRecoveryResponse')),
      }]]
    case 'webhookRecoveries':
      return [['200', { description: 'One page of the endpoint\'s recoveries of the last 7 days, newest first, with the pagination.', headers: headersOf(policy, 200), content: json(schemaRef('WebhookRecoveryListResponse')) }]]
    case 'noContent':
      return [['204', { description: 'Done; no body.', headers: headersOf(policy, 204) }]]
    case 'service': {
      const main: JsonObject = success.status === 204
        ? { description: 'Done; no body.', headers: headersOf(policy, 204) }
        : { description: "The service's answer, passed on.", headers: headersOf(policy, success.status), content: json(schemaRef('ServiceResponse')) }
      return [
        [String(success.status), main],
        ...(success.status === 204 ? [] : [['204', { description: 'The service answered with no body; passed on.', headers: headersOf(policy, 204) }] as [string, JsonObject]]),
        ['2XX', { description: 'Another success of the service, passed on.', headers: headersOf(policy, 200), content: json(schemaRef('ServiceResponse')) }],
        ['3XX', {
          description: 'A redirect of the service, passed on; follow `Location` (a public path of this API).',
          headers: { ...headersOf(policy, 300), Location: { description: 'Where to go: a path of this API.', required: false, schema: { type: 'string', pattern: '^/v1/' } } },
        }],
      ]
    }
  }
}

function tagOf(policy: RoutePolicy): string {
  // A recovery's operations under a tag of their own: under Webhooks, after its first eight
  // operations, the reference's renderer left them off the page (test/browser/docs-site.test.ts).
  if (policy.kind === 'facade' && policy.path.startsWith('/v1/webhook-endpoints/{endpointId}/recover')) return 'Recoveries'
  if (policy.kind === 'facade' && policy.path.startsWith('/v1/webhook-endpoints')) return 'Webhooks'
  // The navigation's links name a tag in lower case, its words joined by '-' ("Request Logs": #/request-logs/…).
  return (policy.path.split('/')[2] ?? 'api').split('-').map(capital).join(' ')
}

const VERB: Record<Method, string> = { GET: 'get', POST: 'create', PUT: 'replace', PATCH: 'update', DELETE: 'delete' }

const capital = (word: string): string => word.charAt(0).toUpperCase() + word.slice(1)

/** `listProperties`, `getProperty`, `getHealth`; declared routes: `listGuests`, `updateGuestsByGuestId`. */
const WEBHOOK_OPERATIONS: Record<string, Partial<Record<Method, string>>> = {
  [webhookRoutes.webhookEndpoints.path]: { GET: 'listWebhookEndpoints', POST: 'createWebhookEndpoint' },
  [webhookRoutes.webhookEndpoint.path]: { GET: 'getWebhookEndpoint', PATCH: 'updateWebhookEndpoint', DELETE: 'deleteWebhookEndpoint' },
  [webhookRoutes.rotateWebhookSecret.path]: { POST: 'rotateWebhookEndpointSecret' },
  [webhookRoutes.testWebhookEndpoint.path]: { POST: 'testWebhookEndpoint' },
  [webhookRoutes.listWebhookDeliveries.path]: { GET: 'listWebhookEndpointDeliveries' },
  [webhookRoutes.redeliverEvent.path]: { POST: 'redeliverEvent' },
  [webhookRoutes.recoverWebhookEndpoint.path]: { POST: 'recoverWebhookEndpoint' },
  [webhookRoutes.listWebhookRecoveries.path]: { GET: 'listWebhookRecoveries' },
  [webhookRoutes.webhookRecovery.path]: { GET: 'getWebhookRecovery', DELETE: 'cancelWebhookRecovery' },
}

/** Unique per operation: a path with several methods has one id per method. */
function operationId(policy: RoutePolicy, method: Method): string {
  const webhook = policy.kind === 'facade' ? WEBHOOK_OPERATIONS[policy.path]?.[method] : undefined
  if (webhook !== undefined) return webhook
  const builtIn = Object.entries({ ...builtInRoutes, ...requestLogRoutes }).find(([, p]) => p.path === policy.path)?.[0]
  if (builtIn !== undefined) return builtIn === 'health' ? 'getHealth' : builtIn
  const segments = policy.path.split('/').slice(2)
  const words = segments.map((s) => (s.startsWith('{') ? `By-${s.slice(1, -1)}` : s)).flatMap((s) => s.split('-')).map(capital)
  const verb = method === 'GET' && !policy.path.endsWith('}') ? 'list' : VERB[method]
  return `${verb}${words.join('')}`
}

function summaryOf(policy: RoutePolicy, method: Method): string {
  const success = successOf(policy, method)
  if (success.kind === 'health') return 'Health of this instance'
  if (success.kind === 'property') return 'Get a property'
  if (success.kind === 'properties') return 'List properties'
  if (success.kind === 'credential') return 'The credential in use'
  if (success.kind === 'event') return 'Get an event'
  if (success.kind === 'events') return 'List events'
  if (success.kind === 'requestLogs') return 'List your requests'
  if (success.kind === 'requestLog') return 'Get one of your requests'
  const webhook = policy.kind === 'facade' ? WEBHOOK_OPERATIONS[policy.path]?.[method] : undefined
  if (webhook !== undefined) return webhook.replace(/([A-Z])/g, ' $1').toLowerCase().replace(/^./, (c) => c.toUpperCase())
  return `${method} ${policy.path}`
}

/** What a deprecated operation's reader must know first: both dates, what to use instead. */
function deprecationNote(deprecation: Deprecation): string {
  const parts = [`**Deprecated** since ${deprecation.since}: every answer carries \`Deprecation\``
    + (deprecation.sunset === undefined ? '.' : ` and \`Sunset\`; from ${deprecation.sunset} (the sunset) it answers 410 \`ROUTE_RETIRED\` to every request.`)]
  if (deprecation.replacement !== undefined) parts.push(`Use \`${deprecation.replacement}\` instead.`)
  if (deprecation.link !== undefined) parts.push(`How to move: ${deprecation.link}`)
  return parts.join(' ')
}

function descriptionOf(policy: RoutePolicy, method: Method): string {
  const parts: string[] = []
  if (policy.deprecation !== undefined) parts.push(deprecationNote(policy.deprecation))
  const success = successOf(policy, method)
  if (success.kind === 'health') parts.push('For load balancers: no key, any host, no rate limit. `{"status":"ok"}` or `{"status":"unhealthy"}` with `Retry-After`, nothing else.')
  if (success.kind === 'properties') parts.push('The active properties of your brand that your key may use, oldest first (`createdAt`, then `id`). A page past the end is an empty `data` with the true `total`.')
  if (success.kind === 'property') parts.push('A property of your brand that your key may use, whatever its status.')
  if (success.kind === 'credential') {
    parts.push('The API key or access token\'s client this request was made with: its id, name, brand, mode, scopes, properties, quota, expiry, the addresses it may be used from, '
      + 'when a rolled key\'s previous secret stops working, and when it was last used (to the minute). Never a secret. Any valid credential may call it: no scope is needed.')
  }
  if (success.kind === 'events') {
    parts.push('The events your credential sees, oldest first: of its mode and brand, about no property or one it may use, of the types it has the scope of.'
      + ' Events are thin: each names what changed; read it at `object.path`. Catch up by asking for `createdAfter` the last `createdAt` you processed and paging on;'
      + ' events may come twice and out of order, so process each `id` once. A page past the end is an empty `data` with the true `total`.')
  }
  if (success.kind === 'event') parts.push('One event your credential sees; an event it may not see is answered as one that does not exist (404 `EVENT_NOT_FOUND`).')
  if (success.kind === 'requestLogs') {
    parts.push('The requests made with your credential, newest first, each about a second after its answer: every answer, refusals of a known but expired or suspended credential too.'
      + ' Filters: `status` (a status such as `404`, a class such as `4xx`, or `errors` for every 4xx and 5xx), `method`, `route` (a template of this reference), `code` (an error code),'
      + ' `createdAfter` and `createdBefore` (when the request arrived), `idempotencyKey`. To walk many pages, set `createdBefore` to the time of your first page.'
      + ' Requests to the request log itself are not logged.')
  }
  if (success.kind === 'requestLog') parts.push('One of your requests by its `Service-Request-Id`; another credential\'s is answered as one that does not exist (404 `REQUEST_LOG_NOT_FOUND`).')
  if (policy.kind === 'facade' && WEBHOOK_OPERATIONS[policy.path] !== undefined) {
    parts.push('Webhook endpoints belong to the credential that made them; another credential\'s are not found (404 `WEBHOOK_ENDPOINT_NOT_FOUND`).'
      + ' Deliveries are signed as Standard Webhooks specifies (`webhook-id`, `webhook-timestamp`, `webhook-signature`); see the partner guide, "Webhooks".')
  }
  if (policy.kind === 'proxy') parts.push('Forwarded to the service behind this route after the checks below; its answer is passed on.')
  if (policy.scope === 'brand') parts.push('Brand-wide: the host name selects the brand; no `Service-Property-Id`.')
  if (policy.scope === 'property') parts.push('Property-scoped: `Service-Property-Id` names the property.')
  if (policy.body !== 'none' && BODY_METHODS.has(method)) parts.push(`Takes a JSON body of at most ${policy.body.maxBytes} bytes.`)
  const idempotency = idempotencyOf(policy, method)
  if (idempotency !== undefined) {
    parts.push(`Safe to retry with an \`Idempotency-Key\` (${idempotency === 'required' ? 'required here' : 'optional'}): the first answer (a success or the service's 4xx) is kept and replayed`
      + ' to a retry with the same key and the same request; `409 IDEMPOTENCY_KEY_IN_USE` while the first is in flight, `422 IDEMPOTENCY_KEY_REUSED` for the same key on another request.')
  }
  if (method === 'GET') parts.push('`HEAD` answers as `GET` does, without the body.')
  const scope = scopeOf(policy, method)
  if (scope !== undefined) parts.push(`Needs the scope \`${scope}\`: an API key or access token without it is answered 403 \`INSUFFICIENT_SCOPE\`.`)
  return parts.join('\n\n')
}

/** The operation's scope under both schemes (OpenAPI 3.1 lets a non-OAuth scheme list the scopes it needs too). */
function securityOf(policy: RoutePolicy, method: Method, source: DocumentSource): Json[] {
  const scope = scopeOf(policy, method)
  if (!policy.auth) return []
  const scopes = scope === undefined ? [] : [scope]
  return [{ apiKey: scopes }, ...(tokenUrlOf(source) === undefined ? [] : [{ oauth2: scopes }])]
}

function operation(policy: RoutePolicy, method: Method, source: DocumentSource): JsonObject {
  const { docsUrl } = source
  const parameters: Json[] = []
  for (const [name, rule] of Object.entries(policy.pathParams)) parameters.push(pathParameter(name, rule))
  for (const [name, rule] of Object.entries(policy.query)) parameters.push(queryParameter(name, rule))
  if (policy.auth) parameters.push(ref('parameters', 'UserAgent'))
  if (policy.scope === 'property') parameters.push(ref('parameters', 'ServicePropertyId'))
  const idempotency = idempotencyOf(policy, method)
  if (idempotency !== undefined) parameters.push(idempotencyParameter(idempotency))
  parameters.push(ref('parameters', 'ServiceCorrelationId'), ref('parameters', 'Traceparent'), ref('parameters', 'Tracestate'))

  const responses: JsonObject = {}
  for (const [status, response] of successResponse(policy, method)) responses[status] = response
  for (const [status, codes] of errorStatusesOf(policy, method)) {
    const response = errorResponse(policy, status, codes, docsUrl, policy.kind === 'proxy')
    if (status === 503 && successOf(policy, method).kind === 'health') {
      const content = response.content as JsonObject
      content['application/json'] = { schema: schemaRef('HealthUnhealthy') }
      response.description = `This instance cannot serve now (\`{"status":"unhealthy"}\`), or:\n${String(response.description)}`
    }
    responses[String(status)] = response
  }
  if (policy.kind === 'proxy') {
    // With IDEMPOTENCY_KEY_REUSED, 422 is documented above, the service's problems included.
    responses['422'] ??= {
      description: "The service refused the body's fields; its problem, passed on.",
      headers: headersOf(policy, 422),
      content: { 'application/problem+json': { schema: schemaRef('ProblemDetails') } },
    }
    responses['4XX'] = {
      description: 'Another problem of the service, passed on.',
      headers: headersOf(policy, 400),
      content: { 'application/problem+json': { schema: schemaRef('ProblemDetails') } },
    }
  }
  if (idempotency !== undefined) {
    // Any answer the service gave (a success, a redirect, a problem of its own) may be a replay.
    for (const [status, response] of Object.entries(responses)) {
      if (!status.startsWith('5')) ((response as JsonObject).headers as JsonObject)['Idempotent-Replayed'] = IDEMPOTENT_REPLAYED
    }
  }
  const body = policy.body !== 'none' && BODY_METHODS.has(method) ? policy.body : undefined
  const ownBody = policy.kind === 'facade' ? WEBHOOK_BODIES[`${method} ${policy.path}`] : undefined
  return {
    operationId: operationId(policy, method),
    summary: summaryOf(policy, method),
    ...(policy.deprecation === undefined ? {} : { deprecated: true, 'x-deprecated-since': policy.deprecation.since, ...(policy.deprecation.sunset === undefined ? {} : { 'x-sunset': policy.deprecation.sunset }) }),
    description: descriptionOf(policy, method),
    tags: [tagOf(policy)],
    security: securityOf(policy, method, source),
    parameters,
    ...(body !== undefined && ownBody !== undefined
      ? { requestBody: { required: ownBody.required, description: `JSON, at most ${body.maxBytes} bytes.`, content: { 'application/json': { schema: schemaRef(ownBody.schema) } } } }
      : {}),
    ...(body !== undefined && ownBody === undefined
      ? { requestBody: { required: false, description: `JSON, at most ${body.maxBytes} bytes; the service checks its fields.`, content: { 'application/json': { schema: {} } } } }
      : {}),
    responses,
  }
}

export function openApiDocument(source: DocumentSource): JsonObject {
  const paths: JsonObject = {}
  for (const policy of routesOf(source)) {
    const item: JsonObject = {}
    for (const method of policy.methods) item[method.toLowerCase()] = operation(policy, method, source)
    paths[policy.path] = item
  }
  const tags = [...new Set(routesOf(source).map(tagOf))].map((name) => ({ name }))
  return {
    openapi: '3.1.1',
    info: {
      title: 'Partner API',
      version: 'v1',
      description: [
        'The partner REST API. Every answer carries `Service-Request-Id`; successes are `application/json` envelopes',
        '(`data`, `meta`), errors are `application/problem+json` (RFC 9457) whose `type` links to the page of its code.',
        '',
        'Authenticate with `Authorization: Bearer <credential>`: an API key (`svc_live_…`, `svc_test_…`)'
          + (tokenUrlOf(source) === undefined ? '.' : ', or an OAuth 2.0 access token from the identity provider (client-credentials grant) for a registered client.'),
        'Each operation but `GET /v1/credential` needs one scope, named below; a credential without it is answered 403 `INSUFFICIENT_SCOPE`.',
        'Authenticated answers carry the quota: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, and `RateLimit-Policy` and `RateLimit`',
        '(draft-ietf-httpapi-ratelimit-headers-11).',
        '',
        `Error codes: [all of them](errors/index.html).`,
      ].join('\n'),
    },
    servers: source.brands.flatMap((brand) => brand.hosts.filter((h) => h.includes('.') && !/^[0-9.]+$/.test(h)).slice(0, 1))
      .map((host) => ({ url: `https://${host}`, description: 'A brand host: the host name selects the brand' })),
    tags,
    paths,
    components: components(source),
  }
}
