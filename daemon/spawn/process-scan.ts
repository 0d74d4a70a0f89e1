import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { setImmediate as nextTurn, setTimeout as delay } from 'node:timers/promises'
import { readProcStat } from '../../protocol/index.js'

/** Every marker starts so (run-name.ts): a process without it in its environment is no task's. */
const MARKER_PREFIX = 'TEND_TASK_'

/** Entries of /proc read between two turns of the event loop, so that a scan never holds it long. */
const ENTRIES_PER_TURN = 32
/** Scans start at most this often; every request made meanwhile shares the next one. */
const SCAN_INTERVAL_MS = 25

/** A sandbox as the host sees it: bubblewrap's init (pid 1 inside) and the processes beside it. */
export interface SandboxProcesses {
  /** The pid namespace, as /proc/<pid>/ns/pid reads (`pid:[inode]`). */
  namespace: string
  init: ProcessIdentity
  /** Every other process in the namespace (host pids): the command and all it started. */
  processes: number[]
}

/** A pid with its start time (clock ticks since boot): a reused pid has another. */
export interface ProcessIdentity {
  pid: number
  startTime: string
}

/**
 * Finds live processes whose environment carries one of `markers` (whole `NAME=value` entries,
 * taskMarker in run-name.ts; descendants inherit it even after setsid or a double fork). A marker
 * names one run of one task on one daemon, so neither a reused pid nor another daemon's run of the
 * same task id is ever taken for it. Answers a map from marker to pids. Zombies and the daemon
 * itself never match.
 */
export async function findTaskProcesses(markers: Iterable<string>): Promise<Map<string, number[]>> {
  const ids = [...markers]
  if (ids.length === 0) return new Map()
  const scan = await sharedScan({ markers: ids, monitors: [] })
  const found = new Map<string, number[]>()
  for (const id of ids) {
    const pids = scan.marked.get(id)
    if (pids) found.set(id, pids)
  }
  return found
}

/**
 * The sandbox that a bubblewrap monitor (a sandboxed task's leader, on the host side) holds: its
 * child in another pid namespace is the sandbox's init, and the sandbox's processes are exactly
 * those in that namespace, whatever they did to their environment, session or parents. Null when
 * it has none: not cloned yet, or its init has exited.
 */
export async function findSandboxProcesses(monitor: number): Promise<SandboxProcesses | null> {
  return (await sharedScan({ markers: [], monitors: [monitor] })).sandboxes.get(monitor) ?? null
}

/** The process's state letter (`R`, `S`, `T`, `Z`, …), or null when there is no such process. */
export function processState(pid: number): string | null {
  return readProcStat(pid)?.state ?? null
}

/** Whether this very process (not a reuse of its pid) is alive: present and not a zombie. */
export function isAliveIdentity(identity: ProcessIdentity): boolean {
  const stat = readProcStat(identity.pid)
  return stat !== null && stat.startTime === identity.startTime && stat.state !== 'Z' && stat.state !== 'X'
}

/**
 * The identity of a task's leader, read when the daemon learns its pid: null when that pid is not
 * the leader (gone already, or its parent is not `parent`, the keeper or spawner that started it).
 */
export function leaderIdentity(pid: number, parent: number): ProcessIdentity | null {
  const stat = readProcStat(pid)
  return stat !== null && stat.parent === parent && stat.state !== 'Z' && stat.state !== 'X' ? { pid, startTime: stat.startTime } : null
}

/**
 * Whether a signal to `leader.pid` (or its process group) can only reach what the daemon started:
 * no process has that pid (a group of that id can then still be the task's: the kernel gives no
 * process a pid that a live group or session still uses), or the one that has it is the leader
 * (same start time). A leader null (not known to be the daemon's) is never signalled while its pid lives.
 */
export function isLeaderPid(pid: number, leader: ProcessIdentity | null): boolean {
  const stat = readProcStat(pid)
  return stat === null || (leader !== null && leader.pid === pid && stat.startTime === leader.startTime)
}

/** Whether `pid` still lives in `namespace` (checked right before a signal, against pid reuse). */
export function isInNamespace(pid: number, namespace: string): boolean {
  return readLink(`/proc/${pid}/ns/pid`) === namespace
}

interface ScanRequest {
  markers: readonly string[]
  monitors: readonly number[]
}

interface ScanResult {
  marked: Map<string, number[]>
  sandboxes: Map<number, SandboxProcesses>
}

