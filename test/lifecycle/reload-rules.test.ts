import { describe, expect, it } from 'vitest'
import { fileSchema, reloadRules } from '../../src/config.js'
import { composeRules, settingsOf } from '../../src/config/reload-rules.js'
import { restartOnlyChanges } from '../../src/lifecycle/reload.js'
import { testConfig } from '../helpers/config.js'

// What a reload may change (src/config/reload-rules.ts): each capability's rules composed at
// the top, covering every setting of the file once, and the refusals they make.

describe('the reload rules', () => {
  it('name every setting of the file once, reloadable or restart-only', () => {
    const config = testConfig() as unknown as Record<string, unknown>
    const settings = Object.keys(settingsOf(config, Object.keys(fileSchema.shape), reloadRules)).sort()
    const named = [...Object.keys(reloadRules.reloadable), ...Object.keys(reloadRules.restartOnly)].sort()
    expect(named).toEqual(settings)
    for (const [setting, text] of [...Object.entries(reloadRules.reloadable), ...Object.entries(reloadRules.restartOnly)]) expect(text.length, setting).toBeGreaterThan(10)
  })

  it('refuse a setting named twice', () => {
    expect(() => composeRules({ reloadable: { brands: 'the next request' }, restartOnly: {} }, { reloadable: {}, restartOnly: { brands: 'at start' } }))
      .toThrow('reload rules: brands is named twice')
  })

  it('let a reload change what a capability follows, and name each restart-only change', () => {
    const current = testConfig()
    const brands = [...current.brands, { id: 'initech', chainCode: 'INIT', hosts: ['api.initech-inns.example'] }]
    expect(restartOnlyChanges(current, { ...current, brands, events: { ...current.events, maxEndpointsPerCredential: 3 } })).toEqual([])
    expect(restartOnlyChanges(current, {
      ...current, docsUrl: 'https://elsewhere.example', events: { ...current.events, retrySchedule: [1], types: [] }, oauth: { ...current.oauth, jwksTimeoutMs: 1 },
    })).toEqual(['docsUrl', 'oauth.jwksTimeoutMs', 'events.retrySchedule'])
  })
})
