import { describe, expect, it } from 'vitest'
import { envelopeBytes } from '../../src/contract/envelope.js'

// The bytes of a success envelope built around items already encoded: every byte written and
// none more (a Buffer taken unzeroed from Node's pool would carry other answers' bytes past
// the body's end if its length were counted too long).

const DATA = Buffer.from('{"data":')
const LIST = Buffer.from('{"data":[')
const META = ',"meta":{"requestId":"req_0123","timestamp":"2026-11-30T05:40:00.000Z"}'

describe('envelopeBytes', () => {
  it('writes one item between the opening and the meta, and the closing brace', () => {
    const body = envelopeBytes(DATA, [Buffer.from('{"name":"Paris Opéra 東京 🌋"}')], META)
    expect(body.toString('utf8')).toBe(`{"data":{"name":"Paris Opéra 東京 🌋"}${META}}`)
    expect(body.length).toBe(Buffer.byteLength(`{"data":{"name":"Paris Opéra 東京 🌋"}${META}}`))
  })

  it('separates a list\'s items by commas, and writes an empty list as []', () => {
    const items = ['{"a":1}', '{"b":"ü"}', '{"c":3}'].map((item) => Buffer.from(item))
    expect(envelopeBytes(LIST, items, `]${META}`).toString('utf8')).toBe(`{"data":[{"a":1},{"b":"ü"},{"c":3}]${META}}`)
    expect(envelopeBytes(LIST, items.slice(0, 1), `]${META}`).toString('utf8')).toBe(`{"data":[{"a":1}]${META}}`)
    expect(envelopeBytes(LIST, [], `]${META}`).toString('utf8')).toBe(`{"data":[]${META}}`)
  })

  it('writes the meta as UTF-8, and its length in bytes, whatever it holds', () => {
    const meta = ',"meta":{"note":"é東🌋"}'
    const body = envelopeBytes(DATA, [Buffer.from('null')], meta)
    expect(body.toString('utf8')).toBe(`{"data":null${meta}}`)
    expect(body.length).toBe(8 + 4 + Buffer.byteLength(meta) + 1)
  })
})
