import type { FastifyReply, FastifyRequest } from 'fastify'
import { HEADER_CORRELATION_ID } from './headers.js'

export interface Pagination {
  page: number
  perPage: number
  total: number
}

export interface Meta {
  requestId: string
  timestamp: string
  pagination?: Pagination
}

/** Sends `{ data, meta }` (contract 2.2) with the success-only headers. */
export function sendData(request: FastifyRequest, reply: FastifyReply, data: unknown, pagination?: Pagination): FastifyReply {
  const meta: Meta = pagination === undefined
    ? { requestId: request.id, timestamp: new Date().toISOString() }
    : { requestId: request.id, timestamp: new Date().toISOString(), pagination }
  if (request.correlationId !== null) reply.header(HEADER_CORRELATION_ID, request.correlationId)
  return reply.send({ data, meta })
}
