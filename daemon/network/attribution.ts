import { readdir, readFile, readlink } from 'node:fs/promises'
import { isIP } from 'node:net'

/** One end of a connection or a datagram inside an owner's namespace. */
export interface Endpoint {
  address: string
  port: number
}

/** A task that may hold the socket: its id, and its first process (bubblewrap, whose descendants are all the task's). */
export interface Candidate {
  id: string
  pid: number | null
}

/**
 * Which tasks hold the socket `inode` (socketInode): those whose processes (the descendants of
 * its first process: a sandbox's pid namespace keeps every orphan among them) hold a descriptor
 * of it. Decided on what the kernel says, never on what the task wrote or chose. A socket held by
 * processes of two tasks is answered as both: the caller takes the narrower. Read through the
 * thread pool, so that a task with many processes slows its own answers, not the daemon's loop.
 */
export async function tasksHoldingSocket(inode: string, candidates: readonly Candidate[]): Promise<string[]> {
  const link = `socket:[${inode}]`
  const holders: string[] = []
  for (const candidate of candidates) {
    if (candidate.pid === null) continue
    for (const pid of await descendants(candidate.pid)) {
      if (await holdsLink(pid, link)) {
        holders.push(candidate.id)
        break
      }
    }
  }
  return holders
}

/**
 * The inode of the socket whose own address is `peer` (the far end of a connection accepted at
 * `local`, or the sender of a datagram to it), or null: from the socket table of the namespace
 * `holderPid` is in (/proc/<holder>/net/*), which only the kernel writes.
 */
export async function socketInode(holderPid: number, proto: 'tcp' | 'udp', peer: Endpoint, local: Endpoint): Promise<string | null> {
  const six = isIP(peer.address) === 6 && !peer.address.startsWith('::ffff:')
  const tables = six ? [`${proto}6`] : [proto, `${proto}6`]
  for (const table of tables) {
    let text: string
    try {
      text = await readFile(`/proc/${holderPid}/net/${table}`, 'utf8')
    } catch {
      continue
    }
    for (const line of linesWithPort(text, peer.port)) {
      const fields = line.trim().split(/\s+/)
      if (fields.length < 10) continue
      const own = parseEndpoint(fields[1]!)
      const far = parseEndpoint(fields[2]!)
      if (!own || !far || own.port !== peer.port) continue
      if (proto === 'tcp') {
        if (sameAddress(own.address, peer.address) && far.port === local.port && sameAddress(far.address, local.address)) return fields[9]!
      } else if (sameAddress(own.address, peer.address) || own.address === '0.0.0.0' || own.address === '::') {
        // A UDP client's socket is often unconnected, and may be bound to any address.
        return fields[9]!
      }
    }
  }
  return null
}

/**
 * The lines whose own address has `port` (`:PPPP ` right after the first address field): found
 * by a search over the text, so that a namespace holding thousands of sockets costs a scan, not
 * thousands of parsed lines, per lookup.
 */
function* linesWithPort(text: string, port: number): Generator<string> {
  const needle = `:${port.toString(16).toUpperCase().padStart(4, '0')} `
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + 1)) {
    const start = text.lastIndexOf('\n', at) + 1
    const end = text.indexOf('\n', at)
    const line = text.slice(start, end === -1 ? text.length : end)
    // Only the own address's port: the first field after the slot number.
    const own = line.trim().split(/\s+/)[1]
    if (own?.endsWith(needle.trim())) yield line
    if (end === -1) break
    at = end
  }
}

/** `0100007F:1F90` (IPv4, or 32 hex digits of IPv6, each 32-bit word in host order) as an address and port. */
function parseEndpoint(text: string): Endpoint | null {
  const [hex, portHex] = text.split(':')
  if (!hex || !portHex) return null
  const port = Number.parseInt(portHex, 16)
  if (hex.length === 8) {
    const bytes = Buffer.from(hex, 'hex').reverse()
    return { address: [...bytes].join('.'), port }
  }
  if (hex.length === 32) {
    const words: string[] = []
    for (let word = 0; word < 4; word++) {
      const bytes = Buffer.from(hex.slice(word * 8, word * 8 + 8), 'hex').reverse()
      words.push(bytes.toString('hex'))
    }
    const groups = words
      .join('')
      .match(/.{4}/g)!
      .map((group) => group.replace(/^0+(?=.)/, ''))
    const address = groups.join(':')
    const mapped = /^0:0:0:0:0:ffff:([0-9a-f]+):([0-9a-f]+)$/.exec(address)
    if (mapped) {
      const value = (Number.parseInt(mapped[1]!, 16) << 16) | Number.parseInt(mapped[2]!, 16)
      return { address: [(value >>> 24) & 255, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.'), port }
    }
    return { address: canonicalSix(address), port }
  }
  return null
}

function canonicalSix(address: string): string {
  if (address === '0:0:0:0:0:0:0:0') return '::'
  if (address === '0:0:0:0:0:0:0:1') return '::1'
  return address
}

function sameAddress(a: string, b: string): boolean {
  const strip = (text: string) => text.replace(/^::ffff:/i, '').toLowerCase()
  return strip(a) === strip(b)
}

/** A process and everything below it, from the kernel's children lists (gone processes are skipped). */
async function descendants(root: number): Promise<number[]> {
  const found: number[] = []
  const queue = [root]
  while (queue.length > 0 && found.length < MAX_PROCESSES) {
    const pid = queue.shift()!
    found.push(pid)
    let threads: string[]
    try {
      threads = await readdir(`/proc/${pid}/task`)
    } catch {
      continue
    }
    for (const thread of threads) {
      try {
        for (const child of (await readFile(`/proc/${pid}/task/${thread}/children`, 'utf8')).split(' ')) if (child.trim()) queue.push(Number(child))
      } catch {
        // the thread is gone
      }
    }
  }
  return found
}
/** A bound on one task's tree, so that a fork bomb cannot make one lookup endless (its pids limit bounds it anyway). */
const MAX_PROCESSES = 4096

async function holdsLink(pid: number, link: string): Promise<boolean> {
  let fds: string[]
  try {
    fds = await readdir(`/proc/${pid}/fd`)
  } catch {
    return false
  }
  for (const fd of fds) {
    try {
      if ((await readlink(`/proc/${pid}/fd/${fd}`)) === link) return true
    } catch {
      // closed meanwhile
    }
  }
  return false
}
