import { hash } from 'node:crypto'
import { generateId } from './format.js'
import type { KeyMode } from './principal.js'

// Grants: what the client of an OAuth 2.0 access token may do. A valid token proves who the
// client is (its issuer and client id); the grant, registered by an operator with the key
// tool, says what it may do, as a key record does for a key: brand, mode, properties,
// scopes, quota, status. Its id (`cli_…`) stands where a key id stands (logs, metrics, quota,
// `X-Service-Key-Id`).

export type GrantStatus = 'active' | 'suspended'

export interface GrantRecord {
  id: string
  /** Of the issuer and the client id: the grant's address in the store. */
  digest: string
  issuer: string
  clientId: string
  brand: string
  mode: KeyMode
  properties: string[] | '*'
  /** The most a token of this client may do; `*`: every scope. */
  scopes: string[] | '*'
  status: GrantStatus
  name: string | null
  rateLimit: number | null
  /** Where the client's tokens may be used from; null: anywhere. */
  allowedIps: string[] | null
  createdAt: string
}

export interface NewGrant {
  issuer: string
  clientId: string
  brand: string
  mode: KeyMode
  properties: string[] | '*'
  scopes?: string[] | '*'
  name?: string | null
  rateLimit?: number | null
  allowedIps?: string[] | null
}

/** A second grant for one (issuer, client id). */
export class GrantExistsError extends Error {
  constructor(readonly existingId: string | null) {
    super(`a grant for this client already exists${existingId === null ? '' : ` (${existingId})`}`)
    this.name = 'GrantExistsError'
  }
}

export const GRANT_ID_PREFIX = 'cli_'

/**
 * The store's address of the grant of `clientId` at `issuer`. A digest rather than the names
 * themselves: fixed length and alphabet, whatever an identity provider calls its clients.
 */
export function grantDigest(issuer: string, clientId: string): string {
  return hash('sha256', `${issuer}\n${clientId}`, 'hex')
}

export function generateGrantId(): string {
  return generateId(GRANT_ID_PREFIX)
}

export function newGrantRecord(input: NewGrant): GrantRecord {
  return {
    id: generateGrantId(),
    digest: grantDigest(input.issuer, input.clientId),
    issuer: input.issuer,
    clientId: input.clientId,
    brand: input.brand,
    mode: input.mode,
    properties: input.properties,
    scopes: input.scopes ?? '*',
    status: 'active',
    name: input.name ?? null,
    rateLimit: input.rateLimit ?? null,
    allowedIps: input.allowedIps ?? null,
    createdAt: new Date().toISOString(),
  }
}

export function grantToHash(record: GrantRecord): Record<string, string> {
  return {
    id: record.id,
    issuer: record.issuer,
    clientId: record.clientId,
    brand: record.brand,
    mode: record.mode,
    properties: record.properties === '*' ? '*' : JSON.stringify(record.properties),
    scopes: record.scopes === '*' ? '*' : JSON.stringify(record.scopes),
    status: record.status,
    name: record.name ?? '',
    rateLimit: record.rateLimit === null ? '' : String(record.rateLimit),
    createdAt: record.createdAt,
    // Written only when set, so a grant without one has the fields it had before allowed addresses existed.
    ...(record.allowedIps === null ? {} : { allowedIps: JSON.stringify(record.allowedIps) }),
  }
}

export function grantFromHash(digest: string, hash: Record<string, string>): GrantRecord | null {
  if (hash.id === undefined || hash.issuer === undefined || hash.clientId === undefined || hash.brand === undefined) return null
  return {
    id: hash.id,
    digest,
    issuer: hash.issuer,
    clientId: hash.clientId,
    brand: hash.brand,
    mode: hash.mode === 'test' ? 'test' : 'live',
    properties: hash.properties === '*' || hash.properties === undefined ? '*' : JSON.parse(hash.properties) as string[],
    scopes: hash.scopes === '*' || hash.scopes === undefined ? '*' : JSON.parse(hash.scopes) as string[],
    status: hash.status === 'suspended' ? 'suspended' : 'active',
    name: hash.name === '' || hash.name === undefined ? null : hash.name,
    rateLimit: hash.rateLimit === '' || hash.rateLimit === undefined ? null : Number(hash.rateLimit),
    allowedIps: hash.allowedIps === '' || hash.allowedIps === undefined ? null : JSON.parse(hash.allowedIps) as string[],
    createdAt: hash.createdAt ?? '',
  }
}
