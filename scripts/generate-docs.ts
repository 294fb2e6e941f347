import { readFileSync, writeFileSync } from 'node:fs'
import { loadConfig } from '../src/config.js'
import { CONFIG_REFERENCE_FILE, errorReference, withConfigReference } from '../src/docs/reference.js'
import { buildSite } from '../src/docs/site.js'

// `npm run docs`: regenerates the configuration reference in docs/operations.md and
// docs/errors.md, and builds the partner documentation site in site/ (or SITE_DIR) from the
// code and the config file in use (CONFIG_FILE): its declared routes are in the OpenAPI
// document.
writeFileSync(CONFIG_REFERENCE_FILE, withConfigReference(readFileSync(CONFIG_REFERENCE_FILE, 'utf8')))
writeFileSync('docs/errors.md', errorReference())
console.log(`wrote ${CONFIG_REFERENCE_FILE} (configuration reference) and docs/errors.md`)

const config = loadConfig(process.env)
const dir = process.env.SITE_DIR ?? 'site'
const files = await buildSite(dir, config)
console.log(`wrote ${files.length} files to ${dir}/ from ${config.configFile}: openapi.json, index.html (the API reference) and errors/`)
