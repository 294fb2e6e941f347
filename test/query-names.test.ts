import { describe, expect, it } from 'vitest'
import { ApiError } from '../src/contract/errors.js'
import { parseQuery } from '../src/pipeline/parameters.js'
import type { QuerySpec } from '../src/routes/policy.js'

// The names a route's query accepts, worked out once per route's rules: the suggestion for an
// unknown name, and the list a refusal names.

function refusal(query: Record<string, string>, spec: QuerySpec): unknown {
  try {
    return parseQuery(query, spec)
  } catch (error) {
    return error instanceof ApiError ? { code: error.code, detail: error.detail, errors: error.errors } : error
  }
}

describe('unknown query parameters', () => {
  it('suggests the first accepted name that folds the same, each time, and lists every accepted name otherwise', () => {
    // Two accepted names fold alike ('createdafter'): the first is suggested.
    const spec: QuerySpec = { createdAfter: { type: 'timestamp' }, created_after: { type: 'timestamp' }, page: { type: 'integer', min: 1, max: 10 } }
    const expected = {
      code: 'UNKNOWN_QUERY_PARAMETER',
      detail: "Unknown query parameters 'CREATED-AFTER', 'size'. 'CREATED-AFTER': Did you mean 'createdAfter'?",
      errors: [
        { field: 'CREATED-AFTER', code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'createdAfter'?" },
        { field: 'size', code: 'UNKNOWN_PARAMETER', detail: "Unknown parameter; this endpoint accepts 'createdAfter', 'created_after', 'page'." },
      ],
    }
    expect(refusal({ 'CREATED-AFTER': '2026-01-01T00:00:00Z', size: '1' }, spec)).toEqual(expected)
    expect(refusal({ 'CREATED-AFTER': '2026-01-01T00:00:00Z', size: '1' }, spec)).toEqual(expected)
    // Other rules, their own names.
    expect(refusal({ size: '1' }, {})).toEqual({
      code: 'UNKNOWN_QUERY_PARAMETER', detail: "Unknown query parameter 'size'.",
      errors: [{ field: 'size', code: 'UNKNOWN_PARAMETER', detail: 'Unknown parameter; this endpoint accepts none.' }],
    })
    expect(refusal({ page: '2' }, spec)).toEqual({ page: 2 })
  })
})
