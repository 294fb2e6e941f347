import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'
import { describe, expect, it } from 'vitest'
import { envSchema, fileSchema, loadConfig } from '../../src/config.js'

// The manifests an operator starts from (deploy/kubernetes): parsed, and checked against the
// gateway's own config and environment defaults, so they cannot drift from the code.

const DIR = 'deploy/kubernetes'

interface Manifest { kind: string; metadata: { name: string }; [field: string]: unknown }
type Any = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort()
const manifests = new Map<string, Manifest[]>()
for (const file of files) {
  manifests.set(file, parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((doc) => {
    expect(doc.errors).toEqual([])
    return doc.toJS() as Manifest
  }))
}
const all = [...manifests.values()].flat()
const one = (kind: string): Any => {
  const found = all.filter((m) => m.kind === kind)
  expect(found).toHaveLength(1)
  return found[0] as Any
}

const deployment = one('Deployment')
const pod = deployment.spec.template.spec
const container = pod.containers[0]
const env: Record<string, string> = Object.fromEntries(container.env.map((e: { name: string; value: string }) => [e.name, e.value]))
const defaults = envSchema.parse({})
const portNumber = (port: number | string): number =>
  typeof port === 'number' ? port : container.ports.find((p: { name: string }) => p.name === port).containerPort
const configMap = one('ConfigMap')
const mountedConfig = JSON.parse(configMap.data['config.json'])

