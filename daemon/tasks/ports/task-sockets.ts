import { readFileSync } from 'node:fs'
import { readdir, readlink } from 'node:fs/promises'
import { readProcStat, type TaskPort } from '../../../protocol/index.js'
import { readSocketTables } from './socket-table.js'

/**
 * Clock ticks per second of /proc's times (USER_HZ): 100 on every architecture Linux runs tend on,
 * whatever the kernel's own tick rate.
 */
const USER_HZ = 100

/** The most processes of a task one look reads the descriptors of (a task's command may fork thousands). */
const MAX_SCANNED_PROCESSES = 256
/** The most descriptors one look reads, over all of a task's processes: those past it are not looked at. */
export const MAX_SCANNED_DESCRIPTORS = 4096
/** Descriptor links read at once: enough to keep the look short, few enough that others' file reads are not queued behind them. */
const LINKS_AT_ONCE = 16

/** Now, in the clock ticks since boot that a process's start time is counted in (/proc/uptime, boot-based like it). */
export function ticksSinceBoot(): bigint {
  const [seconds = '0'] = readFileSync('/proc/uptime', 'latin1').split(' ')
  const [whole = '0', fraction = ''] = seconds.split('.')
  return BigInt(whole) * BigInt(USER_HZ) + BigInt(Number.parseInt(fraction.padEnd(2, '0').slice(0, 2), 10))
}

/**
 * The sockets a task's processes listen on (TCP) or are bound to (UDP): the socket inodes their
 * descriptors link to (`socket:[inode]`), found in the tables of the network namespaces they are
 * in. `pids` is the task's membership as found from a kernel fact (its cgroup, its sandbox's pid
 * namespace, or its run marker) no earlier than `foundAt` (ticksSinceBoot read before it was
 * looked up). A pid counts only if the process that has it started before then and is the same
 * process (same start time) after its descriptors were read: a pid reused since never lends its
 * sockets. Sorted, without repeats (a socket several processes share counts once).
 *
 * Bounded, and never holding the event loop: at most MAX_SCANNED_PROCESSES processes and
 * MAX_SCANNED_DESCRIPTORS descriptors are read, and each table up to MAX_TABLE_BYTES
 * (socket-table.ts), all of it through asynchronous reads. A task holding more sockets than that
 * has those past the bounds left out.
 */
export async function readTaskPorts(pids: Iterable<number>, foundAt: bigint): Promise<TaskPort[]> {
  const inodes = new Set<string>()
  // One process of each network namespace the task's processes are in: its tables are read through it.
  const namespaces = new Map<string, { pid: number; startTime: string }>()
  let descriptorsLeft = MAX_SCANNED_DESCRIPTORS
  for (const pid of [...new Set(pids)].slice(0, MAX_SCANNED_PROCESSES)) {
    if (descriptorsLeft <= 0) break
    const before = readProcStat(pid)
    if (!before || before.state === 'Z' || !startedBefore(before.startTime, foundAt)) continue
    const { sockets, read } = await socketInodes(pid, descriptorsLeft)
    descriptorsLeft -= read
    const namespace = await readLink(`/proc/${pid}/ns/net`)
    if (readProcStat(pid)?.startTime !== before.startTime || namespace === null) continue
    for (const inode of sockets) inodes.add(inode)
    if (sockets.length > 0 && !namespaces.has(namespace)) namespaces.set(namespace, { pid, startTime: before.startTime })
  }
  const ports = new Map<string, TaskPort>()
  for (const { pid, startTime } of namespaces.values()) {
    const sockets = await readSocketTables(pid)
    // Read through a process that is gone or another now: another namespace's table, whose inodes are not the task's anyway.
    if (readProcStat(pid)?.startTime !== startTime) continue
    for (const socket of sockets) {
      if (!inodes.has(socket.inode)) continue
      const port: TaskPort = { proto: socket.proto, address: socket.address, port: socket.port }
      ports.set(`${port.proto} ${port.address} ${port.port}`, port)
    }
  }
  return [...ports.values()].sort(comparePorts)
}

/** Whether two port lists (sorted, as readTaskPorts answers) are the same. */
export function samePorts(a: readonly TaskPort[] | undefined, b: readonly TaskPort[]): boolean {
  return a !== undefined && a.length === b.length && a.every((port, index) => comparePorts(port, b[index]!) === 0)
}

function comparePorts(a: TaskPort, b: TaskPort): number {
  return a.port - b.port || a.proto.localeCompare(b.proto) || a.address.localeCompare(b.address)
}

function startedBefore(startTime: string, foundAt: bigint): boolean {
  return /^\d+$/.test(startTime) && BigInt(startTime) < foundAt
}

/** The inodes of the sockets the process's first `most` descriptors hold (none when they cannot be read), and how many were read. */
async function socketInodes(pid: number, most: number): Promise<{ sockets: string[]; read: number }> {
  let entries: string[]
  try {
    entries = (await readdir(`/proc/${pid}/fd`)).slice(0, most)
  } catch {
    return { sockets: [], read: 0 }
  }
  const sockets: string[] = []
  for (let start = 0; start < entries.length; start += LINKS_AT_ONCE) {
    const targets = await Promise.all(entries.slice(start, start + LINKS_AT_ONCE).map((entry) => readLink(`/proc/${pid}/fd/${entry}`)))
    for (const target of targets) if (target?.startsWith('socket:[')) sockets.push(target.slice(8, -1))
  }
  return { sockets, read: entries.length }
}

async function readLink(path: string): Promise<string | null> {
  try {
    return await readlink(path)
  } catch {
    return null
  }
}
