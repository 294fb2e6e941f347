import { describe, expect, it } from 'vitest'
import { errorCatalog } from '../../src/contract/errors.js'
import { ERROR_TABLE } from '../helpers/catalog.js'

// The error catalog is the one place the code reads statuses and titles from; this pins it to
// the contract's table, written out by hand in test/helpers/catalog.ts. A status or title
// changed in the catalog fails here, whatever the generated docs say.

describe('the error catalog', () => {
  it('holds exactly the codes of the contract\'s table', () => {
    expect(Object.keys(errorCatalog).sort()).toEqual(Object.keys(ERROR_TABLE).sort())
  })

  it.each(Object.entries(ERROR_TABLE))('gives %s its status and title', (code, expected) => {
    const entry = (errorCatalog as Record<string, { status: number; title: string; tip: string } | undefined>)[code]
    expect({ status: entry?.status, title: entry?.title }).toEqual(expected)
  })

  it('gives every code a troubleshooting tip', () => {
    for (const [code, entry] of Object.entries(errorCatalog)) expect(entry.tip.trim().length, code).toBeGreaterThan(30)
  })
})
