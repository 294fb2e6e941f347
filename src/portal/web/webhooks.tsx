import { useState } from 'preact/hooks'
import { api, call, type SessionInfo } from './api'
import type { Delivery, Endpoint } from './public'
import { Recoveries } from './recover'
import { Alert, Empty, Field, formSentence, Heading, Loading, Secret, sentenceOf, time, useLoad } from './ui'

const REASONS: Record<string, string> = {
  gone: 'its URL answered 410 Gone',
  failing: 'its deliveries failed for days',
  partner: 'you disabled it',
}

export function Webhooks({ session }: { session: SessionInfo }) {
  const endpoints = useLoad(async () => (await call<Endpoint[]>('GET', api('/v1/webhook-endpoints?perPage=100'))).data)
  const [created, setCreated] = useState<{ url: string; secret: string } | undefined>()
  const manage = session.capabilities.includes('manage_webhooks')
  return (
    <section aria-labelledby="screen-title">
      <Heading>Webhooks</Heading>
      <p>Endpoints receive this credential's events as signed HTTP POST requests.</p>
      {endpoints.error === undefined ? null : <Alert>{sentenceOf(endpoints.error)}</Alert>}
      {created === undefined ? null : (
        <Secret label={`Signing secret of ${created.url}:`} value={created.secret} note="Shown only now: store it in your receiver to verify each delivery's signature." />
      )}
      {endpoints.data === undefined ? (endpoints.error === undefined ? <Loading /> : null) : endpoints.data.length === 0 ? (
        <Empty>{manage ? 'No webhook endpoints yet. Add one below with the URL where your system receives events.' : 'No webhook endpoints yet. Ask your operator for a portal link that may manage webhooks, or create one through the API.'}</Empty>
      ) : (
        <ul class="endpoints">
          {endpoints.data.map((endpoint) => (
            <li key={endpoint.id}><EndpointView endpoint={endpoint} session={session} onChanged={endpoints.reload} onSecret={(secret) => setCreated({ url: endpoint.url, secret })} /></li>
          ))}
        </ul>
      )}
      {manage ? (
        <section aria-labelledby="create-title" class="panel">
          <h2 id="create-title">Add an endpoint</h2>
          <EndpointForm session={session} idPrefix="new" submitLabel="Add endpoint"
            save={async (body) => {
              const made = (await call<Endpoint & { secret: string }>('POST', api('/v1/webhook-endpoints'), body)).data
              setCreated({ url: made.url, secret: made.secret })
              endpoints.reload()
            }} />
        </section>
      ) : null}
    </section>
  )
}

interface FormBody { url: string; eventTypes: string[]; description: string | null }

