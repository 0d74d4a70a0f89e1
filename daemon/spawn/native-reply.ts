import { existsSync } from 'node:fs'
import { constants as osConstants } from 'node:os'
import { resolve as resolvePath } from 'node:path'
import { signalName } from '../../protocol/index.js'
import { endedBy, withLostOutput } from './exit-file.js'
import {
  cgroupFailure,
  cwdChangedFailure,
  dataFileFailure,
  hiddenFailure,
  idmapFailure,
  keyringFailure,
  pinnedDirFailure,
  userFailure,
  type AttachRequest,
  type KeeperRef,
  type PinnedDir,
  type SpawnExit,
  type SpawnRequest,
} from './spawner.js'

/**
 * The native spawner's replies: one line each on the helper's stdout (daemon/spawner/PROTOCOL.md,
 * "Replies"), parsed here into what they say, and a failure's words turned into its message.
 */
export type Reply =
  | { kind: 'pong'; id: string }
  | { kind: 'started'; id: number; pid: number; keeper: KeeperRef | null }
  | { kind: 'attached'; id: number }
  | { kind: 'failed-attach'; id: number; code: string }
  | { kind: 'failed'; id: number; stage: string; code: string; index: number | undefined }
  /** The program of a request that reportsSetup ended before it said so: how, and the last of what it said. */
  | { kind: 'failed-setup'; id: number; timedOut: boolean; exit: SpawnExit; said: string }
  | { kind: 'exited'; pid: number; exit: SpawnExit }
  /** The keeper is gone without a word about the exit: the task's exit file says how it ended. */
  | { kind: 'gone'; pid: number }
  | { kind: 'error' }
  | { kind: 'unexpected' }

export function parseReply(line: string): Reply {
  const parts = line.split(' ')
  switch (parts[0]) {
    case 'pong':
      return { kind: 'pong', id: parts[1] ?? '' }
    case 'started':
      return {
        kind: 'started',
        id: Number(parts[1]),
        pid: Number(parts[2]),
        keeper: parts[3] === undefined ? null : { pid: Number(parts[3]), startTicks: Number(parts[4]) },
      }
    case 'attached':
      return { kind: 'attached', id: Number(parts[1]) }
    case 'failed':
      if (parts[2] === 'attach') return { kind: 'failed-attach', id: Number(parts[1]), code: errnoName(Number(parts[3])) }
      if (parts[2] === 'setup') {
        const timedOut = errnoName(Number(parts[3])) === 'ETIMEDOUT'
        return { kind: 'failed-setup', id: Number(parts[1]), timedOut, exit: keeperExit(parts[4], parts[5]), said: fromHex(parts[6]) }
      }
      return {
        kind: 'failed',
        id: Number(parts[1]),
        stage: parts[2] ?? 'exec',
        code: errnoName(Number(parts[3])),
        index: parts[4] === undefined ? undefined : Number(parts[4]),
      }
    case 'exited': {
      const exit = keeperExit(parts[2], parts[3])
      // A lifeline that broke is never said here: no helper was left to hear it (the exit file says).
      const words = parts.slice(4)
      return { kind: 'exited', pid: Number(parts[1]), exit: withLostOutput(endedBy(exit, false, words.includes('lease')), lostWord(words)) }
    }
    case 'gone':
      return { kind: 'gone', pid: Number(parts[1]) }
    case 'error':
      return { kind: 'error' }
    default:
      return { kind: 'unexpected' }
  }
}

/** An exit code (-1 for a signal) and a signal number (0 for an exit), as keepers say them. */
function keeperExit(code: string | undefined, signal: string | undefined): SpawnExit {
  return Number(code) === -1 ? { exitCode: null, signal: signalName(Number(signal)) } : { exitCode: Number(code), signal: null }
}

/** What a program said before its setup failed, as its keeper passed it on (hex); trimmed like the node spawner's. */
function fromHex(hex: string | undefined): string {
  return /^(?:[0-9a-f]{2})*$/.test(hex ?? '')
    ? Buffer.from(hex ?? '', 'hex')
        .toString('utf8')
        .trim()
    : ''
}

/** The count in an `exited` line's `lost=<n>` word, when one is there. */
function lostWord(words: string[]): number | undefined {
  const word = words.find((each) => each.startsWith('lost='))
  const value = word === undefined ? NaN : Number(word.slice(5))
  return Number.isSafeInteger(value) && value > 0 ? value : undefined
}

