import { WebSocket } from 'undici'
import { request } from 'undici'

// Where a gateway's own microseconds go: a CPU profile of the gateway process (V8's sampling
// profiler, through the inspector the process opens on SIGUSR1 at the port given by its
// --inspect-port flag) taken while one row's load runs, each sample's time put in a category.
//
// A sample is charged to the first frame, walking up its stack, that a rule below names: the
// gateway's own source files by category (CATEGORIES), and the libraries they call
// (LIBRARIES). Node's internals and native functions name no category and are passed over, so
// serialising counts to whoever wrote (Fastify's reply), pino's work to the log line, and
// Fastify's routing and hook dispatch to Fastify even when a gateway hook called it (a hook's
// `done()` runs the rest of the request). Socket writes (answers, Redis commands, upstream
// requests) are a category of their own: the system call and the wake-up of the reader it
// may pay for. V8 reports garbage collection as a node of its own, "(garbage collector)", and
// native work outside any JavaScript frame as "(program)". Idle samples are left out.

/** Gateway source files (their path under src/, as built into dist/src/) and the category they count to. */
const CATEGORIES: [RegExp, string][] = [
  [/^pipeline\/routing\.js$/, 'check: routing'],
  [/^pipeline\/negotiation\.js$/, 'check: negotiation'],
  [/^pipeline\/headers\.js$/, 'check: headers'],
  [/^pipeline\/parameters\.js$/, 'check: parameters'],
  [/^(pipeline\/authentication|keys\/.*|oauth\/.*)\.js$/, 'check: authentication'],
  [/^pipeline\/abuse\.js$/, 'check: abuse'],
  [/^(pipeline\/rate-limit|ratelimit\/.*)\.js$/, 'check: rate limit'],
  [/^pipeline\/scope\.js$/, 'check: scope'],
  [/^(pipeline\/resource|properties\/access)\.js$/, 'check: resource access'],
  [/^pipeline\/body\.js$/, 'check: body'],
  [/^pipeline\/check\.js$/, 'check runner'],
  [/^idempotency\/.*\.js$/, 'idempotency'],
  [/^events\/.*\.js$/, 'events (ingest, log)'],
  [/^(http\/request-context|http\/request-state|http\/trace|tracing\/.*)\.js$/, 'request context, tracing'],
  [/^http\/load-shedding\.js$/, 'load shedding'],
  [/^admin\/(metrics|series)\.js$/, 'metrics'],
  [/^(pipeline\/log|http\/request-logger|logger)\.js$/, 'log line'],
  [/^(proxy|upstream)\/.*\.js$/, 'upstream call, pass-through'],
  // The entry made after the answer, and its batch written: what the request log's rows compare.
  [/^request-log\/.*\.js$/, 'request log'],
  [/^(contract|properties|http\/client-errors|health)(\/.*)?\.js$/, 'reply (handler, headers, serialisation)'],
  [/\.js$/, 'gateway, other'],
]

