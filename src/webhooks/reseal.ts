import type { EndpointRecord, EndpointStore } from './endpoints.js'
import { secretContext } from './endpoints.js'
import type { SecretBox } from './secrets.js'

// Changing WEBHOOKS_SECRET_KEY without an outage (docs/operations.md, "Changing
// WEBHOOKS_SECRET_KEY"): a secret sealed under a previous key (WEBHOOKS_SECRET_KEY_PREVIOUS)
// is sealed again under the current one when an attempt uses it, and `npm run webhooks --
// reseal` does it for every endpoint at once, so that the previous key can then be dropped.

/** The record with each secret a previous key sealed sealed again under the current key; undefined when none was. A secret no key opens is left as it is. */
export function resealed(record: EndpointRecord, box: SecretBox): EndpointRecord | undefined {
  let changed = false
  const secrets = record.secrets.map((secret) => {
    let opened
    try {
      opened = box.open(secret.sealed, secretContext(record.id))
    } catch {
      return secret
    }
    if (opened.current) return secret
    changed = true
    return { ...secret, sealed: box.seal(opened.plain, secretContext(record.id)) }
  })
  return changed ? { ...record, secrets } : undefined
}

export interface ResealReport {
  /** Endpoints whose secrets were sealed again under the current key. */
  resealed: number
  /** Endpoints whose secrets all were sealed under it already. */
  current: number
  /** Endpoints with a secret that no configured key opens. */
  unreadable: string[]
}

/** Seals every endpoint's secrets under the current key (each by compare-and-set: a rotation meanwhile is kept). */
export async function resealAll(store: EndpointStore, box: SecretBox): Promise<ResealReport> {
  const report: ResealReport = { resealed: 0, current: 0, unreadable: [] }
  for (const { id } of await store.all()) {
    let changed = false
    const after = await store.update(id, (record) => {
      const next = resealed(record, box)
      changed = next !== undefined
      return next
    })
    if (after === undefined) continue
    if (changed) report.resealed += 1
    else report.current += 1
    const live = after.secrets.filter((secret) => secret.expiresAt === null || secret.expiresAt > Date.now())
    if (live.some((secret) => !opens(box, secret.sealed, id))) report.unreadable.push(id)
  }
  return report
}

function opens(box: SecretBox, sealed: string, endpointId: string): boolean {
  try {
    box.open(sealed, secretContext(endpointId))
    return true
  } catch {
    return false
  }
}
