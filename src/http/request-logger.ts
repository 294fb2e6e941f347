import type { FastifyBaseLogger } from 'fastify'
import type { IncomingMessage } from 'node:http'
import type { Bindings, ChildLoggerOptions } from 'pino'
import { traceOf } from './request-context.js'

// A request's logger, made on first use. Most requests log nothing but their one line
// (written by pipeline/log.ts from the root logger with reqId and traceId as fields), so
// building a pino child for each, which serialises its bindings, was pure cost on the
// hot path. When something does log mid-request, the child is made then, with the same
// bindings, so every line of the request carries reqId and traceId.

export class LazyRequestLogger implements FastifyBaseLogger {
  private real: FastifyBaseLogger | undefined

  constructor(
    private readonly root: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
    private readonly raw: IncomingMessage,
  ) {}

  private get logger(): FastifyBaseLogger {
    this.real ??= this.root.child({ ...this.bindings, traceId: traceOf(this.raw).traceId }, this.options)
    return this.real
  }

  get level(): string {
    return this.root.level
  }

  set level(level: string) {
    this.logger.level = level
  }

  // Methods, not arrow-function fields: a field is a closure made anew for every request, seven of
  // them per request for levels that are almost never called.
  fatal(...args: Parameters<FastifyBaseLogger['fatal']>): void {
    this.logger.fatal(...args)
  }

  error(...args: Parameters<FastifyBaseLogger['error']>): void {
    this.logger.error(...args)
  }

  warn(...args: Parameters<FastifyBaseLogger['warn']>): void {
    this.logger.warn(...args)
  }

  info(...args: Parameters<FastifyBaseLogger['info']>): void {
    this.logger.info(...args)
  }

  debug(...args: Parameters<FastifyBaseLogger['debug']>): void {
    this.logger.debug(...args)
  }

  trace(...args: Parameters<FastifyBaseLogger['trace']>): void {
    this.logger.trace(...args)
  }

  silent(...args: Parameters<FastifyBaseLogger['silent']>): void {
    this.logger.silent(...args)
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options)
  }
}
