import { EXIT_FILE, readRegularFileSync, withTaskFolderSync } from '../../spool/index.js'
import { signalName } from '../../protocol/index.js'
import type { SpawnExit } from './spawner.js'

/** An exit record is one short line; a file past this is not one (and is not read into memory). */
const MAX_EXIT_FILE_BYTES = 4096

/**
 * A task's exit file, as its keeper wrote it when the task ended (daemon/spawner/keeper.c): one
 * JSON object on one line, `{"pid":P,"exitCode":N|null,"signal":N|null,"endedAtMs":MS}`, where
 * exactly one of exitCode (0..255) and signal (a signal number) is a number and endedAtMs is the
 * wall-clock time of the end; `"lifelineBroke":true` is added when the keeper ended the task
 * because the spawner's helper was gone (a task started to end with its daemon), and
 * `"leaseRanOut":true` when it did because the lease the daemon wrote ran out, and
 * `"outputLostBytes":N` (N > 0) when the disk refused N bytes of a terminal task's output. The keeper writes it whole (temporary file, fsync, rename), so a file
 * that is there is complete; it is missing when the task has not ended yet, when it never started,
 * when its keeper was SIGKILLed, or when the disk refused it for a minute. Under `off` the task can
 * replace it: anything but a regular file (a FIFO would block the daemon's start) is not read.
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

/** The exit in an exit file's text, or null when it is not a valid exit record. */
export function parseExitRecord(text: string): (SpawnExit & { endedAt: string; pid: number }) | null {
  let record: unknown
  try {
    record = JSON.parse(text)
  } catch {
    return null
  }
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return null
  const { pid, exitCode, signal, endedAtMs, lifelineBroke, leaseRanOut, outputLostBytes } = record as Record<string, unknown>
  if (!isInteger(pid) || pid <= 0) return null
  if (!isInteger(endedAtMs) || endedAtMs < 0) return null
  if (lifelineBroke !== undefined && lifelineBroke !== true) return null
  if (leaseRanOut !== undefined && leaseRanOut !== true) return null
  if (outputLostBytes !== undefined && !(isInteger(outputLostBytes) && outputLostBytes > 0)) return null
  const endedAt = new Date(endedAtMs)
  if (Number.isNaN(endedAt.getTime())) return null
  let exit: SpawnExit
  if (exitCode === null && isInteger(signal) && signal >= 1 && signal <= 64) exit = { exitCode: null, signal: signalName(signal) }
  else if (signal === null && isInteger(exitCode) && exitCode >= 0 && exitCode <= 255) exit = { exitCode, signal: null }
  else return null
  // Only when set: an ordinary exit reads exactly as it always did.
  return { pid, ...withLostOutput(endedBy(exit, lifelineBroke === true, leaseRanOut === true), outputLostBytes as number | undefined), endedAt: endedAt.toISOString() }
}

/** The exit an exit file recorded, without the file's own fields (pid, endedAt). */
export function exitOf(recorded: SpawnExit): SpawnExit {
  return withLostOutput(endedBy({ exitCode: recorded.exitCode, signal: recorded.signal }, recorded.lifelineBroke === true, recorded.leaseRanOut === true), recorded.outputLostBytes)
}

/** The exit, with the bytes of output its keeper could not write, when there were any. */
export function withLostOutput(exit: SpawnExit, outputLostBytes: number | undefined): SpawnExit {
  return outputLostBytes ? { ...exit, outputLostBytes } : exit
}

/** The count in the helper's `lost=<n>` word (see tend-spawner.c), when one is there. */
export function lostWord(words: string[]): number | undefined {
  const word = words.find((each) => each.startsWith('lost='))
  const value = word === undefined ? NaN : Number(word.slice(5))
  return Number.isSafeInteger(value) && value > 0 ? value : undefined
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
