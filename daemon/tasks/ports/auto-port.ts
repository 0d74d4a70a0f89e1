import { AUTO_PORT_RANGE, TendError, type Task, type TaskEvent } from '../../../protocol/index.js'
import { HeldPorts, networkKey, type PortNetwork } from './held-ports.js'
import { readSocketTables } from './socket-table.js'

/** What a PortAllocator reads to know which ports are taken. */
export interface PortAllocatorOptions {
  /** The store: its tasks not ended are read once (at the first pick), its events followed from then on. */
  tasks: { list(): Iterable<Task>; subscribe(listener: (event: Pick<TaskEvent, 'type' | 'task'>) => void): () => void }
  /** The pid of the process holding the owner's private network namespace (its tables are that network's); null: it has none now. */
  namespaceProcessOf: (owner: string) => number | null
  /** The most ports of the range one owner's tasks not ended may hold at once (config `perOwnerAutoPorts`). */
  perOwner: number
  /** The ports it hands out. Default: AUTO_PORT_RANGE. */
  range?: { first: number; last: number }
}

/** A port picked for a task, held in memory until its record (which holds it from then on) is in the store, or its admission failed. */
export interface PortReservation {
  port: number
  release: () => void
}

/** How many of an owner's holders the cap's error names. */
const HOLDERS_NAMED = 5

/**
 * Hands out `--port auto`'s ports from AUTO_PORT_RANGE, each free in the network the task will
 * listen in: the host's for a task on it, its owner's private namespace for a sandboxed
 * `loopback`/`allow` task (the host's listeners and other networks' tasks do not count there).
 * Never one another task not yet ended holds in that network (its record's `port`), nor one being
 * admitted at the same time (a reservation, taken in the same synchronous step as the pick), nor
 * one something listens on there (that network's tables). One owner's tasks hold at most
 * `perOwner` ports at once: no owner can use up the range for the others. A task's port is free
 * again once its record says it has ended; after a daemon restart its recovered tasks hold theirs,
 * read from their records. Picks go round the range, so a port just let go of is the last to be
 * given again.
 */
export class PortAllocator {
  private readonly reserved = new Map<string, Map<number, string>>()
  private readonly range: { first: number; last: number }
  private held: HeldPorts | null = null
  private next: number

  constructor(private readonly options: PortAllocatorOptions) {
    this.range = options.range ?? AUTO_PORT_RANGE
    this.next = this.range.first
    // Events from the start: the first pick's read of the store is at least as new as any of them.
    options.tasks.subscribe((event) => {
      if (event.type === 'task.removed') this.held?.forget(event.task.id)
      else this.held?.follow(event.task)
    })
  }

  /** A free port for a task of this owner (`privateNetwork`: it runs in the owner's namespace). Throws when none is left to it. */
  async reserve(owner: string, privateNetwork: boolean): Promise<PortReservation> {
    const network: PortNetwork = privateNetwork ? { owner } : 'host'
    const inside = privateNetwork ? this.options.namespaceProcessOf(owner) : 'self'
    // No namespace yet: nothing listens in the one the task will make.
    const listened = new Set((inside === null ? [] : await readSocketTables(inside)).map((socket) => socket.port))
    // From here on one synchronous step: the pick and its reservation.
    const held = this.heldPorts()
    this.checkOwnerCap(owner, held)
    const key = networkKey(network)
    const reserved = this.reserved.get(key) ?? new Map<number, string>()
    const { first, last } = this.range
    const size = last - first + 1
    for (let step = 0; step < size; step++) {
      const port = first + ((this.next - first + step) % size)
      if (reserved.has(port) || held.has(network, port) || listened.has(port)) continue
      this.next = port === last ? first : port + 1
      reserved.set(port, owner)
      this.reserved.set(key, reserved)
      return {
        port,
        release: () => {
          reserved.delete(port)
          if (reserved.size === 0 && this.reserved.get(key) === reserved) this.reserved.delete(key)
        },
      }
    }
    throw new TendError('TEND_ERR_NO_FREE_PORT', { first, last })
  }

  private heldPorts(): HeldPorts {
    this.held ??= new HeldPorts(this.options.tasks.list())
    return this.held
  }

  private checkOwnerCap(owner: string, held: HeldPorts): void {
    const holders = held.heldBy(owner, this.range)
    let reserving = 0
    for (const reserved of this.reserved.values()) for (const by of reserved.values()) if (by === owner) reserving++
    if (holders.length + reserving < this.options.perOwner) return
    const named = holders.slice(0, HOLDERS_NAMED).map(({ id, port }) => `${id} (${port})`)
    const more = holders.length - named.length + reserving
    throw new TendError('TEND_ERR_OWNER_PORTS_USED_UP', {
      owner,
      limit: this.options.perOwner,
      holders: named.length === 0 ? 'tasks being admitted' : `${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`,
    })
  }
}
