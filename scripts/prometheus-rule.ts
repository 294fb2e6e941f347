import { readFileSync, writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parse, stringify } from 'yaml'

// `npm run rules`: writes deploy/kubernetes/prometheusrule.yaml, the alerting rules of
// deploy/prometheus/alerts.yml wrapped for the Prometheus Operator (promtool takes only the
// plain file, so that one is the source). A test fails when the two drift.

export const ALERTS_FILE = 'deploy/prometheus/alerts.yml'
export const PROMETHEUS_RULE_FILE = 'deploy/kubernetes/prometheusrule.yaml'

const HEADER = `# Generated from ${ALERTS_FILE} by \`npm run rules\`: edit that file, not this one.
# Needs the Prometheus Operator (its PrometheusRule resource); give it the labels your
# Prometheus selects rules by (its ruleSelector), e.g. \`release: <your release>\`.
`

/** The PrometheusRule manifest of the rules file's text. */
export function prometheusRule(alertsYaml: string): string {
  const rules = parse(alertsYaml) as { groups: unknown[] }
  const manifest = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'partner-gateway', labels: { 'app.kubernetes.io/name': 'partner-gateway' } },
    spec: { groups: rules.groups },
  }
  return `${HEADER}${stringify(manifest, { lineWidth: 0 })}`
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  writeFileSync(PROMETHEUS_RULE_FILE, prometheusRule(readFileSync(ALERTS_FILE, 'utf8')))
  console.log(`wrote ${PROMETHEUS_RULE_FILE} from ${ALERTS_FILE}`)
}
