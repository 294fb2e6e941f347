// One attempt of a request over `fetch`: the whole answer is read under the attempt's signal,
// so a connection reset in the middle of a body, or a body that never ends, fails the attempt
// (and can be retried) instead of failing later, outside the retries.

export type Fetch = (input: Request) => Promise<Response>

/** An attempt that got no whole answer: the connection failed or was reset, or the time ran out. */
export class NoAnswer extends Error {
  constructor(readonly timedOut: boolean, cause: unknown) {
    super(timedOut ? 'no answer in time' : 'the connection failed', { cause })
  }
}

/**
 * `fetchImpl` reading the whole body before it resolves. Failures become NoAnswer, except when
 * the caller's own signal aborted: that reason is thrown as it is, and nothing is retried.
 */
export function wholeAnswers(fetchImpl: typeof globalThis.fetch, callerSignal: AbortSignal | undefined): Fetch {
  return async (request) => {
    try {
      const response = await fetchImpl(request)
      // Answers that have no body: a Response cannot be built with one.
      const empty = response.status === 204 || response.status === 205 || response.status === 304 || request.method === 'HEAD'
      const body = empty ? null : await response.arrayBuffer()
      return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers })
    } catch (error) {
      if (callerSignal?.aborted === true) throw callerSignal.reason
      throw new NoAnswer(request.signal.aborted, error)
    }
  }
}

/** The signal of one attempt: the caller's, and the attempt's own deadline. */
export function attemptSignal(timeoutMs: number, callerSignal: AbortSignal | undefined): AbortSignal {
  const deadline = AbortSignal.timeout(timeoutMs)
  return callerSignal === undefined ? deadline : AbortSignal.any([callerSignal, deadline])
}
