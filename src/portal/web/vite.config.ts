import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'

// The portal's front end, built at `npm run build` into dist/portal-web and served by the
// gateway under /portal (src/portal/pages.ts). No inline script or style: the portal's
// Content-Security-Policy allows only its own files (docs/security.md, "The partner portal").
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/portal/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../../../dist/portal-web', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
  },
})
