import type { Property } from '../contract/property.js'
import type { TraceContext } from '../http/trace.js'
import type { KeyMode } from '../keys/principal.js'

// What the properties routes ask for. The PMS-backed source (pms-source.ts) is the real
// one; tests may give an in-memory one.

/** A property with the chain it belongs to, which never leaves the gateway. */
export interface PropertyRecord {
  chainCode: string
  property: Property
}

export interface SourceContext {
  mode: KeyMode
  requestId: string
  trace: TraceContext | null
  /** Filled by the source for the request's log line. */
  observe?: (observation: { upstreamMs?: number; cache?: 'hit' | 'miss' | 'stale' }) => void
}

export interface ListScope {
  chainCode: string
  /** The ids the key may use, or every property of the chain. */
  allowed: ReadonlySet<string> | 'all'
}

export interface PropertyPage {
  items: Property[]
  total: number
}

export interface PropertySource {
  /** The property with this (lower-case) id, whatever its chain; undefined when unknown. */
  get(id: string, context: SourceContext): Promise<PropertyRecord | undefined>
  /**
   * What `get` would give, at once, when the source holds it without a wait (a read-cache
   * hit): the record, or null for a property known not to exist; undefined when only `get`
   * can tell. A source without it is always asked through `get`.
   */
  held?(id: string, context: SourceContext): PropertyRecord | null | undefined
  /** Active properties in scope, ordered by createdAt then id. */
  listActive(scope: ListScope, page: number, perPage: number, context: SourceContext): Promise<PropertyPage>
}
