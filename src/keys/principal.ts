/** `svc_live_` keys reach live data, `svc_test_` keys only sandboxes (decisions 9). */
export type KeyMode = 'live' | 'test'

/** Who is calling, as authentication established it; later stages read it. */
export interface Principal {
  keyId: string
  brand: string
  mode: KeyMode
  /** Property ids the key may use, or every property of its brand. */
  properties: ReadonlySet<string> | 'all'
  /** The key's own quota per window, when it has one. */
  rateLimit: number | null
}
