import { canonicalName } from '../allowlist.js'

/** The first and last synthetic addresses: 127.100.0.1 to 127.100.255.254, all local on the namespace's lo. */
const FIRST = (127 << 24) | (100 << 16) | 1
const COUNT = 0xfffe

interface Slot {
  address: string
  ports: Set<number>
  /** The last listen() for this name, so that two queries at once open each port once. */
  pending: Promise<void>
}

/**
 * Names ↔ synthetic addresses in 127.100.0.0/16, one per name for the namespace's life: a task
 * that connects to one reaches the proxy, which knows the name it stands for. Listeners on an
 * address are opened (by `listen`, the namespace's owner) before the address is handed out.
 */
export class SyntheticAddresses {
  private readonly byName = new Map<string, Slot>()
  private readonly byAddress = new Map<string, string>()

  constructor(private readonly listen: (address: string, ports: readonly number[]) => Promise<void>) {}

  /** The address standing for `name`, with listeners open on each of `ports`. */
  async addressFor(name: string, ports: readonly number[]): Promise<string> {
    const key = canonicalName(name)
    let slot = this.byName.get(key)
    if (slot === undefined) {
      if (this.byName.size >= COUNT) throw new Error(`no synthetic address left for ${key}: ${COUNT} names are in use`)
      const value = FIRST + this.byName.size
      const address = [value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff].join('.')
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

  /** The name an address stands for, if it is one of these. */
  nameOf(address: string): string | undefined {
    return this.byAddress.get(address)
  }
}