/** Libraries: the reply's part of Fastify apart from its routing and hook dispatch. */
const LIBRARIES: [RegExp, string][] = [
  [/\/node_modules\/(pino|sonic-boom|thread-stream|pino-std-serializers)\//, 'log line'],
  [/\/node_modules\/prom-client\//, 'metrics'],
  [/\/node_modules\/(ioredis|redis-parser|@ioredis\/[^/]+)\//, 'Redis client'],
  [/\/node_modules\/(undici|@fastify\/reply-from|@fastify\/http-proxy)\//, 'upstream call, pass-through'],
  [/\/node_modules\/@opentelemetry\//, 'request context, tracing'],
  [/\/node_modules\/(fastify\/lib\/(reply|error-handler|error-serializer|wrap-thenable|schemas)\.js|fast-json-stringify\/)/, 'reply (handler, headers, serialisation)'],
  [/\/node_modules\/(fastify|find-my-way|avvio|fast-querystring|@fastify\/[^/]+|light-my-request)\//, 'Fastify (request, routing, hooks)'],
]
// The gateway's built sources: this file is dist/bench/breakdown.js.
const GATEWAY_ROOT = new URL('../src/', import.meta.url).href

/** Gateway helpers that several categories call: passed over, their time their caller's. */
const HELPERS = /^json-string\.js$/

function ruleFor(url: string): string | undefined {
  if (url.startsWith(GATEWAY_ROOT)) {
    const path = url.slice(GATEWAY_ROOT.length)
    if (HELPERS.test(path)) return undefined
    return CATEGORIES.find(([pattern]) => pattern.test(path))?.[1]
  }
  return LIBRARIES.find(([pattern]) => pattern.test(url))?.[1]
}

export const GC = 'GC'
const SOCKET_WRITE = 'socket writes'
const NATIVE = 'native, outside JavaScript'
// Node's HTTP parser, sockets, streams and timers, with no frame of ours or a library's above.
const NODE = 'Node (HTTP, net, streams, timers)'

interface ProfileNode { id: number; callFrame: { functionName: string; url: string }; children?: number[] }
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

export interface Breakdown {
  /** Main-thread time the samples cover, µs per answer, idle left out. */
  sampledUs: number
  /** µs per answer by category, largest first. */
  categories: { category: string; us: number; share: number }[]
}

function categorise(profile: Profile): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id)
  const memo = new Map<number, string | undefined>()
  const categoryOf = (id: number): string | undefined => {
    if (memo.has(id)) return memo.get(id)
    const node = byId.get(id) as ProfileNode
    const name = node.callFrame.functionName
    let category: string | undefined
    if (name === '(idle)' || name === '(root)') category = undefined
    else if (name === '(garbage collector)') category = GC
    else if (name === '(program)') category = NATIVE
    else {
      // The first frame up the stack that a rule names; Node's own frames are passed over,
      // but for a socket's write: the system call apart from who made it.
      for (let at: number | undefined = id; at !== undefined && category === undefined; at = parent.get(at)) {
        const { url } = (byId.get(at) as ProfileNode).callFrame
        category = url === 'node:internal/stream_base_commons' ? SOCKET_WRITE : ruleFor(url)
      }
      category ??= NODE
    }
    memo.set(id, category)
    return category
  }
  const time = new Map<string, number>()
  // timeDeltas[i] is the time before sample i: the time sample i stands for is the next delta.
  for (let i = 0; i < profile.samples.length; i += 1) {
    const category = categoryOf(profile.samples[i] as number)
    if (category === undefined) continue
    const delta = profile.timeDeltas[i + 1] ?? 0
    time.set(category, (time.get(category) ?? 0) + Math.max(0, delta))
  }
  return time
}

export function breakdownOf(profile: Profile, answers: number): Breakdown {
  const time = categorise(profile)
  const total = [...time.values()].reduce((a, b) => a + b, 0)
  const round2 = (n: number): number => Math.round(n * 100) / 100
  return {
    sampledUs: answers === 0 ? 0 : round2(total / answers),
    categories: [...time.entries()]
      .map(([category, us]) => ({ category, us: answers === 0 ? 0 : round2(us / answers), share: total === 0 ? 0 : round2(us / total) }))
      .sort((a, b) => b.us - a.us),
  }
}

/** A DevTools protocol session with a process's inspector. */
export class InspectorSession {
  private nextId = 0
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()

  private constructor(private readonly socket: WebSocket) {
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } }
      if (message.id === undefined) return
      const waiting = this.pending.get(message.id)
      this.pending.delete(message.id)
      if (message.error !== undefined) waiting?.reject(new Error(message.error.message))
      else waiting?.resolve(message.result)
    })
  }

  /**
   * Opens the inspector of process `pid` (SIGUSR1; the process was started with
   * --inspect-port=`port`) and connects to it.
   */
  static async open(pid: number, port: number): Promise<InspectorSession> {
    process.kill(pid, 'SIGUSR1')
    let url: string | undefined
    for (let i = 0; i < 100 && url === undefined; i += 1) {
      try {
        const res = await request(`http://127.0.0.1:${port}/json/list`)
        url = (await res.body.json() as { webSocketDebuggerUrl: string }[])[0]?.webSocketDebuggerUrl
      } catch {
        await new Promise((r) => setTimeout(r, 50))
      }
    }
    if (url === undefined) throw new Error(`the inspector of process ${pid} did not open on port ${port}`)
    const socket = new WebSocket(url)
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve())
      socket.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)))
    })
    return new InspectorSession(socket)
  }

  async post<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    this.nextId += 1
    const id = this.nextId
    const result = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }))
    this.socket.send(JSON.stringify({ id, method, params }))
    return result as Promise<T>
  }

  close(): void {
    this.socket.close()
  }
}

/** Profiles the process behind `session` while `load` runs; the profile and what `load` returns. */
export async function profileDuring<T>(session: InspectorSession, intervalUs: number, load: () => Promise<T>): Promise<{ profile: Profile; result: T }> {
  await session.post('Profiler.enable')
  await session.post('Profiler.setSamplingInterval', { interval: intervalUs })
  await session.post('Profiler.start')
  try {
    const result = await load()
    const { profile } = await session.post<{ profile: Profile }>('Profiler.stop')
    return { profile, result }
  } finally {
    await session.post('Profiler.disable')
  }
}
