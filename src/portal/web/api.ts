// The portal's calls to its JSON API (/portal/api): the session cookie goes by itself; a
// change carries the session's CSRF token, kept in memory only (never in browser storage).

export interface FieldError { field: string; code: string; detail: string }

export interface Problem {
  status: number
  code: string
  title: string
  detail: string
  errors?: FieldError[]
}

export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail)
  }

  /** The sentence about one field, when the API named it. */
  fieldDetail(field: string): string | undefined {
    return this.problem.errors?.find((e) => e.field === field)?.detail
  }
}

export interface SessionInfo {
  sessionId: string
  credentialId: string
  brand: string
  mode: 'live' | 'test'
  capabilities: string[]
  label: string | null
  expiresAt: string
  csrfToken: string
  eventTypes: string[]
}

let csrfToken: string | undefined
/** Called when the API says the session is over: the page shows how to get back in. */
let onSessionEnded: () => void = () => undefined

export function startSession(session: SessionInfo, ended: () => void): void {
  csrfToken = session.csrfToken
  onSessionEnded = ended
}

export interface Page<T> { data: T; pagination?: { page: number; perPage: number; total: number } }

async function problemOf(res: Response): Promise<ProblemError> {
  let body: Partial<Problem> = {}
  try {
    body = await res.json() as Partial<Problem>
  } catch {
    // Not the API's problem (a proxy's page): the status says enough.
  }
  return new ProblemError({
    status: res.status,
    code: body.code ?? 'UNKNOWN',
    title: body.title ?? res.statusText,
    detail: body.detail ?? `The portal answered ${res.status}; try again.`,
    ...(body.errors === undefined ? {} : { errors: body.errors }),
  })
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<Page<T>> {
  const headers: Record<string, string> = { accept: 'application/json' }
  if (method !== 'GET') {
    if (csrfToken !== undefined) headers['x-csrf-token'] = csrfToken
  }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, { method, headers, credentials: 'same-origin', ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
  if (res.status === 204) return { data: undefined as T }
  if (!res.ok) {
    const error = await problemOf(res)
    if (error.problem.code === 'PORTAL_SESSION_INVALID') onSessionEnded()
    throw error
  }
  const json = await res.json() as { data: T; meta: { pagination?: Page<T>['pagination'] } }
  return { data: json.data, ...(json.meta.pagination === undefined ? {} : { pagination: json.meta.pagination }) }
}

/** A path of the partner API as the portal serves it. */
export const api = (path: string): string => `/portal/api${path}`

export async function enterWith(token: string): Promise<SessionInfo> {
  return (await call<SessionInfo>('POST', '/portal/session', { token })).data
}

export async function currentSession(): Promise<SessionInfo> {
  const res = await fetch('/portal/api/session', { headers: { accept: 'application/json' }, credentials: 'same-origin' })
  if (!res.ok) throw await problemOf(res)
  return (await res.json() as { data: SessionInfo }).data
}
