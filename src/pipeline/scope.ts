import type { FastifyRequest } from 'fastify'
import { insufficientScope } from '../contract/errors.js'
import type { Principal } from '../keys/principal.js'
import { scopeOf, type RoutePolicy } from '../routes/policy.js'

// Step 4 of the order of checks (docs/architecture.md, "Order of checks"), after the brand: may
// this credential do what the request asks? Each route's policy names the scope of each method
// (routes/policy.ts). A refusal comes before the quota, so it spends none (docs/architecture.md
// §D6).

export function scopeStage(policy: RoutePolicy) {
  // The scope of each method the route takes, HEAD included, looked up once here.
  const needed: Record<string, string | undefined> = {}
  for (const method of [...policy.methods, 'HEAD']) needed[method] = scopeOf(policy, method)
  return function checkScope(request: FastifyRequest): void {
    const { scopes, kind } = request.principal as Principal
    if (scopes === 'all') return
    const scope = needed[request.method]
    if (scope !== undefined && !scopes.has(scope)) throw insufficientScope(scope, kind === 'apiKey' ? 'API key' : 'access token')
  }
}
