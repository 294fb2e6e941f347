import type { ComponentChildren } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { ProblemError } from './api'

// Pieces every screen uses: a problem as a sentence beside its field, a secret shown once
// with a copy button, an empty list saying what to do, and data loaded with its problem.

/** A problem's sentence: the field's own when the API named the field, else its detail. */
export function sentenceOf(error: unknown, field?: string): string | undefined {
  if (error === undefined || error === null) return undefined
  if (error instanceof ProblemError) {
    if (field !== undefined) return error.fieldDetail(field)
    return error.problem.detail
  }
  return field === undefined ? 'The portal could not be reached; check the connection and try again.' : undefined
}

/** Problems of the whole form: those not about one of its `fields`. */
export function formSentence(error: unknown, fields: readonly string[]): string | undefined {
  if (error instanceof ProblemError && error.problem.errors !== undefined && error.problem.errors.some((e) => fields.includes(e.field))) {
    const rest = error.problem.errors.filter((e) => !fields.includes(e.field))
    return rest.length === 0 ? undefined : rest.map((e) => e.detail).join(' ')
  }
  return sentenceOf(error)
}

export function Alert({ children }: { children: ComponentChildren }) {
  return <p class="problem" role="alert">{children}</p>
}

export function Field(props: { id: string; label: string; hint?: string; error?: string | undefined; children: (describedBy: string | undefined, invalid: boolean) => ComponentChildren }) {
  const described = [props.hint === undefined ? undefined : `${props.id}-hint`, props.error === undefined ? undefined : `${props.id}-error`].filter((x) => x !== undefined).join(' ')
  return (
    <div class={`field${props.error === undefined ? '' : ' invalid'}`}>
      <label for={props.id}>{props.label}</label>
      {props.hint === undefined ? null : <p class="hint" id={`${props.id}-hint`}>{props.hint}</p>}
      {props.children(described === '' ? undefined : described, props.error !== undefined)}
      {props.error === undefined ? null : <p class="field-error" id={`${props.id}-error`}>{props.error}</p>}
    </div>
  )
}

/** A secret shown once: in full, selectable, with a copy button. */
export function Secret({ label, value, note }: { label: string; value: string; note: string }) {
  const [copied, setCopied] = useState(false)
  return (
    <div class="secret" role="status">
      <p><strong>{label}</strong> {note}</p>
      <code data-secret>{value}</code>
      <button type="button" onClick={() => { void navigator.clipboard?.writeText(value).then(() => setCopied(true), () => setCopied(false)) }}>
        {copied ? 'Copied' : 'Copy'}
      </button>
    </div>
  )
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>
}

/** Data of the API for a screen: loading, its problem, or the data; `reload` fetches again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): { data: T | undefined; error: unknown; reload: () => void } {
  const [state, setState] = useState<{ data: T | undefined; error: unknown }>({ data: undefined, error: undefined })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    let live = true
    load().then((data) => { if (live) setState({ data, error: undefined }) }, (error: unknown) => { if (live) setState({ data: undefined, error }) })
    return () => { live = false }
  }, [tick, ...deps])
  return { ...state, reload: () => setTick((n) => n + 1) }
}

/** The screen's heading, focused when the screen opens, so a keyboard or a screen reader starts there. */
export function Heading({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null)
  useEffect(() => { ref.current?.focus() }, [])
  return <h1 id="screen-title" tabIndex={-1} ref={ref}>{children}</h1>
}

export function Loading() {
  return <p class="loading" aria-live="polite">Loading…</p>
}

export function time(iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '—'
  return new Date(iso).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC')
}
