import { getEventListeners } from 'node:events'
import { describe, expect, it } from 'vitest'
import { ApiError, ApiTimeoutError, isRefusedToken, retryAfterSeconds, TokenError } from '../../sdk/src/errors.js'
import { sleep } from '../../sdk/src/retry.js'
import { attemptSignal, NoAnswer, wholeAnswers } from '../../sdk/src/transport.js'

// How the SDK reads an answer (sdk/src/errors.ts, transport.ts) and waits between attempts
// (retry.ts), without a gateway: the answers are built here, as fetch would give them, so every
// case of a header or a body the client must tell apart is one line.

const problemBody = { type: 'https://docs.example.test/errors/NOT_FOUND', title: 'Not found', status: 404, code: 'NOT_FOUND', detail: 'No property has this id.', requestId: 'req_body', errors: [] }

function headers(values: Record<string, string>): Headers {
  return new Headers(values)
}

describe('ApiError', () => {
  it('reads the problem of an answer whose type is problem+json, in any case, with parameters and spaces', () => {
    for (const type of ['application/problem+json', ' Application/Problem+JSON ; charset=utf-8', 'application/problem+json;charset=utf-8']) {
      const error = new ApiError(404, headers({ 'content-type': type, 'service-request-id': 'req_header' }), problemBody)
      expect({ code: error.code, title: error.title, detail: error.detail, requestId: error.requestId, problem: error.problem, message: error.message }).toEqual({
        code: 'NOT_FOUND', title: 'Not found', detail: 'No property has this id.', requestId: 'req_header', problem: problemBody,
        message: '404 NOT_FOUND: No property has this id. (request req_header)',
      })
    }
  })

  it('takes no problem from an answer of another type, or without one, whatever its body', () => {
    for (const type of [null, 'application/json', 'application/problem+jsonx', 'text/plain; note=application/problem+json']) {
      const error = new ApiError(404, headers(type === null ? {} : { 'content-type': type }), problemBody, 'Not Found')
      expect({ code: error.code, title: error.title, detail: error.detail, problem: error.problem, errors: error.errors, message: error.message }).toEqual({
        code: null, title: 'Not Found', detail: '', problem: null, errors: [], message: '404 Not Found',
      })
    }
  })

  it('takes no problem from a problem+json body that is not an object with a string code', () => {
    for (const body of [null, 'Not found', [problemBody], { ...problemBody, code: 404 }, {}]) {
      const error = new ApiError(404, headers({ 'content-type': 'application/problem+json' }), body, 'Not Found')
      expect({ code: error.code, problem: error.problem, requestId: error.requestId, message: error.message }).toEqual({ code: null, problem: null, requestId: null, message: '404 Not Found' })
    }
  })

  it('names the request by its Service-Request-Id, else by the problem\'s requestId when that is a string', () => {
    const problemType = { 'content-type': 'application/problem+json' }
    expect(new ApiError(404, headers(problemType), problemBody).requestId).toBe('req_body')
    expect(new ApiError(404, headers({ ...problemType, 'service-request-id': 'req_header' }), problemBody).requestId).toBe('req_header')
    expect(new ApiError(404, headers(problemType), { ...problemBody, requestId: 7 }).requestId).toBeNull()
  })

  it('titles an answer without a problem by its status text, or by its status when it has none', () => {
    const bare = new ApiError(502, headers({ 'retry-after': '3' }), null)
    expect({ title: bare.title, message: bare.message, retryAfter: bare.retryAfter }).toEqual({ title: 'HTTP 502', message: '502 HTTP 502', retryAfter: 3 })
    expect(new ApiError(502, headers({}), null, 'Bad Gateway').title).toBe('Bad Gateway')
  })
})

