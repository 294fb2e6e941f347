import { expect } from 'vitest'
import { ApiError, errorCatalog, kebabCode, type ErrorCode, type FieldError } from '../../src/contract/errors.js'
import { expectedError } from './catalog.js'
import { DOCS_URL } from './config.js'

export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
export const REQUEST_ID = /^req_[0-9a-f]{32}$/

interface Answer {
  statusCode: number
  headers: Record<string, string | string[] | number | undefined>
  body: string
}

export interface ExpectedProblem {
  code: ErrorCode
  instance: string
  detail?: string | RegExp
  errors?: FieldError[]
  docsUrl?: string
  /** Each header's value, or a pattern it must match. */
  headers?: Record<string, string | RegExp>
  /** The status, where the test states it; else the one of the tests' own error table. */
  status?: number
}

/**
 * Asserts a whole problem+json answer, status, headers and body. Status and title come from
 * the caller or from the tests' own copy of the contract's error table (helpers/catalog.ts),
 * never from the production catalog; the tip is the catalog's, the one text it owns.
 */
export function expectProblem(res: Answer, expected: ExpectedProblem): void {
  const spec = expectedError(expected.code)
  const status = expected.status ?? spec.status
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status })
  expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
  expect(res.headers['x-content-type-options']).toBe('nosniff')
  expect(res.headers['cache-control']).toBe('no-store')
  expect(res.headers['service-correlation-id']).toBeUndefined()
  const requestId = res.headers['service-request-id']
  expect(requestId).toMatch(REQUEST_ID)
  for (const [name, value] of Object.entries(expected.headers ?? {})) {
    expect(res.headers[name], name).toEqual(typeof value === 'string' ? value : expect.stringMatching(value))
  }
  const detail = expected.detail === undefined ? expect.any(String)
    : typeof expected.detail === 'string' ? expected.detail : expect.stringMatching(expected.detail)
  expect(JSON.parse(res.body)).toEqual({
    type: `${expected.docsUrl ?? DOCS_URL}/errors/${kebabCode(expected.code)}`,
    title: spec.title,
    status,
    detail,
    moreInfo: errorCatalog[expected.code].tip,
    instance: expected.instance,
    code: expected.code,
    errors: expected.errors ?? [],
    requestId,
    timestamp: expect.stringMatching(TIMESTAMP),
  })
}

/** Asserts the envelope of a success: headers and meta; returns `data`. */
export function expectEnvelope(res: Answer, pagination?: { page: number; perPage: number; total: number }): unknown {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status: 200 })
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
  expect(res.headers['x-content-type-options']).toBe('nosniff')
  expect(res.headers['cache-control']).toBe('no-store')
  const requestId = res.headers['service-request-id']
  expect(requestId).toMatch(REQUEST_ID)
  const body = JSON.parse(res.body) as { data: unknown; meta: unknown }
  expect(Object.keys(body)).toEqual(['data', 'meta'])
  expect(body.meta).toEqual(pagination === undefined
    ? { requestId, timestamp: expect.stringMatching(TIMESTAMP) }
    : { requestId, timestamp: expect.stringMatching(TIMESTAMP), pagination })
  return body.data
}

/** The problem `run` throws (a rule's check, called without a gateway): its code, detail and field errors. */
export function refusal(run: () => unknown): { code: string; detail: string; errors: unknown } {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError)
    const e = error as ApiError
    return { code: e.code, detail: e.detail, errors: e.errors ?? [] }
  }
  throw new Error('expected a refusal')
}
