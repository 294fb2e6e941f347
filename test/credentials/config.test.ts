import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { configReference, reloadReference } from '../../src/docs/reference.js'
import { configFile, configProblems, MINIMAL_CONFIG } from '../helpers/config.js'

// The `keys`, `usage` and `audit` sections of the config file (docs/operations.md, "Credentials
// over their life"): their defaults, their bounds as the operator reads them at start, and
// their rows in the generated reference. The module's mutation run uses these (scripts/mutation.ts).

/** A config file of the least a file must hold and `content`. */
const file = (content: unknown): string => configFile({ ...MINIMAL_CONFIG, ...(content as object) })

/** The problems of a config file, without its path. */
function problemsOf(content: unknown): string[] {
  const path = file(content)
  return configProblems(() => loadConfig({ CONFIG_FILE: path })).map((p) => p.replace(`${path} `, ''))
}

describe('the credentials sections', () => {
  it('default to no lifetime limit, a 14-day warning, a 10 s flush, 90 days of counts and 400 of audit', () => {
    const config = loadConfig({ CONFIG_FILE: file({}) })
    expect(config.keys).toEqual({ expiryWarningDays: 14 })
    expect(config.usage).toEqual({ flushSeconds: 10, retentionDays: 90 })
    expect(config.audit).toEqual({ retentionDays: 400 })
  })

  it('take the largest values allowed, and 0 days of warning', () => {
    const config = loadConfig({ CONFIG_FILE: file({
      keys: { maxLifetimeDays: 36500, expiryWarningDays: 365 }, usage: { flushSeconds: 3600, retentionDays: 3660 }, audit: { retentionDays: 36500 },
    }) })
    expect(config.keys).toEqual({ maxLifetimeDays: 36500, expiryWarningDays: 365 })
    expect(config.usage).toEqual({ flushSeconds: 3600, retentionDays: 3660 })
    expect(config.audit).toEqual({ retentionDays: 36500 })
    expect(loadConfig({ CONFIG_FILE: file({ keys: { maxLifetimeDays: 1, expiryWarningDays: 0 }, usage: { flushSeconds: 1, retentionDays: 1 }, audit: { retentionDays: 1 } }) }).keys)
      .toEqual({ maxLifetimeDays: 1, expiryWarningDays: 0 })
  })

  it('refuse one more than the largest, naming every field', () => {
    expect(problemsOf({
      keys: { maxLifetimeDays: 36501, expiryWarningDays: 366 }, usage: { flushSeconds: 3601, retentionDays: 3661 }, audit: { retentionDays: 36501 },
    })).toEqual([
      'keys.maxLifetimeDays: Too big: expected number to be <=36500',
      'keys.expiryWarningDays: Too big: expected number to be <=365',
      'usage.flushSeconds: Too big: expected number to be <=3600',
      'usage.retentionDays: Too big: expected number to be <=3660',
      'audit.retentionDays: Too big: expected number to be <=36500',
    ])
  })

  it('refuse 0 where a positive number is needed, a negative warning, a fraction and an unknown key', () => {
    expect(problemsOf({
      keys: { maxLifetimeDays: 0, expiryWarningDays: -1 }, usage: { flushSeconds: 0, retentionDays: 1.5 }, audit: { retentionDays: 0, days: 3 },
    })).toEqual([
      'keys.maxLifetimeDays: Too small: expected number to be >0',
      'keys.expiryWarningDays: Too small: expected number to be >=0',
      'usage.flushSeconds: Too small: expected number to be >0',
      'usage.retentionDays: Invalid input: expected int, received number',
      'audit.retentionDays: Too small: expected number to be >0',
      'audit: Unrecognized key: "days"',
    ])
  })

  it('are described in the reference the operator reads, each one needing a restart to change', () => {
    const rows = configReference().split('\n').filter((line) => /^\| `(keys|usage|audit)[`.]/.test(line))
    expect(rows).toEqual([
      "| `keys` | object | `{}` | The policy on API keys' lifetimes |",
      "| `keys.maxLifetimeDays` | integer | none | When set, `create` and `update` refuse an API key without an expiry, or one more than this many days ahead; none: any expiry, or none |",
      "| `keys.expiryWarningDays` | integer | `14` | Answers to a credential that expires within this many days carry `Service-Credential-Expires`; 0: never |",
      "| `usage` | object | `{}` | Requests counted per credential, UTC day, route and status class; and when each credential was last used |",
      "| `usage.flushSeconds` | integer | `10` | How often each instance writes the requests it counted per credential to Redis (one pipeline), and at graceful shutdown; a crash loses at most this much of one instance's counts |",
      "| `usage.retentionDays` | integer | `90` | How long the counts per credential and UTC day are kept in Redis |",
      "| `audit` | object | `{}` | The audit trail of changes to credentials |",
      "| `audit.retentionDays` | integer | `400` | How long each change to a credential is kept in the audit trail in Redis |",
    ])
    const reload = reloadReference().split('\n').filter((line) => /^\| `(keys|usage|audit)`/.test(line))
    expect(reload).toEqual([
      "| `keys` | restart | the credentials service behind the admin API is made with it at start |",
      "| `usage` | restart | the usage recorder and its flush timer are made at start |",
      "| `audit` | restart | the audit trail's retention is set when it is made at start |",
    ])
  })
})
