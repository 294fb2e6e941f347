import { describe, expect, it } from 'vitest'
import { isPublicAddress, urlProblem } from '../../src/webhooks/addresses.js'

// The address rules of the SSRF guard (docs/architecture.md §D34), in every form an address
// can take. The end-to-end checks (a connection refused, a registration refused) are in
// ssrf.test.ts.

describe('isPublicAddress', () => {
  it.each([
    '127.0.0.1', '127.255.255.254', '10.0.0.1', '172.16.0.1', '192.168.1.1', '100.64.0.1', '169.254.169.254', '0.0.0.0', '255.255.255.255',
    '224.0.0.1', '240.0.0.1', '192.0.2.1', '198.51.100.7', '203.0.113.9', '198.18.0.1',
    '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '2001:db8::1',
    // IPv4 carried in IPv6: mapped (both notations), NAT64, 6to4, IPv4-compatible.
    '::ffff:127.0.0.1', '::ffff:7f00:1', '[::ffff:127.0.0.1]', '::ffff:a9fe:a9fe', '64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '2002:7f00:1::', '2002:a9fe:a9fe::1', '::127.0.0.1',
    'not an address', '',
  ])('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false)
  })

  it.each(['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])('allows %s', (address) => {
    expect(isPublicAddress(address)).toBe(true)
  })
})

describe('urlProblem', () => {
  const off = { allowHttp: false, allowPrivate: false }
  it.each([
    ['https://localhost/hook', 'url must not point at localhost'],
    ['https://LOCALHOST./hook', 'url must not point at localhost'],
    ['https://api.localhost/hook', 'url must not point at localhost'],
    ['https://127.0.0.1/hook', 'url must not point at an internal address'],
    ['https://[::ffff:127.0.0.1]/hook', 'url must not point at an internal address'],
    ['https://[::1]:8443/hook', 'url must not point at an internal address'],
    ['https://169.254.169.254/latest/meta-data', 'url must not point at an internal address'],
    // The URL parser writes decimal, octal and short forms as dotted quads.
    ['https://2130706433/hook', 'url must not point at an internal address'],
    ['https://0177.0.0.1/hook', 'url must not point at an internal address'],
    ['https://127.1/hook', 'url must not point at an internal address'],
    ['http://hooks.example.com/', 'url must use https'],
    ['ftp://hooks.example.com/', 'url must use https'],
    ['https://user:pass@hooks.example.com/', 'url must not hold a user name or password'],
    ['https://user@hooks.example.com/', 'url must not hold a user name or password'],
    ['https://:pw@hooks.example.com/', 'url must not hold a user name or password'],
    ['hooks.example.com', 'url must be an absolute https URL'],
    [`https://hooks.example.com/${'a'.repeat(2030)}`, 'url must be at most 2048 characters'],
  ])('refuses %s', (url, problem) => {
    expect(urlProblem(url, off)).toBe(problem)
  })

  it('takes a public https URL, and what the flags allow', () => {
    expect(urlProblem('https://hooks.example.com/acme?x=1', off)).toBeUndefined()
    expect(urlProblem('https://93.184.216.34/hook', off)).toBeUndefined()
    expect(urlProblem('http://127.0.0.1:8080/hook', { allowHttp: true, allowPrivate: true })).toBeUndefined()
    expect(urlProblem('http://hooks.example.com/', { allowHttp: true, allowPrivate: false })).toBeUndefined()
    expect(urlProblem('http://127.0.0.1/', { allowHttp: true, allowPrivate: false })).toBe('url must not point at an internal address')
  })
})
