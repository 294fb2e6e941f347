import { useEffect, useState } from 'preact/hooks'
import { api, call } from './api'
import type { Recovery } from './public'
import { Alert, Empty, Field, formSentence, Loading, sentenceOf, time, useLoad } from './ui'

// Recovering an endpoint after an outage (docs/partners.md, "After an outage: recover"): the
// events of a time range it missed (or all of them) sent again, one attempt each; the
// endpoint's recoveries of the last 7 days with their progress, and a running one cancelled.

/** How often a running recovery's progress is read again. */
const PROGRESS_MS = 2000
const FIELDS = ['since', 'until', 'include'] as const
const STATUS: Record<Recovery['status'], string> = { running: 'Running', done: 'Done', cancelled: 'Cancelled' }

/** An hour ago to the minute, in the API's format: where a person usually starts. */
function anHourAgo(): string {
  return new Date(Math.floor((Date.now() - 3_600_000) / 60_000) * 60_000).toISOString().replace(/\.000Z$/, 'Z')
}

export function Recoveries({ endpointId, replay, enabled }: { endpointId: string; replay: boolean; enabled: boolean }) {
  const path = api(`/v1/webhook-endpoints/${endpointId}/recoveries`)
  const recoveries = useLoad(async () => (await call<Recovery[]>('GET', `${path}?perPage=20`)).data)
  const [notice, setNotice] = useState<string | undefined>()
  const [error, setError] = useState<unknown>()
  const running = recoveries.data?.some((r) => r.status === 'running') ?? false
  // A running recovery's figures move: read again until it has ended.
  useEffect(() => {
    if (!running) return undefined
    const timer = setTimeout(recoveries.reload, PROGRESS_MS)
    return () => clearTimeout(timer)
  }, [recoveries.data])
  const cancel = async (recovery: Recovery) => {
    setError(undefined)
    setNotice(undefined)
    try {
      await call('DELETE', `${path}/${recovery.id}`)
      setNotice(`Recovery ${recovery.id} cancelled: what it had not yet sent will not be sent.`)
      recoveries.reload()
    } catch (e) {
      setError(e)
    }
  }
  return (
    <div class="recoveries">
      <h3>Recover after an outage</h3>
      <p class="hint">Sends again, one attempt each and oldest first, the events of a time range that this endpoint did not receive, or all of them.</p>
      {replay ? (enabled
        ? <RecoverForm endpointId={endpointId} started={(r) => { setNotice(`Recovery ${r.id} started: ${r.queued} ${r.queued === 1 ? 'event' : 'events'} to send.`); recoveries.reload() }} />
        : <p>Enable the endpoint to recover its events.</p>) : null}
      {notice === undefined ? null : <p role="status">{notice}</p>}
      {error === undefined ? null : <Alert>{sentenceOf(error)}</Alert>}
      {recoveries.error === undefined ? null : <Alert>{sentenceOf(recoveries.error)}</Alert>}
      {recoveries.data === undefined ? (recoveries.error === undefined ? <Loading /> : null) : recoveries.data.length === 0 ? (
        <Empty>{replay ? 'No recoveries in the last 7 days. After your receiver was down, choose the time range above to send what it missed.' : 'No recoveries in the last 7 days. A portal link with the replay capability can start one.'}</Empty>
      ) : (
        <table>
          <caption>Recoveries of the last 7 days, newest first</caption>
          <thead><tr><th scope="col">Recovery</th><th scope="col">Range</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Progress</th>{replay ? <th scope="col">Action</th> : null}</tr></thead>
          <tbody>
            {recoveries.data.map((r) => (
              <tr key={r.id}>
                <td><code>{r.id}</code></td>
                <td>{time(r.since)} to {time(r.until)}</td>
                <td>{r.include === 'all' ? 'All' : 'Not received'}</td>
                <td>{STATUS[r.status]}</td>
                <td class="progress">{r.delivered + r.failed} of {r.queued} sent: {r.delivered} delivered, {r.failed} failed</td>
                {replay ? <td>{r.status === 'running' ? <button type="button" onClick={() => void cancel(r)} aria-label={`Cancel recovery ${r.id}`}>Cancel</button> : '—'}</td> : null}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}

function RecoverForm({ endpointId, started }: { endpointId: string; started: (recovery: Recovery) => void }) {
  const [since, setSince] = useState(anHourAgo)
  const [until, setUntil] = useState('')
  const [include, setInclude] = useState<'failed' | 'all'>('failed')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const id = (field: string) => `${endpointId}-recover-${field}`
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const body = { since: since.trim(), include, ...(until.trim() === '' ? {} : { until: until.trim() }) }
      started((await call<Recovery>('POST', api(`/v1/webhook-endpoints/${endpointId}/recover`), body)).data)
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  const includeError = sentenceOf(error, 'include')
  return (
    <form onSubmit={(e) => void submit(e)} aria-label="Recover events" noValidate>
      <Field id={id('since')} label="From" hint="RFC 3339, such as 2026-11-28T09:00:00Z: the start of the outage." error={sentenceOf(error, 'since')}>
        {(describedBy, invalid) => <input id={id('since')} name="since" value={since} aria-describedby={describedBy} aria-invalid={invalid} onInput={(e) => setSince((e.target as HTMLInputElement).value)} />}
      </Field>
      <Field id={id('until')} label="Until (optional)" hint="RFC 3339; empty: until now." error={sentenceOf(error, 'until')}>
        {(describedBy, invalid) => <input id={id('until')} name="until" value={until} aria-describedby={describedBy} aria-invalid={invalid} onInput={(e) => setUntil((e.target as HTMLInputElement).value)} />}
      </Field>
      <fieldset class={includeError === undefined ? '' : 'invalid'} aria-describedby={includeError === undefined ? undefined : id('include-error')}>
        <legend>Events to send</legend>
        <label class="check"><input type="radio" name={id('include')} value="failed" checked={include === 'failed'} onChange={() => setInclude('failed')} /> Those this endpoint did not receive</label>
        <label class="check"><input type="radio" name={id('include')} value="all" checked={include === 'all'} onChange={() => setInclude('all')} /> All of them, received or not</label>
        {includeError === undefined ? null : <p class="field-error" id={id('include-error')}>{includeError}</p>}
      </fieldset>
      {formSentence(error, FIELDS) === undefined ? null : <Alert>{formSentence(error, FIELDS)}</Alert>}
      <button type="submit" disabled={busy}>Start recovery</button>
    </form>
  )
}
