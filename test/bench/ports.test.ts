import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { ephemeralStart, portForLater } from '../../bench/ports.js'

// The port of a listener the bench opens long after choosing it (a gateway's inspector): below
// the ports the system gives outgoing connections, so that none of the run's connections takes it.

describe('ephemeralStart', () => {
  it('reads the first port of the range, and 32768 when the range cannot be read', () => {
    expect(ephemeralStart(() => '32768\t60999\n')).toBe(32768)
    expect(ephemeralStart(() => '49152 65535')).toBe(49152)
    expect(ephemeralStart(() => 'no range')).toBe(32768)
    expect(ephemeralStart(() => { throw new Error('no /proc') })).toBe(32768)
  })
})

describe('portForLater', () => {
  it('is a port below the connections\' range that can be listened on', async () => {
    const port = await portForLater()
    expect(port).toBeGreaterThanOrEqual(10_000)
    expect(port).toBeLessThan(ephemeralStart())
    const server = createServer()
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve())
    })
    await new Promise((resolve) => server.close(resolve))
  })

  it('passes over a port taken, to the next the draw gives', async () => {
    const below = ephemeralStart()
    const busy = await portForLater()
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(busy, '127.0.0.1', () => resolve()))
    // The first draw lands on the taken port, the second in the middle of the range.
    const draws = [(busy - 10_000 + 0.5) / (below - 10_000), 0.5]
    const port = await portForLater(() => draws.shift() ?? 0.25)
    expect(port).toBe(10_000 + Math.floor(0.5 * (below - 10_000)))
    await new Promise((resolve) => taken.close(resolve))
  })
})
