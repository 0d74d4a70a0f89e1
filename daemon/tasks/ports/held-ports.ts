import { isFinished, networkModeOf, type Task } from '../../../protocol/index.js'

/** The network a port is given in: the host's, or one owner's private namespace (its ports are its own). */
export type PortNetwork = 'host' | { owner: string }

/** The key of a network in the maps below. */
export function networkKey(network: PortNetwork): string {
  return network === 'host' ? 'host' : `owner ${network.owner}`
}

/** The network a task's port is in: its owner's private one when it is sandboxed and not on the host's. */
export function networkOfTask(task: Pick<Task, 'owner' | 'sandbox' | 'network'>): PortNetwork {
  return task.sandbox !== 'off' && networkModeOf(task.network) !== 'host' ? { owner: task.owner } : 'host'
}

interface Holder {
  owner: string
  port: number
  network: string
}

/**
 * The ports tasks not ended yet hold (their records' `port`, when tend picked it: `portAuto`), per network and per owner, kept as
 * the store's records change (its events) rather than by listing every task at each pick: read
 * once, at the first use, and followed from then on.
 */
export class HeldPorts {
  private readonly holders = new Map<string, Holder>()
  /** Per network, each held port and how many tasks hold it (a restart may find two records of one pick). */
  private readonly byNetwork = new Map<string, Map<number, number>>()
  /** Per owner, the ids of its tasks holding a port. */
  private readonly byOwner = new Map<string, Set<string>>()

  constructor(tasks: Iterable<Task>) {
    for (const task of tasks) this.follow(task)
  }

  /** A task's newest record: a port tend picked for it (`portAuto`) is held until it has ended; a fixed one is only given. */
  follow(task: Task): void {
    const holds = typeof task.port === 'number' && task.portAuto === true && !isFinished(task)
    if (holds === this.holders.has(task.id)) return
    if (holds) this.hold(task.id, { owner: task.owner, port: task.port as number, network: networkKey(networkOfTask(task)) })
    else this.letGo(task.id)
  }

  /** A task removed from the store holds nothing. */
  forget(id: string): void {
    if (this.holders.has(id)) this.letGo(id)
  }

  /** Whether a task holds this port in this network. */
  has(network: PortNetwork, port: number): boolean {
    return this.byNetwork.get(networkKey(network))?.has(port) === true
  }

  /** The ids of the owner's tasks holding a port within `range`, with their ports. */
  heldBy(owner: string, range: { first: number; last: number }): Array<{ id: string; port: number }> {
    const found: Array<{ id: string; port: number }> = []
    for (const id of this.byOwner.get(owner) ?? []) {
      const { port } = this.holders.get(id)!
      if (port >= range.first && port <= range.last) found.push({ id, port })
    }
    return found
  }

  private hold(id: string, holder: Holder): void {
    this.holders.set(id, holder)
    const ports = this.byNetwork.get(holder.network) ?? new Map<number, number>()
    ports.set(holder.port, (ports.get(holder.port) ?? 0) + 1)
    this.byNetwork.set(holder.network, ports)
    const owned = this.byOwner.get(holder.owner) ?? new Set<string>()
    owned.add(id)
    this.byOwner.set(holder.owner, owned)
  }

  private letGo(id: string): void {
    const holder = this.holders.get(id)!
    this.holders.delete(id)
    const ports = this.byNetwork.get(holder.network)!
    const count = ports.get(holder.port)! - 1
    if (count > 0) ports.set(holder.port, count)
    else ports.delete(holder.port)
    if (ports.size === 0) this.byNetwork.delete(holder.network)
    const owned = this.byOwner.get(holder.owner)!
    owned.delete(id)
    if (owned.size === 0) this.byOwner.delete(holder.owner)
  }
}
