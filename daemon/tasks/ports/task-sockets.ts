import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { readProcStat, type TaskPort } from '../../../protocol/index.js'
import { readSocketTables } from './socket-table.js'

/**
 * Clock ticks per second of /proc's times (USER_HZ): 100 on every architecture Linux runs tend on,
 * whatever the kernel's own tick rate.
 */
const USER_HZ = 100

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
 */
export function readTaskPorts(pids: Iterable<number>, foundAt: bigint): TaskPort[] {
  const inodes = new Set<string>()
  // One process of each network namespace the task's processes are in: its tables are read through it.
  const namespaces = new Map<string, { pid: number; startTime: string }>()
  for (const pid of new Set(pids)) {
    const before = readProcStat(pid)
    if (!before || before.state === 'Z' || !startedBefore(before.startTime, foundAt)) continue
    const sockets = socketInodes(pid)
    const namespace = readLink(`/proc/${pid}/ns/net`)
    if (readProcStat(pid)?.startTime !== before.startTime || namespace === null) continue
    for (const inode of sockets) inodes.add(inode)
    if (sockets.length > 0 && !namespaces.has(namespace)) namespaces.set(namespace, { pid, startTime: before.startTime })
  }
  const ports = new Map<string, TaskPort>()
  for (const { pid, startTime } of namespaces.values()) {
    const sockets = readSocketTables(pid)
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

/** The inodes of the sockets the process's descriptors hold (none when they cannot be read). */
function socketInodes(pid: number): string[] {
  let entries: string[]
  try {
    entries = readdirSync(`/proc/${pid}/fd`)
  } catch {
    return []
  }
  const inodes: string[] = []
  for (const entry of entries) {
    const target = readLink(`/proc/${pid}/fd/${entry}`)
    if (target?.startsWith('socket:[')) inodes.push(target.slice(8, -1))
  }
  return inodes
}

function readLink(path: string): string | null {
  try {
    return readlinkSync(path)
  } catch {
    return null
  }
}
