import { spawn } from 'node:child_process'
import { closeSync, constants, fstatSync, mkdirSync, openSync, readSync, watch, type FSWatcher } from 'node:fs'
import { connect } from 'node:net'
import { dirname } from 'node:path'
import { TendError } from '../protocol/index.js'
import { isUnwritableHome, openHomeFileSync, unwritableDetail } from '../protocol/home-file.js'
import type { NormalizedClientOptions } from './options.js'
import { cliEntry } from './package-root.js'

/** Exit code of `tend daemon` when another daemon already holds the home. */
const DAEMON_ALREADY_RUNNING = 3

/** Longest pause between two tries while a daemon starts, when no change in its folder wakes the client first. */
const POLL_MS = 20

/** Answers whether a daemon accepts connections on the socket. */
export function socketAnswers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(socketPath)
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/**
 * Starts a daemon in the background unless one answers. Two clients racing here both spawn one;
 * the instance lock lets exactly one live, and both wait for the socket it opens.
 */
export async function ensureDaemon(options: NormalizedClientOptions): Promise<void> {
  const { layout } = options
  if (await socketAnswers(layout.socket)) return
  let startupLog: number
  try {
    mkdirSync(layout.home, { recursive: true, mode: 0o700 })
    // In the home, which a task under `off` can write: never a FIFO waited on or a link written through.
    startupLog = openHomeFileSync(layout.startupLog, { truncate: true }).fd
  } catch (error) {
    if (isUnwritableHome(error)) throw new TendError('TEND_ERR_HOME_UNWRITABLE', { path: layout.home, detail: unwritableDetail(error) }, { cause: error })
    throw error
  }
  let exitCode: number | null = null
  try {
    const child = spawn(process.execPath, [cliEntry(), 'daemon'], {
      detached: true,
      stdio: ['ignore', 'ignore', startupLog],
      // Whoever started this client may be a service manager's main process: the daemon is not,
      // and its READY=1 would speak for it (docs/service.md).
      env: { ...options.env, NOTIFY_SOCKET: undefined } as NodeJS.ProcessEnv,
    })
    child.once('exit', (code) => (exitCode = code ?? 1))
    child.once('error', () => (exitCode = 1))
    child.unref()
  } finally {
    closeSync(startupLog)
  }
  const deadline = Date.now() + options.startTimeoutMs
  // The daemon creates its socket, then changes its mode, in the socket's
  // folder: each change wakes the client to try at once, instead of at the next poll.
  const folderChanged = watchFolder(dirname(layout.socket))
  try {
    while (Date.now() < deadline) {
      if (await socketAnswers(layout.socket)) return
      if (exitCode !== null && exitCode !== DAEMON_ALREADY_RUNNING) {
        throw new TendError('TEND_ERR_DAEMON_START_FAILED', { detail: `tend daemon exited with ${exitCode}: ${readStartupLog(layout.startupLog)}` })
      }
      await folderChanged.next(POLL_MS)
    }
  } finally {
    folderChanged.close()
  }
  throw new TendError('TEND_ERR_DAEMON_START_FAILED', {
    detail: `no answer on ${layout.socket} after ${options.startTimeoutMs}ms: ${readStartupLog(layout.startupLog)}`,
  })
}

/** next(ms) resolves at the next change in `folder`, or after ms; without a watch (an unwatchable file system), after ms. */
function watchFolder(folder: string): { next: (ms: number) => Promise<void>; close: () => void } {
  let wake = () => {}
  let watcher: FSWatcher | undefined
  try {
    watcher = watch(folder, { persistent: false }, () => wake())
    watcher.on('error', () => watcher?.close())
  } catch {
    watcher = undefined
  }
  return {
    next: (ms) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => resolve(), ms)
        wake = () => {
          clearTimeout(timer)
          resolve()
        }
      }),
    close: () => watcher?.close(),
  }
}

/** Its last 2000 bytes, read the way it was opened: no link followed, no FIFO waited on. */
function readStartupLog(path: string): string {
  let fd: number | undefined
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY)
    const info = fstatSync(fd)
    if (!info.isFile()) return '(no startup log)'
    const buffer = Buffer.alloc(Math.min(info.size, 2000))
    const read = readSync(fd, buffer, 0, buffer.length, info.size - buffer.length)
    return buffer.subarray(0, read).toString('utf8').trim() || '(it printed nothing)'
  } catch {
    return '(no startup log)'
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}
