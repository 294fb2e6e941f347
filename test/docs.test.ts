import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { errorCatalog } from '../src/contract/errors.js'
import { errorReference, withConfigReference } from '../src/docs/reference.js'

describe('generated references', () => {
  it("keeps the README's configuration reference equal to the config schema", () => {
    const readme = readFileSync('README.md', 'utf8')
    expect(readme, 'run `npm run docs`').toBe(withConfigReference(readme))
  })

  it('keeps docs/errors.md equal to the error catalog', () => {
    expect(readFileSync('docs/errors.md', 'utf8'), 'run `npm run docs`').toBe(errorReference())
  })

  it('has a real tip for every code', () => {
    for (const [code, spec] of Object.entries(errorCatalog)) expect(spec.tip.length, code).toBeGreaterThan(30)
  })
})
