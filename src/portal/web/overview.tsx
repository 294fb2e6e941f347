import { useState } from 'preact/hooks'
import { api, call, type SessionInfo } from './api'
import type { Credential } from './public'
import type { Usage } from './usage'
import { Alert, Heading, Loading, Secret, sentenceOf, time, useLoad } from './ui'

interface Rolled { id: string; secret: string; previousSecretExpiresAt: string }

const WARN_MS = 14 * 86_400_000

function list(value: string[] | '*', all: string): string {
  return value === '*' ? all : value.length === 0 ? 'none' : value.join(', ')
}

export function Overview({ session }: { session: SessionInfo }) {
  const credential = useLoad(async () => (await call<Credential>('GET', api('/v1/credential'))).data)
  const usage = useLoad(async () => (await call<Usage>('GET', '/portal/api/usage')).data)
  const c = credential.data
  const today = usage.data?.rows.filter((row) => row.date === usage.data?.to).reduce((sum, row) => sum + row.total, 0)
  const expiresSoon = c?.expiresAt != null && Date.parse(c.expiresAt) - Date.now() < WARN_MS
  return (
    <section aria-labelledby="screen-title">
      <Heading>Overview</Heading>
      {credential.error === undefined ? null : <Alert>{sentenceOf(credential.error)}</Alert>}
      {c === undefined ? (credential.error === undefined ? <Loading /> : null) : (
        <>
          <dl class="facts">
            <dt>Credential</dt><dd><code>{c.id}</code> ({c.type === 'api_key' ? 'API key' : 'client grant'})</dd>
            <dt>Name</dt><dd>{c.name ?? '—'}</dd>
            <dt>Brand</dt><dd>{c.brand}</dd>
            <dt>Mode</dt><dd><span class={`badge ${c.mode}`}>{c.mode === 'test' ? 'Test mode' : 'Live'}</span></dd>
            <dt>Scopes</dt><dd>{list(c.scopes, 'all scopes')}</dd>
            <dt>Properties</dt><dd>{list(c.properties, 'all properties of the brand')}</dd>
            <dt>Quota</dt><dd>{c.rateLimit.limit} requests per {c.rateLimit.windowSeconds} seconds</dd>
            <dt>Used today</dt><dd data-testid="today">{today === undefined ? (usage.error === undefined ? '…' : sentenceOf(usage.error)) : `${today} requests`}</dd>
            <dt>Expires</dt>
            <dd>{c.expiresAt === null ? 'never' : time(c.expiresAt)}
              {expiresSoon ? <strong class="warning"> Expires in less than 14 days: ask your operator for a new credential.</strong> : null}</dd>
            <dt>Last used</dt><dd>{time(c.lastUsedAt)}</dd>
            {c.previousSecretExpiresAt === null ? null : <><dt>Previous key works until</dt><dd>{time(c.previousSecretExpiresAt)}</dd></>}
          </dl>
          {session.capabilities.includes('roll_credential') && c.type === 'api_key' ? <Roll onRolled={credential.reload} /> : null}
        </>
      )}
    </section>
  )
}

function Roll({ onRolled }: { onRolled: () => void }) {
  const [asking, setAsking] = useState(false)
  const [rolled, setRolled] = useState<Rolled | undefined>()
  const [error, setError] = useState<unknown>()
  const roll = async () => {
    setError(undefined)
    try {
      setRolled((await call<Rolled>('POST', '/portal/api/roll', {})).data)
      setAsking(false)
      onRolled()
    } catch (e) {
      setError(e)
    }
  }
  return (
    <section aria-labelledby="roll-title" class="panel">
      <h2 id="roll-title">Rolling the key</h2>
      {rolled === undefined ? null : (
        <Secret label="New key:" value={rolled.secret}
          note={`Shown only now: store it before leaving this page. The previous key stops working at ${time(rolled.previousSecretExpiresAt)}.`} />
      )}
      {asking ? (
        <p>A new key replaces the current one, which keeps working for 24 hours.{' '}
          <button type="button" onClick={() => void roll()}>Yes, roll the key</button>{' '}
          <button type="button" onClick={() => setAsking(false)}>Cancel</button></p>
      ) : <button type="button" onClick={() => setAsking(true)}>Roll key</button>}
      {error === undefined ? null : <Alert>{sentenceOf(error)}</Alert>}
    </section>
  )
}