function EndpointForm(props: { session: SessionInfo; idPrefix: string; submitLabel: string; initial?: Endpoint; save: (body: FormBody) => Promise<void>; cancel?: () => void }) {
  const [url, setUrl] = useState(props.initial?.url ?? '')
  const [types, setTypes] = useState<string[]>(props.initial?.eventTypes ?? [])
  const [description, setDescription] = useState(props.initial?.description ?? '')
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  const id = (field: string) => `${props.idPrefix}-${field}`
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      await props.save({ url, eventTypes: types, description: description === '' ? null : description })
      if (props.initial === undefined) { setUrl(''); setTypes([]); setDescription('') }
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  const fields = ['url', 'eventTypes', 'description']
  const typesError = sentenceOf(error, 'eventTypes')
  const offered = [...new Set([...props.session.eventTypes, ...(props.initial?.eventTypes ?? [])])]
  return (
    <form onSubmit={(e) => void submit(e)} noValidate>
      <Field id={id('url')} label="URL" hint="An https URL of your system that accepts POST requests." error={sentenceOf(error, 'url')}>
        {(describedBy, invalid) => <input id={id('url')} name="url" type="url" value={url} aria-describedby={describedBy} aria-invalid={invalid} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />}
      </Field>
      <fieldset class={typesError === undefined ? '' : 'invalid'} aria-describedby={typesError === undefined ? undefined : id('eventTypes-error')}>
        <legend>Event types</legend>
        {offered.length === 0 ? <p class="hint">This credential may not subscribe to any event type: ask your operator for the scopes of the events you need.</p> : offered.map((type) => (
          <label key={type} class="check">
            <input type="checkbox" name="eventTypes" value={type} checked={types.includes(type)}
              onChange={(e) => setTypes((e.target as HTMLInputElement).checked ? [...types, type] : types.filter((t) => t !== type))} /> {type}
          </label>
        ))}
        {typesError === undefined ? null : <p class="field-error" id={id('eventTypes-error')}>{typesError}</p>}
      </fieldset>
      <Field id={id('description')} label="Description (optional)" error={sentenceOf(error, 'description')}>
        {(describedBy, invalid) => <input id={id('description')} name="description" value={description} aria-describedby={describedBy} aria-invalid={invalid} onInput={(e) => setDescription((e.target as HTMLInputElement).value)} />}
      </Field>
      {formSentence(error, fields) === undefined ? null : <Alert>{formSentence(error, fields)}</Alert>}
      <button type="submit" disabled={busy}>{props.submitLabel}</button>
      {props.cancel === undefined ? null : <>{' '}<button type="button" onClick={props.cancel}>Cancel</button></>}
    </form>
  )
}

function EndpointView({ endpoint, session, onChanged, onSecret }: { endpoint: Endpoint; session: SessionInfo; onChanged: () => void; onSecret: (secret: string) => void }) {
  const [editing, setEditing] = useState(false)
  const [confirmDelete, setConfirmDelete] = useState(false)
  const [showDeliveries, setShowDeliveries] = useState(false)
  const [showRecoveries, setShowRecoveries] = useState(false)
  const [notice, setNotice] = useState<string | undefined>()
  const [error, setError] = useState<unknown>()
  const manage = session.capabilities.includes('manage_webhooks')
  const path = api(`/v1/webhook-endpoints/${endpoint.id}`)
  const act = async (work: () => Promise<string | undefined>) => {
    setError(undefined)
    setNotice(undefined)
    try {
      setNotice(await work())
    } catch (e) {
      setError(e)
    }
  }
  return (
    <article aria-labelledby={`${endpoint.id}-title`}>
      <h2 id={`${endpoint.id}-title`}><code>{endpoint.url}</code></h2>
      <p>
        <span class={`badge ${endpoint.status}`}>{endpoint.status === 'enabled' ? 'Enabled' : 'Disabled'}</span>
        {endpoint.status === 'disabled' && endpoint.disabledReason !== null ? ` because ${REASONS[endpoint.disabledReason] ?? endpoint.disabledReason}` : null}
        {' · '}<code>{endpoint.id}</code>{endpoint.description === null ? null : ` · ${endpoint.description}`}
      </p>
      <p>Event types: {endpoint.eventTypes.join(', ')}</p>
      {editing ? (
        <EndpointForm session={session} idPrefix={endpoint.id} submitLabel="Save changes" initial={endpoint} cancel={() => setEditing(false)}
          save={async (body) => { await call('PATCH', path, body); setEditing(false); onChanged() }} />
      ) : null}
      <div class="actions">
        {manage && !editing ? <button type="button" onClick={() => setEditing(true)}>Change</button> : null}
        {manage ? (
          <button type="button" onClick={() => void act(async () => {
            await call('PATCH', path, { status: endpoint.status === 'enabled' ? 'disabled' : 'enabled' })
            onChanged()
            return undefined
          })}>{endpoint.status === 'enabled' ? 'Disable' : 'Enable'}</button>
        ) : null}
        {manage ? (
          <button type="button" onClick={() => void act(async () => {
            const sent = (await call<{ eventId: string }>('POST', `${path}/test`, {})).data
            setShowDeliveries(true)
            return `Test event ${sent.eventId} sent; its delivery appears under the deliveries.`
          })}>Send test event</button>
        ) : null}
        {manage ? (
          <button type="button" onClick={() => void act(async () => {
            const rotated = (await call<{ secret: string }>('POST', `${path}/rotate-secret`, {})).data
            onSecret(rotated.secret)
            return 'A new signing secret is shown above; the previous one keeps signing beside it for 24 hours.'
          })}>Rotate secret</button>
        ) : null}
        {manage ? (confirmDelete ? (
          <span>Delete this endpoint and drop its queued deliveries?{' '}
            <button type="button" onClick={() => void act(async () => { await call('DELETE', path); onChanged(); return undefined })}>Yes, delete</button>{' '}
            <button type="button" onClick={() => setConfirmDelete(false)}>Keep it</button>
          </span>
        ) : <button type="button" onClick={() => setConfirmDelete(true)}>Delete</button>) : null}
        <button type="button" aria-expanded={showDeliveries} onClick={() => setShowDeliveries(!showDeliveries)}>Deliveries</button>
        <button type="button" aria-expanded={showRecoveries} onClick={() => setShowRecoveries(!showRecoveries)}>Recover</button>
      </div>
      {notice === undefined ? null : <p role="status">{notice}</p>}
      {error === undefined ? null : <Alert>{sentenceOf(error)}</Alert>}
      {showDeliveries ? <Deliveries endpoint={endpoint} replay={session.capabilities.includes('replay')} /> : null}
      {showRecoveries ? <Recoveries endpointId={endpoint.id} replay={session.capabilities.includes('replay')} enabled={endpoint.status === 'enabled'} /> : null}
    </article>
  )
}