interface Batch {
  markers: string[]
  monitors: number[]
  result: Promise<ScanResult>
}

let nextBatch: Batch | null = null
let lastScan: { startedAt: number; done: Promise<unknown> } = { startedAt: -Infinity, done: Promise.resolve() }

/**
 * One pass over /proc answers every request made while it waits for its turn: tasks being killed
 * at the same time share their scans, and scans start at most every SCAN_INTERVAL_MS.
 */
function sharedScan(request: ScanRequest): Promise<ScanResult> {
  nextBatch ??= createBatch()
  nextBatch.markers.push(...request.markers)
  nextBatch.monitors.push(...request.monitors)
  return nextBatch.result
}

function createBatch(): Batch {
  const batch: Batch = { markers: [], monitors: [], result: Promise.resolve({ marked: new Map(), sandboxes: new Map() }) }
  batch.result = (async () => {
    await lastScan.done
    const waitMs = lastScan.startedAt + SCAN_INTERVAL_MS - Date.now()
    if (waitMs > 0) await delay(waitMs)
    // From here on, new requests wait for the next batch.
    nextBatch = null
    const done = scanProc(new Set(batch.markers), new Set(batch.monitors))
    lastScan = { startedAt: Date.now(), done: done.catch(() => undefined) }
    return done
  })()
  return batch
}

async function scanProc(markerIds: Set<string>, monitors: Set<number>): Promise<ScanResult> {
  // The marker either opens the environment block or follows another variable's NUL.
  const wanted = new Map<string, { first: Buffer; later: Buffer }>()
  for (const marker of markerIds) {
    wanted.set(marker, { first: Buffer.from(`${marker}\0`), later: Buffer.from(`\0${marker}\0`) })
  }
  const prefix = Buffer.from(MARKER_PREFIX)
  const hostNamespace = monitors.size > 0 ? readLink('/proc/self/ns/pid') : null
  const marked = new Map<string, number[]>()
  const namespaced: Array<{ pid: number; namespace: string }> = []
  const pids = readdirSync('/proc')
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid !== process.pid)
  await inTurns(pids, (pid) => {
    if (hostNamespace !== null) {
      // A link, not the process's memory: cheap, and never waits on a busy process's mm lock.
      const namespace = readLink(`/proc/${pid}/ns/pid`)
      if (namespace !== null && namespace !== hostNamespace) namespaced.push({ pid, namespace })
    }
    if (wanted.size > 0) matchMarkers(pid, prefix, wanted, marked)
  })
  const sandboxes = new Map<number, SandboxProcesses>()
  // Only the init of a namespace has its parent outside it; the monitor is that parent.
  await inTurns(namespaced, ({ pid, namespace }) => {
    const stat = readProcStat(pid)
    if (stat === null || !monitors.has(stat.parent) || stat.state === 'Z') return
    const processes = namespaced.filter((entry) => entry.namespace === namespace && entry.pid !== pid).map((entry) => entry.pid)
    sandboxes.set(stat.parent, { namespace, init: { pid, startTime: stat.startTime }, processes })
  })
  return { marked, sandboxes }
}

function matchMarkers(pid: number, prefix: Buffer, wanted: Map<string, { first: Buffer; later: Buffer }>, found: Map<string, number[]>): void {
  let environ: Buffer
  try {
    environ = readFileSync(`/proc/${pid}/environ`)
  } catch {
    return
  }
  if (environ.indexOf(prefix) === -1) return
  for (const [id, marker] of wanted) {
    if (environ.indexOf(marker.first) === 0 || environ.indexOf(marker.later) !== -1) {
      const pids = found.get(id) ?? []
      pids.push(pid)
      found.set(id, pids)
    }
  }
}

/** Runs `each` over `items`, giving the event loop a turn every ENTRIES_PER_TURN items. */
async function inTurns<T>(items: readonly T[], each: (item: T) => void): Promise<void> {
  for (let start = 0; start < items.length; start += ENTRIES_PER_TURN) {
    if (start > 0) await nextTurn()
    // Most entries are kernel threads whose environ cannot be read; without stack traces those
    // failed reads cost a fifth as much (docs/benchmarks.md). Restored before every yield.
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      for (const item of items.slice(start, start + ENTRIES_PER_TURN)) each(item)
    } finally {
      Error.stackTraceLimit = stackTraceLimit
    }
  }
}

function readLink(path: string): string | null {
  try {
    return readlinkSync(path)
  } catch {
    return null
  }
}
