import { formatBlock, inBlock, networkOf, parseAddress, parseBlock, type Block } from '../net/addresses.js'

// Where a credential may be used from (docs/architecture.md, "Allowed addresses"): a list of
// IPv4 and IPv6 addresses and CIDR blocks, at most MAX_ALLOWED_ADDRESSES, checked at step 4
// against the request's client address. What an address or a block is, and whether one holds
// the other, is src/net/addresses.ts's; this module holds the list's rules. The list is
// compiled once per record read (a cached credential's principal holds the compiled form), so
// a request pays a parse of its own address and a comparison per entry, and a map look-up when
// its address asked lately.

export const MAX_ALLOWED_ADDRESSES = 32

/** Whether an address (as Fastify's `request.ip` gives it) is allowed. */
export type AddressMatcher = (address: string) => boolean

/**
 * An entry of an allow-list in its one written form (IPv6 lower-case and compressed, IPv4
 * mapped into IPv6 written as IPv4), or why it is not one.
 */
export function canonicalEntry(text: string): { entry: string } | { problem: string } {
  const block = parseBlock(text.trim())
  if (block === undefined) return { problem: `'${text}' is not an IPv4 or IPv6 address or CIDR block` }
  const network: Block = { address: networkOf(block), bits: block.bits }
  const entry = formatBlock(block)
  const meant = formatBlock(network)
  if (meant !== entry) return { problem: `'${text}' has bits set past its prefix; the block is ${meant}` }
  return { entry }
}

/** Addresses whose answer a matcher remembers: a partner calls from one address, or a few. */
const REMEMBERED = 64

/**
 * The matcher of a list of canonical entries. The answers for the last addresses asked about
 * are remembered (at most REMEMBERED, then forgotten all at once), so most requests cost a
 * map look-up; an address not seen lately costs a parse and a comparison per entry.
 */
export function compileAllowList(entries: readonly string[]): AddressMatcher {
  const blocks = entries.map((entry) => parseBlock(entry)).filter((block): block is Block => block !== undefined)
  const answers = new Map<string, boolean>()
  const judge = (text: string): boolean => {
    const address = parseAddress(text)
    return address !== undefined && blocks.some((block) => inBlock(address, block))
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
