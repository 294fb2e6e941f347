// What the reference servers answer (reference-server.ts, fastify-reference.ts): bench/run.ts
// writes the routes to their stdin as JSON, { "<authorization> <path>": { status, headers,
// body } }, keyed by the Authorization header as well as the path, since one path answers
// differently to different keys (200, 403, 429).

export interface Route {
  status: number
  headers: Record<string, string>
  body: string
}

/** The routes bench/run.ts sent on stdin, once it closed it. */
export async function readRoutes(): Promise<Map<string, Route>> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return new Map(Object.entries(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, Route>))
}
