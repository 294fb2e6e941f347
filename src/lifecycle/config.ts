import { z } from 'zod'
import { httpUrl } from '../config/fields.js'
import { builtInRoutes, pathProblem, webhookRoutes, type Deprecation, type RoutePolicy } from '../routes/policy.js'
import { noticeProblem, parameterNames, type Move } from './rules.js'
import type { ReloadRules } from '../config/reload-rules.js'

// The section of a route's life (docs/architecture.md, "Configuration" and "Deprecated and
// moved routes"): the notice a sunset must give, the deprecations of the built-in routes, the
// paths that moved. A declared route carries its own `deprecated` and `replacement`
// (`routeLifecycleFields`, spread into its entry by src/proxy/config.ts). Whether a
// replacement or a move's target is a route of the file spans sections: the top runs
// `checkLifecycle` with the declared routes.

const instant = z.iso.datetime({ offset: true, error: 'must be an RFC 3339 date-time with its offset, e.g. 2026-12-01T00:00:00Z' })

export const deprecationSchema = z.strictObject({
  since: instant.describe('From when every answer carries `Deprecation` (and `Sunset`, `Link` when set)'),
  sunset: instant.optional().describe('From when the route answers 410 ROUTE_RETIRED; at least `lifecycle.minNoticeDays` after `since`'),
  link: httpUrl.optional().describe('A page on migrating away, sent as `Link: <…>; rel="deprecation"`'),
})

/** What a declared route's entry takes on its life. */
export const routeLifecycleFields = {
  deprecated: deprecationSchema.optional().describe('The route\'s deprecation: `since`, `sunset`, `link`'),
  replacement: z.string().optional().describe('The path to use instead, named in the 410 of a retired route; only with `deprecated`'),
}

export const lifecycleFileFields = {
  lifecycle: z.strictObject({
    minNoticeDays: z.number().int().min(0).default(180).describe('Least number of days between a deprecation\'s `since` and its `sunset`'),
  }).prefault({}).describe('The rules of deprecations'),
  builtinRoutes: z.record(z.string(), z.strictObject({
    deprecated: deprecationSchema,
    replacement: z.string().optional().describe('The path to use instead, named in the 410 of a retired route'),
  })).default({}).describe('Deprecations of built-in routes, by path (e.g. `/v1/properties/{propertyId}`)'),
  moved: z.array(z.strictObject({
    from: z.string().describe('The old path (a route template: `{name}` for a parameter); answered 308 before authentication'),
    to: z.string().describe('The path of a route of this file it moved to; its parameters are among `from`\'s'),
  })).default([]).describe('Paths that moved: each answered 308 with `Location` on the same host, parameters and query kept'),
}

/** The built-in routes a config may deprecate: all but health, which load balancers probe. */
export const DEPRECATABLE_BUILT_INS: readonly string[] = [...Object.values(builtInRoutes), ...Object.values(webhookRoutes)]
  .map((policy) => policy.path).filter((path) => path !== builtInRoutes.health.path)

const ALL_BUILT_INS: readonly string[] = [builtInRoutes.health.path, ...DEPRECATABLE_BUILT_INS]

/** The router's view of a path: `/v1/a/{x}` and `/v1/a/{y}` are the same route. */
function shape(path: string): string {
  return path.replace(/\{[^}]*\}/g, '{}')
}

interface LifecycleFile {
  lifecycle: { minNoticeDays: number }
  builtinRoutes: Record<string, { deprecated: Deprecation; replacement?: string | undefined }>
  moved: Move[]
  routes: { path: string; deprecated?: Deprecation | undefined; replacement?: string | undefined }[]
}

type Issue = (path: (string | number)[], message: string) => void

