import type { Property } from '../../src/contract/property.js'
import type { ListScope, PropertyPage, PropertyRecord, PropertySource } from '../../src/properties/source.js'

/** An in-memory property source for pipeline tests that need no PMS. */
export class MemorySource implements PropertySource {
  constructor(private readonly records: PropertyRecord[]) {}

  async get(id: string): Promise<PropertyRecord | undefined> {
    return this.records.find((r) => r.property.id === id)
  }

  async listActive(scope: ListScope, page: number, perPage: number): Promise<PropertyPage> {
    const matching = this.records
      .filter((r) => r.chainCode === scope.chainCode && r.property.status === 'active')
      .filter((r) => scope.allowed === 'all' || scope.allowed.has(r.property.id))
      .map((r) => r.property)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id))
    const start = (page - 1) * perPage
    return { items: matching.slice(start, start + perPage), total: matching.length }
  }
}

function withoutId<T extends { id: string }>(value: T): Omit<T, 'id'> {
  const { id: _id, ...rest } = value
  return rest
}

export function property(overrides: Partial<Property> & Pick<Property, 'id'>): Property {
  // Built in wire order, so JSON.stringify of it is what the API sends.
  return {
    object: 'property',
    id: overrides.id,
    name: 'Acme Paris Opéra',
    code: 'ACMPAR',
    status: 'active',
    timezone: 'Europe/Paris',
    createdAt: '2024-01-01T00:00:00.000Z',
    updatedAt: '2024-05-01T12:03:12.500Z',
    ...withoutId(overrides),
  }
}
