import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Tests share one Redis server and bind real sockets; files run in parallel workers,
    // each isolated by its own key prefix.
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
})
