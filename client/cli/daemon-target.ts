import { describePorts, exitStatusOf, sandboxHint, taskLabel, type Task } from '../../protocol/index.js'
import type { TendClient } from '../client.js'
import { printTask } from './describe-task.js'
import { outputTailForHint } from './output-tail.js'
import { EXIT } from './exit-codes.js'
import { ageOf, exitText, formatTable, outputText, printJson, stateCell, stoppedByText, type CliIo } from './output.js'
import { printLogs, streamOutput, type LogsFlags } from './print-output.js'
import { printReadiness } from './readiness.js'
import { killAll, type KillAllOptions } from './kill-all.js'
import { killedLine, printKilled, printWaited } from './task-answers.js'
import { cpuCell, memoryCell } from './usage-text.js'
import type { KillOptions, RunRequest, TaskTarget } from './task-target.js'

/**
 * The task verbs on the local daemon (or the one TEND_URL names), through its API. A task is named
 * by its id, its name or a unique id prefix: the daemon resolves the reference first (resolve()).
 */
export class DaemonTarget implements TaskTarget {
  constructor(private readonly client: TendClient) {}

  async run(io: CliIo, request: RunRequest, wait: boolean | 'ready'): Promise<number> {
    const { require: _require, retries: _retries, after: refs, ...options } = request
    // Each dependency is named as any task is; the daemon is sent ids, and refuses one that no longer exists.
    const after = refs && (await Promise.all(refs.map((ref) => this.client.resolve(ref))))
    const task = await this.client.start(after ? { ...options, after } : options)
    // On stderr: stdout keeps only the id (or the JSON document, which carries them).
    if (!io.json) for (const warning of task.warnings ?? []) io.err(`tend: warning: ${warning}`)
    if (wait === 'ready') {
      if (!io.json) io.out(task.id)
      return printReadiness(io, await this.client.waitReady(task.id))
    }
    if (!wait) {
      if (io.json) printJson(io, task)
      else io.out(task.id)
      return EXIT.ok
    }
    if (!io.json) await streamOutput(this.client, io, task.id, { from: 0 })
    const finished = await this.client.wait(task.id)
    if (io.json) printJson(io, finished)
    else if (finished.state !== 'exited') io.err(`tend: task ${finished.id} ${finished.state}${stoppedByText(finished)}: ${finished.reason ?? ''}`.trimEnd())
    const hint = sandboxHint(finished, await outputTailForHint(this.client, finished))
    if (hint) io.err(hint)
    return exitStatusOf(finished) ?? EXIT.waitFailed
  }

  async logs(io: CliIo, ref: string, flags: LogsFlags): Promise<number> {
    return printLogs(this.client, io, await this.client.resolve(ref), flags)
  }

  async show(io: CliIo, ref: string): Promise<number> {
    const task = await this.client.get(await this.client.resolve(ref), { live: true })
    // --json prints the record alone: no hint, so no output to read for one.
    printTask(io, task, io.json ? '' : await outputTailForHint(this.client, task))
    return EXIT.ok
  }

  async kill(io: CliIo, ref: string, options: KillOptions): Promise<number> {
    return printKilled(io, await this.client.kill(await this.client.resolve(ref), options))
  }

  async killAll(io: CliIo, options: KillAllOptions & KillOptions): Promise<number> {
    const { owner, yes, ...how } = options
    const tasks = await this.client.list({ owner })
    const candidates = tasks.map((task) => ({ id: task.id, state: task.state, label: taskLabel(task) }))
    return killAll(io, candidates, { owner, yes }, (id) => this.client.kill(id, how), killedLine)
  }

  async wait(io: CliIo, ref: string, options: { timeoutMs?: number; ready?: boolean }): Promise<number> {
    const id = await this.client.resolve(ref)
    const { ready, ...waitOptions } = options
    if (ready) return printReadiness(io, await this.client.waitReady(id, waitOptions))
    const task = await this.client.wait(id, waitOptions)
    return printWaited(io, id, task, await outputTailForHint(this.client, task))
  }

  async list(io: CliIo, options: { all?: boolean; owner?: string }): Promise<number> {
    const tasks = await this.client.list({ ...options, live: true })
    if (io.json) {
      printJson(io, tasks)
      return EXIT.ok
    }
    if (tasks.length === 0) {
      io.err(options.all ? 'no tasks' : 'no running or queued tasks (tend ps --all shows finished ones)')
      return EXIT.ok
    }
    const now = Date.now()
    // PORTS only when a task listed listens on something: the table stays as narrow as it was otherwise.
    const withPorts = tasks.some((task) => (task.ports?.length ?? 0) > 0)
    const rows = tasks.map((task) => [
      task.id,
      stateCell(io, task),
      exitText(task),
      ageOf(task, now),
      cpuCell(task),
      memoryCell(task),
      outputText(task),
      ...(withPorts ? [describePorts(task.ports) || '-'] : []),
      task.owner,
      commandText(task),
    ])
    io.out(formatTable(['ID', 'STATE', 'EXIT', 'AGE', 'CPU', 'MEM', 'OUTPUT', ...(withPorts ? ['PORTS'] : []), 'OWNER', 'COMMAND'], rows))
    return EXIT.ok
  }

  async remove(ref: string): Promise<{ removed: string; freedBytes: number }> {
    return this.client.remove(await this.client.resolve(ref))
  }

  /** The client is the command's own: it closes it. */
  async close(): Promise<void> {}
}

/** The command column: a corrupt entry's says what is wrong with it, after what is left of its command. */
function commandText(task: Task): string {
  if (task.state !== 'corrupt') return taskLabel(task)
  const label = taskLabel(task)
  return `${label ? `${label} ` : ''}[corrupt: ${task.reason}]`
}
