import type { FastifyRequest } from 'fastify'
import type { Principal } from '../keys/principal.js'
import type { Brand } from './brands.js'

// What the stages establish about a request, read back by later stages and handlers. The
// authentication stage runs before any stage or handler of a route that takes a key (the
// route's policy says so, and app.ts composes the stages from it), so these accessors fail
// only on a wiring mistake, which every test of such a route would show.

export interface Caller {
  brand: Brand
  principal: Principal
}

/** The brand of the host and the key's principal, on a route that takes a key. */
export function callerOf(request: FastifyRequest): Caller {
  const { brand, principal } = request
  if (brand === null || principal === null) throw new Error(`${request.routeUrl ?? request.url}: no authenticated caller; the route's policy takes no key`)
  return { brand, principal }
}
