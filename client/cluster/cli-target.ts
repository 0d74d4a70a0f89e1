import { exitStatusOf, pollUntil, taskLabel, TendError } from '../../protocol/index.js'
import { describeTask, formatFields } from '../cli/describe-task.js'
import { EXIT } from '../cli/exit-codes.js'
import { formatTable, printJson, type CliIo } from '../cli/output.js'
import { printChunk, printerFor, printLogs, streamOutput, type LogsFlags, type ReadStart } from '../cli/print-output.js'
import { killAll, type KillAllOptions } from '../cli/kill-all.js'
import { killedLine, printKilled, printWaited } from '../cli/task-answers.js'
import type { KillOptions, RunRequest, TaskTarget } from '../cli/task-target.js'
import { followOnCluster } from './cli-follow.js'
import { ClusterClient } from './cluster-client.js'
import type { ClusterChoice } from './cluster-choice.js'
import type { ClusterTask } from './cluster-records.js'
import { unmetRequirementsWarning } from './cluster-workers.js'

/** How often `run --wait --cluster` looks whether a worker has taken the task. */
const CLUSTER_POLL_MS = 100

/**
 * The task verbs on a cluster's shared queue: where the queue knows a task and no worker has its
 * record (queued, refused, lost), that is what is printed; a task's output is read on the worker
 * that runs it, through its console's API.
 */
export class ClusterTarget implements TaskTarget {
  private readonly cluster: ClusterClient

  constructor(chosen: ClusterChoice) {
    this.cluster = new ClusterClient(chosen.redis, chosen.queue, { keyFile: chosen.keyFile })
  }

  /** A cluster task: its id (or, with --wait, its final record once a worker has run it). */
  async run(io: CliIo, request: RunRequest, wait: boolean | 'ready'): Promise<number> {
    if (wait === 'ready' || request.ready) throw readinessIsLocal()
    const { cluster } = this
    if (request.after) throw new TendError('TEND_ERR_USAGE', { detail: "--after: a cluster's tasks cannot wait for others (a task on the local daemon can)" })
    const submitted = await cluster.start(request)
    const warning = request.require ? unmetRequirementsWarning(request.require, await cluster.workerLabels()) : null
    if (warning !== null && !io.json) io.err(`tend: warning: ${warning}`)
    if (!wait) {
      if (io.json) printJson(io, warning === null ? submitted : { ...submitted, warnings: [warning] })
      else io.out(submitted.id)
      return EXIT.ok
    }
    if (!io.json) {
      // Its output, as it is written, from the worker that takes it.
      await pollUntil(async () => (await cluster.get(submitted.id)).worker !== null, Infinity, CLUSTER_POLL_MS)
      const { client: worker } = await cluster.workerClient(submitted.id)
      try {
        await streamOutput(worker, io, submitted.id, { from: 0 })
      } finally {
        worker.close()
      }
    }
    const finished = await cluster.wait(submitted.id)
    if (io.json) printJson(io, finished)
    else io.err(`tend: task ${finished.id} ${finished.state} on ${finished.worker ?? 'no worker'}${finished.reason ? `: ${finished.reason}` : ''}`)
    return finished.task ? (exitStatusOf(finished.task) ?? EXIT.waitFailed) : EXIT.waitFailed
  }

  /** A cluster task's output stays on its worker: read there. A follow goes on across the loss of that worker (cli-follow.ts). */
  async logs(io: CliIo, id: string, flags: LogsFlags): Promise<number> {
    if (flags.follow) {
      const printer = printerFor(flags.plain)
      const start: ReadStart = flags.tail !== undefined ? { tail: flags.tail } : { from: flags.from ?? 0 }
      return followOnCluster(this.cluster, io, id, start, (chunk) => printChunk(io, chunk, printer, false))
    }
    const { client: worker } = await this.cluster.workerClient(id)
    try {
      return await printLogs(worker, io, id, flags)
    } finally {
      worker.close()
    }
  }

