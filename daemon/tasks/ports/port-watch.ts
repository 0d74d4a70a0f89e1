import type { Logger } from 'pino'
import { MAX_RECORDED_PORTS, type Task, type TaskPort } from '../../../protocol/index.js'
import type { TaskStore } from '../../store/task-store.js'
import { readTaskPorts, samePorts, ticksSinceBoot } from './task-sockets.js'

/** How often one task's sockets may be looked at: a record served more often shows the last look. */
export const PORTS_REFRESH_MS = 1000

/**
 * How many tasks' ports one list looks at, at most, the longest unlooked first: a list of a
 * thousand running tasks costs what a list of a few does, and each task's ports are looked at in
 * turn, list after list.
 */
export const LIST_REFRESH_BATCH = 32

/** What a PortWatch is made with. */
export interface PortWatchOptions {
  store: Pick<TaskStore, 'current' | 'findCurrent' | 'transition'>
  /** The task's processes now (task-processes.ts); null when it is not running here. */
  processesOf: (id: string) => Promise<number[]> | null
  log: Logger
}

/**
 * Keeps running tasks' `ports` up to date, on demand: a task's sockets are looked at when its
 * record is about to be served (GET /v1/tasks/:id, a start's port check; a list looks at a batch
 * of its tasks, refreshSome), at most once a PORTS_REFRESH_MS per task, and nothing is looked at while nobody asks (no background sweep: 1,000
 * running tasks cost nothing until someone reads them). task.json is written only when the set
 * changed, and lists at most MAX_RECORDED_PORTS of them (the lowest; `portsOmitted` counts the rest); the transition that ends a task empties it (finish.ts).
 */
export class PortWatch {
  /** Per task, the last look: when it began and its end (a request meanwhile shares it). */
  private readonly looks = new Map<string, { at: number; done: Promise<void> }>()
  /** Per task, when its ports were last looked at: which a list looks at next. */
  private readonly lastLooked = new Map<string, number>()

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
      this.lastLooked.set(id, now)
      looks.push(done)
    }
    this.forgetOld(now)
    await Promise.all(looks)
  }

  /**
   * For a list: brings up to LIST_REFRESH_BATCH of these tasks' ports up to date, those looked at
   * longest ago (or never) first; the others show their last look. Never rejects.
   */
  async refreshSome(ids: readonly string[]): Promise<void> {
    const now = Date.now()
    const due = ids.filter((id) => now - (this.lastLooked.get(id) ?? 0) >= PORTS_REFRESH_MS)
    due.sort((a, b) => (this.lastLooked.get(a) ?? 0) - (this.lastLooked.get(b) ?? 0))
    // Tasks no list names any more (ended, removed) leave the map once it holds many more than a list.
    if (this.lastLooked.size > ids.length + 256) {
      const named = new Set(ids)
      for (const id of this.lastLooked.keys()) if (!named.has(id)) this.lastLooked.delete(id)
    }
    await this.refresh(due.slice(0, LIST_REFRESH_BATCH))
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
