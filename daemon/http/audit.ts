import type { FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { OWNER_HEADER, OWNER_PATTERN } from '../../protocol/index.js'
import type { TendApp } from './tend-app.js'

/** The constant message of the line every request that changes something leaves in daemon.log. */
export const CHANGE_REQUESTED = 'change requested'

/**
 * Who made a request, as the kernel or the listener knows it, never as the request says: on the
 * socket the peer's uid and pid (SO_PEERCRED), on the console the id of the token it showed (a
 * prefix of its SHA-256, never the token), on the cluster the queue it came from. `owner` is the
 * label the request acted for (its header), which only narrows what it may touch.
 */
export type Caller =
  | { via: 'socket'; uid: number | null; pid: number | null; owner: string | null }
  | { via: 'console'; tokenId: string | null; scope: 'operator' | 'read' | null; address: string; owner: string | null }
  | { via: 'cluster'; queue: string; channel: 'jobs' | 'kills' | 'requests' }

const SAFE_METHODS = new Set(['GET', 'HEAD'])
const OWNER_REGEXP = new RegExp(OWNER_PATTERN)

/** What the listener learnt of a request before its route ran (the console's guard), and the task it started. */
const noted = new WeakMap<object, { caller?: Caller; taskId?: string; owner?: string }>()

export function noteCaller(request: FastifyRequest, caller: Caller): void {
  noted.set(request.raw, { ...noted.get(request.raw), caller })
}

/** Who the listener found had made the request (the console's guard notes it before routing), if it noted anyone. */
export function notedCaller(request: FastifyRequest): Caller | undefined {
  return noted.get(request.raw)?.caller
}

/** The task a request made (a start): its id is in no parameter, and its owner may be in the body only. */
export function noteStartedTask(request: FastifyRequest, task: { id: string; owner: string }): void {
  noted.set(request.raw, { ...noted.get(request.raw), taskId: task.id, owner: task.owner })
}

/** The owner header as sent, when it is one (a malformed one is refused by the route). */
export function ownerHeader(request: FastifyRequest): string | null {
  const header = request.headers[OWNER_HEADER]
  const owner = Array.isArray(header) ? header[0] : header
  return owner !== undefined && OWNER_REGEXP.test(owner) ? owner : null
}

/**
 * One line in daemon.log for every request that changes something (any method but GET and HEAD),
 * answered or refused, with who made it: a task nobody remembers starting can be traced to a uid
 * and pid, or to a token. `callerOf` says who, for what the listener did not note before. The
 * caller's `owner` is the one the request acted for: its header, else the owner it started a task for.
 */
export function registerAuditLog(app: TendApp, log: Logger, callerOf: (request: FastifyRequest) => Caller): void {
  app.addHook('onResponse', async (request, reply) => {
    if (SAFE_METHODS.has(request.method)) return
    const known = noted.get(request.raw)
    const params = request.params as { id?: unknown } | undefined
    const taskId = known?.taskId ?? (typeof params?.id === 'string' ? params.id : undefined)
    const caller = known?.caller ?? callerOf(request)
    if (caller.via !== 'cluster' && caller.owner === null && known?.owner !== undefined) caller.owner = known.owner
    log.info(
      { method: request.method, route: request.routeOptions.url ?? request.url.split('?', 1)[0], statusCode: reply.statusCode, taskId, caller },
      CHANGE_REQUESTED,
    )
  })
}

/** The same line for a change that came through the cluster's Redis (a job, a kill, a request). */
export function logClusterChange(
  log: Pick<Logger, 'info'>,
  fields: { queue: string; channel: 'jobs' | 'kills' | 'requests'; action: string; taskId: string; outcome: string },
): void {
  const { queue, channel, action, taskId, outcome } = fields
  log.info({ method: 'REDIS', route: action, outcome, taskId, caller: { via: 'cluster', queue, channel } satisfies Caller }, CHANGE_REQUESTED)
}
