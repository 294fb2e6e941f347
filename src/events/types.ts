import type { EventTypeConfig } from './config.js'
import type { KeyMode, Principal } from '../keys/principal.js'

// The public event types of the config file (`events.types`), how an internal type of a
// publisher becomes one, and who sees an event of one (docs/architecture.md, "Events"). Read
// from the config when the gateway starts; the scope of a type is looked up when an event is
// read (or, later, delivered), so a type's scope applies to every event of it, however old.

/** How one internal type of one publisher becomes a public event. */
export interface EventMapping {
  /** The public type. */
  type: string
  scope: string
  /** Field names in `data`, outermost first. */
  brand: readonly string[]
  property: readonly string[] | undefined
  object: { type: string; id: readonly string[]; path: string }
}

/** What decides who sees an event: its brand (id), mode, public type and property. */
export interface EventFacts {
  brand: string
  mode: KeyMode
  type: string
  propertyId: string | null
}

/** What of a credential decides what it sees (an API key's or an access token's principal). */
export type Viewer = Pick<Principal, 'brand' | 'mode' | 'properties' | 'scopes'>

/** Whether a credential may use `scope`: it has every scope, or this one. */
export function hasScope(viewer: Viewer, scope: string): boolean {
  return viewer.scopes === 'all' || viewer.scopes.has(scope)
}

/**
 * Whether `viewer` sees `event` (docs/architecture.md, "Events"): same mode, same brand, an
 * event of no property or of one the credential may use, and the scope of its type (`scope`,
 * undefined for a type the config no longer names: then nobody does). The same rule serves
 * `/v1/events` and every later use of an event, checked when it is used.
 */
export function sees(viewer: Viewer, event: EventFacts, scope: string | undefined): boolean {
  if (scope === undefined || viewer.mode !== event.mode || viewer.brand !== event.brand) return false
  if (event.propertyId !== null && viewer.properties !== 'all' && !viewer.properties.has(event.propertyId)) return false
  return hasScope(viewer, scope)
}

export class EventTypes {
  private readonly mappings = new Map<string, EventMapping>()
  private readonly scopes = new Map<string, string>()
  private readonly internal = new Map<string, Set<string>>()

  constructor(types: readonly EventTypeConfig[]) {
    for (const entry of types) {
      this.mappings.set(mappingKey(entry.publisher, entry.internalType), {
        type: entry.type,
        scope: entry.scope,
        brand: entry.brand.split('.'),
        property: entry.property?.split('.'),
        object: { type: entry.object.type, id: entry.object.id.split('.'), path: entry.object.path },
      })
      this.scopes.set(entry.type, entry.scope)
      const named = this.internal.get(entry.publisher) ?? new Set<string>()
      named.add(entry.internalType)
      this.internal.set(entry.publisher, named)
    }
  }

  /** The mapping of an internal type of `publisher`; undefined when no public type maps it (the event is dropped). */
  mappingOf(publisher: string, internalType: string): EventMapping | undefined {
    return this.mappings.get(mappingKey(publisher, internalType))
  }

  /** Whether the config names `internalType` for `publisher` (else a metric counts it as `other`). */
  names(publisher: string, internalType: string): boolean {
    return this.internal.get(publisher)?.has(internalType) === true
  }

  /** The scope a credential needs to see events of a public type; undefined for a type the config does not name. */
  scopeOf(type: string): string | undefined {
    return this.scopes.get(type)
  }

  /** Every public type, sorted. */
  get publicTypes(): string[] {
    return [...this.scopes.keys()].sort()
  }

  /** The public types `viewer` has the scope of, sorted. */
  typesSeenBy(viewer: Viewer): string[] {
    return this.publicTypes.filter((type) => hasScope(viewer, this.scopes.get(type) as string))
  }

  /** Whether `viewer` sees `event`, with the scope the config gives its type now. */
  sees(viewer: Viewer, event: EventFacts): boolean {
    return sees(viewer, event, this.scopes.get(event.type))
  }
}

function mappingKey(publisher: string, internalType: string): string {
  return `${publisher} ${internalType}`
}
