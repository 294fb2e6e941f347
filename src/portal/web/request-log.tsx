import { useEffect, useRef, useState } from 'preact/hooks'
import { api, call, ProblemError } from './api'
import type { RequestLogEntry as Entry } from './public'
import { Alert, Empty, Field, formSentence, Heading, Loading, sentenceOf, time, useLoad } from './ui'

// The request log (docs/partners.md, "The request log"): the credential's own requests, newest
// first, with the API's filters, which live in the page's address so that a link to a filtered
// log can be sent to support; a request found by its id (Service-Request-Id), and its detail.

const PER_PAGE = 25
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const

/** The filters of `GET /v1/request-logs`, each with its label and hint. */
const FILTERS = [
  { name: 'status', label: 'Status', hint: 'A status such as 404, a class such as 4xx, or "errors" for every 4xx and 5xx.' },
  { name: 'method', label: 'Method' },
  { name: 'route', label: 'Route', hint: 'A route as the API reference names it, such as /v1/properties/{propertyId}.' },
  { name: 'code', label: 'Problem code', hint: 'A code of the error catalog, such as VALIDATION_FAILED.' },
  { name: 'createdAfter', label: 'From', hint: 'RFC 3339, such as 2026-11-28T09:00:00Z.' },
  { name: 'createdBefore', label: 'Until', hint: 'RFC 3339, such as 2026-11-28T18:00:00Z.' },
  { name: 'idempotencyKey', label: 'Idempotency key' },
] as const

type FilterName = (typeof FILTERS)[number]['name']
type Filters = Record<FilterName, string>
const FIELDS: readonly string[] = FILTERS.map((f) => f.name)

function filtersOf(search: string): Filters {
  const query = new URLSearchParams(search)
  return Object.fromEntries(FILTERS.map((f) => [f.name, query.get(f.name) ?? ''])) as Filters
}

function queryOf(filters: Filters): URLSearchParams {
  const query = new URLSearchParams()
  for (const f of FILTERS) if (filters[f.name].trim() !== '') query.set(f.name, filters[f.name].trim())
  return query
}

export function RequestLog() {
  // The filters applied, as the address holds them; `draft` is the form being typed.
  const [filters, setFilters] = useState<Filters>(() => filtersOf(location.search))
  const [draft, setDraft] = useState<Filters>(filters)
  const [page, setPage] = useState(1)
  const [shown, setShown] = useState<Entry | undefined>()
  const entries = useLoad(async () => {
    const query = queryOf(filters)
    query.set('perPage', String(PER_PAGE))
    query.set('page', String(page))
    const answer = await call<Entry[]>('GET', api(`/v1/request-logs?${query.toString()}`))
    return { entries: answer.data, last: Math.max(1, Math.ceil((answer.pagination?.total ?? 0) / PER_PAGE)) }
  }, [filters, page])
  const apply = (next: Filters) => {
    const query = queryOf(next).toString()
    history.replaceState(null, '', `${location.pathname}${query === '' ? '' : `?${query}`}`)
    setPage(1)
    setFilters(next)
  }
  const filtered = FILTERS.some((f) => filters[f.name] !== '')
  const cleared = Object.fromEntries(FILTERS.map((f) => [f.name, ''])) as Filters
  const d = entries.data
  return (
    <section aria-labelledby="screen-title">
      <Heading>Request log</Heading>
      <p>Every request this credential made over the last days, newest first, as the gateway answered it. Each answer's <code>Service-Request-Id</code> header finds its request here.</p>
      <FindRequest show={setShown} />
      {shown === undefined ? null : <EntryDetail entry={shown} close={() => setShown(undefined)} />}
      <form class="filters" role="search" aria-label="Request log filters" onSubmit={(e) => { e.preventDefault(); apply(draft) }}>
        {FILTERS.map((f) => (
          <Field key={f.name} id={`log-${f.name}`} label={f.label} {...('hint' in f ? { hint: f.hint } : {})} error={sentenceOf(entries.error, f.name)}>
            {(describedBy, invalid) => f.name === 'method' ? (
              <select id="log-method" name="method" value={draft.method} aria-describedby={describedBy} aria-invalid={invalid}
                onChange={(e) => setDraft({ ...draft, method: (e.target as HTMLSelectElement).value })}>
                <option value="">All methods</option>
                {METHODS.map((m) => <option key={m} value={m}>{m}</option>)}
              </select>
            ) : (
              <input id={`log-${f.name}`} name={f.name} value={draft[f.name]} aria-describedby={describedBy} aria-invalid={invalid}
                onInput={(e) => setDraft({ ...draft, [f.name]: (e.target as HTMLInputElement).value })} />
            )}
          </Field>
        ))}
        <div class="actions">
          <button type="submit">Filter</button>
          {filtered ? <button type="button" onClick={() => { setDraft(cleared); apply(cleared) }}>Clear filters</button> : null}
        </div>
      </form>
      {entries.error === undefined || formSentence(entries.error, FIELDS) === undefined ? null : <Alert>{formSentence(entries.error, FIELDS)}</Alert>}
      {d === undefined ? (entries.error === undefined ? <Loading /> : null) : d.entries.length === 0 ? (
        <Empty>{filtered
          ? 'No request matches these filters. Change them, or clear them to see every request.'
          : 'No requests logged yet. Each call your system makes with this credential appears here within a few seconds of its answer.'}</Empty>
      ) : (
        <>
          <table>
            <caption>Requests, newest first, page {page} of {d.last}</caption>
            <thead><tr><th scope="col">At</th><th scope="col">Request</th><th scope="col">Status</th><th scope="col">Problem</th><th scope="col">Duration</th><th scope="col">Request id</th></tr></thead>
            <tbody>
              {d.entries.map((e) => (
                <tr key={e.id}>
                  <td>{time(e.at)}</td><td><code>{e.method} {e.path}</code></td><td>{e.status}</td><td>{e.code === null ? '—' : <code>{e.code}</code>}</td><td>{e.durationMs} ms</td>
                  <td><button type="button" class="link" aria-label={`Details of ${e.id}`} onClick={() => setShown(e)}><code>{e.id}</code></button></td>
                </tr>
              ))}
            </tbody>
          </table>
          <nav aria-label="Request log pages" class="pages">
            <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>Newer requests</button>{' '}
            <button type="button" disabled={page >= d.last} onClick={() => setPage(page + 1)}>Older requests</button>
          </nav>
        </>
      )}
    </section>
  )
}

