import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { errorCatalog } from '../src/contract/errors.js'
import { CONFIG_REFERENCE_FILE, errorReference, withConfigReference } from '../src/docs/reference.js'

describe('generated references', () => {
  it('keeps the configuration reference of docs/operations.md equal to the config schema', () => {
    expect(CONFIG_REFERENCE_FILE).toBe('docs/operations.md')
    const document = readFileSync('docs/operations.md', 'utf8')
    expect(document, 'run `npm run docs`').toBe(withConfigReference(document))
  })

  it('keeps docs/errors.md equal to the error catalog', () => {
    expect(readFileSync('docs/errors.md', 'utf8'), 'run `npm run docs`').toBe(errorReference())
  })

  it('has a real tip for every code', () => {
    for (const [code, spec] of Object.entries(errorCatalog)) expect(spec.tip.length, code).toBeGreaterThan(30)
  })
})
