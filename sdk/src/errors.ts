import type { components, operations } from './openapi.js'

/** The problem body of every error answer (RFC 9457), as the API documents it. */
export type ProblemDetails = components['schemas']['ProblemDetails']
export type FieldError = ProblemDetails['errors'][number]

type ProblemBodies<O> = O extends { responses: infer R }
  ? { [S in keyof R]: R[S] extends { content: { 'application/problem+json': infer B } } ? B : never }[keyof R]
  : never
type LiteralCode<B> = B extends { code?: infer C } ? (string extends C ? never : Exclude<C, undefined>) : never

/** Every error code an operation of the API documents (the gateway's own; a service behind a route may add its own). */
export type ErrorCode = LiteralCode<ProblemBodies<operations[keyof operations]>>

/** The codes of a refused access token: the client gets a new token once and tries again. */
export function isRefusedToken(code: string | null): boolean {
  return code === ('INVALID_ACCESS_TOKEN' satisfies ErrorCode) || code === ('ACCESS_TOKEN_EXPIRED' satisfies ErrorCode)
}

/** `Retry-After` in seconds (delta-seconds or an HTTP date), or null when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null
  const text = value.trim()
  if (/^[0-9]+$/.test(text)) return Number(text)
  // An HTTP date in any of its three forms begins with the day's name.
  const date = /^[A-Za-z]/.test(text) ? Date.parse(text) : Number.NaN
  if (Number.isNaN(date)) return null
  return Math.max(0, Math.ceil((date - now) / 1000))
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The body as a problem when the answer says it is one (`application/problem+json`) and it has a code. */
function problemOf(contentType: string | null, body: unknown): ProblemDetails | null {
  if (contentType === null || !/^application\/problem\+json\s*(;|$)/i.test(contentType.trim())) return null
  return isObject(body) && typeof body.code === 'string' ? body as unknown as ProblemDetails : null
}

/** A non-2xx answer of the API. Branch on `code` (null when the body was not problem+json); quote `requestId` to support. */
export class ApiError extends Error {
  override readonly name = 'ApiError'
  readonly status: number
  /** The problem's `code`; `null` when the answer was not problem+json (a proxy's 502 page, an empty body). */
  readonly code: ErrorCode | (string & {}) | null
  readonly title: string
  readonly detail: string
  readonly errors: FieldError[]
  /** `Service-Request-Id` of the answer (the problem's `requestId` when the header is missing). */
  readonly requestId: string | null
  /** `Retry-After` in seconds, or null when the answer had none. */
  readonly retryAfter: number | null
  /** The whole problem body, or null when the answer was not problem+json. */
  readonly problem: ProblemDetails | null
  readonly headers: Headers

  constructor(status: number, headers: Headers, body: unknown, statusText = '') {
    const problem = problemOf(headers.get('content-type'), body)
    const requestId = headers.get('service-request-id') ?? (typeof problem?.requestId === 'string' ? problem.requestId : null)
    const title = typeof problem?.title === 'string' ? problem.title : (statusText === '' ? `HTTP ${status}` : statusText)
    const detail = typeof problem?.detail === 'string' ? problem.detail : ''
    super(`${status} ${problem?.code ?? title}${detail === '' ? '' : `: ${detail}`}${requestId === null ? '' : ` (request ${requestId})`}`)
    this.status = status
    this.code = problem?.code ?? null
    this.title = title
    this.detail = detail
    this.errors = Array.isArray(problem?.errors) ? problem.errors : []
    this.requestId = requestId
    this.retryAfter = retryAfterSeconds(headers.get('retry-after'))
    this.problem = problem
    this.headers = headers
  }
}

/** No answer came: the connection failed or was reset, on every attempt. `cause` is the last failure. */
export class ApiConnectionError extends Error {
  override readonly name: string = 'ApiConnectionError'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}

/** No answer came within `timeoutMs`, on every attempt. */
export class ApiTimeoutError extends ApiConnectionError {
  override readonly name: string = 'ApiTimeoutError'
}

/** The token endpoint refused the client credentials or failed (RFC 6749 5.2: `error`, `error_description`). */
export class TokenError extends Error {
  override readonly name = 'TokenError'
  /** The token endpoint's status; null when it gave no usable answer. */
  readonly status: number | null
  /** The OAuth error code (`invalid_client`, `invalid_scope`, …), or null. */
  readonly error: string | null
  readonly errorDescription: string | null

  constructor(message: string, status: number | null, body: unknown, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause })
    this.status = status
    this.error = isObject(body) && typeof body.error === 'string' ? body.error : null
    this.errorDescription = isObject(body) && typeof body.error_description === 'string' ? body.error_description : null
  }
}