export function attachFailure(request: AttachRequest, code: string): string {
  const keeper = `the keeper ${request.keeper.pid} of pid ${request.taskPid}`
  if (code === 'ESRCH') return `${keeper} is gone (no such process, or another one has its pid now)`
  if (code === 'ENOSYS') return `cannot watch ${keeper}: pidfd_open is missing (Linux 5.3 or later is needed)`
  return `cannot watch ${keeper}: ${code}`
}

const ERRNO_NAMES = new Map<number, string>()
for (const [name, value] of Object.entries(osConstants.errno)) if (!ERRNO_NAMES.has(value)) ERRNO_NAMES.set(value, name)

function errnoName(value: number): string {
  return ERRNO_NAMES.get(value) ?? `errno ${value}`
}

/** The pinned folder, or past them the view, a failure's index names. */
function folderAt(request: SpawnRequest, index: number): PinnedDir | undefined {
  const pinned = request.pinnedDirs ?? []
  return index < pinned.length ? pinned[index] : request.idmappedViews?.[index - pinned.length]
}

export function failureMessage(stage: string, code: string, index: number | undefined, request: SpawnRequest): string {
  switch (stage) {
    case 'output':
      // ENXIO: something that is not a regular file is in its place (regular.c).
      return code === 'ENXIO'
        ? `the output file ${request.outputFile} is not a regular file (a FIFO, socket or device put in its place?)`
        : `could not open the output file ${request.outputFile}: ${code}`
    case 'stdin':
      if (!request.stdinFifo) return `could not open /dev/null as stdin: ${code}`
      if (code === 'ENXIO') return `the task's stdin pipe is not a FIFO: ${request.stdinFifo}`
      return `could not make or open the task's stdin pipe ${request.stdinFifo}: ${code}`
    case 'lifeline':
      return `could not make the task's keeper watch its daemon, so that the task ends with it: ${code}`
    case 'tty':
      if (code === 'ENXIO') return `the task's resize pipe is not a FIFO: ${request.terminal?.resizeFifo}`
      return `could not give the task a terminal: ${code}`
    case 'extra': {
      const file = index === undefined ? request.extraFiles.join(', ') : request.extraFiles[index]
      return `could not open ${file}: ${code}`
    }
    case 'data':
      return dataFileFailure(index ?? 0, code)
    case 'pinned': {
      const pinned = index === undefined ? undefined : folderAt(request, index)
      return pinnedDirFailure(pinned?.path ?? (request.pinnedDirs ?? []).map((dir) => dir.path).join(', '), code)
    }
    case 'idmap':
      return idmapFailure(index === undefined ? undefined : (folderAt(request, index)?.path ?? `folder ${index}`), code)
    case 'hidden':
      return hiddenFailure(
        index === undefined
          ? undefined
          : (request.hiddenPaths?.[index] ?? request.coveredFiles?.[index - (request.hiddenPaths?.length ?? 0)]?.path ?? `place ${index}`),
        code,
      )
    case 'keyring':
      return keyringFailure(code)
    case 'netns':
      if (code === 'ESTALE') return `the private network the task was to join (${request.netns?.path}) is gone; it was not given another`
      return `could not join the task's private network ${request.netns?.path ?? ''}: ${code}`
    case 'user':
      return request.user ? userFailure(request.user, code) : `could not switch user: ${code}`
    case 'cgroup': {
      const group = index === undefined ? request.cgroups.map((each) => each.path).join(', ') : request.cgroups[index]?.path
      return cgroupFailure(group ?? `${index}`, code)
    }
    case 'limits':
      return `could not set the resource limits (open files ${request.limits.openFiles}, file size ${request.limits.fileSizeBytes} bytes): ${code}`
    case 'setsid':
      return `could not start a new session: ${code}`
    case 'chdir':
      if (code === 'ESTALE') return cwdChangedFailure(request.cwd)
      if (code === 'ENOENT') return `cwd does not exist: ${request.cwd}`
      if (code === 'ENOTDIR') return `cwd is not a directory: ${request.cwd}`
      return `cwd is not usable: ${request.cwd} (${code})`
    case 'exec':
      if (code === 'ENOENT') {
        // A bare name was searched on PATH; a path that exists has a missing interpreter (#!) or loader.
        if (!request.file.includes('/')) return `no such program: ${request.file}`
        return existsSync(resolvePath(request.cwd, request.file))
          ? `the interpreter of ${request.file} is missing (ENOENT)`
          : `no such program: ${request.file}`
      }
      if (code === 'EACCES') return `program is not executable: ${request.file}`
      if (code === 'ENOEXEC') return `program is not a valid executable: ${request.file}`
      return `could not start ${request.file}: ${code}`
    case 'fork':
      return `could not fork a process for ${request.file}: ${code}`
    default:
      return `could not start ${request.file} (${stage}): ${code}`
  }
}
