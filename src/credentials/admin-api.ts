import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { z } from 'zod'
import { envelopeJson, type Pagination } from '../contract/envelope.js'
import { ApiError, type FieldError } from '../contract/errors.js'
import { pathOf, PROBLEM_CONTENT_TYPE, problemBody, quoteInput } from '../contract/problem.js'
import { PAGE_MAX } from '../routes/policy.js'
import { portalLinkBody } from '../portal/schemas.js'
import { PortalSessionLimitReached, type PortalSessions } from '../portal/sessions.js'
import { createGrantBody, createKeyBody, rollBody, updateBody } from './schemas.js'
import { CredentialInputError, CredentialNotFound, FIELD_LABEL, instantMillis, parseOverlap, type CredentialService } from './service.js'

// The credentials API of the admin port (docs/operations.md, "The credentials API"): list,
// create, show, update, roll, end an overlap, suspend, resume, revoke, usage and the audit
// trail, as the key tool does them, through the same service. Served only when ADMIN_TOKEN is
// set, and only with it (the admin listener checks the token). JSON in, the public envelope
// out; problems with the public API's codes: 400 UNKNOWN_BODY_FIELD for a field the operation
// does not take, 422 VALIDATION_FAILED with one field error per bad field, 404
// CREDENTIAL_NOT_FOUND for an id no credential has.

export const ADMIN_API_PREFIX = '/admin/v1'
const ACTOR = 'admin-api'
const JSON_TYPE = 'application/json; charset=utf-8'
const MAX_BODY_BYTES = 64 * 1024
const PER_PAGE_DEFAULT = 20
/** The body of an action that takes none but may get `{}`. */
const NO_FIELDS = z.strictObject({})

export interface AdminApiOptions {
  docsUrl: string
  /** Whether Redis answers now: a failure while it does not is a 503, else a 500. */
  storeUp: () => boolean
  onError?: (error: unknown) => void
  /** The partner portal's sessions; without them (no portal) no link can be made. */
  portal?: PortalSessions
}

function problem(request: FastifyRequest, reply: FastifyReply, error: ApiError, docsUrl: string): FastifyReply {
  if (error.headers !== undefined) reply.headers(error.headers)
  if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter))
  return reply.code(error.status).type(PROBLEM_CONTENT_TYPE).send(problemBody(error, docsUrl, pathOf(request.url), request.id))
}

function send(reply: FastifyReply, status: number, data: unknown, pagination?: Pagination): FastifyReply {
  return reply.code(status).type(JSON_TYPE).send(envelopeJson(JSON.stringify(data), reply.request.id, pagination))
}

/** 400 UNKNOWN_BODY_FIELD for the fields `schema` does not take, suggesting a known one that matches ignoring case. */
function refuseUnknownFields(body: Record<string, unknown>, schema: z.ZodObject): void {
  const known = Object.keys(schema.shape)
  const errors: FieldError[] = []
  for (const name of Object.keys(body)) {
    if (known.includes(name)) continue
    const near = known.find((k) => k.toLowerCase() === name.toLowerCase())
    errors.push({ field: name, code: 'UNKNOWN_PARAMETER', detail: `Unknown field '${quoteInput(name)}'.${near === undefined ? '' : ` Did you mean '${near}'?`}` })
  }
  if (errors.length > 0) throw new ApiError('UNKNOWN_BODY_FIELD', `The body has ${errors.length === 1 ? 'a field' : 'fields'} this operation does not take: ${errors.map((e) => e.field).map(quoteInput).join(', ')}.`, { errors })
}

/** The body as an object (none: an empty one); anything else is 422. */
function objectBody(request: FastifyRequest): Record<string, unknown> {
  const body = request.body
  if (body === undefined || body === null) return {}
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError('VALIDATION_FAILED', 'The body must be a JSON object.', { errors: [{ field: 'body', code: 'INVALID_FORMAT', detail: 'The body must be a JSON object.' }] })
  }
  return body as Record<string, unknown>
}

/** The fields of `body` that `schema` takes, checked by it and the service: 400 or 422. */
function fieldsOf(request: FastifyRequest, schema: z.ZodObject): Record<string, unknown> {
  const body = objectBody(request)
  refuseUnknownFields(body, schema)
  return body
}

type Query = Record<string, string | string[] | undefined>

