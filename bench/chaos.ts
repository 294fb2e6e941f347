import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { runFailoverScenario, statusesOverTime, type ScenarioReport } from './redis-ha/scenario.js'
import { haRedisMissing, RedisCluster, SentinelGroup, type HaTopology } from './redis-ha/topology.js'

// `npm run chaos [-- --mode sentinel|cluster]`: the failover scenario of the tests, on a
// Sentinel group and on a Cluster of this machine's own, reported: requests by status over
// time, the failover time, each instance's recovery. Writes bench/results/chaos-<time>.md
// and .json and prints the Markdown.

const { values: flags } = parseArgs({ options: { mode: { type: 'string' } } })
const modes = flags.mode === undefined ? ['sentinel', 'cluster'] : [flags.mode]
if (!modes.every((m) => m === 'sentinel' || m === 'cluster')) {
  process.stderr.write('--mode takes sentinel or cluster\n')
  process.exit(2)
}
const missing = haRedisMissing()
if (missing !== undefined) {
  process.stderr.write(`cannot run the chaos scenario: ${missing}\n`)
  process.exit(1)
}

const ms = (value: number | null): string => (value === null ? '–' : `${value}`)

function markdown(report: ScenarioReport): string {
  const lines: string[] = []
  const title = report.mode === 'sentinel' ? 'Sentinel: a master, a replica, three sentinels' : 'Cluster: three masters, a replica each'
  lines.push(`### ${title}`, '')
  lines.push(`Master on port ${report.killedPort} killed (SIGKILL) at t = 0; a replica took over after **${report.failoverMs} ms**`
    + ' (as the sentinels or the cluster nodes report it).', '')
  lines.push('| instance | health 503 from | health 200 again | last 503 answer | limiter enforcing again | suspended key refused after | revoked key refused after | fail-open requests |')
  lines.push('|---|---|---|---|---|---|---|---|')
  for (const i of report.instances) {
    lines.push(`| ${i.name} | ${ms(i.unhealthyAt)} ms | ${ms(i.healthyAgainAt)} ms | ${ms(i.last503At)} ms | ${ms(i.leasedAgainAt)} ms | ${i.suspensionRefusedAfterMs} ms | ${i.revocationRefusedAfterMs} ms | ${i.failOpenCounted} |`)
  }
  lines.push('', `The key was suspended at t = ${report.suspendedAt} ms.`, '')
  const q = report.quota
  lines.push(`Quota key: limit ${q.limit}; admitted by the limiter ${q.admitted}, let through while Redis could not answer ${q.admittedFailOpen};`
    + ` leased ${q.leased}, surviving counter ${q.counterAfter}, so unreplicated ${q.unreplicated}.`
    + ` Bound: ${q.admitted} ≤ ${q.limit} + ${q.unreplicated}.`, '')
  const statuses = [...new Set(report.samples.map((s) => s.status))].sort((a, b) => a - b)
  lines.push('Requests by status, both instances, per second since the kill:', '')
  lines.push(`| from | ${statuses.join(' | ')} |`)
  lines.push(`|---|${statuses.map(() => '---|').join('')}`)
  for (const bucket of statusesOverTime(report.samples, 1000)) {
    lines.push(`| ${bucket.from / 1000} s | ${statuses.map((s) => bucket.counts[String(s)] ?? 0).join(' | ')} |`)
  }
  lines.push('')
  return lines.join('\n')
}

const reports: ScenarioReport[] = []
for (const mode of modes) {
  process.stderr.write(`starting ${mode}\n`)
  const topology: HaTopology = mode === 'sentinel' ? await SentinelGroup.start() : await RedisCluster.start()
  try {
    reports.push(await runFailoverScenario({ topology, warmupMs: 4000, afterMs: 3000, log: (line) => process.stderr.write(`  ${line}\n`) }))
  } finally {
    await topology.stop()
  }
}

const stamp = new Date().toISOString().replaceAll(':', '-').replace('.', '-')
const header = [
  `## Failover under load (npm run chaos)`, '',
  `Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, Node ${process.version};`
  + ' two gateway instances in one process, each under three request loops (a cached key, a key with a quota of 400,'
  + ' a new unknown key each time), ~25 ms apart. Times in ms since the kill.', '', '',
].join('\n')
const text = header + reports.map(markdown).join('\n')
const dir = join('bench', 'results')
mkdirSync(dir, { recursive: true })
writeFileSync(join(dir, `chaos-${stamp}.md`), text)
// The JSON keeps the figures and the answers in 250 ms buckets, not every request.
writeFileSync(join(dir, `chaos-${stamp}.json`), `${JSON.stringify(reports.map(({ samples, ...figures }) => ({
  ...figures, requests: samples.length, statusesOverTime: statusesOverTime(samples, 250),
})), null, 1)}\n`)
process.stdout.write(text)
process.stderr.write(`wrote ${join(dir, `chaos-${stamp}.md`)} and .json\n`)
