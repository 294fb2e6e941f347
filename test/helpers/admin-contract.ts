import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { adminOpenApiDocument } from '../../src/credentials/admin-openapi.js'
import type { JsonObject } from '../../src/docs/openapi.js'

// The contract check of the admin port: every answer a test of the credentials API receives
// must be one the admin port's OpenAPI document (/admin/v1/openapi.json) describes for that
// operation and status: its content type and its body's schema, as helpers/contract.ts does
// for the public port.

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020
const DOCUMENT_ID = 'https://contract.test/admin-openapi.json'
const document = adminOpenApiDocument()
const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }))
ajv.addSchema(document, DOCUMENT_ID)
const validators = new Map<string, ValidateFunction>()
const paths = document.paths as Record<string, Record<string, JsonObject>>
const routes = Object.keys(paths).map((path) => ({
  path, pattern: new RegExp(`^${path.split('/').map((s) => (/^\{.+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))).join('/')}$`),
}))

export interface AdminAnswer { statusCode: number; headers: Record<string, string | string[] | undefined>; body: string }

function pointer(...parts: string[]): string {
  return `#/${parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`
}

/** Throws unless the admin document describes `answer` for `method url`. */
export function checkAdminAnswer(method: string, url: string, answer: AdminAnswer): void {
  const path = url.split('?')[0] as string
  const where = `${method} ${url} answered ${answer.statusCode}`
  const route = routes.find((r) => r.pattern.test(path))
  const operation = route === undefined ? undefined : paths[route.path]?.[method.toLowerCase()]
  if (route === undefined || operation === undefined) {
    // No operation: the admin port's 404 (or 405) problem.
    if (![404, 405].includes(answer.statusCode)) throw new Error(`admin contract: ${where}: no operation, yet not a 404`)
    return
  }
  const responses = operation.responses as Record<string, JsonObject>
  const key = String(answer.statusCode)
  const response = responses[key]
  if (response === undefined) throw new Error(`admin contract: ${where}: the document describes no ${key}\n${answer.body.slice(0, 400)}`)
  if (answer.headers['service-request-id'] === undefined) throw new Error(`admin contract: ${where}: no Service-Request-Id`)
  const content = response.content as Record<string, JsonObject> | undefined
  if (content === undefined) return
  const media = String(answer.headers['content-type'] ?? '').split(';')[0]?.trim() ?? ''
  if (!(media in content)) throw new Error(`admin contract: ${where}: content type '${media}' is not one of ${Object.keys(content).join(', ')}`)
  // Prometheus text and the request log's CSV: their type is what the document says of them.
  if (media === 'text/plain' || media === 'text/csv') return
  const at = pointer('paths', route.path, method.toLowerCase(), 'responses', key, 'content', media, 'schema')
  let validate = validators.get(at)
  if (validate === undefined) {
    validate = ajv.compile({ $ref: `${DOCUMENT_ID}${at}` })
    validators.set(at, validate)
  }
  if (!validate(JSON.parse(answer.body))) throw new Error(`admin contract: ${where}: the body breaks the schema: ${ajv.errorsText(validate.errors)}\n${answer.body.slice(0, 600)}`)
}
