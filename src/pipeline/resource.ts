import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../contract/errors.js'
import type { Property } from '../contract/property.js'
import { callerOf } from '../http/request-state.js'
import { accessibleProperty } from '../properties/access.js'
import type { PropertySource } from '../properties/source.js'
import type { RoutePolicy } from '../routes/policy.js'

// Steps after the input checks, before any upstream is called: a test key must have a sandbox
// for every upstream the route reads (docs/architecture.md, "Test mode"), and on a
// property-scoped route the key must be allowed the property of `Service-Property-Id`
// (docs/architecture.md, "Order of checks", step 7). They run as preHandler hooks, after the
// body (if any) is read and found well-formed.

/** Which upstreams have a sandbox for test keys. */
export type SandboxCheck = (upstream: string) => boolean

export function testModeStage(policy: RoutePolicy, hasSandbox: SandboxCheck) {
  // A route whose every upstream has a sandbox needs no check at all; on the others a test
  // credential is refused, never sent to live data (docs/architecture.md §D20).
  if (policy.upstreams.every(hasSandbox)) return undefined
  return async function checkTestMode(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    if (callerOf(request).principal.mode !== 'test') return
    throw new ApiError('TEST_MODE_UNAVAILABLE', 'This endpoint has no sandbox: test keys (svc_test_) cannot use it; use a live key.')
  }
}

export function propertyScopeStage(source: PropertySource, accessDeniedStatus: 403 | 404) {
  // A hook with a callback, not an async one: a property the source holds is decided in the
  // hook's own turn (docs/performance.md, "A cache hit answered at once").
  return function checkPropertyScope(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
    // Fastify answers a hook's throw as it answers the error given to `done`.
    const found = accessibleProperty(source, request.propertyId as string, request, accessDeniedStatus)
    if (found instanceof Promise) found.then((decided) => done(refusalOf(decided)), done)
    else done(refusalOf(found))
  }
}

function refusalOf(found: Property | ApiError): ApiError | undefined {
  return found instanceof ApiError ? found : undefined
}
