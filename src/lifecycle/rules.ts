import type { Deprecation } from '../routes/policy.js'

// The rules of a route's life (docs/architecture.md, "Deprecated and moved routes"), as pure
// functions of the config and the clock: which phase a deprecated route is in, the headers
// that announce it (RFC 9745 `Deprecation`, RFC 8594 `Sunset`, RFC 8288 `Link`), how much
// notice a sunset gives, and where a moved path now lives. The pipeline's stage
// (src/lifecycle/stage.ts) and the config's checks (src/lifecycle/config.ts) read them.

const DAY_MS = 86_400_000

/** `announced`: before `since`, nothing shows; `deprecated`: the headers on every answer; `retired`: 410 from `sunset`. */
export type Phase = 'announced' | 'deprecated' | 'retired'

export function phaseAt(sinceMs: number, sunsetMs: number | undefined, nowMs: number): Phase {
  if (sunsetMs !== undefined && nowMs >= sunsetMs) return 'retired'
  return nowMs >= sinceMs ? 'deprecated' : 'announced'
}

/** The headers of every answer of a deprecated route, lower-cased names. */
export function deprecationHeaders(deprecation: Deprecation): Record<string, string> {
  const headers: Record<string, string> = { deprecation: `@${Math.floor(Date.parse(deprecation.since) / 1000)}` }
  // toUTCString writes the IMF-fixdate of RFC 9110 5.6.7, which is what Sunset takes.
  if (deprecation.sunset !== undefined) headers.sunset = new Date(Date.parse(deprecation.sunset)).toUTCString()
  if (deprecation.link !== undefined) headers.link = `<${deprecation.link}>; rel="deprecation"; type="text/html"`
  return headers
}

/** The `detail` of a retired route's 410. */
export function retiredDetail(path: string, deprecation: Deprecation): string {
  const when = new Date(Date.parse(deprecation.sunset ?? deprecation.since)).toISOString()
  const instead = deprecation.replacement === undefined ? '' : ` Use ${deprecation.replacement} instead.`
  const read = deprecation.link === undefined ? '' : ' The Link header leads to the migration guide.'
  return `${path} was retired at ${when}.${instead}${read}`
}

/**
 * What is wrong with the dates of a deprecation, or undefined: a sunset must come at least
 * `minNoticeDays` after `since`, so partners get the notice docs/partners.md promises.
 */
export function noticeProblem(deprecation: Deprecation, minNoticeDays: number): string | undefined {
  if (deprecation.sunset === undefined) return undefined
  const notice = Date.parse(deprecation.sunset) - Date.parse(deprecation.since)
  if (notice < minNoticeDays * DAY_MS) {
    const days = Math.floor(notice / DAY_MS)
    return `sunset gives ${notice < 0 ? 'no' : `${days} day${days === 1 ? '' : 's'} of`} notice after since; lifecycle.minNoticeDays asks for at least ${minNoticeDays}`
  }
  return undefined
}

const PARAMETER = /^\{([a-z][A-Za-z0-9]*)\}$/

/** The names of a template's `{name}` segments. */
export function parameterNames(template: string): string[] {
  return template.split('/').flatMap((segment) => {
    const match = PARAMETER.exec(segment)
    return match === null ? [] : [match[1] as string]
  })
}

export interface Move {
  readonly from: string
  readonly to: string
}

interface CompiledMove extends Move {
  readonly pattern: RegExp
  readonly names: readonly string[]
}

function escape(segment: string): string {
  return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** A matcher of the moved paths: exact case, no trailing slash, one whole segment per parameter. */
export function movedPaths(moves: readonly Move[]): (url: string) => { from: string; location: string } | undefined {
  const compiled: CompiledMove[] = moves.map((move) => ({
    ...move,
    names: parameterNames(move.from),
    pattern: new RegExp(`^${move.from.split('/').map((s) => (PARAMETER.test(s) ? '([^/]+)' : escape(s))).join('/')}$`),
  }))
  return function locate(url) {
    if (compiled.length === 0) return undefined
    const q = url.indexOf('?')
    const path = q === -1 ? url : url.slice(0, q)
    for (const move of compiled) {
      const match = move.pattern.exec(path)
      if (match === null) continue
      // The values as the partner wrote them (still percent-encoded), so the new path names the same thing.
      const values = new Map(move.names.map((name, i) => [name, match[i + 1] as string]))
      const target = move.to.split('/').map((s) => {
        const name = PARAMETER.exec(s)?.[1]
        return name === undefined ? s : (values.get(name) as string)
      }).join('/')
      return { from: move.from, location: q === -1 ? target : `${target}${url.slice(q)}` }
    }
    return undefined
  }
}
