import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import { backoffMs, cutText, networkModeOf, type Readiness, type ReadyBy, type Task } from '../../../protocol/index.js'
import { outputPath, taskOutput } from '../../../spool/index.js'
import type { OwnerNetworks } from '../../network/owner-networks.js'
import type { TaskStore } from '../../store/task-store.js'
import { compileLinePattern } from '../output/line-pattern.js'
import type { HeldOutputs } from '../output/held-outputs.js'
import type { OutputWatch } from '../output/output-watch.js'
import { firstMatchingLine } from './pattern-watch.js'
import { listensOn } from './port-probe.js'
import { answersUrl, type ConnectInside } from './url-probe.js'

/** A port or URL is looked at this often at first, then less often, up to PROBE_MAX_MS. */
const PROBE_FIRST_MS = 100
const PROBE_MAX_MS = 500
/** The matching line as the record keeps it, at most this many characters. */
export const READY_LINE_MAX = 500

/** What a readiness watch reads: one object, shared by all of a supervisor's runs. */
export interface ReadinessContext {
  store: TaskStore
  log: Logger
  outputs: HeldOutputs
  outputWatch: OutputWatch
  spoolRoot: string
  networks: OwnerNetworks | null
}

/**
 * Watches one running task's readiness condition (`readyWhen`) until it holds or its deadline
 * (counted from the task's start) passes, and records `ready`. Stopped when the task ends: its
 * ending records `ended first` (transitions.ts) if it was still waiting.
 */
export class ReadinessWatch {
  private readonly abort = new AbortController()
  private deadline?: NodeJS.Timeout

  private constructor(
    private readonly context: ReadinessContext,
    private readonly task: Task,
  ) {}

  /** Starts watching a running task that still waits for its condition; null when there is nothing to watch. */
  static start(context: ReadinessContext, task: Task): ReadinessWatch | null {
    if (task.state !== 'running' || !task.readyWhen || task.ready !== null) return null
    const watch = new ReadinessWatch(context, task)
    watch.begin()
    return watch
  }

  stop(): void {
    clearTimeout(this.deadline)
    this.abort.abort()
  }

  private begin(): void {
    const { readyWhen, startedAt } = this.task
    const leftMs = Date.parse(startedAt!) + readyWhen!.timeoutMs - Date.now()
    this.deadline = setTimeout(() => this.settle({ failed: 'timed out', at: new Date().toISOString() }), Math.max(0, leftMs))
    this.deadline.unref()
    this.watch().then(
      (held) => {
        if (held) this.settle({ at: new Date().toISOString(), ...held })
      },
      (error: unknown) => this.context.log.warn({ taskId: this.task.id, err: error }, 'watching a readiness condition failed'),
    )
  }

  /** Resolves once the condition holds (how), or with null once stopped. */
  private async watch(): Promise<{ by: ReadyBy; line?: string } | null> {
    const { readyWhen } = this.task
    if (readyWhen!.pattern !== undefined) {
      const line = await this.matchLine(readyWhen!.pattern)
      return line === null ? null : { by: 'pattern', line: cutText(line, READY_LINE_MAX, '…') }
    }
    const port = readyWhen!.port
    const url = readyWhen!.url
    const holds = port !== undefined ? () => listensOn(this.namespacePid(), port) : () => answersUrl(url!, this.connectInside())
    for (let retry = 0; !this.abort.signal.aborted; retry++) {
      if (await holds()) return this.abort.signal.aborted ? null : { by: port !== undefined ? 'port' : 'url' }
      await sleep(backoffMs(retry, PROBE_FIRST_MS, PROBE_MAX_MS), undefined, { signal: this.abort.signal }).catch(() => undefined)
    }
    return null
  }

  private matchLine(source: string): Promise<string | null> {
    const { outputs, outputWatch, spoolRoot } = this.context
    const id = this.task.id
    const byPath = taskOutput(spoolRoot, id)
    const signal = this.abort.signal
    return firstMatchingLine({
      pattern: compileLinePattern(source, 'ready.pattern'),
      source: () => outputs.source(id, byPath),
      signal,
      waitForChange: (sizeSeen) => {
        // The file the keeper writes is watched (through the held descriptor), whatever is at its name.
        const held = outputs.held(id)
        const source = outputs.source(id, byPath)
        return outputWatch.waitForChange(id, held ? `/proc/self/fd/${held.fd}` : outputPath(spoolRoot, id), {
          sizeSeen,
          endedSince: () => signal.aborted,
          // A wake-up that never comes (a watch the kernel dropped) is made up for once in a while.
          timeoutMs: 5000,
          signal,
          sizeNow: () => source.size(),
        })
      },
    })
  }

  /** Whether the task is in the host's network (the daemon's own) or its owner's private one. */
  private get inPrivateNetwork(): boolean {
    return this.task.sandbox !== 'off' && networkModeOf(this.task.network) !== 'host'
  }

  /** A process whose /proc/<pid>/net is the task's network: the daemon's own, or the owner network's holder. */
  private namespacePid(): number | 'self' {
    if (!this.inPrivateNetwork) return 'self'
    const network = this.context.networks?.networkOf(this.task.owner)
    // No holder: nothing of the task's network can be looked at; tried again at the next look.
    return network?.alive ? network.pid : -1
  }

  private connectInside(): ConnectInside | undefined {
    if (!this.inPrivateNetwork) return undefined
    return (address, port) => {
      const network = this.context.networks?.networkOf(this.task.owner)
      if (!network?.alive) throw new Error(`the private network of ${this.task.owner} is gone`)
      return network.connectTcp(address, port)
    }
  }

  /** Records the readiness, if the task is still running and waiting. */
  private settle(ready: NonNullable<Readiness>): void {
    if (this.abort.signal.aborted) return
    this.stop()
    const { store, log } = this.context
    store
      .transition(this.task.id, (current) =>
        // Object.assign, not a spread after fields: see createQueuedTask (transitions.ts).
        current.state === 'running' && current.ready === null ? Object.assign({}, current, { ready }) : null,
      )
      .then(
        // The matching line is the task's output: never logged.
        () => log.info({ taskId: this.task.id, ...('by' in ready ? { by: ready.by } : { failed: ready.failed }) }, 'task readiness settled'),
        (error: unknown) => log.error({ taskId: this.task.id, err: error }, 'recording readiness failed'),
      )
  }
}
