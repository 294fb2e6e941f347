import { describe, expect, it } from 'vitest'
import { formatBlock, inBlock, isPublicAddress, networkOf, parseAddress, parseBlock, type Block } from '../../src/net/addresses.js'
import { urlProblem } from '../../src/webhooks/addresses.js'

// What an address is (docs/architecture.md §D45): the one module that reads addresses for
// allowed addresses, the webhooks' guard and trustProxy. Unit tests, no gateway.

const block = (text: string): Block => parseBlock(text) as Block

describe('an address', () => {
  it.each([
    ['10.1.2.3', '10.1.2.3'], ['2001:DB8::1', '2001:db8::1'], ['::ffff:10.0.0.1', '10.0.0.1'], ['::ffff:a00:1', '10.0.0.1'],
    ['fe80::1%eth0', 'fe80::1%eth0'], ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
  ])('reads %s as %s', (text, written) => {
    expect(parseAddress(text)?.toString()).toBe(written)
  })

  // Forms ipaddr.js alone would take (octal, hex, short, leading zeros) are not addresses here.
  it.each(['010.0.0.1', '0x7f.0.0.1', '127.1', '2130706433', '::ffff:010.0.0.1', '1::2::3', '00001::1', '10.0.0.0/8', '', 'example.com'])('refuses %j', (text) => {
    expect(parseAddress(text)).toBeUndefined()
  })
})

describe('a block', () => {
  it.each([
    ['10.0.0.0/8', '10.0.0.0/8'], ['10.1.2.3', '10.1.2.3'], ['10.1.2.3/32', '10.1.2.3'], ['0.0.0.0/0', '0.0.0.0/0'],
    ['2001:db8:0:0:0:0:0:0/32', '2001:db8::/32'], ['::/0', '::/0'], ['::', '::'], ['::ffff:10.0.0.0/104', '10.0.0.0/8'], ['::ffff:10.0.0.1/128', '10.0.0.1'],
    ['2001:db8:0:1:0:0:0:1', '2001:db8:0:1::1'],
  ])('reads %s, written %s', (text, written) => {
    expect(formatBlock(block(text))).toBe(written)
  })

  it.each(['10.0.0.0/33', '2001:db8::/129', '10.0.0.0/08', '10.0.0.0/', '10.0.0.0/8/8', '/8', 'fe80::1%eth0', 'fe80::/10%eth0', '::ffff:10.0.0.0/95', '10.0.0.0/-1', '10.0.0.0/1000'])('refuses %j', (text) => {
    expect(parseBlock(text)).toBeUndefined()
  })

  it('has a network: its address with the bits past the prefix cleared', () => {
    expect(networkOf(block('10.1.2.3/8')).toString()).toBe('10.0.0.0')
    expect(networkOf(block('10.1.2.3/31')).toString()).toBe('10.1.2.2')
    expect(networkOf(block('10.1.2.3')).toString()).toBe('10.1.2.3')
    expect(networkOf(block('2001:db8:ffff::1/32')).toString()).toBe('2001:db8::')
    expect(networkOf(block('2001:db8::1/127')).toString()).toBe('2001:db8::')
    expect(networkOf(block('::ffff:10.1.2.3/104')).toString()).toBe('10.0.0.0')
  })

  it.each([
    ['10.255.255.255', '10.0.0.0/8', true], ['11.0.0.0', '10.0.0.0/8', false], ['9.255.255.255', '10.0.0.0/8', false],
    ['::ffff:10.1.1.1', '10.0.0.0/8', true], ['10.1.1.1', '::ffff:10.0.0.0/104', true], ['2001:db8:ffff::1', '2001:db8::/32', true],
    ['2001:db9::1', '2001:db8::/32', false], ['203.0.113.9', '0.0.0.0/0', true], ['2001:db8::1', '0.0.0.0/0', false],
    ['2001:db8::1', '::/0', true], ['203.0.113.9', '::/0', false], ['192.0.2.7', '192.0.2.7', true], ['192.0.2.8', '192.0.2.7', false],
  ])('holds %s in %s: %s', (address, text, expected) => {
    expect(inBlock(parseAddress(address) as NonNullable<ReturnType<typeof parseAddress>>, block(text))).toBe(expected)
  })
})

describe('a public address', () => {
  it.each([
    '127.0.0.1', '10.0.0.1', '172.16.0.1', '192.168.1.1', '100.64.0.1', '169.254.169.254', '0.0.0.0', '255.255.255.255',
    '224.0.0.1', '240.0.0.1', '192.0.0.8', '192.0.2.1', '198.51.100.7', '203.0.113.9', '198.18.0.1',
    '::1', '::', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fd12:3456::1', 'ff02::1', '2001:db8::1', '2001::1', '100::1',
    // IPv4 carried in IPv6: mapped, NAT64's well-known prefix, 6to4, IPv4-compatible.
    '::ffff:127.0.0.1', '[::ffff:127.0.0.1]', '64:ff9b::7f00:1', '64:ff9b::a00:1', '2002:7f00:1::', '2002:a9fe:a9fe::1', '::127.0.0.1', '::7f00:1',
    // NAT64 for local use (64:ff9b:1::/48) is judged whole, whatever its last 32 bits say:
    // an address carrying 127.0.0.1 under a /48 or a /96 translator prefix, or 8.8.8.8 at its end.
    '64:ff9b:1:7f00:0:100::', '64:ff9b:1::7f00:1', '64:ff9b:1:7f00:0:100:808:808', '64:ff9b:1::808:808',
    // IPv6 outside the global unicast space (2000::/3), where ipaddr.js says only `unicast`.
    '64:ff9b:5::808:808', '4000::1', '::1:2:3:4:5',
    'not an address', '', '010.0.0.1',
  ])('is not %s', (address) => {
    expect(isPublicAddress(address)).toBe(false)
  })

  it.each(['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '[2606:4700:4700::1111]', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '::8.8.8.8'])('is %s', (address) => {
    expect(isPublicAddress(address)).toBe(true)
  })

  it('keeps a webhook URL off the local-use NAT64 prefix', () => {
    const flags = { allowHttp: false, allowPrivate: false }
    expect(urlProblem('https://[64:ff9b:1::808:808]/hook', flags)).toBe('url must not point at an internal address')
    expect(urlProblem('https://[64:ff9b::808:808]/hook', flags)).toBeUndefined()
  })
})
