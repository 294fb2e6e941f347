import { z } from 'zod'
import type { ReloadRules } from '../config/reload-rules.js'

// The partner portal's section of the configuration (docs/architecture.md, "Configuration";
// docs/operations.md, "The partner portal"). Where each brand's links lead is the brand's own
// `portalOrigin` (http/config.ts).

export const portalFileFields = {
  portal: z.strictObject({
    enabled: z.boolean().default(true)
      .describe('Serve the portal at `/portal/` (with Redis: its sessions live there); false: no portal routes, and no links can be made'),
  }).prefault({}).describe('The partner portal: a web page on a credential, served at `/portal/` on its brand\'s hosts and entered by a link an operator makes'),
}

/** Each brand's portal origin: its `portalOrigin`, else `https://` and its first host. */
export function portalOrigins(brands: readonly { id: string; hosts: readonly string[]; portalOrigin?: string | undefined }[]): Map<string, string> {
  return new Map(brands.map((brand) => [brand.id, new URL(brand.portalOrigin ?? `https://${brand.hosts[0] as string}`).origin]))
}

/** What a reload may change of this section (src/config/reload-rules.ts). */
export const portalReload: ReloadRules = {
  reloadable: {},
  restartOnly: { portal: 'the portal\'s sessions and their store are made at start' },
}
