import { describe, expect, it } from 'vitest'
import { ApiError, errorCatalog, type FieldError } from '../../src/contract/errors.js'
import { MAX_FIELD_ERRORS, problemBody, problemJsonSchema, QuoteBudget, quoteInput } from '../../src/contract/problem.js'
import { TIMESTAMP } from '../helpers/problem.js'

// The problem body is assembled from parts escaped once per code and docs URL; whatever a
// detail, path or field error holds, the result must be the JSON of the whole problem.

const awkward = 'quote " backslash \\ newline \n tab \t control \u0001 emoji 😀 lone \ud800 end'

describe('problem bodies', () => {
  it('is valid JSON holding every field, in the documented order, whatever the strings hold', () => {
    const error = new ApiError('INVALID_QUERY_PARAMETER', awkward, {
      errors: [{ field: awkward, code: 'INVALID_FORMAT', detail: awkward }],
    })
    const body = problemBody(error, 'https://docs.example.com/a"b', `/v1/${awkward}`, 'req_0123')
    const parsed = JSON.parse(body) as Record<string, unknown>
    expect(parsed).toEqual({
      type: 'https://docs.example.com/a"b/errors/invalid-query-parameter',
      title: 'Invalid query parameter',
      status: 400,
      detail: awkward,
      moreInfo: errorCatalog.INVALID_QUERY_PARAMETER.tip,
      instance: `/v1/${awkward}`,
      code: 'INVALID_QUERY_PARAMETER',
      errors: [{ field: awkward, code: 'INVALID_FORMAT', detail: awkward }],
      requestId: 'req_0123',
      timestamp: expect.stringMatching(TIMESTAMP),
    })
    expect(Object.keys(parsed)).toEqual(problemJsonSchema.required)
    // JSON.stringify escapes a lone surrogate rather than writing broken UTF-8.
    expect(body).toContain('lone \\ud800 end')
  })

  it('makes each docs URL\'s and each code\'s own frame, whichever was asked for first', () => {
    const typeOf = (docsUrl: string, code: 'INVALID_API_KEY' | 'RATE_LIMITED') => (JSON.parse(problemBody(new ApiError(code, 'x'), docsUrl, '/v1/x', 'req_1')) as { type: string; status: number })
    expect([typeOf('https://a.example', 'INVALID_API_KEY'), typeOf('https://b.example', 'INVALID_API_KEY'), typeOf('https://a.example', 'RATE_LIMITED'), typeOf('https://a.example', 'INVALID_API_KEY')]).toEqual([
      { type: 'https://a.example/errors/invalid-api-key', status: 401 },
      { type: 'https://b.example/errors/invalid-api-key', status: 401 },
      { type: 'https://a.example/errors/rate-limited', status: 429 },
      { type: 'https://a.example/errors/invalid-api-key', status: 401 },
    ].map((expected) => expect.objectContaining(expected)))
  })

  it('lists at most the first field errors and says how many more there were', () => {
    const errors: FieldError[] = Array.from({ length: MAX_FIELD_ERRORS + 2 }, (_, i) => ({ field: `p${i}`, code: 'UNKNOWN_PARAMETER', detail: `d${i}` }))
    const parsed = JSON.parse(problemBody(new ApiError('INVALID_QUERY_PARAMETER', 'Bad query.', { errors }), 'https://d', '/v1/x', 'req_1')) as { detail: string; errors: FieldError[] }
    expect(parsed.detail).toBe('Bad query. 2 more field errors are not listed.')
    expect(parsed.errors).toEqual(errors.slice(0, MAX_FIELD_ERRORS))
  })

  it('keeps only the three fields of a field error', () => {
    const extra = { field: 'page', code: 'OUT_OF_RANGE', detail: 'Too big.', internal: 'not for partners' } as FieldError
    const parsed = JSON.parse(problemBody(new ApiError('INVALID_QUERY_PARAMETER', 'Bad query.', { errors: [extra] }), 'https://d', '/v1/x', 'req_1')) as { errors: unknown[] }
    expect(parsed.errors).toEqual([{ field: 'page', code: 'OUT_OF_RANGE', detail: 'Too big.' }])
  })
})

describe('quoting what a partner sent', () => {
  it('quotes input whole up to 200 characters, and cuts it there with an ellipsis', () => {
    expect(quoteInput('a'.repeat(200))).toBe('a'.repeat(200))
    expect(quoteInput('a'.repeat(201))).toBe(`${'a'.repeat(200)}…`)
  })

  it('shares one budget between the quotes of one detail', () => {
    const budget = new QuoteBudget()
    expect([budget.take('x'.repeat(120)), budget.take('y'.repeat(120)), budget.spent, budget.take('z')]).toEqual(['x'.repeat(120), `${'y'.repeat(80)}…`, true, '…'])
  })

  it('never cuts a surrogate pair in half', () => {
    const text = `${'a'.repeat(199)}😀tail`
    expect(quoteInput(text)).toBe(`${'a'.repeat(199)}…`)
    expect(quoteInput(text)).not.toMatch(/\p{Cs}/u)
  })
})
