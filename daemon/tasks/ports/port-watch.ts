import type { Logger } from 'pino'
import { MAX_RECORDED_PORTS, type Task, type TaskPort } from '../../../protocol/index.js'
import type { TaskStore } from '../../store/task-store.js'
import { readTaskPorts, samePorts, ticksSinceBoot } from './task-sockets.js'

/** How often one task's sockets may be looked at: a record served more often shows the last look. */
export const PORTS_REFRESH_MS = 1000

/** What a PortWatch is made with. */
export interface PortWatchOptions {
  store: Pick<TaskStore, 'current' | 'findCurrent' | 'transition'>
  /** The task's processes now (task-processes.ts); null when it is not running here. */
  processesOf: (id: string) => Promise<number[]> | null
  log: Logger
}

/**
 * Keeps running tasks' `ports` up to date, on demand: a task's sockets are looked at when its
 * record is about to be served (GET /v1/tasks/:id, the list, a start's port check), at most once a
 * PORTS_REFRESH_MS per task, and nothing is looked at while nobody asks (no background sweep: 1,000
 * running tasks cost nothing until someone reads them). task.json is written only when the set
 * changed, and lists at most MAX_RECORDED_PORTS of them (the lowest; `portsOmitted` counts the rest); the transition that ends a task empties it (finish.ts).
 */
export class PortWatch {
  /** Per task, the last look: when it began and its end (a request meanwhile shares it). */
  private readonly looks = new Map<string, { at: number; done: Promise<void> }>()

  constructor(private readonly options: PortWatchOptions) {}

  /** Brings these tasks' ports up to date (those running; each at most once a PORTS_REFRESH_MS). Never rejects. */
  async refresh(ids: Iterable<string>): Promise<void> {
    const now = Date.now()
    const looks: Array<Promise<void>> = []
    for (const id of ids) {
      const last = this.looks.get(id)
      if (last && now - last.at < PORTS_REFRESH_MS) {
        looks.push(last.done)
        continue
      }
      const done = this.look(id)
      this.looks.set(id, { at: now, done })
      looks.push(done)
    }
    this.forgetOld(now)
    await Promise.all(looks)
  }

  private async look(id: string): Promise<void> {
    const { store, log } = this.options
    try {
      if (store.findCurrent(id)?.state !== 'running') return
      // Read before the processes are: a process started after it cannot be one of them (pid reuse).
      const foundAt = ticksSinceBoot()
      const processes = this.options.processesOf(id)
      if (!processes) return
      const found = await readTaskPorts(await processes, foundAt)
      const ports = found.slice(0, MAX_RECORDED_PORTS)
      const omitted = found.length - ports.length
      await store.transition(id, (current) =>
        current.state === 'running' && (!samePorts(current.ports, ports) || (current.portsOmitted ?? 0) !== omitted)
          ? withPorts(current, ports, omitted)
          : null,
      )
    } catch (error) {
      log.warn({ taskId: id, err: error }, "reading a task's ports failed")
    }
  }

  /** Looks past their interval are of no use any more: the map holds only recent ones. */
  private forgetOld(now: number): void {
    if (this.looks.size < 64) return
    for (const [id, look] of this.looks) if (now - look.at >= PORTS_REFRESH_MS) this.looks.delete(id)
  }
}

/** The task with these ports, and `portsOmitted` only when some were left out. */
function withPorts<T extends Task>(task: T, ports: TaskPort[], omitted: number): T {
  // Object.assign, not a spread after fields: see createQueuedTask.
  const next: T = Object.assign({}, task, { ports })
  if (omitted > 0) next.portsOmitted = omitted
  else delete next.portsOmitted
  return next
}
