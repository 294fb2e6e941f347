import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { messagesOf, reservationsOf, type Guest } from '../../mocks/service/data.js'
import { startWithService, type Setup } from '../helpers/declared.js'
import { TestGateway, type Answer } from '../helpers/gateway.js'
import { expectProblem, REQUEST_ID, TIMESTAMP } from '../helpers/problem.js'

// Steps 2 and 6 of the order of checks (docs/architecture.md, "Order of checks"; docs/partners.md,
// "Parameters and pagination"), as a partner sees them: which Accept values admit
// application/json (media ranges, wildcards, q-values, the whitespace around their parts) and
// the exact 406 that refuses the others; the query rules of a route (strings, enums, lists,
// booleans), the unknown names and the suggestions for them, and every path parameter of a
// route checked, each refusal as its whole problem+json, and what the service receives when the
// request passes.
//
// Each test builds its own gateway: a route's parameter check is composed from its policy while
// the gateway is built, and mutation testing counts code run in a file-level beforeAll as
// static, testing its changes against no test that could notice them (stryker.config.mjs,
// ignoreStatic). Over real sockets, with real Redis and the stand-in services.


/** Routes of the test's own besides the shipped ones, each with rules the shipped ones lack. */
const EXTRA_ROUTES = [
  {
    path: '/v1/guest-search', methods: ['GET'], scope: 'brand', upstream: 'bookings', upstreamPath: '/partner/v1/guests',
    query: {
      code: { type: 'string', maxLength: 5 },
      tier: { type: 'enum', values: ['gold', 'silver'] },
      vip: { type: 'boolean' },
    },
  },
  {
    path: '/v1/guests/{guestId}/visits/{visitId}', methods: ['GET'], scope: 'brand', upstream: 'bookings',
    upstreamPath: '/partner/v1/guests/{guestId}', pathParams: { guestId: { type: 'uuid' }, visitId: { type: 'string' } },
  },
]

const SHIPPED_GUEST_PARAMETERS = "Unknown parameter; this endpoint accepts 'page', 'perPage', 'email'."

/** The stand-in bookings service and a gateway with the shipped routes and the test's own in front of it. */
function start(): Promise<Setup> {
  return startWithService({ routes: EXTRA_ROUTES })
}

function get(s: Setup, path: string): Promise<Answer> {
  return s.t.call('GET', path, { key: s.key, userAgent: 'params-kills/1.0' })
}

/** The paths (with their queries) the service was called on. */
function receivedPaths(s: Setup): string[] {
  return s.service.received.map((r) => r.path)
}

/** Asserts the service's success passed on whole: status, type and body. */
function expectPassed(res: Answer, data: unknown, pagination?: { page: number; perPage: number; total: number }): void {
  expect({ status: res.statusCode, type: res.headers['content-type'] }).toEqual({ status: 200, type: 'application/json; charset=utf-8' })
  expect(JSON.parse(res.body)).toEqual({
    data,
    meta: { requestId: expect.stringMatching(REQUEST_ID), timestamp: expect.stringMatching(TIMESTAMP), ...(pagination === undefined ? {} : { pagination }) },
  })
}

/** The first page of the acme guests as the stand-in service lists them. */
function firstPage(s: Setup): { data: Guest[]; pagination: { page: number; perPage: number; total: number } } {
  const all = s.service.guestsOf('acme')
  return { data: all.slice(0, 20), pagination: { page: 1, perPage: 20, total: all.length } }
}

