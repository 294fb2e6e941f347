// Where a credential may be used from (docs/architecture.md, "Allowed addresses"): a list of
// IPv4 and IPv6 addresses and CIDR blocks, at most MAX_ALLOWED_ADDRESSES, checked at step 4
// against the request's client address. The list is compiled once per record read (a cached
// credential's principal holds the compiled form), so a request pays a parse of its own
// address and a few integer comparisons, and a map look-up when its address asked lately.

export const MAX_ALLOWED_ADDRESSES = 32

/** Whether an address (as Fastify's `request.ip` gives it) is allowed. */
export type AddressMatcher = (address: string) => boolean

interface Parsed {
  family: 4 | 6
  /** Four 32-bit words, most significant first; an IPv4 address fills the last. */
  words: [number, number, number, number]
  /** Prefix length in the family's bits. */
  bits: number
}

const DECIMAL_OCTET = /^(0|[1-9][0-9]{0,2})$/
const HEXTET = /^[0-9a-fA-F]{1,4}$/

function parseV4(text: string): number | undefined {
  const parts = text.split('.')
  if (parts.length !== 4) return undefined
  let value = 0
  for (const part of parts) {
    if (!DECIMAL_OCTET.test(part)) return undefined
    const octet = Number(part)
    if (octet > 255) return undefined
    value = value * 256 + octet
  }
  return value
}

/** Eight 16-bit groups, or undefined. */
function parseV6(text: string): number[] | undefined {
  let head = text
  let tail: number[] = []
  // An IPv4 tail (`::ffff:192.0.2.1`) stands for the last two groups.
  const lastColon = text.lastIndexOf(':')
  if (lastColon !== -1 && text.includes('.', lastColon)) {
    const v4 = parseV4(text.slice(lastColon + 1))
    if (v4 === undefined) return undefined
    tail = [Math.floor(v4 / 65536), v4 % 65536]
    head = text.slice(0, lastColon + 1)
    // `::1.2.3.4` keeps its `::`; `a:b::c:1.2.3.4` leaves `a:b::c:`, whose last colon goes.
    if (!head.endsWith('::')) head = head.slice(0, -1)
  }
  const halves = head.split('::')
  if (halves.length > 2) return undefined
  const groups = (half: string): number[] | undefined => {
    if (half === '') return []
    const out: number[] = []
    for (const group of half.split(':')) {
      if (!HEXTET.test(group)) return undefined
      out.push(parseInt(group, 16))
    }
    return out
  }
  const left = groups(halves[0] as string)
  const right = halves.length === 2 ? groups(halves[1] as string) : []
  if (left === undefined || right === undefined) return undefined
  const given = left.length + right.length + tail.length
  if (halves.length === 2) {
    if (given > 7) return undefined
    return [...left, ...new Array<number>(8 - given).fill(0), ...right, ...tail]
  }
  return given === 8 ? [...left, ...tail] : undefined
}

function isMappedV4(groups: number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff
}

/** An address or CIDR block; an IPv4-mapped IPv6 one (`::ffff:10.0.0.1`) is taken as IPv4. */
function parse(text: string): Parsed | undefined {
  const slash = text.indexOf('/')
  const address = slash === -1 ? text : text.slice(0, slash)
  const prefix = slash === -1 ? undefined : text.slice(slash + 1)
  if (prefix !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(prefix)) return undefined
  const v4 = parseV4(address)
  if (v4 !== undefined) {
    const bits = prefix === undefined ? 32 : Number(prefix)
    return bits > 32 ? undefined : { family: 4, words: [0, 0, 0, v4], bits }
  }
  const groups = parseV6(address)
  if (groups === undefined) return undefined
  const bits = prefix === undefined ? 128 : Number(prefix)
  if (bits > 128) return undefined
  if (isMappedV4(groups)) {
    if (bits < 96) return undefined
    return { family: 4, words: [0, 0, 0, (groups[6] as number) * 65536 + (groups[7] as number)], bits: bits - 96 }
  }
  const words: Parsed['words'] = [0, 0, 0, 0]
  for (let i = 0; i < 4; i += 1) words[i] = (groups[2 * i] as number) * 65536 + (groups[2 * i + 1] as number)
  return { family: 6, words, bits }
}

/** The mask of word `i` (0-3) for a prefix of `bits` over `total` bits (32 for IPv4: word 3 only). */
function maskOf(bits: number, family: 4 | 6, i: number): number {
  const start = family === 4 ? 96 : 0
  const covered = Math.max(0, Math.min(32, start + bits - i * 32))
  if (family === 4 && i < 3) return 0
  return covered === 0 ? 0 : covered === 32 ? 0xffffffff : (0xffffffff << (32 - covered)) >>> 0
}

function masked(parsed: Parsed): Parsed['words'] {
  return parsed.words.map((word, i) => (word & maskOf(parsed.bits, parsed.family, i)) >>> 0) as Parsed['words']
}

function formatV6(words: Parsed['words']): string {
  const groups = words.flatMap((w) => [Math.floor(w / 65536), w % 65536])
  // RFC 5952: the longest run of two or more zero groups (the first of equals) becomes `::`.
  let best = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i += 1
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j += 1
    if (j - i > bestLength) {
      best = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (best === -1) return hex.join(':')
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`
}

function format(parsed: Parsed, words: Parsed['words'] = parsed.words): string {
  const address = parsed.family === 4
    ? [24, 16, 8, 0].map((shift) => (words[3] >>> shift) & 255).join('.')
    : formatV6(words)
  const full = parsed.family === 4 ? 32 : 128
  return parsed.bits === full ? address : `${address}/${parsed.bits}`
}

/**
 * An entry of an allow-list in its one written form (IPv6 lower-case and compressed, IPv4
 * mapped into IPv6 written as IPv4), or why it is not one.
 */
export function canonicalEntry(text: string): { entry: string } | { problem: string } {
  const parsed = parse(text.trim())
  if (parsed === undefined) return { problem: `'${text}' is not an IPv4 or IPv6 address or CIDR block` }
  const network = masked(parsed)
  if (network.some((word, i) => word !== parsed.words[i])) {
    return { problem: `'${text}' has bits set past its prefix; the block is ${format(parsed, network)}` }
  }
  return { entry: format(parsed) }
}

/** Addresses whose answer a matcher remembers: a partner calls from one address, or a few. */
const REMEMBERED = 64

/**
 * The matcher of a list of canonical entries. The answers for the last addresses asked about
 * are remembered (at most REMEMBERED, then forgotten all at once), so most requests cost a
 * map look-up; an address not seen lately costs a parse and a comparison per entry.
 */
export function compileAllowList(entries: readonly string[]): AddressMatcher {
  const blocks = entries.map((entry) => parse(entry)).filter((p): p is Parsed => p !== undefined)
    .map((p) => ({ family: p.family, words: masked(p), masks: [0, 1, 2, 3].map((i) => maskOf(p.bits, p.family, i)) }))
  const answers = new Map<string, boolean>()
  const judge = (address: string): boolean => {
    const parsed = parse(address)
    if (parsed === undefined) return false
    for (const block of blocks) {
      if (block.family !== parsed.family) continue
      let inside = true
      for (let i = 0; i < 4 && inside; i += 1) inside = (((parsed.words[i] as number) & (block.masks[i] as number)) >>> 0) === block.words[i]
      if (inside) return true
    }
    return false
  }
  return (address: string): boolean => {
    let allowed = answers.get(address)
    if (allowed === undefined) {
      allowed = judge(address)
      if (answers.size >= REMEMBERED) answers.clear()
      answers.set(address, allowed)
    }
    return allowed
  }
}
