// Mutation testing (`npm run mutation`): StrykerJS changes one operator, literal or branch of
// the code at a time and runs the tests that cover it; a change no test notices is a rule the
// suite does not defend. The run takes hours on two cores, so it is not part of .ci/run; it is
// incremental instead: the last report, docs/mutation/mutation.json, is committed, and a rerun
// tests only the mutants whose code or covering tests changed since. `npm run mutation` runs it
// through scripts/mutation.ts, which lets a run cover some modules only (`npm run mutation --
// src/keys`) without losing the others' results, and writes docs/mutation/README.md from the
// report.
//
// Stryker 9 is the line that runs on Node 20; 10 needs Node 22.

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.config.ts', related: true },
  // Each mutant runs only the tests that reached it in the dry run.
  coverageAnalysis: 'perTest',

  // The modules that hold the contract's rules. A pattern that matches nothing (a module not
  // written yet) is skipped with a warning, not an error.
  mutate: [
    'src/pipeline/**/*.ts',
    'src/contract/**/*.ts',
    'src/keys/**/*.ts',
    'src/proxy/**/*.ts',
    'src/properties/**/*.ts',
    'src/ratelimit/**/*.ts',
    'src/oauth/**/*.ts',
    'src/idempotency/**/*.ts',
    // The partner client's rules: what it retries and waits, its keys and tokens, webhook
    // checks (sdk/README.md). Its generated types (sdk/src/openapi.ts) hold no code to mutate.
    'sdk/src/**/*.ts',
    // Credentials over their life: the service behind the key tool and the credentials API,
    // usage counting, the audit trail, the admin API's validation, GET /v1/credential.
    'src/credentials/**/*.ts',
    // Events: the ingest's rules, the mapping of internal to public types, the log and its
    // visibility rules, /v1/events.
    'src/events/**/*.ts',
    // Webhooks: the address guard, the signatures, the endpoints API's validation, the delivery rules.
    'src/webhooks/**/*.ts',
    // The partner portal: a link's rules, the sessions and their ending, the cookie and the
    // CSRF token, the portal's step 4 and which partner routes it serves.
    'src/portal/**/*.ts',
    // The portal's page runs in a browser, built by Vite: the browser suite (test/browser) checks it.
    '!src/portal/web/**',
    // A route's life: the phases and headers of a deprecation, the notice a sunset gives, where
    // a moved path leads, and the config's rules over them.
    'src/lifecycle/**/*.ts',
    // The request log: what an entry keeps of a request, the filters and the index line a page
    // is matched by, the writer's batches and drops, the store's scripts, the CSV export's cells.
    'src/request-log/**/*.ts',
    // Its routes: each handler parses the query (the policy's step 6, then filters.ts) and
    // calls the store, whose rules are tested there without a gateway; what is left, the
    // answers' envelopes, the CSV stream and the admin port's look-up, is tested over sockets
    // (test/request-log/request-log.test.ts, admin.test.ts), as every route registration is.
    '!src/request-log/routes.ts',
    '!src/request-log/admin-routes.ts',
    // The request log line and the request metrics: an operator's surface, not a rule a partner
    // sees, pinned by the observability tests by field name; its mutants are mostly in the
    // serialiser's schema and pino's plumbing, where a change alters no answer.
    '!src/pipeline/log.ts',
    // The key tool's entry point and the tool itself: operators' wording, tested as operators
    // run it, from dist/ in a child process, where no mutant is switched on, so every mutant
    // would be reported as surviving whatever the tests check.
    '!src/keys/cli.ts',
    '!src/credentials/tool.ts',
    // The admin port's OpenAPI document: wording and structure, checked whole by a validator and
    // by every answer of the credentials API's tests; no rule of its own.
    '!src/credentials/admin-openapi.ts',
    // The two routes of /v1/events: a policy and two calls of the log, whose rules (what a
    // credential sees, the page) are in log.ts and types.ts and tested there without a gateway.
    '!src/events/routes.ts',
    // The webhook tool's entry point: three lines that hand the process's arguments to the tool
    // (src/webhooks/tool.ts, whose rules are tested in-process) and set its exit code.
    '!src/webhooks/cli.ts',
    // The webhook endpoints API's routes: each handler one call of WebhookEndpoints (service.ts),
    // whose rules are tested there without a gateway. What is left, the replay of a POST's kept
    // answer under its Idempotency-Key (src/idempotency holds its rules), is tested over sockets
    // (test/webhooks/endpoints.test.ts, secrets.test.ts), as every route registration is.
    '!src/webhooks/routes.ts',
  ],
  // Code that runs once, when a module loads (the error catalog, the route tables), can only be
  // tested by rerunning the whole suite for each of its mutants: minutes per mutant, days in
  // all. Such mutants are reported as ignored; the catalog is pinned instead by a test that
  // compares it with a literal copy of the table of errors.
  // Stryker counts as static all code run outside a test, a file-level `beforeAll` included: a
  // mutant in code that builds a gateway there is ignored, or, when some test also builds one,
  // run against that test alone. Tests of rules set when a gateway is built (a route's stages,
  // its limits) therefore build their gateway inside the test (test/mutation-kills/); a run of
  // one file can also pass `--ignoreStatic false` to test such mutants against every test of
  // its list.
  ignoreStatic: true,

  // The machine is two shared cores: one test process at a time. A mutant that makes a request
  // hang (a pipeline step that never calls back) is stopped after the time its tests took in
  // the dry run, doubled, plus ten seconds; an infinite loop is stopped sooner by Stryker's
  // hit counter.
  concurrency: 1,
  timeoutMS: 10_000,
  timeoutFactor: 2,

  incremental: true,
  incrementalFile: 'docs/mutation/mutation.json',
  reporters: ['clear-text', 'progress-append-only', 'html'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  thresholds: { high: 90, low: 80, break: null },
  tempDirName: '.stryker-tmp',
  // dist/ is rebuilt in the sandbox by the tests' global setup (tsc over the instrumented
  // sources, which carry `// @ts-nocheck`), so copying the built tree would only cost time; a
  // run over a module's unit tests, which read nothing from dist/, skips that build
  // (scripts/mutation.ts).
  ignorePatterns: ['dist', 'coverage', 'reports', 'site', '*.cpuprofile'],
  cleanTempDir: 'always',
}
