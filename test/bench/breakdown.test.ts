import { describe, expect, it } from 'vitest'
import { breakdownOf } from '../../bench/breakdown.js'

// The breakdown charges each sample of a CPU profile to the first frame up its stack that is
// the gateway's own (by source file) or a library's, passing over Node's own frames. A
// synthetic profile, built as V8 reports one, with a known time per stack.

// Where the gateway's built sources are, as bench/breakdown.ts sees them from bench/.
const SRC = new URL('../../src/', import.meta.url).href
const LIB = 'file:///app/node_modules/'

interface Frame { name: string; url: string }
const frame = (name: string, url: string): Frame => ({ name, url })

/**
 * A profile whose samples are the given stacks (outermost frame first), one sample each. V8's
 * timeDeltas[i] is the time before sample i, so the time a sample stands for is the next delta.
 */
function profileOf(stacks: { stack: Frame[]; us: number }[]) {
  const root = { id: 1, callFrame: { functionName: '(root)', url: '' }, children: [] as number[] }
  const nodes = [root]
  const samples: number[] = []
  for (const { stack } of stacks) {
    let parent = root
    for (const f of stack) {
      const node = { id: nodes.length + 1, callFrame: { functionName: f.name, url: f.url }, children: [] as number[] }
      nodes.push(node)
      parent.children.push(node.id)
      parent = node
    }
    samples.push(parent.id)
  }
  return { nodes, samples, timeDeltas: [0, ...stacks.map((s) => s.us)], startTime: 0, endTime: 0 }
}

describe('breakdownOf', () => {
  it('charges each sample to the nearest gateway or library frame, and divides by the answers', () => {
    const fastifyHooks = frame('next', `${LIB}fastify/lib/hooks.js`)
    const httpServer = frame('parserOnIncoming', 'node:_http_server')
    const stacks = [
      // pino under the log hook: the log line.
      { stack: [httpServer, fastifyHooks, frame('observe', `${SRC}pipeline/log.js`), frame('write', `${LIB}sonic-boom/index.js`), frame('byteLength', 'node:buffer')], us: 300 },
      // metrics called from the log hook: metrics, the nearer frame.
      { stack: [fastifyHooks, frame('observe', `${SRC}pipeline/log.js`), frame('request', `${SRC}admin/metrics.js`), frame('inc', `${SRC}admin/series.js`)], us: 200 },
      // Fastify's hook dispatch called from a gateway hook's done(): Fastify.
      { stack: [fastifyHooks, frame('requestContext', `${SRC}http/request-context.js`), fastifyHooks, frame('hookIterator', `${LIB}fastify/lib/hooks.js`)], us: 100 },
      // A check: its own category.
      { stack: [fastifyHooks, frame('pipeline', `${SRC}pipeline/check.js`), frame('rateLimit', `${SRC}pipeline/rate-limit.js`)], us: 400 },
      // The socket write under Fastify's reply: socket writes, not the reply.
      { stack: [frame('onSendEnd', `${LIB}fastify/lib/reply.js`), frame('end', 'node:_http_outgoing'), frame('writevGeneric', 'node:internal/stream_base_commons'), frame('writev', '')], us: 500 },
      // Headers written by Fastify's reply: the reply.
      { stack: [frame('onSendEnd', `${LIB}fastify/lib/reply.js`), frame('writeHead', 'node:_http_server')], us: 100 },
      // Node's HTTP parser with no frame of ours or a library's above.
      { stack: [httpServer], us: 100 },
      { stack: [frame('(garbage collector)', '')], us: 200 },
      { stack: [frame('(program)', '')], us: 100 },
      // Idle: left out.
      { stack: [frame('(idle)', '')], us: 5000 },
    ]
    expect(breakdownOf(profileOf(stacks), 100)).toEqual({
      sampledUs: 20,
      categories: [
        { category: 'socket writes', us: 5, share: 0.25 },
        { category: 'check: rate limit', us: 4, share: 0.2 },
        { category: 'log line', us: 3, share: 0.15 },
        { category: 'metrics', us: 2, share: 0.1 },
        { category: 'GC', us: 2, share: 0.1 },
        { category: 'Fastify (request, routing, hooks)', us: 1, share: 0.05 },
        { category: 'reply (handler, headers, serialisation)', us: 1, share: 0.05 },
        { category: 'Node (HTTP, net, streams, timers)', us: 1, share: 0.05 },
        { category: 'native, outside JavaScript', us: 1, share: 0.05 },
      ],
    })
  })
})

describe('breakdownOf, the request log and shared helpers', () => {
  it('charges the request log its own code, and a shared helper to whoever called it', () => {
    const observe = frame('observe', `${SRC}pipeline/log.js`)
    const quoted = frame('quoted', `${SRC}json-string.js`)
    const stacks = [
      // The entry made in the log hook: the request log, not the log line.
      { stack: [observe, frame('entryOf', `${SRC}request-log/entry.js`)], us: 300 },
      // Quoting for a stored entry: the request log's; for the log line: the log line's.
      { stack: [frame('write', `${SRC}request-log/store.js`), frame('storedEntry', `${SRC}request-log/entry.js`), quoted], us: 200 },
      { stack: [observe, frame('serializeLine', `${SRC}http/request-logger.js`), quoted], us: 100 },
      // A helper with no gateway frame above it: Node's.
      { stack: [frame('processTicksAndRejections', 'node:internal/process/task_queues'), quoted], us: 100 },
    ]
    expect(breakdownOf(profileOf(stacks), 10)).toEqual({
      sampledUs: 70,
      categories: [
        { category: 'request log', us: 50, share: 0.71 },
        { category: 'log line', us: 10, share: 0.14 },
        { category: 'Node (HTTP, net, streams, timers)', us: 10, share: 0.14 },
      ],
    })
  })
})
