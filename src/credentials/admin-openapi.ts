import { z } from 'zod'
import { errorCatalog, fieldErrorCodes, type ErrorCode } from '../contract/errors.js'
import { problemJsonSchema } from '../contract/problem.js'
import { UTC_MILLIS } from '../contract/property.js'
import { queryParameter, requestLogEntrySchema } from '../docs/openapi.js'
import { portalLinkBody, portalLinkView } from '../portal/schemas.js'
import { CSV_MAX_ROWS } from '../request-log/admin-routes.js'
import { requestLogRoutes } from '../routes/policy.js'
import { ADMIN_API_PREFIX } from './admin-api.js'
import {
  auditEntry, createdView, createGrantBody, createKeyBody, credentialView, revokedView, rollBody, rolledView, RULES, updateBody, usageView,
} from './schemas.js'

// The OpenAPI 3.1 document of the admin port (served at /admin/v1/openapi.json): its request
// bodies and answers are generated from the very zod schemas that validate and shape them
// (credentials/schemas.ts), the problems from the error catalog.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }

export const ADMIN_OPENAPI_PATH = `${ADMIN_API_PREFIX}/openapi.json`

function schemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonObject {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonObject
  return rest
}

const ref = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` })

function problemOf(status: number, codes: ErrorCode[]): JsonObject {
  return {
    description: codes.map((code) => `- \`${code}\`: ${errorCatalog[code].title}`).join('\n'),
    headers: { 'Service-Request-Id': { description: 'Unique id of this request.', required: true, schema: { type: 'string' } } },
    content: {
      'application/problem+json': {
        schema: { allOf: [ref('ProblemDetails'), { properties: { status: { const: status }, code: { enum: codes } } }] },
      },
    },
  }
}

const ok = (description: string, schema: JsonObject, status = '200'): [string, JsonObject] => [status, {
  description,
  headers: { 'Service-Request-Id': { description: 'Unique id of this request.', required: true, schema: { type: 'string' } } },
  content: { 'application/json': { schema } },
}]

const envelope = (data: JsonObject): JsonObject => ({
  type: 'object', additionalProperties: false, required: ['data', 'meta'], properties: { data, meta: ref('Meta') },
})

const collection = (item: string): JsonObject => ({
  type: 'object', additionalProperties: false, required: ['data', 'meta'], properties: { data: { type: 'array', items: ref(item) }, meta: ref('CollectionMeta') },
})

/** The errors every credentials operation may answer, with those of its own. */
function errors(own: Record<number, ErrorCode[]>): [string, JsonObject][] {
  const all: Record<number, ErrorCode[]> = {
    400: ['MALFORMED_REQUEST'],
    401: ['MISSING_AUTH_HEADER', 'INVALID_AUTH_HEADER'],
    404: ['ROUTE_NOT_FOUND'],
    500: ['INTERNAL_ERROR'],
    503: ['SERVICE_UNAVAILABLE'],
  }
  for (const [status, codes] of Object.entries(own)) all[Number(status)] = [...(all[Number(status)] ?? []), ...codes]
  return Object.entries(all).sort(([a], [b]) => Number(a) - Number(b)).map(([status, codes]) => [status, problemOf(Number(status), codes)])
}

const BODY_ERRORS: Record<number, ErrorCode[]> = { 400: ['UNKNOWN_BODY_FIELD', 'MALFORMED_JSON'], 413: ['PAYLOAD_TOO_LARGE'], 415: ['UNSUPPORTED_MEDIA_TYPE'], 422: ['VALIDATION_FAILED'] }
const QUERY_ERRORS: Record<number, ErrorCode[]> = { 400: ['UNKNOWN_QUERY_PARAMETER', 'INVALID_QUERY_PARAMETER'] }
const NOT_FOUND: Record<number, ErrorCode[]> = { 404: ['CREDENTIAL_NOT_FOUND'] }

function merge(...parts: Record<number, ErrorCode[]>[]): Record<number, ErrorCode[]> {
  const out: Record<number, ErrorCode[]> = {}
  for (const part of parts) for (const [status, codes] of Object.entries(part)) out[Number(status)] = [...(out[Number(status)] ?? []), ...codes]
  return out
}

