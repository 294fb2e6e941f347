import { readFileSync, writeFileSync } from 'node:fs'
import { loadConfig } from '../src/config.js'
import { errorReference, withConfigReference } from '../src/docs/reference.js'
import { buildSite } from '../src/docs/site.js'

// `npm run docs`: regenerates the README's configuration reference and docs/errors.md, and
// builds the partner documentation site in site/ (or SITE_DIR) from the code and the config
// file in use (CONFIG_FILE): its declared routes are in the OpenAPI document.
writeFileSync('README.md', withConfigReference(readFileSync('README.md', 'utf8')))
writeFileSync('docs/errors.md', errorReference())
console.log('wrote README.md (configuration reference) and docs/errors.md')

const config = loadConfig(process.env)
const dir = process.env.SITE_DIR ?? 'site'
const files = await buildSite(dir, config)
console.log(`wrote ${files.length} files to ${dir}/ from ${config.configFile}: openapi.json, index.html (the API reference) and errors/`)
