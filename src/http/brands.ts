import { normaliseHost, type BrandConfig } from './config.js'

export interface Brand {
  id: string
  chainCode: string
  docsUrl: string
}

/** Host name → brand (operations: a host belongs to at most one brand). */
export class BrandDirectory {
  private readonly byHost = new Map<string, Brand>()
  private readonly byId = new Map<string, Brand>()

  constructor(brands: readonly BrandConfig[], defaultDocsUrl: string) {
    for (const b of brands) {
      const brand: Brand = { id: b.id, chainCode: b.chainCode, docsUrl: b.docsUrl ?? defaultDocsUrl }
      this.byId.set(b.id, brand)
      for (const host of b.hosts) this.byHost.set(normaliseHost(host), brand)
    }
  }

  forHost(host: string | undefined): Brand | undefined {
    if (host === undefined || host === '') return undefined
    return this.byHost.get(host) ?? this.byHost.get(normaliseHost(host))
  }

  byBrandId(id: string): Brand | undefined {
    return this.byId.get(id)
  }

  ids(): string[] {
    return [...this.byId.keys()]
  }
}