const idParameter: JsonObject = { name: 'id', in: 'path', required: true, description: 'A key id `key_…` or a grant id `cli_…`.', schema: { type: 'string' } }
const pageParameters: JsonObject[] = [
  { name: 'page', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 10000, default: 1 } },
  { name: 'perPage', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
]

function operation(summary: string, description: string, responses: [string, JsonObject][], extra: JsonObject = {}): JsonObject {
  return { summary, description, tags: ['Credentials'], security: [{ adminToken: [] }], ...extra, responses: Object.fromEntries(responses) }
}

function body(schema: string, required: boolean): JsonObject {
  return { requestBody: { required, content: { 'application/json': { schema: ref(schema) } } } }
}

export function adminOpenApiDocument(): JsonObject {
  const credentials = `${ADMIN_API_PREFIX}/credentials`
  const action = (name: string, summary: string, description: string): JsonObject => ({
    post: operation(summary, description, [ok('The credential as it is now.', envelope(ref('Credential'))), ...errors(merge(BODY_ERRORS, NOT_FOUND))],
      { operationId: `${name}Credential`, parameters: [idParameter] }),
  })
  const meta = {
    requestId: { type: 'string', description: 'The same value as the `Service-Request-Id` header' },
    timestamp: { type: 'string', pattern: UTC_MILLIS.source, description: 'UTC, with milliseconds' },
  }
  const problem = JSON.parse(JSON.stringify(problemJsonSchema)) as JsonObject & { properties: Record<string, JsonObject> }
  const errorItems = problem.properties.errors?.items as JsonObject & { properties: Record<string, JsonObject> }
  return {
    openapi: '3.1.1',
    info: {
      title: 'Gateway admin API',
      version: 'v1',
      description: [
        'The admin port: metrics, status, liveness and, when `ADMIN_TOKEN` is set (404 otherwise), the credentials API: the key tool\'s commands over HTTP,',
        'through the same rules. Successes are the public API\'s envelopes (`data`, `meta`); errors are `application/problem+json` with the public API\'s codes.',
        'Every change is written to the audit trail with the actor `admin-api`. With a Redis and the request log on, each credential\'s request log can be read and exported.',
      ].join(' '),
    },
    tags: [{ name: 'Credentials' }, { name: 'Request log' }, { name: 'Operations' }],
    paths: {
      '/livez': { get: { summary: 'Liveness', tags: ['Operations'], security: [], responses: Object.fromEntries([ok('The process answers.', { type: 'object', properties: { status: { const: 'ok' } }, required: ['status'] })]) } },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics', tags: ['Operations'], security: [{ adminToken: [] }],
          responses: { 200: { description: 'Prometheus text format.', content: { 'text/plain': { schema: { type: 'string' } } } }, ...Object.fromEntries(errors({})) },
        },
      },
      '/status': { get: { summary: 'Status for operators', tags: ['Operations'], security: [{ adminToken: [] }], responses: Object.fromEntries([ok('This instance\'s status.', { type: 'object' }), ...errors({})]) } },
      [ADMIN_OPENAPI_PATH]: { get: { summary: 'This document', tags: ['Operations'], security: [{ adminToken: [] }], responses: Object.fromEntries([ok('OpenAPI 3.1.', { type: 'object' }), ...errors({})]) } },
      [credentials]: {
        get: operation('List credentials', 'API keys, then client grants, each oldest first; as `keys list`.', [ok('One page of credentials.', collection('Credential')), ...errors(QUERY_ERRORS)], {
          operationId: 'listCredentials',
          parameters: [
            { name: 'brand', in: 'query', required: false, schema: { type: 'string' }, description: 'Only this brand\'s' },
            { name: 'status', in: 'query', required: false, schema: { type: 'string', enum: ['active', 'suspended'] } },
            ...pageParameters,
          ],
        }),
        post: operation('Create an API key or register a client',
          '`"type": "api_key"` as `keys create` (the answer carries the key, once, in `secret`); `"type": "oauth_client"` as `keys grant-client`.',
          [ok('The credential made.', envelope(ref('CreatedCredential')), '201'), ...errors(BODY_ERRORS)],
          { operationId: 'createCredential', requestBody: { required: true, content: { 'application/json': { schema: { oneOf: [ref('CreateApiKey'), ref('CreateOAuthClient')] } } } } }),
      },
      [`${credentials}/{id}`]: {
        get: operation('Show a credential', 'As `keys show`.', [ok('The credential.', envelope(ref('Credential'))), ...errors(merge(QUERY_ERRORS, NOT_FOUND))], { operationId: 'getCredential', parameters: [idParameter] }),
        patch: operation('Change a credential', 'As `keys update`: the fields given change, `null` lifts a limit; effective on every instance within a second.',
          [ok('The credential as it is now.', envelope(ref('Credential'))), ...errors(merge(BODY_ERRORS, NOT_FOUND))],
          { operationId: 'updateCredential', parameters: [idParameter], ...body('UpdateCredential', true) }),
      },
      [`${credentials}/{id}/roll`]: {
        post: operation('Roll an API key', `As \`keys roll\`: a new secret for the same key; the previous one works for \`overlap\` (${RULES.overlap}; default 24h).`,
          [ok('The new secret, shown only here.', envelope(ref('RolledCredential'))), ...errors(merge(BODY_ERRORS, NOT_FOUND))],
          { operationId: 'rollCredential', parameters: [idParameter], ...body('RollCredential', false) }),
      },
      [`${credentials}/{id}/end-overlap`]: action('endOverlapOf', 'End a roll\'s overlap', 'As `keys end-overlap`: the previous secret stops working now.'),
      [`${credentials}/{id}/suspend`]: action('suspend', 'Suspend a credential', 'As `keys suspend`.'),
      [`${credentials}/{id}/resume`]: action('resume', 'Resume a credential', 'As `keys resume`.'),
      [`${credentials}/{id}/revoke`]: {
        post: operation('Revoke a credential', 'As `keys revoke`: gone on every instance within a second; its audit trail stays.',
          [ok('Revoked.', envelope(ref('RevokedCredential'))), ...errors(merge(BODY_ERRORS, NOT_FOUND))], { operationId: 'revokeCredential', parameters: [idParameter] }),
      },
      [`${credentials}/{id}/usage`]: {
        get: operation('Usage of a credential', 'As `keys usage`: per UTC day and route, the requests by status class.', [ok('The usage.', envelope(ref('Usage'))), ...errors(merge(QUERY_ERRORS, NOT_FOUND))], {
          operationId: 'getCredentialUsage',
          parameters: [idParameter, { name: 'days', in: 'query', required: false, schema: { type: 'integer', minimum: 1, default: 7 }, description: 'At most `usage.retentionDays`' }],
        }),
      },
      [`${credentials}/{id}/portal-sessions`]: {
        post: operation('Make a partner portal link',
          'As `keys portal-link`: a session of the credential in the partner portal, with its capabilities, and the single-use link that opens it (the token, in the URL\'s fragment, is shown only here; Redis keeps its digest). At most 10 live sessions per credential, links not yet entered included.',
          [ok('The session and its link.', envelope(ref('PortalLink')), '201'), ...errors(merge(BODY_ERRORS, NOT_FOUND, { 409: ['PORTAL_SESSION_LIMIT_REACHED'] }))],
          { operationId: 'createPortalSession', parameters: [idParameter], ...body('CreatePortalLink', false) }),
        delete: {
          ...operation('End every partner portal session of a credential', 'Entered or not, each ends at once, on every instance; each ending is audited.',
            [['204', { description: 'Ended (none may have been live).', headers: { 'Service-Request-Id': { description: 'Unique id of this request.', required: true, schema: { type: 'string' } } } }], ...errors(merge(QUERY_ERRORS, NOT_FOUND))],
            { operationId: 'endPortalSessions', parameters: [idParameter] }),
        },
      },
      [`${credentials}/{id}/request-logs`]: {
        get: operation('A credential\'s request log',
          'Its entries, newest first, with the filters and pages of the partner\'s `GET /v1/request-logs`, in the mode of the credential.',
          [ok('One page of entries.', collection('RequestLogEntry')), ...errors(merge(QUERY_ERRORS, NOT_FOUND))], {
            operationId: 'listCredentialRequestLogs', tags: ['Request log'],
            parameters: [idParameter, ...Object.entries(requestLogRoutes.listRequestLogs.query).map(([name, rule]) => queryParameter(name, rule) as JsonObject)],
          }),
      },
      [`${credentials}/{id}/request-logs.csv`]: {
        get: operation('Export a credential\'s request log as CSV',
          [
            'The entries of the window, newest first, streamed: RFC 4180 with CRLF line ends, a header row of the entry\'s fields in order,',
            'a list\'s items joined by `;`, null as an empty cell, booleans as `true`/`false`; a text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return',
            `gets a leading \`'\` so that a spreadsheet does not read it as a formula. More than ${CSV_MAX_ROWS} entries: 422, asking for a narrower window.`,
          ].join(' '),
          [['200', {
            description: 'The entries as CSV.',
            headers: {
              'Service-Request-Id': { description: 'Unique id of this request.', required: true, schema: { type: 'string' } },
              'Content-Disposition': { description: '`attachment; filename="<id>-request-log.csv"`', required: true, schema: { type: 'string' } },
            },
            content: { 'text/csv': { schema: { type: 'string' } } },
          }], ...errors(merge(QUERY_ERRORS, NOT_FOUND, { 422: ['VALIDATION_FAILED'] }))],
          {
            operationId: 'exportCredentialRequestLogs', tags: ['Request log'],
            parameters: [idParameter, queryParameter('createdAfter', { type: 'timestamp' }), queryParameter('createdBefore', { type: 'timestamp' })],
          }),
      },
      [`${ADMIN_API_PREFIX}/request-logs/{requestId}`]: {
        get: operation('One request log entry, of any credential', 'The entry of a `Service-Request-Id`, whichever credential made the request.',
          [ok('The entry.', envelope(ref('RequestLogEntry'))), ...errors(merge(QUERY_ERRORS, { 404: ['REQUEST_LOG_NOT_FOUND'] }))], {
            operationId: 'getRequestLog', tags: ['Request log'],
            parameters: [{ name: 'requestId', in: 'path', required: true, description: 'The `Service-Request-Id` of the request.', schema: { type: 'string' } }],
          }),
      },
      [`${ADMIN_API_PREFIX}/audit`]: {
        get: operation('The audit trail', 'As `keys audit`: every change, newest first.', [ok('One page of entries.', collection('AuditEntry')), ...errors(QUERY_ERRORS)], {
          operationId: 'listAuditEntries',
          parameters: [
            { name: 'id', in: 'query', required: false, schema: { type: 'string' }, description: 'One credential\'s changes' },
            { name: 'since', in: 'query', required: false, schema: { type: 'string' }, description: 'An ISO 8601 date-time: changes at or after it' },
            ...pageParameters,
          ],
        }),
      },
    },
    components: {
      securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: '`ADMIN_TOKEN`' } },
      schemas: {
        CreateApiKey: schemaOf(createKeyBody, 'input'),
        CreateOAuthClient: schemaOf(createGrantBody, 'input'),
        UpdateCredential: schemaOf(updateBody, 'input'),
        RollCredential: schemaOf(rollBody, 'input'),
        Credential: schemaOf(credentialView, 'output'),
        CreatedCredential: schemaOf(createdView, 'output'),
        RolledCredential: schemaOf(rolledView, 'output'),
        RevokedCredential: schemaOf(revokedView, 'output'),
        Usage: schemaOf(usageView, 'output'),
        AuditEntry: schemaOf(auditEntry, 'output'),
        CreatePortalLink: schemaOf(portalLinkBody, 'input'),
        PortalLink: schemaOf(portalLinkView, 'output'),
        RequestLogEntry: requestLogEntrySchema() as JsonObject,
        Meta: { type: 'object', additionalProperties: false, required: ['requestId', 'timestamp'], properties: meta },
        CollectionMeta: {
          type: 'object', additionalProperties: false, required: ['requestId', 'timestamp', 'pagination'],
          properties: {
            ...meta,
            pagination: {
              type: 'object', additionalProperties: false, required: ['page', 'perPage', 'total'],
              properties: { page: { type: 'integer', minimum: 1 }, perPage: { type: 'integer', minimum: 1 }, total: { type: 'integer', minimum: 0 } },
            },
          },
        },
        ProblemDetails: {
          ...problem,
          additionalProperties: false,
          properties: {
            ...problem.properties,
            errors: { type: 'array', items: { ...errorItems, additionalProperties: false, properties: { ...errorItems.properties, code: { type: 'string', enum: [...fieldErrorCodes] } } } },
          },
        },
      },
    },
  }
}
