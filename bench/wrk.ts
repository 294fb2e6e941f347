import { spawn, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

// The load generator: wrk (written in C, one thread, an event loop over its connections), in
// a process of its own. On two cores a generator that costs as much per request as the server
// it drives leaves that server waiting for work and waking for every answer; wrk costs a
// fraction of a bare server's CPU per request, so the servers run saturated, as in production.
//
// Each run gets a Lua script: the method, headers and body of the request; a `response` hook
// that counts answers by status and stops the thread after a fixed number of them; and a
// `done` hook that prints the count, the latency percentiles (µs, wrk's own histogram of every
// answer) and the errors as one JSON line.

export const INSTALL_HINT = 'the bench drives the servers with wrk, which is not installed: `apt-get install wrk` (Debian, Ubuntu) or see https://github.com/wg/wrk'

/** Whether `wrk` can be started. */
export function wrkAvailable(): boolean {
  const result = spawnSync('wrk', ['--version'], { stdio: 'ignore' })
  return result.error === undefined
}

export interface WrkRequest {
  url: string
  headers: Record<string, string>
  method?: 'POST'
  body?: string
  /** A new Idempotency-Key on every request, built by the script. */
  newKeys?: boolean
  /** Every `XIDX` of the body replaced on each request by a text of its own (new CloudEvent ids for each batch of the ingest). */
  newIds?: boolean
}

export interface WrkResult {
  answers: number
  /** Answers by HTTP status. */
  statuses: Record<string, number>
  /** Connection errors (connect, read, write) and timeouts. */
  errors: number
  /** Microseconds from wrk's start to its last counted answer (a fixed amount) or its end. */
  durationUs: number
  p50Us: number
  p99Us: number
}

/** A Lua string literal for any bytes: printable ASCII as is, everything else as `\ddd`. */
function luaString(value: string): string {
  let out = '"'
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte)
    out += byte >= 0x20 && byte < 0x7f && c !== '"' && c !== '\\' ? c : `\\${String(byte).padStart(3, '0')}`
  }
  return `${out}"`
}

function script(request: WrkRequest, amount: number, keyPrefix: string): string {
  const lines = [
    `wrk.method = ${luaString(request.method ?? 'GET')}`,
    ...Object.entries(request.headers).map(([name, value]) => `wrk.headers[${luaString(name)}] = ${luaString(value)}`),
    ...(request.body === undefined ? [] : [`wrk.body = ${luaString(request.body)}`]),
    // Globals of the thread's Lua state: `done` reads them through thread:get.
    `amount = ${amount}`,
    'answers = 0',
    'statuses = {}',
    'local threads = {}',
    'function setup(thread) table.insert(threads, thread) end',
    'function response(status)',
    '  answers = answers + 1',
    '  local key = tostring(status)',
    '  statuses[key] = (statuses[key] or 0) + 1',
    // The thread stops here, but wrk's main thread sleeps out the duration: the line tells
    // runWrk to end it (SIGINT), which then prints the summary.
    '  if amount > 0 and answers == amount then',
    '    wrk.thread:stop()',
    '    io.write("WRK-STOPPED\\n")',
    '    io.flush()',
    '  end',
    'end',
  ]
  if (request.newIds === true) {
    // The body is rebuilt per request: every event of every batch gets an id of its own, so the
    // ingest stores each one (a copy would be answered without being stored).
    lines.push(
      'sent = 0',
      `template = ${luaString(request.body ?? '')}`,
      'function request()',
      '  sent = sent + 1',
      `  local body = string.gsub(template, "XIDX", ${luaString(keyPrefix)} .. sent)`,
      '  return wrk.format(nil, nil, nil, body)',
      'end',
    )
  } else if (request.newKeys === true) {
    // A request built per call: wrk only calls `request` when the script defines it, and
    // then for every request, so the other rows do without.
    lines.push(
      'sent = 0',
      'function request()',
      '  sent = sent + 1',
      `  wrk.headers["Idempotency-Key"] = ${luaString(keyPrefix)} .. sent`,
      '  return wrk.format()',
      'end',
    )
  }
  lines.push(
    'function done(summary, latency)',
    '  local answered, parts = 0, {}',
    '  for _, thread in ipairs(threads) do',
    '    answered = answered + thread:get("answers")',
    '    for status, n in pairs(thread:get("statuses")) do parts[#parts + 1] = string.format("\\"%s\\":%d", status, n) end',
    '  end',
    '  local e = summary.errors',
    '  io.write(string.format("WRK-RESULT {\\"answers\\":%d,\\"durationUs\\":%d,\\"p50Us\\":%d,\\"p99Us\\":%d,\\"errors\\":%d,\\"statuses\\":{%s}}\\n",',
    '    answered, summary.duration, latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.timeout, table.concat(parts, ",")))',
    'end',
  )
  return `${lines.join('\n')}\n`
}

let scripts = 0

/**
 * Sends `amount` requests (or runs for `seconds`) over `connections` connections with wrk,
 * and returns what its script counted. `dir` holds the script. With an amount, `atLast` runs
 * as soon as the last answer is counted (to read the server's CPU then, not after wrk exits).
 */
export async function runWrk(request: WrkRequest, connections: number, size: { amount: number } | { seconds: number }, dir: string, atLast?: () => void): Promise<WrkResult> {
  scripts += 1
  const file = join(dir, `wrk-${scripts}.lua`)
  const amount = 'amount' in size ? size.amount : 0
  writeFileSync(file, script(request, amount, `bench-${process.pid}-${Date.now()}-`))
  // A fixed amount stops the thread from the script; the duration is then only a bound.
  const seconds = 'amount' in size ? 3600 : size.seconds
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '30s', '-s', file, request.url]
  const started = process.hrtime.bigint()
  let stopped: bigint | undefined
  let interrupting: NodeJS.Timeout | undefined
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk
    if (stopped === undefined && out.includes('WRK-STOPPED\n')) {
      stopped = process.hrtime.bigint()
      atLast?.()
      // wrk ignores SIGINT until its main thread has started the load threads and only then
      // installs its handler: a thread that counts its last answer before that (a small
      // amount on a loaded machine) would leave wrk asleep for the whole duration. So the
      // signal is sent again until wrk exits; once handled, another one changes nothing.
      child.kill('SIGINT')
      interrupting = setInterval(() => child.kill('SIGINT'), 100)
    }
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { err += chunk })
  // 'close', not 'exit': wrk's last lines may still be on their way when it has exited.
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  }).finally(() => clearInterval(interrupting))
  const line = out.split('\n').find((l) => l.startsWith('WRK-RESULT '))
  if (code !== 0 || line === undefined) throw new Error(`wrk ${args.join(' ')} exited ${String(code)}: ${err.trim() || out.trim()}`)
  const result = JSON.parse(line.slice('WRK-RESULT '.length)) as WrkResult
  return stopped === undefined ? result : { ...result, durationUs: Number(stopped - started) / 1000 }
}