  async show(io: CliIo, id: string): Promise<number> {
    let where = await this.cluster.get(id)
    let record = where.task
    // A running task's record is its worker's (asked over its API), else what its job says of it.
    if (!record && where.worker !== null && where.state !== 'failed') ({ cluster: where, task: record } = await this.cluster.record(id))
    if (!record) {
      if (io.json) printJson(io, where)
      else
        io.out(
          formatFields([
            ['id', id],
            ['state', where.state],
            ['worker', where.worker],
            ['queue', where.queue],
            ['reason', where.reason],
            ...attemptFields(where),
          ]),
        )
      return EXIT.ok
    }
    // A cluster task's record, and where and in which attempt it runs or ran.
    const { task: _final, name: _name, command: _command, shell: _shell, ...placement } = where
    if (io.json) printJson(io, { ...record, cluster: placement })
    else io.out(`${describeTask(io, record)}\n${formatFields([['worker', where.worker], ['queue', where.queue], ...attemptFields(where)])}`)
    return EXIT.ok
  }

  async kill(io: CliIo, id: string, options: KillOptions): Promise<number> {
    const where = await this.cluster.kill(id, options)
    if (where.task) return printKilled(io, where.task)
    if (io.json) printJson(io, where)
    else io.out(clusterKilledLine(where))
    return EXIT.ok
  }

  async killAll(io: CliIo, options: KillAllOptions & KillOptions): Promise<number> {
    const { owner, yes, ...how } = options
    const tasks = await this.cluster.list({ owner })
    const candidates = tasks.map((each) => ({ id: each.id, state: each.state, label: labelOf(each) }))
    return killAll(io, candidates, { owner, yes }, (id) => this.cluster.kill(id, how), clusterKilledLine)
  }

  async wait(io: CliIo, id: string, options: { timeoutMs?: number; ready?: boolean }): Promise<number> {
    if (options.ready) throw readinessIsLocal()
    const where = await this.cluster.wait(id, options)
    if (where.task) return printWaited(io, id, where.task)
    if (io.json) printJson(io, where)
    else io.err(`tend: task ${id} is ${where.state}${where.worker ? ` on ${where.worker}` : ''}${where.reason ? `: ${where.reason}` : ''}`)
    return where.state === 'failed' ? EXIT.waitFailed : EXIT.waitTimedOut
  }

  async list(io: CliIo, options: { all?: boolean; owner?: string }): Promise<number> {
    const tasks = await this.cluster.list(options)
    if (io.json) printJson(io, tasks)
    else if (tasks.length === 0) io.err(options.all ? 'no cluster tasks' : 'no running or queued cluster tasks (tend ps --all shows finished ones)')
    else
      io.out(
        formatTable(
          ['ID', 'STATE', 'WORKER', 'QUEUE', 'COMMAND'],
          tasks.map((each) => [each.id, each.state, each.worker ?? '-', each.queue || '-', labelOf(each)]),
        ),
      )
    return EXIT.ok
  }

  remove(id: string): Promise<{ removed: string; freedBytes: number }> {
    return this.cluster.remove(id)
  }

  async close(): Promise<void> {
    await this.cluster.close()
  }
}

/** A killed cluster task's line: its record's once it has one, else where it was and why. */
function clusterKilledLine(where: ClusterTask): string {
  return where.task ? killedLine(where.task) : `${where.id} ${where.state}${where.reason ? `: ${where.reason}` : ''}`
}

/** Its name, else its command: from its record once it has one, else from its start request. */
function labelOf(where: ClusterTask): string {
  return taskLabel(where.task ?? where)
}

/** A cluster task's attempt, once it was retried, and how each earlier attempt was lost. */
function attemptFields(where: ClusterTask): Array<[string, string | null]> {
  if (where.attempt === 1 && where.earlier.length === 0) return []
  return [
    ['attempt', String(where.attempt)],
    ...where.earlier.map((each): [string, string] => [`attempt ${each.attempt}`, `lost on ${each.worker}: ${each.reason}`]),
  ]
}

/** A readiness condition is watched by the daemon that runs the task: a shared queue's tasks have none. */
function readinessIsLocal(): TendError {
  return new TendError('TEND_ERR_USAGE', { detail: 'readiness (--ready-*, --wait-ready, wait --ready) is for tasks of the local daemon, not a shared queue' })
}
