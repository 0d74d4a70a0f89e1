import { socketInode, tasksHoldingSocket, type Endpoint } from './attribution.js'
import type { NetworkedTask } from './owner-networks.js'

/** Sockets whose task is remembered (a resolver's socket asks many times). */
const REMEMBERED_SOCKETS = 4096
/** Lookups waiting in one namespace; past it a connection or query is refused (a resolver retries). */
const WAITING_MOST = 256
/** Lookups one namespace may start per second (a burst of as many first); past it, refused. */
const LOOKUPS_PER_SECOND = 500

/**
 * Which task of one owner's namespace a connection or datagram comes from (attribution.ts), one
 * lookup at a time and a bounded queue of them: a task that floods the proxy or the DNS stub
 * slows its own owner's answers, never the daemon's other work. A socket's task is remembered
 * while the task runs (a socket's inode is never another socket's while it is open).
 */
export class Attributor {
  private readonly remembered = new Map<string, string>()
  private chain: Promise<unknown> = Promise.resolve()
  private waiting = 0
  private tokens = LOOKUPS_PER_SECOND
  private filledAt = Date.now()

  constructor(
    private readonly holderPid: () => number,
    private readonly tasks: () => NetworkedTask[],
  ) {}

  /** The task, or null: none of the owner's (a process outside them), gone, or too many lookups waiting. */
  find(proto: 'tcp' | 'udp', peer: Endpoint, local: Endpoint): Promise<NetworkedTask | null> {
    if (this.waiting >= WAITING_MOST || !this.take()) return Promise.resolve(null)
    this.waiting++
    const lookup = this.chain.then(() => this.lookup(proto, peer, local))
    this.chain = lookup.catch(() => null).finally(() => this.waiting--)
    return lookup.catch(() => null)
  }

  private async lookup(proto: 'tcp' | 'udp', peer: Endpoint, local: Endpoint): Promise<NetworkedTask | null> {
    const inode = await socketInode(this.holderPid(), proto, peer, local)
    if (inode === null) return null
    const tasks = this.tasks()
    const known = this.remembered.get(inode)
    const remembered = known === undefined ? undefined : tasks.find((task) => task.id === known)
    if (remembered) return remembered
    const holders = await tasksHoldingSocket(inode, tasks)
    const found = holders.map((id) => tasks.find((task) => task.id === id)).filter((task): task is NetworkedTask => task !== undefined)
    if (found.length === 0) return null
    // A socket two tasks hold counts as the narrower one's.
    const task = found.find((each) => each.network !== 'allow') ?? found[0]!
    if (this.remembered.size >= REMEMBERED_SOCKETS) this.remembered.delete(this.remembered.keys().next().value!)
    this.remembered.set(inode, task.id)
    return task
  }

  /** One lookup's token, refilled at LOOKUPS_PER_SECOND. */
  private take(): boolean {
    const now = Date.now()
    this.tokens = Math.min(LOOKUPS_PER_SECOND, this.tokens + ((now - this.filledAt) * LOOKUPS_PER_SECOND) / 1000)
    this.filledAt = now
    if (this.tokens < 1) return false
    this.tokens -= 1
    return true
  }
}