describe('content negotiation (docs/architecture.md, "Order of checks", step 2)', () => {
  // The gateway remembers its verdict on each Accept value for the life of the process (a memo
  // shared by every gateway in it). Each value sent here ends with a part of its own that is no
  // media range, so that the rules decide each answer, not a verdict remembered from a request
  // an earlier test made.
  function unseen(accept: string): string {
    return `${accept}, unseen-${randomUUID()}`
  }

  async function expectAdmitted(t: TestGateway, accept: string): Promise<void> {
    const res = await t.call('GET', '/v1/health', { headers: { accept: unseen(accept) } })
    expect({ accept, status: res.statusCode, type: res.headers['content-type'], body: res.body })
      .toEqual({ accept, status: 200, type: 'application/json; charset=utf-8', body: '{"status":"ok"}' })
  }

  async function expectRefused(t: TestGateway, accept: string): Promise<void> {
    const sent = unseen(accept)
    expectProblem(await t.call('GET', '/v1/health', { headers: { accept: sent } }), {
      code: 'NOT_ACCEPTABLE', instance: '/v1/health', status: 406,
      detail: `This API produces application/json only; the Accept header '${sent}' does not admit it.`,
    })
  }

  it('reads a media range with spaces around its subtype, its parameter names and its q-value', async () => {
    const t = await TestGateway.start()
    try {
      await expectAdmitted(t, 'application/json , text/html')
      await expectAdmitted(t, 'application/json;q=0.5 , text/html')
      await expectAdmitted(t, 'application/json; q=0.5')
      await expectRefused(t, 'application/json; q=0, text/html')
      await expectRefused(t, 'application/json ; Q=0 , text/html')
    } finally {
      await t.close()
    }
  })

  it('ignores a parameter without a value, and a range whose q-value is not 0 to 1 with at most three decimals', async () => {
    const t = await TestGateway.start()
    try {
      await expectAdmitted(t, 'application/json;qs')
      await expectAdmitted(t, 'application/json;q=abc, */*;q=0.1')
      await expectRefused(t, 'application/json;q=0.0001')
      await expectRefused(t, 'application/json;q=2')
      await expectRefused(t, 'application/json;q=1.5, text/html')
    } finally {
      await t.close()
    }
  })

  it('ignores a wildcard type with a named subtype and a part that is no type/subtype', async () => {
    const t = await TestGateway.start()
    try {
      await expectRefused(t, '*/json')
      await expectRefused(t, 'text/html, */json;q=1')
      await expectRefused(t, 'text/html, * ;q=0.5')
      await expectRefused(t, 'text/html, application')
      await expectAdmitted(t, '*/*')
    } finally {
      await t.close()
    }
  })

  it('answers 406 to media ranges of other types only, a json subtype of another type included', async () => {
    const t = await TestGateway.start()
    try {
      await expectRefused(t, 'text/html')
      await expectRefused(t, 'text/json')
      await expectRefused(t, 'text/plain, image/*')
      await expectRefused(t, 'application/xml;q=1, text/*')
    } finally {
      await t.close()
    }
  })

  it('takes the highest q-value of equally specific ranges, and lets the most specific decide', async () => {
    const t = await TestGateway.start()
    try {
      await expectAdmitted(t, 'application/json;q=0, application/json;q=0.5')
      await expectAdmitted(t, 'application/json;q=0.5, application/json;q=0')
      await expectAdmitted(t, 'application/*;q=0, application/*;q=0.2')
      await expectAdmitted(t, '*/*;q=0, */*;q=0.3')
      await expectRefused(t, 'application/json;q=0, application/*;q=1, */*;q=1')
      await expectRefused(t, 'application/*;q=0, */*;q=1')
    } finally {
      await t.close()
    }
  })
})

