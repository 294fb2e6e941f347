import { z } from 'zod'
import { envSchema, fileSchema, reloadRules } from '../config.js'
import { errorCatalog, fieldErrorCodes, kebabCode, type ErrorCode } from '../contract/errors.js'

// Reference documents generated from the one source of each fact: the configuration
// tables from the config schemas, what a reload changes from the sections' reload rules, the
// error reference from the error catalog.
// `npm run docs` writes them; a test fails when the committed copies drift.

interface JsonSchema {
  type?: string | string[]
  description?: string
  default?: unknown
  properties?: Record<string, JsonSchema>
  items?: JsonSchema
  anyOf?: JsonSchema[]
  oneOf?: JsonSchema[]
  additionalProperties?: JsonSchema | boolean
  const?: unknown
  enum?: unknown[]
  required?: string[]
}

function typeOf(schema: JsonSchema): string {
  if (schema.anyOf !== undefined) return schema.anyOf.map((s) => (s.const !== undefined ? JSON.stringify(s.const) : typeOf(s))).join(' or ')
  if (schema.enum !== undefined) return schema.enum.map((v) => `\`${String(v)}\``).join(', ')
  if (schema.type === 'array') return `array of ${schema.items === undefined ? 'values' : typeOf(schema.items)}`
  return Array.isArray(schema.type) ? schema.type.join(' or ') : schema.type ?? 'value'
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|')
}

/** A rule written as one of several shapes told apart by `type` (a declared route's query rules). */
function variants(branches: JsonSchema[]): string {
  return branches.map((branch) => {
    const kind = branch.properties?.type?.const
    const options = Object.keys(branch.properties ?? {}).filter((key) => key !== 'type')
    return `\`${String(kind)}\`${options.length === 0 ? '' : ` (${options.map((o) => `\`${o}\``).join(', ')})`}`
  }).join(', ')
}

function fallbackOf(property: JsonSchema, required: boolean): string {
  return property.default !== undefined ? `\`${JSON.stringify(property.default)}\`` : required ? 'required' : 'none'
}

function rows(schema: JsonSchema, prefix: string, out: string[], required: Set<string>): void {
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}${name}`
    if (property.type === 'object' && property.properties !== undefined) {
      if (property.description !== undefined) out.push(`| \`${path}\` | object | ${fallbackOf(property, required.has(name))} | ${cell(property.description)} |`)
      rows(property, `${path}.`, out, new Set(property.required ?? []))
      continue
    }
    const entries = typeof property.additionalProperties === 'object' ? property.additionalProperties : undefined
    if (property.type === 'object' && entries !== undefined) {
      // A map by name: its entries' fields, or the shapes one entry may take.
      const shapes = entries.oneOf ?? entries.anyOf
      const of = shapes !== undefined ? `one of ${variants(shapes)}` : entries.properties !== undefined ? 'object' : typeOf(entries)
      out.push(`| \`${path}\` | map of name to ${of} | ${fallbackOf(property, required.has(name))} | ${cell(property.description ?? '')} |`)
      if (entries.properties !== undefined && shapes === undefined) rows(entries, `${path}.<name>.`, out, new Set(entries.required ?? []))
      continue
    }
    if (property.type === 'array' && property.items?.properties !== undefined) {
      out.push(`| \`${path}\` | array | ${fallbackOf(property, required.has(name))} | ${cell(property.description ?? '')} |`)
      rows(property.items, `${path}[].`, out, new Set(property.items.required ?? []))
      continue
    }
    out.push(`| \`${path}\` | ${typeOf(property)} | ${fallbackOf(property, required.has(name))} | ${cell(property.description ?? '')} |`)
  }
}

function table(schema: z.ZodType, heading: string): string {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema
  const out = [`| ${heading} | type | default | meaning |`, '|---|---|---|---|']
  rows(json, '', out, new Set(json.required ?? []))
  return out.join('\n')
}

export function configReference(): string {
  return [
    '### Environment',
    '',
    table(envSchema, 'variable'),
    '',
    '### Config file (`CONFIG_FILE`)',
    '',
    'Unknown keys are refused, so a typo cannot pass silently.',
    '',
    table(fileSchema, 'key'),
  ].join('\n')
}

export function errorReference(): string {
  const codes = Object.keys(errorCatalog) as ErrorCode[]
  return [
    '# Error codes',
    '',
    'Every error is `application/problem+json` (RFC 9457) with `type`, `title`, `status`, `detail`,',
    '`moreInfo`, `instance`, `code`, `errors`, `requestId` and `timestamp`. Branch on `code`; the',
    '`type` of a code is `{docsUrl}/errors/<code in kebab-case>`. Generated from',
    '`src/contract/errors.ts` by `npm run docs`.',
    '',
    '| status | code | title | type path | what to do |',
    '|---|---|---|---|---|',
    ...codes.map((code) => {
      const spec = errorCatalog[code]
      return `| ${spec.status} | \`${code}\` | ${spec.title} | \`/errors/${kebabCode(code)}\` | ${cell(spec.tip)} |`
    }),
    '',
    `Field-error codes (in \`errors[].code\`): ${fieldErrorCodes.map((c) => `\`${c}\``).join(', ')}.`,
    '',
  ].join('\n')
}

export const CONFIG_START = '<!-- config-reference:start (generated by npm run docs) -->'
export const CONFIG_END = '<!-- config-reference:end -->'

/** The operator's document, which holds the generated configuration reference between the markers. */
export const CONFIG_REFERENCE_FILE = 'docs/operations.md'

/** What a reload changes and what needs a restart, one row per setting as the rules name it. */
export function reloadReference(): string {
  return [
    '| Setting | Changed by | From when, or why only a restart changes it |',
    '|---|---|---|',
    ...Object.entries(reloadRules.reloadable).map(([setting, when]) => `| \`${setting}\` | reload | ${cell(when)} |`),
    ...Object.entries(reloadRules.restartOnly).map(([setting, why]) => `| \`${setting}\` | restart | ${cell(why)} |`),
    '| anything from the environment | restart | the environment of a running process does not change |',
  ].join('\n')
}

export const RELOAD_START = '<!-- reload-rules:start (generated by npm run docs) -->'
export const RELOAD_END = '<!-- reload-rules:end -->'

function between(document: string, startMarker: string, endMarker: string, content: string): string {
  const start = document.indexOf(startMarker)
  const end = document.indexOf(endMarker)
  if (start === -1 || end === -1) throw new Error(`${CONFIG_REFERENCE_FILE} has no markers ${startMarker}`)
  return `${document.slice(0, start + startMarker.length)}\n${content}\n${document.slice(end)}`
}

/** `document` with its generated parts (between their markers) replaced: the configuration reference, and what a reload changes. */
export function withConfigReference(document: string): string {
  return between(between(document, CONFIG_START, CONFIG_END, configReference()), RELOAD_START, RELOAD_END, reloadReference())
}