function Deliveries({ endpoint, replay }: { endpoint: Endpoint; replay: boolean }) {
  const deliveries = useLoad(async () => (await call<Delivery[]>('GET', api(`/v1/webhook-endpoints/${endpoint.id}/deliveries?perPage=50`))).data)
  const [notice, setNotice] = useState<string | undefined>()
  const [error, setError] = useState<unknown>()
  const redeliver = async (eventId: string) => {
    setError(undefined)
    try {
      await call('POST', api(`/v1/events/${eventId}/redeliver`), { endpointId: endpoint.id })
      setNotice(`Event ${eventId} queued again for this endpoint.`)
      deliveries.reload()
    } catch (e) {
      setError(e)
    }
  }
  return (
    <div class="deliveries">
      <h3>Deliveries of the last 7 days <button type="button" onClick={deliveries.reload}>Refresh</button></h3>
      {deliveries.error === undefined ? null : <Alert>{sentenceOf(deliveries.error)}</Alert>}
      {notice === undefined ? null : <p role="status">{notice}</p>}
      {error === undefined ? null : <Alert>{sentenceOf(error)}</Alert>}
      {deliveries.data === undefined ? (deliveries.error === undefined ? <Loading /> : null) : deliveries.data.length === 0 ? (
        <Empty>No deliveries yet. Send a test event to check that your endpoint receives them.</Empty>
      ) : (
        <table>
          <caption>Attempts to {endpoint.url}, newest first</caption>
          <thead><tr><th scope="col">Event</th><th scope="col">Attempt</th><th scope="col">At</th><th scope="col">Status</th><th scope="col">Outcome</th><th scope="col">Duration</th>{replay ? <th scope="col">Action</th> : null}</tr></thead>
          <tbody>
            {deliveries.data.map((d) => (
              <tr key={`${d.eventId}-${d.attempt}-${d.at}`}>
                <td><code>{d.eventId}</code></td><td>{d.attempt}</td><td>{time(d.at)}</td><td>{d.status ?? '—'}</td><td>{d.outcome}</td>
                <td>{d.durationMs === null ? '—' : `${d.durationMs} ms`}</td>
                {replay ? <td><button type="button" onClick={() => void redeliver(d.eventId)} aria-label={`Redeliver ${d.eventId}`}>Redeliver</button></td> : null}
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}
