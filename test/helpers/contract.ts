import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { loadConfig } from '../../src/config.js'
import type { ErrorCode } from '../../src/contract/errors.js'
import { openApiDocument, type DocumentSource, type JsonObject } from '../../src/docs/openapi.js'
import { codesOfEveryRoute } from '../../src/docs/responses.js'
import { expectedError } from './catalog.js'

// The contract check: every answer the integration tests receive must be one the OpenAPI
// document describes for that operation and status: its required headers, its content type
// and its body's schema (ajv, JSON Schema 2020-12). The shared helpers (TestGateway.get,
// contractChecked apps, the raw-socket helpers) pass every answer through `checkAnswer`, so a
// response the document does not describe fails the test that received it.

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

export interface CheckedAnswer {
  statusCode: number
  headers: Record<string, string | string[] | number | undefined>
  body: string
}

interface Compiled {
  document: JsonObject
  ajv: Ajv2020
  validators: Map<string, ValidateFunction>
  routes: { path: string; pattern: RegExp }[]
}

const DOCUMENT_ID = 'https://contract.test/openapi.json'
const compiledBySource = new WeakMap<object, Compiled>()
let shippedSource: DocumentSource | undefined

/** The config file the project ships, with its declared routes: what `npm run docs` documents. */
function shipped(): DocumentSource {
  shippedSource ??= loadConfig({ CONFIG_FILE: 'config/default.json' })
  return shippedSource
}

function compile(source: DocumentSource): Compiled {
  let compiled = compiledBySource.get(source)
  if (compiled !== undefined) return compiled
  const document = openApiDocument(source)
  const ajv = new Ajv2020({ strict: false, allErrors: true })
  addFormats(ajv)
  ajv.addSchema(document, DOCUMENT_ID)
  const routes = Object.keys(document.paths as JsonObject).map((path) => ({
    path,
    pattern: new RegExp(`^${path.split('/').map((s) => (/^\{.+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))).join('/')}$`),
  }))
  compiled = { document, ajv, validators: new Map(), routes }
  compiledBySource.set(source, compiled)
  return compiled
}

function pointer(...parts: string[]): string {
  return `#/${parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`
}

function validator(compiled: Compiled, at: string): ValidateFunction {
  let validate = compiled.validators.get(at)
  if (validate === undefined) {
    validate = compiled.ajv.compile({ $ref: `${DOCUMENT_ID}${at}` })
    compiled.validators.set(at, validate)
  }
  return validate
}

function resolve(compiled: Compiled, value: JsonObject): JsonObject {
  const target = value.$ref
  if (typeof target !== 'string') return value
  let node: unknown = compiled.document
  for (const part of target.slice(2).split('/')) node = (node as JsonObject)[part.replaceAll('~1', '/').replaceAll('~0', '~')]
  return node as JsonObject
}

function header(answer: CheckedAnswer, name: string): string | undefined {
  const value = answer.headers[name.toLowerCase()]
  return value === undefined ? undefined : Array.isArray(value) ? value.join(', ') : String(value)
}

function fail(where: string, answer: CheckedAnswer, problem: string): never {
  throw new Error(`contract: ${where} answered ${answer.statusCode}: ${problem}\n${answer.body.slice(0, 600)}`)
}

function checkBody(compiled: Compiled, at: string, where: string, answer: CheckedAnswer): void {
  let body: unknown
  try {
    body = JSON.parse(answer.body)
  } catch {
    fail(where, answer, 'the body is not JSON')
  }
  const validate = validator(compiled, at)
  if (!validate(body)) fail(where, answer, `the body breaks the schema: ${compiled.ajv.errorsText(validate.errors)}`)
}

