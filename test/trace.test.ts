import { describe, expect, it } from 'vitest'
import { outgoingTraceparent, parseTraceparent, traceFromHeaders } from '../src/http/trace.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'

describe('traceparent (W3C Trace Context)', () => {
  it('parses a version 00 header', () => {
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, parentId: SPAN, flags: '01' })
  })

  it('parses the shared fields of a higher version, extra fields after a dash', () => {
    expect(parseTraceparent(`cc-${TRACE}-${SPAN}-01-what-the-future-holds`)).toEqual({ traceId: TRACE, parentId: SPAN, flags: '01' })
    expect(parseTraceparent(`01-${TRACE}-${SPAN}-00`)).toEqual({ traceId: TRACE, parentId: SPAN, flags: '00' })
  })

  it.each([
    ['upper-case hex', `00-${TRACE.toUpperCase()}-${SPAN}-01`],
    ['version ff', `ff-${TRACE}-${SPAN}-01`],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${SPAN}-01`],
    ['all-zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`],
    ['version 00 with extra fields', `00-${TRACE}-${SPAN}-01-extra`],
    ['higher version without a dash after the flags', `cc-${TRACE}-${SPAN}-01x`],
    ['short trace id', `00-${TRACE.slice(1)}-${SPAN}-01`],
    ['bad separator', `00_${TRACE}-${SPAN}-01`],
    ['non-hex flags', `00-${TRACE}-${SPAN}-0g`],
    ['empty', ''],
  ])('refuses %s', (_name, header) => {
    expect(parseTraceparent(header)).toBeUndefined()
  })

  it('keeps tracestate with a valid parent and drops it with a malformed one', () => {
    expect(traceFromHeaders(`00-${TRACE}-${SPAN}-01`, 'vendor=abc')).toEqual({ traceId: TRACE, parentId: SPAN, flags: '01', tracestate: 'vendor=abc' })
    const fresh = traceFromHeaders('garbage', 'vendor=abc')
    expect(fresh).toEqual({ traceId: expect.stringMatching(/^[0-9a-f]{32}$/), parentId: undefined, flags: '00', tracestate: undefined })
  })

  it('does not believe two traceparent headers', () => {
    expect(traceFromHeaders([`00-${TRACE}-${SPAN}-01`, `00-${TRACE}-${SPAN}-01`], undefined).traceId).not.toBe(TRACE)
  })

  it('continues the trace with a new span on outgoing calls', () => {
    const outgoing = outgoingTraceparent(traceFromHeaders(`00-${TRACE}-${SPAN}-01`, undefined))
    expect(outgoing).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`))
    expect(outgoing).not.toContain(SPAN)
  })
})

describe('tracestate (docs/security.md, "Big inputs": forwarded only when well-formed and at most 512 characters)', () => {
  const parent = `00-${TRACE}-${SPAN}-01`

  it.each([
    ['one member', 'congo=t61rcWkgMzE'],
    ['several, with spaces and empty members', 'rojo=00f067aa0ba902b7, congo=t61rcWkgMzE,,\tvendor@sys=a b'],
    ['a multi-tenant key', 'tenant-1@dt=some/value'],
    ['exactly 512 characters', `a=${'v'.repeat(254)},b=${'v'.repeat(253)}`],
  ])('passes on %s unchanged', (_name, state) => {
    expect(traceFromHeaders(parent, state).tracestate).toBe(state)
  })

  it.each([
    ['over 512 characters', `a=${'v'.repeat(254)},b=${'v'.repeat(254)}`],
    ['12 kB of markup', Array.from({ length: 30 }, (_, i) => `k${i}=<b>${'x'.repeat(400)}</b>`).join(',')],
    ['a value over 256 characters', `k=${'v'.repeat(257)}`],
    ['bytes over 0x7F', 'k=caf\u00e9'],
    ['an upper-case key', 'Congo=x'],
    ['a member without =', 'congo'],
    ['a control character', 'k=a\u0000b'],
    ['33 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
    ['nothing but commas', ',,'],
  ])('drops %s', (_name, state) => {
    expect(traceFromHeaders(parent, state)).toEqual({ traceId: TRACE, parentId: SPAN, flags: '01', tracestate: undefined })
  })
})
