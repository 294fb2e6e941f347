import { useState } from 'preact/hooks'
import { api, call, type Page, type SessionInfo } from './api'
import type { PublicEvent } from './public'
import { Alert, Empty, Field, formSentence, Heading, Loading, sentenceOf, time, useLoad } from './ui'

const PER_PAGE = 25

export function Events({ session }: { session: SessionInfo }) {
  const [filters, setFilters] = useState({ type: '', propertyId: '' })
  const [type, setType] = useState('')
  const [propertyId, setPropertyId] = useState('')
  /** The page shown; undefined: the newest (the API lists oldest first). */
  const [page, setPage] = useState<number | undefined>()
  const events = useLoad(async () => {
    const query = (n: number) => {
      const q = new URLSearchParams({ perPage: String(PER_PAGE), page: String(n) })
      if (filters.type !== '') q.set('type', filters.type)
      if (filters.propertyId !== '') q.set('propertyId', filters.propertyId)
      return api(`/v1/events?${q.toString()}`)
    }
    let answer: Page<PublicEvent[]> = await call<PublicEvent[]>('GET', query(page ?? 1))
    const last = Math.max(1, Math.ceil((answer.pagination?.total ?? 0) / PER_PAGE))
    if (page === undefined && last > 1) answer = await call<PublicEvent[]>('GET', query(last))
    return { events: [...answer.data].reverse(), page: page ?? last, last }
  }, [filters, page])
  const apply = (event: Event) => {
    event.preventDefault()
    setPage(undefined)
    setFilters({ type, propertyId: propertyId.trim() })
  }
  const d = events.data
  return (
    <section aria-labelledby="screen-title">
      <Heading>Events</Heading>
      <p>The events this credential sees over the last days, newest first; webhook endpoints receive the types they subscribe to.</p>
      <form class="filters" onSubmit={apply} role="search" aria-label="Event filters">
        <Field id="events-type" label="Type">
          {() => (
            <select id="events-type" name="type" value={type} onChange={(e) => setType((e.target as HTMLSelectElement).value)}>
              <option value="">All types</option>
              {session.eventTypes.map((t) => <option key={t} value={t}>{t}</option>)}
            </select>
          )}
        </Field>
        <Field id="events-property" label="Property id" hint="A property's UUID, or empty for every property." error={sentenceOf(events.error, 'propertyId')}>
          {(describedBy, invalid) => <input id="events-property" name="propertyId" value={propertyId} aria-describedby={describedBy} aria-invalid={invalid} onInput={(e) => setPropertyId((e.target as HTMLInputElement).value)} />}
        </Field>
        <button type="submit">Filter</button>
      </form>
      {events.error === undefined || formSentence(events.error, ['propertyId']) === undefined ? null : <Alert>{formSentence(events.error, ['propertyId'])}</Alert>}
      {d === undefined ? (events.error === undefined ? <Loading /> : null) : d.events.length === 0 ? (
        <Empty>{filters.type === '' && filters.propertyId === '' ? 'No events yet. Events appear here as your properties change; a test event sent from the Webhooks screen appears here too.' : 'No event matches these filters. Clear them to see every event.'}</Empty>
      ) : (
        <>
          <table>
            <caption>Events, page {d.page} of {d.last}</caption>
            <thead><tr><th scope="col">Event</th><th scope="col">Type</th><th scope="col">At</th><th scope="col">Property</th><th scope="col">Object</th></tr></thead>
            <tbody>
              {d.events.map((e) => (
                <tr key={e.id}><td><code>{e.id}</code></td><td>{e.type}</td><td>{time(e.createdAt)}</td><td>{e.propertyId === null ? '—' : <code>{e.propertyId}</code>}</td><td><code>{e.object.path}</code></td></tr>
              ))}
            </tbody>
          </table>
          <nav aria-label="Event pages" class="pages">
            <button type="button" disabled={d.page >= d.last} onClick={() => setPage(d.page + 1)}>Newer events</button>{' '}
            <button type="button" disabled={d.page <= 1} onClick={() => setPage(d.page - 1)}>Older events</button>
          </nav>
        </>
      )}
    </section>
  )
}