/** The query's parameters: each known one at most once, no unknown ones (400, as on the public port). */
function queryOf(request: FastifyRequest, known: readonly string[]): Record<string, string> {
  const query = request.query as Query
  const unknown = Object.keys(query).filter((name) => !known.includes(name))
  if (unknown.length > 0) {
    throw new ApiError('UNKNOWN_QUERY_PARAMETER', `Unknown query parameter${unknown.length > 1 ? 's' : ''}: ${unknown.map(quoteInput).join(', ')}.`, {
      errors: unknown.map((name) => {
        const near = known.find((k) => k.toLowerCase() === name.toLowerCase())
        return { field: name, code: 'UNKNOWN_PARAMETER' as const, detail: `Unknown parameter '${quoteInput(name)}'.${near === undefined ? '' : ` Did you mean '${near}'?`}` }
      }),
    })
  }
  const out: Record<string, string> = {}
  const errors: FieldError[] = []
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) errors.push({ field: name, code: 'INVALID_FORMAT', detail: `${name} is given more than once.` })
    else if (value !== undefined) out[name] = value
  }
  if (errors.length > 0) throw new ApiError('INVALID_QUERY_PARAMETER', 'A query parameter has a bad value.', { errors })
  return out
}

function intParam(query: Record<string, string>, name: string, fallback: number, max: number, errors: FieldError[]): number {
  const value = query[name]
  if (value === undefined) return fallback
  if (!/^[0-9]{1,9}$/.test(value) || Number(value) < 1 || Number(value) > max) {
    errors.push({ field: name, code: 'OUT_OF_RANGE', detail: `${name} must be a whole number from 1 to ${max}.` })
    return fallback
  }
  return Number(value)
}

function checkQuery(errors: FieldError[]): void {
  if (errors.length > 0) throw new ApiError('INVALID_QUERY_PARAMETER', 'A query parameter has a bad value.', { errors })
}

function page<T>(items: T[], pageNumber: number, perPage: number): T[] {
  return items.slice((pageNumber - 1) * perPage, pageNumber * perPage)
}

function toApiError(error: unknown, options: AdminApiOptions): ApiError {
  if (error instanceof ApiError) return error
  if (error instanceof CredentialInputError) {
    return new ApiError('VALIDATION_FAILED', `The request has ${error.errors.length === 1 ? 'a field' : 'fields'} with a bad value.`, { errors: error.errors })
  }
  if (error instanceof CredentialNotFound) return new ApiError('CREDENTIAL_NOT_FOUND', `No API key or client grant has the id '${quoteInput(error.id)}'.`)
  if (error instanceof PortalSessionLimitReached) {
    return new ApiError('PORTAL_SESSION_LIMIT_REACHED', `${error.credentialId} has 10 live portal sessions, links not yet entered included; end them (DELETE …/portal-sessions) or wait until one expires.`)
  }
  const code = (error as FastifyError | undefined)?.code
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Send the body as JSON with `Content-Type: application/json`.')
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ApiError('PAYLOAD_TOO_LARGE', `The body is larger than ${MAX_BODY_BYTES} bytes.`)
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new ApiError('MALFORMED_JSON', 'The body is empty though `Content-Type: application/json` announces one.')
  if (!options.storeUp()) return new ApiError('SERVICE_UNAVAILABLE', 'Credentials cannot be read or changed right now (Redis does not answer); retry shortly.', { retryAfter: 1, cause: error })
  options.onError?.(error)
  return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred; it has been logged.', { cause: error })
}

