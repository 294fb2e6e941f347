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
