import { render } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { call, currentSession, enterWith, ProblemError, startSession, type SessionInfo } from './api'
import { Events } from './events'
import { Overview } from './overview'
import { RequestLog } from './request-log'
import './style.css'
import { Alert } from './ui'
import { UsageScreen } from './usage'
import { Webhooks } from './webhooks'

// The portal's page (docs/partners.md, "The portal"): one document for every screen, the
// screen picked from the path. Entering spends the link's token (in the URL's fragment,
// which no server ever sees) for the session's cookie.

const SCREENS = [
  { path: '/portal/', name: 'Overview' },
  { path: '/portal/usage', name: 'Usage' },
  { path: '/portal/request-log', name: 'Request log' },
  { path: '/portal/webhooks', name: 'Webhooks' },
  { path: '/portal/events', name: 'Events' },
] as const

type State =
  | { kind: 'loading' }
  | { kind: 'in'; session: SessionInfo }
  | { kind: 'refused'; detail: string }
  | { kind: 'ended'; detail?: string }
  | { kind: 'unreachable'; detail: string }

function useRoute(): [string, (path: string, replace?: boolean) => void] {
  const [path, setPath] = useState(location.pathname)
  useEffect(() => {
    const back = () => setPath(location.pathname)
    addEventListener('popstate', back)
    return () => removeEventListener('popstate', back)
  }, [])
  return [path, (to, replace = false) => {
    if (replace) history.replaceState(null, '', to)
    else history.pushState(null, '', to)
    setPath(to)
  }]
}

function App() {
  const [state, setState] = useState<State>({ kind: 'loading' })
  const [path, go] = useRoute()
  useEffect(() => {
    const ended = () => setState({ kind: 'ended' })
    const start = async () => {
      if (location.pathname === '/portal/enter') {
        const token = location.hash.slice(1)
        // The token leaves the address bar and the history before anything else happens.
        history.replaceState(null, '', '/portal/enter')
        try {
          const session = await enterWith(token)
          startSession(session, ended)
          go('/portal/', true)
          setState({ kind: 'in', session })
        } catch (error) {
          setState(error instanceof ProblemError && error.problem.status < 500
            ? { kind: 'refused', detail: error.problem.detail }
            : { kind: 'unreachable', detail: error instanceof ProblemError ? error.problem.detail : 'The portal could not be reached.' })
        }
        return
      }
      try {
        const session = await currentSession()
        startSession(session, ended)
        setState({ kind: 'in', session })
      } catch (error) {
        setState(error instanceof ProblemError && error.problem.status === 401
          ? { kind: 'ended', detail: error.problem.detail }
          : { kind: 'unreachable', detail: error instanceof ProblemError ? error.problem.detail : 'The portal could not be reached.' })
      }
    }
    void start()
  }, [])

  if (state.kind === 'loading') return <main><p aria-live="polite">Loading the portal…</p></main>
  if (state.kind === 'refused') {
    return (
      <main>
        <h1>This link cannot be used</h1>
        <p>A portal link works once, until it expires. Ask the operator who sent it for a new link.</p>
        <p class="hint">{state.detail}</p>
      </main>
    )
  }
  if (state.kind === 'ended') {
    return (
      <main>
        <h1>Your portal session has ended</h1>
        <p>Sessions end when they expire, when you log out, or when the credential is suspended or revoked. Ask your operator for a new link.</p>
        {state.detail === undefined ? null : <p class="hint">{state.detail}</p>}
      </main>
    )
  }
  if (state.kind === 'unreachable') return <main><h1>The portal is not available</h1><Alert>{state.detail} Try again in a moment.</Alert></main>

  const { session } = state
  const screen = SCREENS.find((s) => s.path === path) ?? SCREENS[0]
  const logout = async () => {
    try {
      await call('POST', '/portal/logout', {})
    } finally {
      setState({ kind: 'ended' })
    }
  }
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class={`top ${session.mode}`}>
        <p class="brand">Partner portal · <span class={`badge ${session.mode}`}>{session.mode === 'test' ? 'Test mode' : 'Live'}</span> · <code>{session.credentialId}</code></p>
        <nav aria-label="Portal">
          <ul>
            {SCREENS.map((s) => (
              <li key={s.path}>
                <a href={s.path} aria-current={s === screen ? 'page' : undefined}
                  onClick={(e) => { if (!e.ctrlKey && !e.metaKey && !e.shiftKey) { e.preventDefault(); go(s.path) } }}>{s.name}</a>
              </li>
            ))}
          </ul>
        </nav>
        <button type="button" onClick={() => void logout()}>Log out</button>
      </header>
      {session.mode === 'test' ? <p class="test-banner">Test mode: this credential sees test data only, never a live booking.</p> : null}
      <main id="main" key={screen.path}>
        {screen.name === 'Overview' ? <Overview session={session} />
          : screen.name === 'Usage' ? <UsageScreen />
            : screen.name === 'Request log' ? <RequestLog />
            : screen.name === 'Webhooks' ? <Webhooks session={session} />
              : <Events session={session} />}
      </main>
      <footer><p>Session ends {new Date(session.expiresAt).toISOString().replace('T', ' ').slice(0, 16)} UTC.</p></footer>
    </>
  )
}

render(<App />, document.getElementById('app') as HTMLElement)