/** The rules of the section, with the declared routes it names. */
export function checkLifecycle(file: LifecycleFile, ctx: z.RefinementCtx): void {
  const issue: Issue = (path, message) => ctx.addIssue({ code: 'custom', path, message })
  const routeShapes = new Set([...ALL_BUILT_INS, ...file.routes.map((r) => r.path)].map(shape))
  const checkDeprecation = (at: (string | number)[], path: string, deprecated: Deprecation, replacement: string | undefined): void => {
    const notice = noticeProblem(deprecated, file.lifecycle.minNoticeDays)
    if (notice !== undefined) issue([...at, 'deprecated', 'sunset'], notice)
    if (replacement === undefined) return
    const problem = pathProblem(replacement)
    if (problem !== undefined) issue([...at, 'replacement'], problem)
    else if (!routeShapes.has(shape(replacement))) issue([...at, 'replacement'], `'${replacement}' is no route of this file`)
    else if (shape(replacement) === shape(path)) issue([...at, 'replacement'], 'is the route itself')
  }
  for (const [path, entry] of Object.entries(file.builtinRoutes)) {
    if (!DEPRECATABLE_BUILT_INS.includes(path)) {
      issue(['builtinRoutes', path], path === builtInRoutes.health.path ? 'health cannot be deprecated: load balancers probe it' : `no built-in route has this path (${DEPRECATABLE_BUILT_INS.join(', ')})`)
      continue
    }
    checkDeprecation(['builtinRoutes', path], path, entry.deprecated, entry.replacement)
  }
  file.routes.forEach((route, i) => {
    if (route.deprecated !== undefined) checkDeprecation(['routes', i], route.path, route.deprecated, route.replacement)
    else if (route.replacement !== undefined) issue(['routes', i, 'replacement'], 'only a deprecated route names a replacement')
  })
  const froms = new Map<string, number>()
  file.moved.forEach((move, i) => {
    const fromProblem = pathProblem(move.from)
    if (fromProblem !== undefined) issue(['moved', i, 'from'], fromProblem)
    else if (routeShapes.has(shape(move.from))) issue(['moved', i, 'from'], `'${move.from}' is a route of this file; a moved path must not be one`)
    else if (froms.has(shape(move.from))) issue(['moved', i, 'from'], `moved already by moved[${froms.get(shape(move.from)) as number}]`)
    froms.set(shape(move.from), i)
    const toProblem = pathProblem(move.to)
    if (toProblem !== undefined) {
      issue(['moved', i, 'to'], toProblem)
      return
    }
    if (!routeShapes.has(shape(move.to))) issue(['moved', i, 'to'], `'${move.to}' is no route of this file`)
    const fromNames = parameterNames(move.from)
    for (const name of parameterNames(move.to)) if (!fromNames.includes(name)) issue(['moved', i, 'to'], `{${name}} is no parameter of from`)
  })
}

/** `policy` with the deprecation the config gives its path, if any (built-in routes: `builtinRoutes`). */
export function withDeprecation(policy: RoutePolicy, builtinRoutes: LifecycleFile['builtinRoutes']): RoutePolicy {
  if (policy.kind !== 'facade' || !Object.hasOwn(builtinRoutes, policy.path)) return policy
  const entry = builtinRoutes[policy.path] as LifecycleFile['builtinRoutes'][string]
  return { ...policy, deprecation: deprecationOf(entry.deprecated, entry.replacement) }
}

/** The policy's view of a deprecation as the file writes it. */
export function deprecationOf(deprecated: Deprecation, replacement: string | undefined): Deprecation {
  return {
    since: deprecated.since,
    ...(deprecated.sunset === undefined ? {} : { sunset: deprecated.sunset }),
    ...(deprecated.link === undefined ? {} : { link: deprecated.link }),
    ...(replacement === undefined ? {} : { replacement }),
  }
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const lifecycleReload: ReloadRules = {
  reloadable: {
    lifecycle: 'the next reload\'s checks of notice periods',
    builtinRoutes: 'the next request of a built-in route: its deprecation headers, or 410 from its sunset',
    moved: 'the next request: a path added answers 308, one removed 404',
  },
  restartOnly: {},
}