export function credentialsAdminApi(service: CredentialService, options: AdminApiOptions) {
  return async function routes(app: FastifyInstance): Promise<void> {
    app.removeAllContentTypeParsers()
    app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: MAX_BODY_BYTES }, (_request, text, done) => {
      if (text === '') return done(null, undefined)
      try {
        done(null, JSON.parse(text as string))
      } catch {
        done(new ApiError('MALFORMED_JSON', 'The body is not one well-formed JSON document.'), undefined)
      }
    })
    app.setErrorHandler((error, request, reply) => problem(request, reply, toApiError(error, options), options.docsUrl))
    const retentionDays = service.known.usageRetentionDays

    app.get(`${ADMIN_API_PREFIX}/credentials`, async (request, reply) => {
      const query = queryOf(request, ['brand', 'status', 'page', 'perPage'])
      const errors: FieldError[] = []
      const pageNumber = intParam(query, 'page', 1, PAGE_MAX, errors)
      const perPage = intParam(query, 'perPage', PER_PAGE_DEFAULT, 100, errors)
      const { brand, status } = query
      if (brand !== undefined && !service.known.brands.includes(brand)) {
        errors.push({ field: 'brand', code: 'INVALID_ENUM_VALUE', detail: `unknown brand '${quoteInput(brand)}' (known: ${service.known.brands.join(', ')})` })
      }
      if (status !== undefined && status !== 'active' && status !== 'suspended') errors.push({ field: 'status', code: 'INVALID_ENUM_VALUE', detail: 'status is active or suspended.' })
      checkQuery(errors)
      const all = await service.list({ ...(brand === undefined ? {} : { brand }), ...(status === undefined ? {} : { status: status as 'active' | 'suspended' }) })
      return send(reply, 200, page(all, pageNumber, perPage), { page: pageNumber, perPage, total: all.length })
    })

    app.post(`${ADMIN_API_PREFIX}/credentials`, async (request, reply) => {
      const body = objectBody(request)
      if (body.type === 'oauth_client') {
        const view = await service.createGrant(fieldsOf(request, createGrantBody), ACTOR, FIELD_LABEL)
        return send(reply, 201, view)
      }
      if (body.type !== 'api_key') {
        throw new CredentialInputError([{ field: 'type', code: body.type === undefined ? 'REQUIRED' : 'INVALID_ENUM_VALUE', detail: body.type === undefined ? 'type is required: "api_key" or "oauth_client"' : 'type is "api_key" or "oauth_client"' }])
      }
      const { key, view } = await service.createKey(fieldsOf(request, createKeyBody), ACTOR, FIELD_LABEL)
      return send(reply, 201, { ...view, secret: key })
    })

    app.get<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id`, async (request, reply) => {
      queryOf(request, [])
      return send(reply, 200, await service.show(request.params.id))
    })

    app.patch<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id`, async (request, reply) => {
      return send(reply, 200, await service.update(request.params.id, fieldsOf(request, updateBody), ACTOR, FIELD_LABEL))
    })

    app.post<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/roll`, async (request, reply) => {
      const body = fieldsOf(request, rollBody)
      if (body.overlap !== undefined && typeof body.overlap !== 'string') {
        throw new CredentialInputError([{ field: 'overlap', code: 'INVALID_FORMAT', detail: 'overlap is a duration such as 30m, 24h or 7d (at most 7d), or 0 to end the previous secret at once' }])
      }
      const overlap = parseOverlap(body.overlap, FIELD_LABEL)
      return send(reply, 200, await service.roll(request.params.id, overlap, ACTOR))
    })

    app.post<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/end-overlap`, async (request, reply) => {
      fieldsOf(request, NO_FIELDS)
      return send(reply, 200, (await service.endOverlap(request.params.id, ACTOR)).view)
    })

    for (const action of ['suspend', 'resume'] as const) {
      app.post<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/${action}`, async (request, reply) => {
        fieldsOf(request, NO_FIELDS)
        return send(reply, 200, await service.setStatus(request.params.id, action === 'suspend' ? 'suspended' : 'active', ACTOR))
      })
    }

    app.post<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/revoke`, async (request, reply) => {
      fieldsOf(request, NO_FIELDS)
      await service.revoke(request.params.id, ACTOR)
      return send(reply, 200, { id: request.params.id, status: 'revoked' })
    })

    app.get<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/usage`, async (request, reply) => {
      const query = queryOf(request, ['days'])
      const errors: FieldError[] = []
      const days = intParam(query, 'days', 7, retentionDays, errors)
      checkQuery(errors)
      return send(reply, 200, await service.usageOf(request.params.id, days))
    })

    // The partner portal (docs/operations.md, "The partner portal"): a single-use link that
    // opens a session of the credential, and the end of all its sessions.
    const portal = options.portal
    if (portal !== undefined) {
      app.post<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/portal-sessions`, async (request, reply) => {
        return send(reply, 201, await portal.createLink(request.params.id, fieldsOf(request, portalLinkBody), ACTOR))
      })

      app.delete<{ Params: { id: string } }>(`${ADMIN_API_PREFIX}/credentials/:id/portal-sessions`, async (request, reply) => {
        queryOf(request, [])
        if (!await portal.exists(request.params.id)) throw new CredentialNotFound(request.params.id)
        await portal.endAll(request.params.id, ACTOR, 'ended by an operator')
        return reply.code(204).send()
      })
    }

    app.get(`${ADMIN_API_PREFIX}/audit`, async (request, reply) => {
      const query = queryOf(request, ['id', 'since', 'page', 'perPage'])
      const errors: FieldError[] = []
      const pageNumber = intParam(query, 'page', 1, PAGE_MAX, errors)
      const perPage = intParam(query, 'perPage', PER_PAGE_DEFAULT, 100, errors)
      let since: number | undefined
      if (query.since !== undefined) {
        since = instantMillis(query.since)
        if (since === undefined) errors.push({ field: 'since', code: 'INVALID_FORMAT', detail: 'since is an ISO 8601 date-time.' })
      }
      checkQuery(errors)
      const result = await service.auditTrail({
        ...(query.id === undefined ? {} : { id: query.id }), ...(since === undefined ? {} : { since }), offset: (pageNumber - 1) * perPage, limit: perPage,
      })
      return send(reply, 200, result.entries, { page: pageNumber, perPage, total: result.total })
    })
  }
}