describe('unknown query parameters (docs/partners.md, "Parameters and pagination")', () => {
  it("suggests a known name for each unknown one that differs from it only in letter case, '-' or '_', and gives every suggestion in the detail", async () => {
    const s = await start()
    try {
      // 'emaıl' has a dotless i: another letter, not another case of 'i'.
      expectProblem(await get(s, '/v1/guests?per_page=5&EMAIL=a&ema%C4%B1l=b'), {
        code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/guests', status: 400,
        detail: "Unknown query parameters 'per_page', 'EMAIL', 'emaıl'. 'per_page': Did you mean 'perPage'? 'EMAIL': Did you mean 'email'?",
        errors: [
          { field: 'per_page', code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'perPage'?" },
          { field: 'EMAIL', code: 'UNKNOWN_PARAMETER', detail: "Did you mean 'email'?" },
          { field: 'emaıl', code: 'UNKNOWN_PARAMETER', detail: SHIPPED_GUEST_PARAMETERS },
        ],
      })
      expect(receivedPaths(s)).toEqual([])
    } finally {
      await s.close()
    }
  })

  it('names at most 20 unknown parameters, and suggests a name only for those it names', async () => {
    const s = await start()
    try {
      const letters = 'bcdefghijklmnopqrstu'.split('')
      const res = await get(s, `/v1/guests?${letters.map((l) => `${l}=1`).join('&')}&PAGE=2`)
      expectProblem(res, {
        code: 'UNKNOWN_QUERY_PARAMETER', instance: '/v1/guests', status: 400,
        detail: `Unknown query parameters ${letters.map((l) => `'${l}'`).join(', ')} and 1 more. 1 more field error is not listed.`,
        errors: letters.map((l) => ({ field: l, code: 'UNKNOWN_PARAMETER', detail: SHIPPED_GUEST_PARAMETERS })),
      })
      expect(receivedPaths(s)).toEqual([])
    } finally {
      await s.close()
    }
  })
})

describe('query parameter values by the route\'s rules (docs/partners.md, "Parameters and pagination")', () => {
  it('takes a string of 1 to maxLength characters and refuses an empty or a longer one', async () => {
    const s = await start()
    try {
      const page = firstPage(s)
      expectPassed(await get(s, '/v1/guest-search?code=abcde'), page.data, page.pagination)
      for (const value of ['', 'abcdef']) {
        expectProblem(await get(s, `/v1/guest-search?code=${value}`), {
          code: 'INVALID_QUERY_PARAMETER', instance: '/v1/guest-search', status: 400, detail: "Invalid query parameter 'code'.",
          errors: [{ field: 'code', code: 'INVALID_FORMAT', detail: 'Must be 1 to 5 characters.' }],
        })
      }
      expect(receivedPaths(s)).toEqual(['/partner/v1/guests?code=abcde'])
    } finally {
      await s.close()
    }
  })

  it('takes one of an enum\'s values, and refuses another value or a list of them', async () => {
    const s = await start()
    try {
      const page = firstPage(s)
      expectPassed(await get(s, '/v1/guest-search?tier=silver'), page.data, page.pagination)
      for (const value of ['bronze', 'gold,silver', 'Gold']) {
        expectProblem(await get(s, `/v1/guest-search?tier=${value}`), {
          code: 'INVALID_QUERY_PARAMETER', instance: '/v1/guest-search', status: 400, detail: "Invalid query parameter 'tier'.",
          errors: [{ field: 'tier', code: 'INVALID_ENUM_VALUE', detail: "Must be one of 'gold', 'silver'." }],
        })
      }
      expect(receivedPaths(s)).toEqual(['/partner/v1/guests?tier=silver'])
    } finally {
      await s.close()
    }
  })

  it('takes true or false and forwards it as given, and refuses any other spelling', async () => {
    const s = await start()
    try {
      const page = firstPage(s)
      expectPassed(await get(s, '/v1/guest-search?vip=true'), page.data, page.pagination)
      expectPassed(await get(s, '/v1/guest-search?vip=false'), page.data, page.pagination)
      for (const value of ['yes', 'TRUE', '', '1']) {
        expectProblem(await get(s, `/v1/guest-search?vip=${value}`), {
          code: 'INVALID_QUERY_PARAMETER', instance: '/v1/guest-search', status: 400, detail: "Invalid query parameter 'vip'.",
          errors: [{ field: 'vip', code: 'INVALID_FORMAT', detail: "Must be 'true' or 'false'." }],
        })
      }
      expect(receivedPaths(s)).toEqual(['/partner/v1/guests?vip=true', '/partner/v1/guests?vip=false'])
    } finally {
      await s.close()
    }
  })

  it('takes a comma-separated list of known values, each once, and refuses an empty item, a repeat or an unknown value', async () => {
    const s = await start()
    try {
      const guest = s.service.guestsOf('acme')[0] as Guest
      expectPassed(await get(s, `/v1/guests/${guest.id}?with=reservations,messages`),
        { ...guest, messages: messagesOf(guest), reservations: reservationsOf(guest, 'acme') })
      expectPassed(await get(s, `/v1/guests/${guest.id}?with=messages`), { ...guest, messages: messagesOf(guest) })
      const format = { field: 'with', code: 'INVALID_FORMAT', detail: "Give a comma-separated list of 'messages', 'reservations', each at most once." } as const
      for (const [value, error] of [
        ['', format],
        ['messages,', format],
        [',reservations', format],
        ['messages,,reservations', format],
        ['messages,messages', format],
        ['reservations,messages,reservations', format],
        ['messages,notes', { field: 'with', code: 'INVALID_ENUM_VALUE', detail: "'notes' is not one of 'messages', 'reservations'." }],
        ['Messages', { field: 'with', code: 'INVALID_ENUM_VALUE', detail: "'Messages' is not one of 'messages', 'reservations'." }],
      ] as const) {
        expectProblem(await get(s, `/v1/guests/${guest.id}?with=${value}`), {
          code: 'INVALID_QUERY_PARAMETER', instance: `/v1/guests/${guest.id}`, status: 400, detail: "Invalid query parameter 'with'.", errors: [error],
        })
      }
      expect(receivedPaths(s)).toEqual([`/partner/v1/guests/${guest.id}?with=reservations%2Cmessages`, `/partner/v1/guests/${guest.id}?with=messages`])
    } finally {
      await s.close()
    }
  })
})

describe('path parameters (docs/partners.md, "Parameters and pagination")', () => {
  it('checks every path parameter of a route, the second one too when the first is valid', async () => {
    const s = await start()
    try {
      const guest = s.service.guestsOf('acme')[0] as Guest
      expectPassed(await get(s, `/v1/guests/${guest.id}/visits/v-1.2_x~`), guest)
      for (const value of ['a:b', 'caf%C3%A9']) {
        expectProblem(await get(s, `/v1/guests/${guest.id}/visits/${value}`), {
          code: 'INVALID_PATH_PARAMETER', instance: `/v1/guests/${guest.id}/visits/${value}`, status: 400, detail: "'visitId' is not a valid identifier.",
          errors: [{ field: 'visitId', code: 'INVALID_FORMAT', detail: 'Must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ -.' }],
        })
      }
      expect(receivedPaths(s)).toEqual([`/partner/v1/guests/${guest.id}`])
    } finally {
      await s.close()
    }
  })
})