/** The search by request id: its entry shown, or why not beside the box. */
function FindRequest({ show }: { show: (entry: Entry | undefined) => void }) {
  const [id, setId] = useState('')
  const [error, setError] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const find = async (event: Event) => {
    event.preventDefault()
    const wanted = id.trim()
    setError(undefined)
    if (wanted === '') {
      setError('Enter a request id: the Service-Request-Id header of the answer, such as req_0123456789abcdef0123456789abcdef.')
      return
    }
    setBusy(true)
    try {
      show((await call<Entry>('GET', api(`/v1/request-logs/${encodeURIComponent(wanted)}`))).data)
    } catch (e) {
      show(undefined)
      setError(e instanceof ProblemError && e.problem.code === 'REQUEST_LOG_NOT_FOUND'
        ? `${e.problem.detail} A request appears a few seconds after its answer and is kept for some days; check the id, or try again in a moment.`
        : sentenceOf(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="filters" role="search" aria-label="Find a request" onSubmit={(e) => void find(e)}>
      <Field id="log-request-id" label="Request id" hint="The Service-Request-Id header of an answer." error={error}>
        {(describedBy, invalid) => <input id="log-request-id" name="requestId" value={id} spellcheck={false} autocomplete="off" aria-describedby={describedBy} aria-invalid={invalid}
          onInput={(e) => setId((e.target as HTMLInputElement).value)} />}
      </Field>
      <button type="submit" disabled={busy}>Find</button>
    </form>
  )
}

function EntryDetail({ entry, close }: { entry: Entry; close: () => void }) {
  // The detail's heading takes the focus, so a keyboard or a screen reader goes on from there.
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => { heading.current?.focus() }, [entry.id])
  const facts: [string, string][] = [
    ['Request id', entry.id],
    ['At', time(entry.at)],
    ['Request', `${entry.method} ${entry.path}`],
    ['Route', entry.route ?? 'none: no route of the API matched'],
    ['Query parameters', entry.queryParameters.length === 0 ? 'none' : entry.queryParameters.join(', ')],
    ['Status', String(entry.status)],
    ['Problem code', entry.code ?? 'none'],
    ['Duration', `${entry.durationMs} ms`],
    ['Mode', entry.mode === 'test' ? 'Test' : 'Live'],
    ['Key used', entry.secret === 'previous' ? 'the previous key of a roll' : entry.secret === 'current' ? 'the current key' : '—'],
    ['Cache', entry.cache ?? '—'],
    ['Idempotency key', entry.idempotencyKey === null ? '—' : `${entry.idempotencyKey}${entry.replayed ? ' (answer replayed)' : ''}`],
    ['Client address', entry.clientIp ?? '—'],
    ['User agent', entry.userAgent ?? '—'],
    ['Trace id', entry.traceId ?? '—'],
  ]
  return (
    <section class="panel" aria-labelledby="entry-title">
      <h2 id="entry-title" tabIndex={-1} ref={heading}>Request <code>{entry.id}</code></h2>
      <dl class="facts" data-testid="entry">
        {facts.map(([name, value]) => [<dt key={`${name}-t`}>{name}</dt>, <dd key={`${name}-d`}>{value}</dd>])}
      </dl>
      <button type="button" onClick={close}>Close</button>
    </section>
  )
}
