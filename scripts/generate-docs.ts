import { readFileSync, writeFileSync } from 'node:fs'
import { errorReference, withConfigReference } from '../src/docs/reference.js'

// `npm run docs`: regenerates the README's configuration reference and docs/errors.md.
writeFileSync('README.md', withConfigReference(readFileSync('README.md', 'utf8')))
writeFileSync('docs/errors.md', errorReference())
console.log('wrote README.md (configuration reference) and docs/errors.md')
