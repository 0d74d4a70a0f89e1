import { AUTO_PORT_RANGE, TendError } from '../../../protocol/index.js'
import { readSocketTables } from './socket-table.js'

/** What a PortAllocator reads to know which ports are taken. */
export interface PortAllocatorOptions {
  /** The port of every task not ended yet (queued or running, recovered ones included): each holds its own until it ends. */
  held: () => Iterable<number>
  /** A process in the owner's private network namespace, when it has one (its tables are read through it); null: none. */
  namespaceProcessOf: (owner: string) => number | null
  /** The ports it hands out. Default: AUTO_PORT_RANGE. */
  range?: { first: number; last: number }
}

/** A port picked for a task, held in memory until its record (which holds it from then on) is in the store, or its admission failed. */
export interface PortReservation {
  port: number
  release: () => void
}

/**
 * Hands out `--port auto`'s ports from AUTO_PORT_RANGE: never one another task not yet ended
 * holds (its record's `port`), nor one being admitted at the same time (a reservation, taken in
 * the same synchronous step as the pick), nor one something listens on (the host's tables, and
 * its owner's private network's). A task's port is free again once its record says it has ended;
 * after a daemon restart its recovered running tasks hold theirs, read from their records. Picks
 * go round the range, so a port just let go of is the last to be given again.
 */
export class PortAllocator {
  private readonly reserved = new Set<number>()
  private readonly range: { first: number; last: number }
  private next: number

  constructor(private readonly options: PortAllocatorOptions) {
    this.range = options.range ?? AUTO_PORT_RANGE
    this.next = this.range.first
  }

  /** A free port for a task of this owner (`privateNetwork`: it runs in the owner's namespace). Throws when the range is used up. */
  reserve(owner: string, privateNetwork: boolean): PortReservation {
    const taken = new Set<number>(this.reserved)
    for (const port of this.options.held()) taken.add(port)
    for (const socket of readSocketTables('self')) taken.add(socket.port)
    const inside = privateNetwork ? this.options.namespaceProcessOf(owner) : null
    if (inside !== null) for (const socket of readSocketTables(inside)) taken.add(socket.port)
    const { first, last } = this.range
    const size = last - first + 1
    for (let step = 0; step < size; step++) {
      const port = first + ((this.next - first + step) % size)
      if (taken.has(port)) continue
      this.next = port === last ? first : port + 1
      this.reserved.add(port)
      return { port, release: () => this.reserved.delete(port) }
    }
    throw new TendError('TEND_ERR_NO_FREE_PORT', { first, last })
  }
}
