import type { Logger } from 'pino'
import { INPUT_MAX_BYTES, TendError, type ClusterReply, type ClusterRequest } from '../../protocol/index.js'
import { unseal } from '../../protocol/sealed-env.js'
import type { WorkerDeps } from './worker-deps.js'
import { logClusterChange } from '../http/audit.js'

export interface ClusterRequestsOptions {
  daemon: Pick<WorkerDeps, 'log' | 'store' | 'cleanup' | 'input'>
  /** This worker's name: requests name the worker that holds their task. */
  worker: string
  queue: string
  /** The cluster key (null: none), for input that came sealed. */
  key: Buffer | null
  /** Publishes a reply on its channel. */
  reply: (channel: string, message: string) => Promise<unknown>
}

/**
 * Changes a cluster's clients ask of the worker that holds a task, through Redis: its stdin and its
 * removal. They come this way because the token a worker publishes only reads. The worker named
 * answers each, on the channel the request gives, with what its socket's route would answer (or
 * that route's error); the others ignore it. Whoever can publish on the cluster's Redis can ask
 * these, as they can kill and start tasks: Redis is the cluster's trust (docs/cluster.md).
 */
export function clusterRequests(options: ClusterRequestsOptions): { heard: (message: string) => void } {
  const { daemon, worker, queue } = options
  const log: Logger = daemon.log
  return {
    heard(message) {
      let request: ClusterRequest
      try {
        request = JSON.parse(message) as ClusterRequest
      } catch {
        return log.warn({ message: message.slice(0, 200) }, 'cluster request that is not JSON, ignored')
      }
      if (
        request?.worker !== worker ||
        typeof request.id !== 'string' ||
        typeof request.replyTo !== 'string' ||
        !request.replyTo.startsWith(`tend:${queue}:reply:`)
      )
        return
      void answer(options, request)
        .then((reply) => {
          logClusterChange(log, { queue, channel: 'requests', action: request.op, taskId: request.id, outcome: reply.ok ? 'done' : reply.error.code })
          return options.reply(request.replyTo, JSON.stringify(reply))
        })
        .catch((error: unknown) => log.warn({ err: error, taskId: request.id }, 'cluster request not answered'))
    },
  }
}

async function answer({ daemon, key }: ClusterRequestsOptions, request: ClusterRequest): Promise<ClusterReply> {
  try {
    // Not found here, as the socket's route would say.
    daemon.store.get(request.id)
    if (request.op === 'remove') return { ok: true, result: { removed: request.id, freedBytes: await daemon.cleanup.remove(request.id) } }
    if (request.op === 'input') return { ok: true, result: await daemon.input.send(request.id, inputBytes(request, key), request.eof === true) }
    throw new TendError('TEND_ERR_VALIDATION', { detail: `op: expected input or remove, got ${JSON.stringify((request as { op?: unknown }).op)}` })
  } catch (error) {
    const tendError = error instanceof TendError ? error : new TendError('TEND_ERR_INTERNAL', { detail: (error as Error).message }, { cause: error })
    return { ok: false, error: tendError.toWire() }
  }
}

function inputBytes(request: Extract<ClusterRequest, { op: 'input' }>, key: Buffer | null): Buffer {
  let bytes: Buffer
  if (request.sealed !== undefined) {
    if (key === null)
      throw new TendError('TEND_ERR_CLUSTER_KEY', {
        detail: 'this input came sealed with the cluster key, and this worker has none (clusterKeyFile, TEND_CLUSTER_KEY_FILE)',
      })
    bytes = unseal(request.sealed, key, `input:${request.id}`)
  } else bytes = Buffer.from(typeof request.data === 'string' ? request.data : '', 'base64')
  if (bytes.length > INPUT_MAX_BYTES)
    throw new TendError('TEND_ERR_VALIDATION', { detail: `input: at most ${INPUT_MAX_BYTES} bytes per input, got ${bytes.length}` })
  if (bytes.length === 0 && request.eof !== true) throw new TendError('TEND_ERR_VALIDATION', { detail: 'input: expected bytes or eof, got neither' })
  return bytes
}
