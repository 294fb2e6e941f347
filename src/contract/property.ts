import { z } from 'zod'

// The public Property (contract 2.5). Field order here is the order on the wire
// (decisions 4). The response serialiser's JSON schemas are derived from this one.

const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

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

const metaJsonSchema = {
  type: 'object',
  properties: {
    requestId: { type: 'string' },
    timestamp: { type: 'string' },
    pagination: {
      type: 'object',
      properties: { page: { type: 'integer' }, perPage: { type: 'integer' }, total: { type: 'integer' } },
      required: ['page', 'perPage', 'total'],
    },
  },
  required: ['requestId', 'timestamp'],
} as const

/** Precompiled serialisation of `{ data: Property, meta }`. */
export const propertyResponseSchema = {
  type: 'object',
  properties: { data: propertyJsonSchema, meta: metaJsonSchema },
  required: ['data', 'meta'],
}

/** Precompiled serialisation of `{ data: Property[], meta }`. */
export const propertyListResponseSchema = {
  type: 'object',
  properties: { data: { type: 'array', items: propertyJsonSchema }, meta: metaJsonSchema },
  required: ['data', 'meta'],
}
