import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import { ALERTS_FILE, PROMETHEUS_RULE_FILE, prometheusRule } from '../../scripts/prometheus-rule.js'
import { TestGateway } from '../helpers/gateway.js'

// What SREs load (deploy/grafana, deploy/prometheus, the PrometheusRule): promtool checks the
// rules and runs their unit tests, every dashboard query parses, every metric either names
// exists in a live gateway's /metrics, and every runbook link lands on a section.

interface Rule { alert: string; expr: string; for: string; labels: Record<string, string>; annotations: Record<string, string> }
interface Panel { id: number; type: string; title: string; datasource?: { type: string; uid: string }; targets?: { refId: string; expr: string; datasource: { uid: string } }[] }
interface Dashboard { uid: string; panels: Panel[]; templating: { list: { name: string; type: string; query?: string | { query: string } }[] } }
interface RuleTest { name: string; alert_rule_test: { eval_time: string; alertname: string; exp_alerts: unknown[] }[] }

const alertsText = readFileSync(ALERTS_FILE, 'utf8')
const rules = (parse(alertsText) as { groups: { name: string; rules: Rule[] }[] }).groups.flatMap((g) => g.rules)
const ruleTests = (parse(readFileSync('deploy/prometheus/alerts.test.yml', 'utf8')) as { tests: RuleTest[] }).tests
const dashboard = JSON.parse(readFileSync('deploy/grafana/gateway-dashboard.json', 'utf8')) as Dashboard
const queryPanels = dashboard.panels.filter((p) => p.type !== 'row')

function promtool(...args: string[]): { status: number | null; output: string } {
  const run = spawnSync('promtool', args, { encoding: 'utf8' })
  if (run.error !== undefined) {
    throw new Error(`promtool did not run (${run.error.message}): install Debian's prometheus package (apt-get install -y --no-install-recommends prometheus); .ci/run does`)
  }
  return { status: run.status, output: `${run.stdout}${run.stderr}` }
}

/** A Grafana query as Prometheus would get it: its variables filled in. */
function filled(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', 'partner-gateway').replaceAll('$instance', '.*')
}

/** Metric names in PromQL: every `name{` selector, and every name of ours or prom-client's. */
function metricNames(expr: string): string[] {
  const names = new Set<string>()
  for (const match of expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)) names.add(match[1] as string)
  for (const match of expr.matchAll(/\b(?:gateway|process|nodejs)_[a-zA-Z0-9_]+/g)) names.add(match[0])
  return [...names]
}