describe('the other errors', () => {
  it('a timeout is named as such', () => {
    const error = new ApiTimeoutError('no answer in 5000 ms')
    expect({ name: error.name, message: error.message }).toEqual({ name: 'ApiTimeoutError', message: 'no answer in 5000 ms' })
  })

  it('a token error reads error and error_description only when they are strings, and keeps a cause only when given one', () => {
    const cause = new Error('socket hang up')
    const refused = new TokenError('refused', 401, { error: 'invalid_client', error_description: 'Unknown client.' })
    expect({ status: refused.status, error: refused.error, description: refused.errorDescription, hasCause: 'cause' in refused }).toEqual({
      status: 401, error: 'invalid_client', description: 'Unknown client.', hasCause: false,
    })
    const odd = new TokenError('failed', null, { error: 5, error_description: ['no'] }, cause)
    expect({ error: odd.error, description: odd.errorDescription, cause: odd.cause }).toEqual({ error: null, description: null, cause })
    expect(new TokenError('failed', 502, ['invalid_client']).error).toBeNull()
  })

  it('a token is refused by INVALID_ACCESS_TOKEN and ACCESS_TOKEN_EXPIRED alone', () => {
    expect(['INVALID_ACCESS_TOKEN', 'ACCESS_TOKEN_EXPIRED', 'INSUFFICIENT_SCOPE', 'INVALID_API_KEY', null].map(isRefusedToken)).toEqual([true, true, false, false, false])
  })

  it('Retry-After is whole seconds or a date that begins with its day\'s name', () => {
    const now = Date.parse('2026-11-26T12:00:00Z')
    expect(retryAfterSeconds('7s', now)).toBeNull()
    expect(retryAfterSeconds('26 Nov 2026 12:00:05 GMT', now)).toBeNull()
    expect(retryAfterSeconds('Thursday, 26-Nov-26 12:00:05 GMT', now)).toBe(5)
  })
})

describe('one attempt over fetch', () => {
  const request = (method = 'GET', signal?: AbortSignal): Request => new Request('http://gateway.test/v1/properties', { method, ...(signal === undefined ? {} : { signal }) })

  it('gives the answers that have no body without one, and reads the others whole', async () => {
    for (const [status, method] of [[204, 'DELETE'], [205, 'POST'], [304, 'GET'], [200, 'HEAD']] as const) {
      const answer = await wholeAnswers(async () => new Response(null, { status }), undefined)(request(method))
      expect({ status: answer.status, body: answer.body }).toEqual({ status, body: null })
    }
    const answer = await wholeAnswers(async () => new Response('{"data":[]}', { status: 200, statusText: 'OK', headers: { 'content-type': 'application/json' } }), undefined)(request())
    expect({ status: answer.status, statusText: answer.statusText, type: answer.headers.get('content-type'), body: await answer.text() }).toEqual({
      status: 200, statusText: 'OK', type: 'application/json', body: '{"data":[]}',
    })
  })

  it('a failure is NoAnswer, timed out when the attempt\'s signal aborted; the caller\'s own abort is thrown as it is', async () => {
    const reset = new TypeError('fetch failed')
    const failing = async (): Promise<Response> => {
      throw reset
    }
    const failed = await wholeAnswers(failing, undefined)(request()).catch((error: unknown) => error)
    expect(failed).toBeInstanceOf(NoAnswer)
    expect({ timedOut: (failed as NoAnswer).timedOut, message: (failed as NoAnswer).message, cause: (failed as NoAnswer).cause }).toEqual({ timedOut: false, message: 'the connection failed', cause: reset })

    const expired = AbortSignal.abort(new DOMException('timed out', 'TimeoutError'))
    const late = await wholeAnswers(failing, undefined)(request('GET', expired)).catch((error: unknown) => error) as NoAnswer
    expect({ timedOut: late.timedOut, message: late.message }).toEqual({ timedOut: true, message: 'no answer in time' })

    const caller = new AbortController()
    const reason = new Error('the caller gave up')
    caller.abort(reason)
    expect(await wholeAnswers(failing, caller.signal)(request()).catch((error: unknown) => error)).toBe(reason)
  })

  it('an attempt\'s signal aborts with the caller\'s', () => {
    const caller = new AbortController()
    const signal = attemptSignal(60_000, caller.signal)
    expect(signal.aborted).toBe(false)
    const reason = new Error('stop')
    caller.abort(reason)
    expect({ aborted: signal.aborted, reason: signal.reason }).toEqual({ aborted: true, reason })
    expect(attemptSignal(60_000, undefined).aborted).toBe(false)
  })
})

describe('the wait between attempts', () => {
  it('ends with the signal\'s reason as soon as it aborts, and at once when it had', async () => {
    const caller = new AbortController()
    const reason = new Error('stop waiting')
    const waiting = sleep(600_000, caller.signal).then(() => 'slept', (error: unknown) => error)
    caller.abort(reason)
    expect(await waiting).toBe(reason)
    expect(await sleep(600_000, AbortSignal.abort(reason)).then(() => 'slept', (error: unknown) => error)).toBe(reason)
    expect(await sleep(1)).toBeUndefined()
  })

  it('leaves no listener on the caller\'s signal once it has waited its time: one signal serves many calls', async () => {
    const caller = new AbortController()
    for (let i = 0; i < 3; i += 1) expect(await sleep(1, caller.signal)).toBeUndefined()
    expect(getEventListeners(caller.signal, 'abort')).toEqual([])
  })
})