describe('deploy/kubernetes', () => {
  it('lists every manifest in the kustomization, and nothing that is not there', () => {
    const kustomization = one('Kustomization')
    expect([...kustomization.resources].sort()).toEqual(files.filter((f) => f !== 'kustomization.yaml'))
    expect(all.map((m) => m.kind).sort()).toEqual([
      'ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Ingress', 'Kustomization', 'NetworkPolicy', 'PodDisruptionBudget', 'PrometheusRule', 'Secret', 'Service',
    ])
  })

  it('guards the admin port, bound on the pod\'s address, with ADMIN_TOKEN from the Secret', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'gw-k8s-')), 'config.json')
    writeFileSync(file, configMap.data['config.json'])
    const started = loadConfig({ ...env, ...one('Secret').stringData, CONFIG_FILE: file }, { requirePms: true, requireTokens: true })
    expect(started.adminHost).toBe('0.0.0.0')
    expect(started.adminToken).toEqual(expect.stringMatching(/^replace-me-.{6,}$/))
    expect(started.adminToken).toBe(one('Secret').stringData.ADMIN_TOKEN)
    expect(env.ADMIN_TOKEN).toBeUndefined()
  })

  it('sets an environment the gateway accepts, with the config file from the ConfigMap', () => {
    // What `npm start` checks, with the Secret's values and the ConfigMap as the file.
    const file = join(mkdtempSync(join(tmpdir(), 'gw-k8s-')), 'config.json')
    writeFileSync(file, configMap.data['config.json'])
    const started = loadConfig({ ...env, ...one('Secret').stringData, CONFIG_FILE: file }, { requirePms: true, requireTokens: true })
    expect(started.redisSentinel?.sentinels).toHaveLength(3)
    const mount = container.volumeMounts.find((m: { name: string }) => m.name === 'config')
    const volume = pod.volumes.find((v: { name: string }) => v.name === 'config')
    expect(volume.configMap.name).toBe(configMap.metadata.name)
    expect(env.CONFIG_FILE).toBe(`${mount.mountPath}/config.json`)
    expect(fileSchema.safeParse(mountedConfig).success).toBe(true)
    // The ConfigMap is the shipped config file, but for the proxies it believes (below).
    const shippedFile = JSON.parse(readFileSync('config/default.json', 'utf8')) as Record<string, unknown>
    expect({ ...mountedConfig, trustProxy: shippedFile.trustProxy }).toEqual(shippedFile)
    expect(started.trustProxy).toEqual(mountedConfig.trustProxy)
    // Both listeners reachable from the pod's address (the kubelet probes it there).
    expect({ host: env.HOST, adminHost: env.ADMIN_HOST }).toEqual({ host: '0.0.0.0', adminHost: '0.0.0.0' })
  })

  it('seals webhook secrets with WEBHOOKS_SECRET_KEY from the Secret, without which the gateway does not start', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'gw-k8s-')), 'config.json')
    writeFileSync(file, configMap.data['config.json'])
    const { WEBHOOKS_SECRET_KEY: key, ...others } = one('Secret').stringData as Record<string, string>
    expect(key).toMatch(/^replace-me-.{21,}$/)
    expect(loadConfig({ ...env, ...others, WEBHOOKS_SECRET_KEY: key, CONFIG_FILE: file }, { requirePms: true, requireTokens: true }).webhooksSecretKey).toBe(key)
    expect(() => loadConfig({ ...env, ...others, CONFIG_FILE: file }, { requirePms: true, requireTokens: true })).toThrow(/environment WEBHOOKS_SECRET_KEY: required/)
    expect(env.WEBHOOKS_SECRET_KEY).toBeUndefined()
  })

  it('believes only the ingress controller, and admits only it to the public port', () => {
    // The proxies believed: the pod network the ingress controller connects from, by address,
    // never any (true), a hop count, or every private range (a client reaching a pod from a
    // private address would then choose its own address in X-Forwarded-For).
    expect(mountedConfig.trustProxy).toEqual(['10.244.0.0/16'])
    // The Ingress sends the brands' hosts to the Service's public port, through the class the
    // policy admits.
    const ingress = one('Ingress')
    const service = one('Service')
    const file = JSON.parse(readFileSync('config/default.json', 'utf8')) as { brands: { hosts: string[] }[] }
    const publicHosts = file.brands.flatMap((b) => b.hosts).filter((h) => h.includes('.example'))
    expect(ingress.spec.rules.map((r: Any) => r.host).sort()).toEqual(publicHosts.sort())
    for (const rule of ingress.spec.rules) {
      expect(rule.http.paths.map((p: Any) => p.backend.service)).toEqual([{ name: service.metadata.name, port: { name: service.spec.ports[0].name } }])
    }
    expect(ingress.spec.tls[0].hosts.sort()).toEqual(publicHosts.sort())
    expect(ingress.spec.ingressClassName).toBe('nginx')
    // The public port admits the ingress controller's pods and nothing else; the admin port
    // (its token checked first) the cluster.
    const policy = one('NetworkPolicy')
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.template.metadata.labels)
    expect(policy.spec.policyTypes).toEqual(['Ingress'])
    expect(policy.spec.ingress).toEqual([
      {
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ingress-nginx' } } }],
        ports: [{ port: 'http' }],
      },
      { ports: [{ port: 'admin' }] },
    ])
    expect(portNumber('http')).toBe(Number(env.PORT ?? defaults.PORT))
    expect(portNumber('admin')).toBe(Number(env.ADMIN_PORT ?? defaults.ADMIN_PORT))
  })

  it('takes the tokens from the Secret, as placeholders', () => {
    const secret = one('Secret')
    expect(container.envFrom).toEqual([{ secretRef: { name: secret.metadata.name } }])
    expect(Object.keys(secret.stringData).sort()).toEqual([
      'ADMIN_TOKEN', 'EVENTS_BOOKINGS_SANDBOX_TOKEN', 'EVENTS_BOOKINGS_TOKEN', 'EVENTS_PMS_SANDBOX_TOKEN', 'EVENTS_PMS_TOKEN', 'PMS_SANDBOX_TOKEN', 'PMS_TOKEN', 'REDIS_URL',
      'UPSTREAM_BOOKINGS_SANDBOX_TOKEN', 'UPSTREAM_BOOKINGS_TOKEN', 'WEBHOOKS_SECRET_KEY',
    ])
    for (const value of Object.values(secret.stringData)) expect(String(value)).toContain('replace-me')
    // No token in the Deployment itself.
    expect(Object.keys(env).filter((name) => /TOKEN|PASSWORD/.test(name))).toEqual([])
  })

  it('probes readiness on /v1/health at the public port and liveness on the admin port', () => {
    const publicPort = Number(env.PORT ?? defaults.PORT)
    const adminPort = Number(env.ADMIN_PORT ?? defaults.ADMIN_PORT)
    expect({ path: container.readinessProbe.httpGet.path, port: portNumber(container.readinessProbe.httpGet.port) })
      .toEqual({ path: '/v1/health', port: publicPort })
    expect({ path: container.livenessProbe.httpGet.path, port: portNumber(container.livenessProbe.httpGet.port) })
      .toEqual({ path: '/livez', port: adminPort })
    expect(container.ports.map((p: { containerPort: number }) => p.containerPort).sort()).toEqual([publicPort, adminPort].sort())
  })

  it('pauses before SIGTERM and gives the shutdown more time than it may take', () => {
    const { shutdown } = loadConfig({ CONFIG_FILE: 'config/default.json' })
    expect(mountedConfig.shutdown).toEqual(shutdown)
    const [command, seconds] = container.lifecycle.preStop.exec.command as [string, string]
    expect(command).toBe('sleep')
    const needed = Number(seconds) + (shutdown.drainMs + shutdown.timeoutMs) / 1000
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(needed)
  })

  it('exposes only the public port in the Service', () => {
    const service = one('Service')
    expect(service.spec.selector).toEqual(deployment.spec.template.metadata.labels)
    const adminPort = Number(env.ADMIN_PORT ?? defaults.ADMIN_PORT)
    const targets = service.spec.ports.map((p: { targetPort: number | string }) => portNumber(p.targetPort))
    expect(targets).toEqual([Number(env.PORT ?? defaults.PORT)])
    expect(service.spec.ports.map((p: { port: number }) => p.port)).not.toContain(adminPort)
  })

  it('keeps instances up through disruptions and scales the Deployment', () => {
    const pdb = one('PodDisruptionBudget')
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels)
    const hpa = one('HorizontalPodAutoscaler')
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name })
    expect(hpa.spec.minReplicas).toBeGreaterThan(pdb.spec.maxUnavailable)
    // Utilisation targets need requests to measure against.
    expect(container.resources.requests.cpu).toBeDefined()
  })
})
