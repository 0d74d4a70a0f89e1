import { EXIT_FILE, readRegularFileSync, withTaskFolderSync } from '../../spool/index.js'
import { signalName } from '../../protocol/index.js'
import type { KeeperUsage, SpawnExit } from './spawner.js'

const KEEPER_USAGE_FIELDS = ['cpuUserMs', 'cpuSystemMs', 'peakMemoryBytes', 'readBytes', 'writeBytes'] as const

/** An exit record is one short line; a file past this is not one (and is not read into memory). */
const MAX_EXIT_FILE_BYTES = 4096

/**
 * A task's exit file, as its keeper wrote it when the task ended (daemon/spawner/keeper.c; the
 * format and when it is written: daemon/spawner/PROTOCOL.md, "Exit file"). Read here only: the
 * helper never parses it, it says `gone` and the daemon reads the file. Files written by keepers of
 * the versions before (v 1, without usage; JSON with optional fields and no "v") are read too: such
 * a keeper may still run across an upgrade. Under `off` the task can replace the file: anything but a regular file (a
 * FIFO would block the daemon's start) is not read.
 *
 * Returns the exit (signal as its name, endedAt as an ISO time, pid the task's) or null when the
 * file is missing, unreadable or not a valid exit record. Synchronous: for recovery at start.
 */
export function readExitFile(path: string): (SpawnExit & { endedAt: string; pid: number }) | null {
  let text: string
  try {
    text = readRegularFileSync(path, MAX_EXIT_FILE_BYTES).toString('utf8')
  } catch {
    return null
  }
  return parseExitRecord(text)
}

/**
 * readExitFile of a task's exit.json, reached through the spool's and its folder's descriptors
 * (spool/task-folders.ts): a folder the task replaced (a link to another task's) is not read: null.
 */
export function readTaskExitFile(spoolRoot: string, id: string): ReturnType<typeof readExitFile> {
  try {
    return withTaskFolderSync(spoolRoot, id, (folder) => readExitFile(folder.file(EXIT_FILE)))
  } catch {
    return null
  }
}

/** What ended a task besides itself, as an exit file's `endedBy` says. */
const ENDED_BY = new Map<unknown, { lifelineBroke: boolean; leaseRanOut: boolean }>([
  ['itself', { lifelineBroke: false, leaseRanOut: false }],
  ['lifeline', { lifelineBroke: true, leaseRanOut: false }],
  ['lease', { lifelineBroke: false, leaseRanOut: true }],
])

/** The exit in an exit file's text, or null when it is not a valid exit record. */
export function parseExitRecord(text: string): (SpawnExit & { endedAt: string; pid: number }) | null {
  let record: unknown
  try {
    record = JSON.parse(text)
  } catch {
    return null
  }
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return null
  const fields = record as Record<string, unknown>
  const ending = fields.v === undefined ? previousEnding(fields) : fields.v === 1 ? fixedEnding(fields, 7) : fields.v === 2 ? fixedEnding(fields, 12) : null
  if (!ending) return null
  const usage = fields.v === 2 ? keeperUsage(fields) : undefined
  if (usage === null) return null
  const { pid, exitCode, signal, endedAtMs } = fields
  if (!isInteger(pid) || pid <= 0) return null
  if (!isInteger(endedAtMs) || endedAtMs < 0) return null
  const endedAt = new Date(endedAtMs)
  if (Number.isNaN(endedAt.getTime())) return null
  let exit: SpawnExit
  if (exitCode === null && isInteger(signal) && signal >= 1 && signal <= 64) exit = { exitCode: null, signal: signalName(signal) }
  else if (signal === null && isInteger(exitCode) && exitCode >= 0 && exitCode <= 255) exit = { exitCode, signal: null }
  else return null
  // Only when set: an ordinary exit reads exactly as it always did.
  return {
    pid,
    ...withLostOutput(endedBy(exit, ending.lifelineBroke, ending.leaseRanOut), ending.outputLostBytes || undefined),
    endedAt: endedAt.toISOString(),
    ...(usage ? { usage } : {}),
  }
}

/** The figures of the line with usage (v 2): every one a non-negative integer, or null (no exit record). */
function keeperUsage(fields: Record<string, unknown>): KeeperUsage | null {
  const usage = Object.fromEntries(KEEPER_USAGE_FIELDS.map((name) => [name, fields[name]]))
  return Object.values(usage).every((value) => isInteger(value) && value >= 0) ? (usage as unknown as KeeperUsage) : null
}

interface Ending {
  lifelineBroke: boolean
  leaseRanOut: boolean
  outputLostBytes: number
}

/** The fixed line's (v 1: seven fields; v 2: those and the five figures of usage), every one there. */
function fixedEnding(fields: Record<string, unknown>, count: number): Ending | null {
  if (Object.keys(fields).length !== count) return null
  const ended = ENDED_BY.get(fields.endedBy)
  const { outputLostBytes } = fields
  if (!ended || !isInteger(outputLostBytes) || outputLostBytes < 0) return null
  return { ...ended, outputLostBytes }
}

/** The previous version's (no v): `lifelineBroke`, `leaseRanOut` and `outputLostBytes` only when set. */
function previousEnding(fields: Record<string, unknown>): Ending | null {
  const { lifelineBroke, leaseRanOut, outputLostBytes } = fields
  if (lifelineBroke !== undefined && lifelineBroke !== true) return null
  if (leaseRanOut !== undefined && leaseRanOut !== true) return null
  if (outputLostBytes !== undefined && !(isInteger(outputLostBytes) && outputLostBytes > 0)) return null
  return { lifelineBroke: lifelineBroke === true, leaseRanOut: leaseRanOut === true, outputLostBytes: (outputLostBytes as number | undefined) ?? 0 }
}

/** The exit an exit file recorded, without the file's own fields (pid, endedAt). */
export function exitOf(recorded: SpawnExit): SpawnExit {
  return withLostOutput(
    endedBy({ exitCode: recorded.exitCode, signal: recorded.signal }, recorded.lifelineBroke === true, recorded.leaseRanOut === true),
    recorded.outputLostBytes,
  )
}

/** The exit, with the bytes of output its keeper could not write, when there were any. */
export function withLostOutput(exit: SpawnExit, outputLostBytes: number | undefined): SpawnExit {
  return outputLostBytes ? { ...exit, outputLostBytes } : exit
}

/** The exit, with what ended it besides itself when something did (its keeper: lifeline, lease). */
export function endedBy(exit: SpawnExit, lifelineBroke: boolean, leaseRanOut: boolean): SpawnExit {
  if (lifelineBroke) return { ...exit, lifelineBroke: true }
  if (leaseRanOut) return { ...exit, leaseRanOut: true }
  return exit
}

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value)
}