/** The anchors GitHub gives a Markdown file's headings. */
function anchorsOf(file: string): string[] {
  return readFileSync(file, 'utf8').split('\n').filter((line) => /^#{1,6} /.test(line))
    .map((line) => line.replace(/^#+ /, '').trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'))
}

describe('alert rules (deploy/prometheus/alerts.yml)', () => {
  it('are the alerts SREs page on, each with a severity', () => {
    expect(rules.map((r) => [r.alert, r.labels.severity])).toEqual([
      ['GatewayHighErrorRatio', 'critical'],
      ['GatewayHighLatencyP99', 'warning'],
      ['GatewayCircuitBreakerOpen', 'critical'],
      ['GatewayRedisDown', 'critical'],
      ['GatewayInstancesUnhealthy', 'warning'],
      ['GatewayAuthFailureSpike', 'warning'],
      ['GatewayJwksRefreshFailing', 'warning'],
      ['GatewayWebhookBacklogOld', 'warning'],
      ['GatewayWebhookFailureRatio', 'warning'],
      ['GatewayWebhookBlockedAttempts', 'warning'],
      ['GatewayWebhookSecretUnreadable', 'critical'],
      ['GatewayRequestLogDropping', 'warning'],
    ])
  })

  it('pass promtool check rules', () => {
    expect(promtool('check', 'rules', ALERTS_FILE)).toEqual({ status: 0, output: expect.stringContaining(`SUCCESS: ${rules.length} rules found`) })
  })

  it('fire and clear as alerts.test.yml expects (promtool test rules)', () => {
    expect(promtool('test', 'rules', 'deploy/prometheus/alerts.test.yml')).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') })
  })

  it('each have a unit test that sees them fire and, later, clear', () => {
    const seen = rules.map((rule) => {
      const checks = ruleTests.flatMap((t) => t.alert_rule_test).filter((c) => c.alertname === rule.alert)
      const minutes = (time: string): number => Number(time.replace(/m$/, ''))
      const fires = checks.filter((c) => c.exp_alerts.length > 0).map((c) => minutes(c.eval_time))
      const clears = checks.filter((c) => c.exp_alerts.length === 0).map((c) => minutes(c.eval_time))
      return { alert: rule.alert, fires: fires.length > 0, clearsLater: clears.some((t) => t > Math.min(...fires)) }
    })
    expect(seen).toEqual(rules.map((r) => ({ alert: r.alert, fires: true, clearsLater: true })))
  })

  it('each have a summary and a runbook annotation naming a section that exists', () => {
    for (const rule of rules) {
      expect(rule.annotations.summary, rule.alert).toMatch(/\S/)
      const [file, anchor] = (rule.annotations.runbook ?? '').split('#') as [string, string | undefined]
      expect(file, rule.alert).toMatch(/^(README|docs\/[a-z0-9-]+)\.md$/)
      expect(existsSync(file), `${rule.alert}: ${file}`).toBe(true)
      expect(anchorsOf(file), `${rule.alert}: #${String(anchor)} in ${file}`).toContain(anchor)
    }
  })

  it('are exactly what the Kubernetes PrometheusRule holds (npm run rules writes it)', () => {
    const committed = readFileSync(PROMETHEUS_RULE_FILE, 'utf8')
    expect(committed).toBe(prometheusRule(alertsText))
    const manifest = parse(committed) as { kind: string; spec: { groups: unknown } }
    expect(manifest.kind).toBe('PrometheusRule')
    expect(stringify(manifest.spec.groups)).toBe(stringify((parse(alertsText) as { groups: unknown }).groups))
  })
})

describe('dashboard (deploy/grafana/gateway-dashboard.json)', () => {
  it('has a panel for each thing an SRE watches', () => {
    expect(queryPanels.map((p) => p.title)).toEqual(expect.arrayContaining([
      'Request rate by route', 'Error ratio by route', 'Errors by status and code', 'Latency by route (p50, p90, p99)',
      'Circuit breaker state', 'Upstream calls by outcome', 'Read cache hit ratio', 'Quota rejections', 'Authentication failures by code',
      'Redis reachable', 'Load shedding',
      'Webhook attempts by outcome', 'Webhook backlog', 'Webhook attempt latency (p50, p99)', 'Webhook endpoints by status',
    ]))
  })

  it('asks the chosen Prometheus through the datasource variable, panel ids unique', () => {
    const ids = dashboard.panels.map((p) => p.id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(dashboard.templating.list.map((v) => [v.name, v.type])).toEqual([['datasource', 'datasource'], ['job', 'query'], ['instance', 'query']])
    for (const panel of queryPanels) {
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' })
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0)
      expect(panel.targets?.map((t) => t.datasource.uid), panel.title).toEqual(panel.targets?.map(() => '${datasource}'))
    }
  })

  it('has every panel query parse: promtool checks them as recording rules', () => {
    const queries = queryPanels.flatMap((p) => (p.targets ?? []).map((t) => ({ record: `dashboard:panel_${p.id}_${t.refId}`, expr: filled(t.expr) })))
    expect(queries.length).toBeGreaterThan(20)
    const file = join(mkdtempSync(join(tmpdir(), 'gw-dashboard-')), 'queries.yml')
    writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: queries }] }))
    expect(promtool('check', 'rules', file)).toEqual({ status: 0, output: expect.stringContaining(`SUCCESS: ${queries.length} rules found`) })
  })
})

describe('metrics named by the dashboard and the rules', () => {
  let t: TestGateway
  let exposition: string

  beforeAll(async () => {
    t = await TestGateway.start()
    await t.gateway.admin.listen({ port: 0, host: '127.0.0.1' })
    const res = await request(`http://127.0.0.1:${(t.gateway.admin.server.address() as { port: number }).port}/metrics`)
    exposition = await res.body.text()
  })
  afterAll(async () => t.close())

  it('all exist in a live gateway\'s /metrics', () => {
    const types = new Map([...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] as string, m[2] as string]))
    const exists = (name: string): boolean => types.has(name)
      || ['_bucket', '_sum', '_count'].some((suffix) => name.endsWith(suffix) && types.get(name.slice(0, -suffix.length)) === 'histogram')
    const variableQueries = dashboard.templating.list.map((v) => (typeof v.query === 'object' ? v.query.query : ''))
    const named = new Set([...rules.map((r) => r.expr), ...queryPanels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)), ...variableQueries].flatMap(metricNames))
    expect(named.size).toBeGreaterThan(15)
    expect([...named].filter((name) => !exists(name))).toEqual([])
  })
})
