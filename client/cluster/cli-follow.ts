import { TendError, type ReadResult } from '../../protocol/index.js'
import type { ClusterClient, ClusterTask } from './cluster-client.js'
import { EXIT } from '../cli/exit-codes.js'
import type { CliIo } from '../cli/output.js'

/** How long one look at the queue waits for a change while the task's worker does not answer. */
const LOOK_MS = 1000

/** What the caller prints each read with. */
export type PrintChunk = (chunk: ReadResult) => Promise<void>

/**
 * Follows a cluster task's output to its end, across the loss of its worker: the output is read on
 * the worker that runs the task, and when that worker stops answering, the queue says what became
 * of the task. A retry on another worker is followed there, from its first byte (stderr names the
 * lost attempt and where the next runs); a worker that comes back is read again from where the
 * follow stopped; a task lost for good ends the follow with where it was lost, exit 125 (as
 * `wait` for a lost task). Waiting for a worker to take the task, or for the queue to judge a
 * worker that does not answer (within the stall interval), is part of following it.
 */
export async function followOnCluster(
  cluster: ClusterClient,
  io: CliIo,
  id: string,
  start: { from?: number; tail?: number },
  print: PrintChunk,
): Promise<number> {
  let where = await cluster.get(id)
  // A place in the output belongs to the attempt it was read on: another attempt is read from its first byte.
  const followed = { attempt: where.attempt, worker: where.worker, cursor: start }
  const readOn = async (now: ClusterTask) => {
    if (now.attempt !== followed.attempt) {
      const lost = now.earlier.find((each) => each.attempt === followed.attempt)
      io.err(
        `tend: attempt ${followed.attempt} was lost on worker ${lost?.worker ?? followed.worker ?? 'unknown'}${lost?.reason ? `: ${lost.reason}` : ''}` +
          `; following attempt ${now.attempt} on worker ${now.worker}`,
      )
      Object.assign(followed, { attempt: now.attempt, cursor: { from: 0 } })
    }
    followed.worker = now.worker
    const reading = await readFromWorker(cluster, now, followed.cursor, print)
    followed.cursor = reading.cursor
    return reading.done
  }
  for (;;) {
    if (hasEnded(where) && !where.worker) return ended(io, where)
    if (where.worker && (await readOn(where))) return EXIT.ok
    where = await nextChange(cluster, id)
    if (hasEnded(where)) {
      // Ended while its worker did not answer: what is left of its output is on that worker, read once more if it answers.
      if (where.task && where.worker && where.state !== 'lost' && (await readOn(where))) return EXIT.ok
      return ended(io, where)
    }
  }
}

/**
 * Reads the task's output from its worker until the task ends there (done), or the worker stops
 * answering (the cursor reached). A frozen worker answers nothing, not even an error: while it
 * reads, the queue is looked at each second, and the read is given up as soon as the queue has
 * the task elsewhere (another attempt, another worker, none) or lost.
 */
async function readFromWorker(
  cluster: ClusterClient,
  where: ClusterTask,
  start: { from?: number; tail?: number },
  print: PrintChunk,
): Promise<{ done: boolean; cursor: { from?: number; tail?: number } }> {
  const { id } = where
  let cursor = start
  let worker
  try {
    const found = await cluster.workerClient(id)
    worker = found.client
    // The lookup is a later look at the queue than `where`: the task moved on meanwhile (another
    // attempt, another worker). What it says now is read from the start of that attempt, not from here.
    if (found.cluster.attempt !== where.attempt || found.cluster.worker !== where.worker) {
      worker.close()
      return { done: false, cursor }
    }
  } catch (error) {
    if (workerAway(error)) return { done: false, cursor }
    throw error
  }
  const moved = new AbortController()
  const watching = watchQueue(cluster, where, moved)
  try {
    for await (const chunk of worker.follow(id, { ...cursor, encoding: 'base64', maxBytes: 4 * 1024 * 1024, signal: moved.signal })) {
      await print(chunk)
      cursor = { from: chunk.next }
    }
    return { done: true, cursor }
  } catch (error) {
    if (moved.signal.aborted || workerAway(error)) return { done: false, cursor }
    throw error
  } finally {
    watching.stop()
    worker.close()
  }
}

/** Aborts `moved` once the queue no longer has the task where `where` says it runs (it was lost, or is another attempt's). */
function watchQueue(cluster: ClusterClient, where: ClusterTask, moved: AbortController): { stop: () => void } {
  let stopped = false
  void (async () => {
    while (!stopped && !moved.signal.aborted) {
      const now = await cluster.wait(where.id, { timeoutMs: LOOK_MS }).catch(() => null)
      if (stopped) return
      // Ended where it ran: the read gets the rest and ends by itself.
      if (now && hasEnded(now) && now.state !== 'lost' && now.worker === where.worker && now.attempt === where.attempt) return
      if (now && (now.state === 'lost' || now.attempt !== where.attempt || now.worker !== where.worker)) moved.abort()
      // A queue that cannot be asked is asked again a second later.
      else if (!now) await new Promise((resolve) => setTimeout(resolve, LOOK_MS))
    }
  })()
  return { stop: () => (stopped = true) }
}

/** The task as the queue has it after a look of up to a second (at once when its job ends). */
async function nextChange(cluster: ClusterClient, id: string): Promise<ClusterTask> {
  // Unchanged after a look: its worker may be back (read again), or still to be judged (looked at again).
  return cluster.wait(id, { timeoutMs: LOOK_MS })
}

/** The end of a follow whose output cannot be read to the end on a worker: where the task is, said on stderr. */
function ended(io: CliIo, where: ClusterTask): number {
  if (where.state === 'lost') {
    io.err(`tend: task ${where.id} was lost on worker ${where.worker ?? 'unknown'} (attempt ${where.attempt})${where.reason ? `: ${where.reason}` : ''}`)
    return EXIT.waitFailed
  }
  // It never ran on a worker (refused, or killed before one took it): there is no output to read.
  if (!where.task || !where.worker) {
    io.err(`tend: task ${where.id} ${where.state}${where.reason ? `: ${where.reason}` : ''}`)
    return EXIT.ok
  }
  io.err(`tend: task ${where.id} ended (${where.state}) on worker ${where.worker}, which no longer answers: the rest of its output is on that machine`)
  return EXIT.unavailable
}

/** The worker cannot be reached (gone, frozen, not announced): the queue is asked what became of the task. */
function workerAway(error: unknown): boolean {
  return (
    error instanceof TendError &&
    (error.code === 'TEND_ERR_DAEMON_UNAVAILABLE' ||
      error.code === 'TEND_ERR_DAEMON_TIMEOUT' ||
      error.code === 'TEND_ERR_CLUSTER_WORKER' ||
      error.code === 'TEND_ERR_CLUSTER_QUEUED')
  )
}

function hasEnded(task: ClusterTask): boolean {
  return task.state !== 'queued' && task.state !== 'running'
}
