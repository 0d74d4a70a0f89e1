import { canonicalName } from '../allowlist.js'

/** The first and last synthetic addresses: 127.100.0.1 to 127.100.255.254, all local on the namespace's lo. */
const FIRST = (127 << 24) | (100 << 16) | 1
const COUNT = 0xfffe
/**
 * Names held at once: each holds listeners (descriptors of the daemon's), so a task that invents
 * names under a wildcard must not run the daemon out of them. The least recently answered name
 * gives its address and listeners up first; a connection to it afterwards finds nothing there.
 */
export const SYNTHETIC_NAMES_HELD = 256

interface Slot {
  address: string
  ports: Set<number>
  /** The last listen() for this name, so that two queries at once open each port once. */
  pending: Promise<void>
}

/**
 * Names ↔ synthetic addresses in 127.100.0.0/16, at most SYNTHETIC_NAMES_HELD at once: a task
 * that connects to one reaches the proxy, which knows the name it stands for. Listeners on an
 * address are opened (by `listen`, the namespace's owner) before the address is handed out, and
 * closed (by `unlisten`) when the name gives it up.
 */
export class SyntheticAddresses {
  /** In order of last use, least recent first (a Map keeps insertion order). */
  private readonly byName = new Map<string, Slot>()
  private readonly byAddress = new Map<string, string>()
  private next = 0

  constructor(
    private readonly listen: (address: string, ports: readonly number[]) => Promise<void>,
    private readonly unlisten: (address: string) => void = () => {},
    private readonly held = SYNTHETIC_NAMES_HELD,
  ) {}

  /** The address standing for `name`, with listeners open on each of `ports`. */
  async addressFor(name: string, ports: readonly number[]): Promise<string> {
    const key = canonicalName(name)
    let slot = this.byName.get(key)
    if (slot !== undefined) {
      // Most recently used last.
      this.byName.delete(key)
      this.byName.set(key, slot)
    } else {
      if (this.byName.size >= this.held) this.giveUp(this.byName.keys().next().value!)
      const address = this.freeAddress()
      slot = { address, ports: new Set(), pending: Promise.resolve() }
      this.byName.set(key, slot)
      this.byAddress.set(address, key)
    }
    const current = slot
    const opening = current.pending.then(async () => {
      const missing = [...new Set(ports)].filter((port) => !current.ports.has(port))
      if (missing.length === 0) return
      await this.listen(current.address, missing)
      for (const port of missing) current.ports.add(port)
    })
    current.pending = opening.catch(() => undefined)
    await opening
    return current.address
  }

  /** The next address no name holds (addresses go round the range; at most `held` are taken). */
  private freeAddress(): string {
    for (;;) {
      const value = FIRST + (this.next++ % COUNT)
      const address = [value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff].join('.')
      if (!this.byAddress.has(address)) return address
    }
  }

  private giveUp(name: string): void {
    const slot = this.byName.get(name)!
    this.byName.delete(name)
    this.byAddress.delete(slot.address)
    this.unlisten(slot.address)
  }

  /** The name an address stands for, if it is one of these. */
  nameOf(address: string): string | undefined {
    return this.byAddress.get(address)
  }
}
