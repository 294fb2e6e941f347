import { createHash, randomUUID } from 'node:crypto'
import rateLimit from '@fastify/rate-limit'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import { readRoutes } from './reference-routes.js'

// The peer: the same job built the obvious way, as a team would in a week. Fastify with its
// logger on (one JSON line per request, as the gateway writes), @fastify/rate-limit counting
// each key's requests in Redis, a key check in an onRequest hook with an lru-cache in front of
// Redis (a key's record kept a minute), and each answer's data from an lru-cache, wrapped in
// the same envelope as the gateway's: `{ data, meta: { requestId, timestamp } }`, both made
// per answer. It checks far less than the gateway (no scopes, no parameter checks, no usage,
// no brand, a key record stale for a minute): what the gateway is measured against is what
// that much less costs.
//
// Started by bench/run.ts with the reference routes on stdin (reference-routes.ts): each
// route's body that is a success envelope fills the answer cache, keyed by path. In the
// environment: PEER_PORT, PEER_REDIS_URL, PEER_PREFIX (its keys, `<prefix>peer:key:<sha-256 of
// the key>` holding the key's record as JSON, written by bench/run.ts). Its stdout carries its
// log lines only, so bench/run.ts hands it the port and waits for it to answer.

const redisUrl = process.env.PEER_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = process.env.PEER_PREFIX ?? 'peer:'
const redis = new Redis(redisUrl)

interface KeyRecord { brand: string; rateLimit: number }

const answers = new LRUCache<string, object>({ max: 10_000 })
for (const [route, { status, body }] of await readRoutes()) {
  if (status !== 200) continue
  const parsed = JSON.parse(body) as { data?: object }
  if (parsed.data !== undefined) answers.set(route.slice(route.lastIndexOf(' ') + 1), parsed.data)
}

const keys = new LRUCache<string, KeyRecord>({ max: 10_000, ttl: 60_000 })

async function keyRecord(authorization: string | undefined): Promise<{ hash: string; record: KeyRecord } | undefined> {
  if (authorization?.startsWith('Bearer ') !== true) return undefined
  const hash = createHash('sha256').update(authorization.slice(7)).digest('hex')
  let record = keys.get(hash)
  if (record === undefined) {
    const stored = await redis.get(`${prefix}peer:key:${hash}`)
    if (stored === null) return undefined
    record = JSON.parse(stored) as KeyRecord
    keys.set(hash, record)
  }
  return { hash, record }
}

declare module 'fastify' {
  interface FastifyRequest { peerKey?: { hash: string; record: KeyRecord } }
}

const app = Fastify({ logger: true, keepAliveTimeout: 72_000, genReqId: () => `req_${randomUUID().replaceAll('-', '')}` })
app.addHook('onRequest', async (request, reply) => {
  const key = await keyRecord(request.headers.authorization)
  if (key === undefined) {
    await reply.code(401).type('application/problem+json').send({ type: 'about:blank', title: 'Unauthorized', status: 401 })
    return
  }
  request.peerKey = key
})
await app.register(rateLimit, {
  redis,
  nameSpace: `${prefix}peer:rate:`,
  timeWindow: 60_000,
  max: (request) => request.peerKey?.record.rateLimit ?? 1,
  keyGenerator: (request) => request.peerKey?.hash ?? request.ip,
})
app.get('/v1/properties/:id', async (request, reply) => {
  const data = answers.get(request.url)
  if (data === undefined) return reply.code(404).send({ type: 'about:blank', title: 'Not Found', status: 404 })
  return { data, meta: { requestId: request.id, timestamp: new Date().toISOString() } }
})
await app.listen({ port: Number(process.env.PEER_PORT ?? 0), host: '127.0.0.1' })
