import fastJson from 'fast-json-stringify'
import { z } from 'zod'

// The public Property (contract 2.5). Field order here is the order on the wire
// (docs/architecture.md, "Properties"). The response serialiser's JSON schemas are derived from
// this one.

export const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

export const propertySchema = z.strictObject({
  object: z.literal('property'),
  id: z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
  name: z.string(),
  code: z.string().min(1).nullable(),
  status: z.enum(['active', 'inactive']),
  timezone: z.string().min(1),
  createdAt: z.string().regex(UTC_MILLIS),
  updatedAt: z.string().regex(UTC_MILLIS),
})

export type Property = z.infer<typeof propertySchema>

type JsonSchema = Record<string, unknown>

// fast-json-stringify checks each `anyOf` branch with ajv at run time; a nullable scalar
// written as a type list serialises without that.
function forSerializer(schema: JsonSchema): JsonSchema {
  const { $schema: _ignored, ...rest } = schema
  const properties = rest.properties as Record<string, JsonSchema> | undefined
  if (properties === undefined) return rest
  const simplified = Object.fromEntries(Object.entries(properties).map(([name, property]) => {
    const anyOf = property.anyOf as JsonSchema[] | undefined
    if (anyOf !== undefined && anyOf.every((branch) => typeof branch.type === 'string' && Object.keys(branch).length === 1 + (branch.minLength === undefined ? 0 : 1))) {
      return [name, { type: anyOf.map((branch) => branch.type) }]
    }
    return [name, property]
  }))
  return { ...rest, properties: simplified }
}

const propertyJsonSchema = forSerializer(z.toJSONSchema(propertySchema, { target: 'draft-7' }) as JsonSchema)

/** The JSON of a Property, in wire order, by a function compiled once from its schema. */
const compiledProperty = fastJson(propertyJsonSchema) as (property: Property) => string

// Each property's JSON as UTF-8 bytes, remembered for as long as the object lives. Properties
// served from the read cache are the same objects on every hit, so a cached property is
// serialised and encoded once, not on every response (a list of 100 was 100 serialisations per
// request); an answer copies its bytes (envelope.ts).
const serialised = new WeakMap<Property, Buffer>()

export function propertyBytes(property: Property): Buffer {
  let bytes = serialised.get(property)
  if (bytes === undefined) {
    const json = compiledProperty(property)
    // A Buffer of its own: one from Node's shared pool would keep the pool's whole 8 KiB slab
    // alive for as long as the property stays in the read cache.
    bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(json))
    bytes.write(json)
    serialised.set(property, bytes)
  }
  return bytes
}
