import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

// What an IP address is, in one place (docs/architecture.md §D45): how one is written, which
// range it falls in, and whether it lies in a CIDR block. The text must follow Node's own
// grammar (`net.isIP`: dotted quads without leading zeros, no short, octal or hex IPv4 forms,
// which ipaddr.js would take); ipaddr.js, a well-kept library, does the rest. An IPv4-mapped
// IPv6 address (`::ffff:10.0.0.1`) is its IPv4 address throughout. Allowed addresses
// (src/keys/addresses.ts), the webhooks' guard against internal targets (src/webhooks/
// addresses.ts) and the config's `trustProxy` all read addresses through this module.

export type Address = ipaddr.IPv4 | ipaddr.IPv6

/** An address or a CIDR block: its address and its prefix length in its family's bits. */
export interface Block {
  address: Address
  bits: number
}

const PREFIX = /^(0|[1-9][0-9]{0,2})$/

function bitsOf(address: Address): 32 | 128 {
  return address.kind() === 'ipv4' ? 32 : 128
}

/** An address (a zone id allowed), or undefined when the text is not one. */
export function parseAddress(text: string): Address | undefined {
  if (isIP(text) === 0) return undefined
  return ipaddr.process(text)
}

/**
 * An address or a CIDR block as an entry of a list is written (no zone id), or undefined.
 * An IPv4-mapped block (`::ffff:10.0.0.0/104`) is the IPv4 block it covers; one shorter than
 * the mapped prefix (/96) is not a block of IPv4 addresses, and is refused.
 */
export function parseBlock(text: string): Block | undefined {
  const slash = text.indexOf('/')
  const written = slash === -1 ? text : text.slice(0, slash)
  const prefix = slash === -1 ? undefined : text.slice(slash + 1)
  if (written.includes('%') || isIP(written) === 0) return undefined
  if (prefix !== undefined && !PREFIX.test(prefix)) return undefined
  const address = ipaddr.parse(written)
  const bits = prefix === undefined ? bitsOf(address) : Number(prefix)
  if (bits > bitsOf(address)) return undefined
  if (address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress()) {
    return bits < 96 ? undefined : { address: address.toIPv4Address(), bits: bits - 96 }
  }
  return { address, bits }
}

/** The block's first address: its address with every bit past the prefix cleared. */
export function networkOf(block: Block): Address {
  const mask = block.address.kind() === 'ipv4' ? ipaddr.IPv4.subnetMaskFromPrefixLength(block.bits) : ipaddr.IPv6.subnetMaskFromPrefixLength(block.bits)
  const maskBytes = mask.toByteArray()
  return ipaddr.fromByteArray(block.address.toByteArray().map((byte, i) => byte & (maskBytes[i] as number)))
}

/** A block in its one written form: IPv6 as RFC 5952 compresses it, the prefix only when it is not the whole address. */
export function formatBlock(block: Block): string {
  const address = block.address.toString()
  return block.bits === bitsOf(block.address) ? address : `${address}/${block.bits}`
}

/** Whether an address lies in a block (of its own family: `0.0.0.0/0` holds no IPv6 address). */
export function inBlock(address: Address, block: Block): boolean {
  return address.kind() === block.address.kind() && address.match(block.address, block.bits)
}

/** IANA's global unicast space: the only IPv6 space that holds public addresses. */
const GLOBAL_UNICAST: Block = { address: ipaddr.parse('2000::'), bits: 3 }
/** RFC 6052's well-known NAT64 prefix: the IPv4 address is the last 32 bits. */
const WELL_KNOWN_NAT64: Block = { address: ipaddr.parse('64:ff9b::'), bits: 96 }
/** 6to4 (RFC 3056): the IPv4 address is bits 16 to 47. */
const SIX_TO_FOUR: Block = { address: ipaddr.parse('2002::'), bits: 16 }
/** IPv4-compatible addresses (`::a.b.c.d`, deprecated), `::` and `::1` apart. */
const IPV4_COMPATIBLE: Block = { address: ipaddr.parse('::'), bits: 96 }

function ipv4Of(high: number, low: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff])
}

/**
 * The IPv4 address an IPv6 address carries where whatever routes it delivers to that IPv4
 * address (NAT64's well-known prefix, 6to4, IPv4-compatible), or undefined. The local-use
 * NAT64 prefix (64:ff9b:1::/48, RFC 8215) is not one of them: its translators are inside an
 * operator's own network, so the address is judged whole, as space that is not global.
 */
function carriedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const parts = address.parts as [number, number, number, number, number, number, number, number]
  if (inBlock(address, WELL_KNOWN_NAT64)) return ipv4Of(parts[6], parts[7])
  if (inBlock(address, SIX_TO_FOUR)) return ipv4Of(parts[1], parts[2])
  if (inBlock(address, IPV4_COMPATIBLE) && (parts[6] !== 0 || parts[7] > 1)) return ipv4Of(parts[6], parts[7])
  return undefined
}

/**
 * Whether an address (any textual form Node reads, in brackets or not) is public unicast.
 * Loopback, private (RFC 1918), CGNAT, link-local, unique-local, multicast, unspecified,
 * broadcast, reserved, documentation and benchmarking space are not, nor IPv6 outside the
 * global unicast space, nor anything that does not parse. An IPv6 address that carries an
 * IPv4 address (mapped, NAT64's well-known prefix, 6to4, IPv4-compatible) is judged by it.
 */
export function isPublicAddress(text: string): boolean {
  const address = parseAddress(text.replace(/^\[(.*)\]$/, '$1'))
  if (address === undefined) return false
  if (address instanceof ipaddr.IPv4) return address.range() === 'unicast'
  const carried = carriedIPv4(address)
  if (carried !== undefined) return carried.range() === 'unicast'
  return address.range() === 'unicast' && inBlock(address, GLOBAL_UNICAST)
}
