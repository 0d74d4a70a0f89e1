import { randomBytes } from 'node:crypto'
import { requestChannel, TendError, type ClusterReply, type ClusterRequest } from '../../protocol/index.js'

/** A Redis connection that can publish and be copied into one that listens. */
export interface RequestRedis {
  publish(channel: string, message: string): Promise<number>
  duplicate(): { subscribe(channel: string): Promise<unknown>; on(event: string, listener: (...args: never[]) => void): unknown; disconnect(): void }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/** A change to ask of the worker that holds a task, without the fields askWorker fills in. */
export type WorkerRequest = DistributiveOmit<ClusterRequest, 'replyTo' | 'worker'>

/**
 * Asks the worker that holds a task to change something, through Redis (the token a worker
 * publishes only reads): the request goes on the cluster's request channel, addressed to that
 * worker, and its answer comes back on a reply channel of this client's own. Answers the result,
 * or throws the worker's error; TEND_ERR_CLUSTER_WORKER when no worker listens or it does not
 * answer within answerMs.
 */
export async function askWorker(redis: RequestRedis, base: string, worker: string, request: WorkerRequest, answerMs: number): Promise<unknown> {
  const replyTo = `tend:${base}:reply:${randomBytes(12).toString('hex')}`
  const listener = redis.duplicate()
  listener.on('error', () => undefined)
  let timer: NodeJS.Timeout | undefined
  try {
    const answered = new Promise<string>((resolve, reject) => {
      listener.on('message', (_channel: string, message: string) => resolve(message))
      timer = setTimeout(
        () => reject(new TendError('TEND_ERR_CLUSTER_WORKER', { worker, id: request.id, detail: `it did not answer within ${answerMs / 1000} s` })),
        answerMs,
      )
    })
    // Listening before asking: an answer published before the subscription would be lost.
    await listener.subscribe(replyTo)
    const heard = await redis.publish(requestChannel(base), JSON.stringify({ ...request, worker, replyTo } satisfies ClusterRequest))
    if (heard === 0) throw new TendError('TEND_ERR_CLUSTER_WORKER', { worker, id: request.id, detail: 'no worker listens on the cluster' })
    const reply = JSON.parse(await answered) as ClusterReply
    if (!reply.ok) throw TendError.fromWire(reply.error)
    return reply.result
  } finally {
    clearTimeout(timer)
    listener.disconnect()
  }
}