/** A request no operation has (unknown path or method, bad framing): one of the codes every route can answer. */
function checkUnmatched(compiled: Compiled, where: string, method: string, answer: CheckedAnswer): void {
  if (header(answer, 'service-request-id') === undefined) fail(where, answer, 'no Service-Request-Id')
  if (header(answer, 'x-content-type-options') !== 'nosniff') fail(where, answer, 'no X-Content-Type-Options: nosniff')
  if (method === 'HEAD' || answer.body === '') return
  if (!(header(answer, 'content-type') ?? '').startsWith('application/problem+json')) fail(where, answer, 'not a problem, though no operation matches')
  checkBody(compiled, pointer('components', 'schemas', 'ProblemDetails'), where, answer)
  const code = (JSON.parse(answer.body) as { code: ErrorCode }).code
  if (!codesOfEveryRoute().includes(code)) fail(where, answer, `${code} is not a code every route documents`)
  if (expectedError(code).status !== answer.statusCode) fail(where, answer, `${code} is not a ${answer.statusCode}`)
}

/**
 * Throws unless the document describes `answer` for `method url`. `source` is the gateway's
 * config (its docsUrl and declared routes); the shipped config file when not given.
 */
export function checkAnswer(method: string, url: string, answer: CheckedAnswer, source: DocumentSource = shipped()): void {
  const compiled = compile(source)
  // An absolute-form target (`http://host/v1/…`) is answered as its path.
  const target = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, '')
  const path = target === '' || target.startsWith('?') ? '/' : target.split('?')[0] ?? target
  const where = `${method} ${url.length > 120 ? `${url.slice(0, 120)}…` : url}`
  const route = compiled.routes.find((r) => r.pattern.test(path))
  const verb = (method === 'HEAD' ? 'GET' : method).toLowerCase()
  const paths = compiled.document.paths as Record<string, JsonObject>
  const operation = route === undefined ? undefined : paths[route.path]?.[verb] as JsonObject | undefined
  if (route === undefined || operation === undefined) return checkUnmatched(compiled, where, method, answer)

  const responses = operation.responses as Record<string, JsonObject>
  const status = String(answer.statusCode)
  const key = status in responses ? status : `${status[0]}XX` in responses ? `${status[0]}XX` : 'default' in responses ? 'default' : undefined
  if (key === undefined) fail(where, answer, `the document describes no ${status} for ${verb.toUpperCase()} ${route.path}`)
  const response = responses[key] as JsonObject
  const at = (...parts: string[]): string => pointer('paths', route.path, verb, 'responses', key, ...parts)

  for (const [name, declared] of Object.entries((response.headers ?? {}) as Record<string, JsonObject>)) {
    const spec = resolve(compiled, declared)
    const value = header(answer, name)
    if (value === undefined) {
      if (spec.required === true) fail(where, answer, `header ${name} is required`)
      continue
    }
    const validate = validator(compiled, declared.$ref === undefined ? at('headers', name, 'schema') : `${String(declared.$ref)}/schema`)
    if (!validate(value)) fail(where, answer, `header ${name}: ${value}: ${compiled.ajv.errorsText(validate.errors)}`)
  }

  const content = response.content as Record<string, JsonObject> | undefined
  if (method === 'HEAD' || (content === undefined && answer.body === '')) return
  if (content === undefined) fail(where, answer, 'a body where the document describes none')
  const media = (header(answer, 'content-type') ?? '').split(';')[0]?.trim() ?? ''
  if (!(media in content)) fail(where, answer, `content type '${media}' is not one of ${Object.keys(content).join(', ')}`)
  checkBody(compiled, at('content', media, 'schema'), where, answer)
}

/** `app` with every `inject` answer checked against the document of its own config. */
export function contractChecked<T extends FastifyInstance>(app: T): T {
  const inject = app.inject.bind(app) as (options: InjectOptions | string) => Promise<CheckedAnswer>
  const checked = async (options: InjectOptions | string): Promise<CheckedAnswer> => {
    const answer = await inject(options)
    const method = typeof options === 'string' ? 'GET' : options.method ?? 'GET'
    const url = typeof options === 'string' ? options : typeof options.url === 'string' ? options.url : String(options.path ?? '/')
    checkAnswer(String(method).toUpperCase(), url, answer, app.gatewayConfig)
    return answer
  }
  Object.assign(app, { inject: checked })
  return app
}
