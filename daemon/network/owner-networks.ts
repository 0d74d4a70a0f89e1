import { statSync } from 'node:fs'
import type { Logger } from 'pino'
import { readProcStat, type NetworkMode } from '../../protocol/index.js'
import type { AllowEntry } from './allowlist.js'
import { OwnerNetwork, type NamespaceRef } from './owner-network.js'

/** A task's hold on its owner's network: released when the task has ended. */
export interface NetworkLease {
  network: OwnerNetwork
  release(): void
}

/** A running task as the registry knows it: which owner, which mode, and (once started) its process. */
export interface NetworkedTask {
  id: string
  owner: string
  network: NetworkMode
  /** The task's first process (bubblewrap, in the owner's namespace), once it runs; null before. */
  pid: number | null
  /** What it may reach through the egress proxy (allow): networkAllow and its own allowNet, parsed. */
  allow: readonly AllowEntry[]
}

interface Entry {
  network: OwnerNetwork
  tasks: Map<string, NetworkedTask>
  idle: NodeJS.Timeout | null
}

/** How long an owner's empty namespace is kept for its next task: an agent's commands come one after another. */
export const NETWORK_LINGER_MS = 30_000

/**
 * Every owner's private network namespace (loopback and allow tasks), made at the owner's first
 * such task and closed a while after its last has ended. A task that outlived an earlier daemon
 * brings its namespace back with it: its owner's next tasks join the one it is in, found from the
 * task's own process (the kernel's answer, never a file the task could have written).
 */
export class OwnerNetworks {
  private readonly entries = new Map<string, Entry>()
  private readonly opened: Array<(network: OwnerNetwork) => void> = []
  private readonly waiting = new Set<() => void>()

  constructor(
    private readonly log: Pick<Logger, 'warn' | 'info'>,
    private readonly lingerMs = NETWORK_LINGER_MS,
  ) {}

  /** Called with each namespace as it is made (the egress proxy opens its listeners there). */
  onOpen(listener: (network: OwnerNetwork) => void): void {
    this.opened.push(listener)
  }

  /** The namespace a new task of this owner joins (made when the owner has none). Throws with why it cannot be had. */
  acquire(task: NetworkedTask): NetworkLease {
    const entry = this.entryFor(task.owner, null)
    return this.lease(entry, task)
  }

  /**
   * A task an earlier daemon started (resumed): it is in its owner's namespace already, which its
   * owner's next tasks join. Null when that namespace cannot be held (its process is gone).
   */
  adopt(task: NetworkedTask & { pid: number }): NetworkLease | null {
    let join: NamespaceRef | null
    try {
      join = namespaceOf(task.pid)
    } catch (error) {
      this.log.warn({ taskId: task.id, err: error }, "the private network of a resumed task cannot be found: its owner's next tasks get a new one")
      return null
    }
    if (join === null) return null
    try {
      return this.lease(this.entryFor(task.owner, join), task)
    } catch (error) {
      this.log.warn({ taskId: task.id, err: error }, "the private network of a resumed task cannot be held: its owner's next tasks get a new one")
      return null
    }
  }

  /** The owner's namespace, if it has one now. */
  networkOf(owner: string): OwnerNetwork | undefined {
    const entry = this.entries.get(owner)
    return entry?.network.alive ? entry.network : undefined
  }

  /** The tasks in the owner's namespace now. */
  tasksOf(owner: string): NetworkedTask[] {
    return [...(this.entries.get(owner)?.tasks.values() ?? [])]
  }

  /** Records the process a task started as (its namespace's members are found through it). */
  started(owner: string, id: string, pid: number): void {
    const task = this.entries.get(owner)?.tasks.get(id)
    if (task) task.pid = pid
    this.wakeLaunches()
  }

  /**
   * Resolves once no task of the owner is still being launched (each has its process, or is
   * gone), or after timeoutMs: a task may connect before its spawn has been answered.
   */
  async launched(owner: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (this.tasksOf(owner).some((task) => task.pid === null) && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(1, deadline - Date.now()))
        function done() {
          clearTimeout(timer)
          resolve()
        }
        this.waiting.add(done)
      })
    }
  }

  private wakeLaunches(): void {
    const waiting = [...this.waiting]
    this.waiting.clear()
    for (const wake of waiting) wake()
  }

  /** Closes every namespace's holder (the daemon stops); tasks still in one keep it. */
  closeAll(): void {
    for (const entry of this.entries.values()) {
      if (entry.idle) clearTimeout(entry.idle)
      entry.network.close()
    }
    this.entries.clear()
  }

  private entryFor(owner: string, asked: NamespaceRef | null): Entry {
    const existing = this.entries.get(owner)
    // A holder that died under running tasks: their namespace is found again through them.
    const join = asked ?? (existing && !existing.network.alive ? firstNamespace(existing.tasks.values()) : null)
    if (existing?.network.alive && (join === null || existing.network.namespace.ino === join.ino)) return existing
    if (existing?.network.alive && join !== null) {
      // Two namespaces for one owner (tasks of two earlier daemons): the newest keeps the name.
      this.log.warn({ owner }, "a resumed task is in another private network than its owner's others")
    }
    if (existing && !existing.network.alive && existing.tasks.size > 0 && join === null) {
      this.log.warn({ owner, tasks: [...existing.tasks.keys()] }, "the holder of an owner's private network is gone: its next tasks get a new one")
    }
    const network = OwnerNetwork.open(owner, join ?? undefined)
    const entry: Entry = { network, tasks: existing?.tasks ?? new Map(), idle: null }
    if (existing?.idle) clearTimeout(existing.idle)
    this.entries.set(owner, entry)
    for (const listener of this.opened) listener(network)
    return entry
  }

  private lease(entry: Entry, task: NetworkedTask): NetworkLease {
    if (entry.idle) {
      clearTimeout(entry.idle)
      entry.idle = null
    }
    entry.tasks.set(task.id, { ...task })
    let released = false
    return {
      network: entry.network,
      release: () => {
        if (released) return
        released = true
        entry.tasks.delete(task.id)
        this.wakeLaunches()
        if (entry.tasks.size > 0 || this.entries.get(task.owner) !== entry) return
        entry.idle = setTimeout(() => {
          if (entry.tasks.size > 0 || this.entries.get(task.owner) !== entry) return
          this.entries.delete(task.owner)
          entry.network.close()
        }, this.lingerMs)
        entry.idle.unref()
      },
    }
  }
}

function firstNamespace(tasks: Iterable<NetworkedTask>): NamespaceRef | null {
  for (const task of tasks) {
    if (task.pid === null) continue
    try {
      const found = namespaceOf(task.pid)
      if (found) return found
    } catch {
      // gone meanwhile
    }
  }
  return null
}

/**
 * The network namespace a task's process is in, as the holder joins it: never the daemon's own
 * (a pid reused by a host process would be), null when the process is gone.
 */
function namespaceOf(pid: number): NamespaceRef | null {
  const path = `/proc/${pid}/ns/net`
  let info
  try {
    info = statSync(path, { bigint: true })
  } catch {
    return null
  }
  if (info.ino === statSync('/proc/self/ns/net', { bigint: true }).ino) return null
  // A zombie has no namespaces left to join.
  if (readProcStat(pid)?.state === 'Z') return null
  return { path, dev: String(info.dev), ino: String(info.ino) }
}
