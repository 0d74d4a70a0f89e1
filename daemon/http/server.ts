import Fastify, { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import { TendError } from '../../protocol/index.js'
import type { Logger } from 'pino'
import { peerCheckedServerFactory, peerOf, type PeerCheck } from '../peer/index.js'
import { ownerHeader, registerAuditLog, type Caller } from './audit.js'
import { lazySerializerFactory, lazyValidatorCompiler } from './lazy-compilers.js'
import { validatorCompiler } from './request-validation.js'
import type { TendApp } from './tend-app.js'

/**
 * Builds the HTTP API on the daemon's Unix socket (`/v1/...`): every route defined by its schema,
 * one error shape. `registerRoutes` declares them (daemon/http/api.ts): the API, and the routes
 * that only the socket serves (the console's control).
 */
export async function createServer(log: Logger, peerCheck: PeerCheck, registerRoutes: (app: TendApp) => void): Promise<TendApp> {
  // Refuses callers inside a sandbox (any daemon's) once per connection, before routing.
  const app = buildApp(log, { serverFactory: peerCheckedServerFactory(peerCheck, log), callerOf: socketCaller })
  registerRoutes(app)
  await app.ready()
  return app
}

/**
 * A fastify app with tend's compilers, error shape and router errors, and no routes yet: the
 * socket's (above) or the console's TCP listener's (daemon/console/).
 */
export function buildApp(
  log: Logger,
  {
    callerOf,
    ...options
  }: Pick<FastifyServerOptions, 'serverFactory' | 'logController'> & { https?: { cert: Buffer; key: Buffer }; callerOf: (request: FastifyRequest) => Caller },
): TendApp {
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    ...options,
    forceCloseConnections: true,
    // Both compilers are tend's: fastify then never loads ajv or fast-json-stringify (daemon/precompiled/).
    schemaController: { compilersFactory: { buildValidator: validatorFactory, buildSerializer: lazySerializerFactory } },
    bodyLimit: 1024 * 1024,
    // The router rejects an undecodable or over-long path segment before any handler runs; without
    // this, those answers bypass the error catalogue (FST_ERR_BAD_URL, a 414 FST_ERR_MAX_PARAM_LENGTH).
    frameworkErrors: (error, request, reply) => {
      const tendError = routerError(error, request.raw.url ?? '')
      void (reply as FastifyReply).status(tendError.statusCode).send(tendError.toWire())
    },
  })

  app.setErrorHandler((error, request, reply) => {
    const tendError = toTendError(error)
    // An answer that says when to try again is the daemon working as meant, not failing: not logged.
    if (tendError.statusCode >= 500 && tendError.retryAfterSeconds === undefined) request.log.error({ err: error }, 'request failed')
    if (tendError.retryAfterSeconds !== undefined) void reply.header('retry-after', String(tendError.retryAfterSeconds))
    void reply.status(tendError.statusCode).send(tendError.toWire())
  })
  app.setNotFoundHandler((request, reply) => {
    const error = new TendError('TEND_ERR_ROUTE_NOT_FOUND', { method: request.method, url: request.url })
    void reply.status(404).send(error.toWire())
  })
  registerAuditLog(app as unknown as TendApp, log, callerOf)
  return app as unknown as TendApp
}

/** Who made a request on the socket: the peer's uid and pid as the kernel gave them at connect (SO_PEERCRED). */
function socketCaller(request: FastifyRequest): Caller {
  const peer = peerOf(request.raw.socket)
  return { via: 'socket', uid: peer?.uid ?? null, pid: peer && peer.pid > 0 ? peer.pid : null, owner: ownerHeader(request) }
}

/**
 * fastify's validator factory, answering tend's compiler for every route (the same as
 * setValidatorCompiler, which would still have fastify load its default ajv compiler). fastify's
 * types model this factory on ajv's own compile signature, hence the cast.
 */
const validatorFactory = (() => lazyValidatorCompiler(validatorCompiler)) as unknown as NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildValidator']
>

/** The only path parameter is a task id, so a rejected segment under /v1/tasks/ is a bad id. */
function routerError(error: { message?: string }, url: string): TendError {
  const segment = /^\/v1\/tasks\/([^/?#]*)/.exec(url)?.[1]
  if (segment === undefined) return new TendError('TEND_ERR_VALIDATION', { detail: `url: ${error.message ?? 'rejected by the router'}` })
  return new TendError('TEND_ERR_INVALID_TASK_ID', { id: segment.length > 40 ? `${segment.slice(0, 40)}... (${segment.length} characters)` : segment })
}

function toTendError(error: unknown): TendError {
  if (error instanceof TendError) return error
  const fastifyError = error as { code?: string; statusCode?: number; message?: string; validation?: unknown }
  if (fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || fastifyError.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return new TendError('TEND_ERR_VALIDATION', { detail: `body: ${fastifyError.message}` })
  }
  if (fastifyError.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new TendError('TEND_ERR_VALIDATION', { detail: fastifyError.message ?? 'body rejected' })
  }
  if (fastifyError.statusCode !== undefined && fastifyError.statusCode < 500) {
    return new TendError('TEND_ERR_VALIDATION', { detail: fastifyError.message ?? 'request rejected' })
  }
  return new TendError('TEND_ERR_INTERNAL', { detail: fastifyError.message ?? String(error) }, { cause: error })
}
