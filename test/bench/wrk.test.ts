import { mkdtempSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runWrk, wrkAvailable } from '../../bench/wrk.js'

// The bench's load generator: the Lua script it writes for wrk must send the request the row
// names (method, headers, body, a new Idempotency-Key each time when asked) and report what
// wrk saw. A real wrk against a real server; .ci/run installs wrk.

interface Seen { method: string; url: string; headers: IncomingMessage['headers']; body: string }

const seen: Seen[] = []
let server: Server
let url: string
const dir = mkdtempSync(join(tmpdir(), 'wrk-test-'))

beforeAll(async () => {
  if (!wrkAvailable()) throw new Error('wrk is not installed: apt-get install wrk (.ci/run installs it)')
  server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') })
      // Every third request refused, so the counts by status have two entries.
      const status = seen.length % 3 === 0 ? 429 : 200
      res.writeHead(status, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
})

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

describe('runWrk', () => {
  it('sends a fixed number of GETs with the given headers and counts the answers by status', async () => {
    seen.length = 0
    const result = await runWrk({ url: `${url}/v1/properties/P1?x=1`, headers: { Authorization: 'Bearer key "quoted" \\ é', 'User-Agent': 'bench/1.0' } }, 1, { amount: 300 }, dir)
    expect(result.answers).toBe(300)
    expect(result.statuses).toEqual({ 200: 200, 429: 100 })
    expect(result.errors).toBe(0)
    expect(Number.isInteger(result.p50Us)).toBe(true)
    expect(result.p99Us).toBeGreaterThanOrEqual(result.p50Us)
    // One connection: nothing was in flight when the thread stopped.
    expect(seen).toHaveLength(300)
    for (const request of seen) {
      expect(request.method).toBe('GET')
      expect(request.url).toBe('/v1/properties/P1?x=1')
      expect(request.headers.authorization).toBe(Buffer.from('Bearer key "quoted" \\ é', 'utf8').toString('latin1'))
      expect(request.headers['user-agent']).toBe('bench/1.0')
    }
  })

  it('sends a POST body and a new Idempotency-Key on every request when asked', async () => {
    seen.length = 0
    const body = '{"firstName":"Ann","lastName":"Lee"}'
    const result = await runWrk({ url: `${url}/v1/guests`, headers: { 'Content-Type': 'application/json' }, method: 'POST', body, newKeys: true }, 1, { amount: 50 }, dir)
    expect(result.answers).toBe(50)
    expect(seen).toHaveLength(50)
    for (const request of seen) {
      expect(request.method).toBe('POST')
      expect(request.headers['content-type']).toBe('application/json')
      expect(request.body).toBe(body)
    }
    const keys = seen.map((r) => r.headers['idempotency-key'])
    expect(keys.every((k) => typeof k === 'string' && k.length > 0)).toBe(true)
    expect(new Set(keys).size).toBe(50)
  })

  it('makes every XIDX of the body new on each request when asked, the rest of the body as given', async () => {
    seen.length = 0
    const body = '[{"id":"XIDX-0","data":"é"},{"id":"XIDX-1"}]'
    const result = await runWrk({ url: `${url}/events`, headers: { 'Content-Type': 'application/cloudevents-batch+json' }, method: 'POST', body, newIds: true }, 1, { amount: 40 }, dir)
    expect(result.answers).toBe(40)
    const ids = seen.flatMap((r) => (JSON.parse(r.body) as { id: string }[]).map((e) => e.id))
    expect(ids).toHaveLength(80)
    expect(new Set(ids).size).toBe(80)
    for (const request of seen) {
      expect(request.method).toBe('POST')
      expect(request.body).toMatch(/^\[\{"id":"bench-[0-9]+-[0-9]+-([0-9]+)-0","data":"é"\},\{"id":"bench-[0-9]+-[0-9]+-\1-1"\}\]$/)
    }
  })
})
