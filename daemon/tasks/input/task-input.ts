import { constants } from 'node:fs'
import { lstat, open, type FileHandle } from 'node:fs/promises'
import { setTimeout as delay } from 'node:timers/promises'
import type { Logger } from 'pino'
import { backoffMs, isFinished, TendError, type Task, type TaskInputResult } from '../../../protocol/index.js'
import { fileKind, INPUT_FIFO, INPUT_LOG, openRegularFileForWrite, spoolFolders, type OpenFolder } from '../../../spool/index.js'
import { isAliveIdentity } from '../../spawn/process-scan.js'
import type { TaskStore } from '../../store/task-store.js'
import { markStdinClosed } from '../transitions.js'

/**
 * How long one input waits for a full pipe to drain (the task reading slower than it is sent)
 * before it answers with what it could write. A task that does not read at all must not hold a
 * request, or the daemon, for longer.
 */
export const INPUT_WAIT_MS = 2000
/** What a terminal's end of input is: Ctrl-D, the EOF character every terminal starts with. */
const END_OF_FILE_CHARACTER = Buffer.from([0x04])
/** First and last pause between two tries at a full pipe. */
const RETRY_FIRST_MS = 5
const RETRY_MAX_MS = 100

/**
 * Writes to tasks' stdin pipes. A pipe is a FIFO in the task's spool folder that its keeper holds
 * open (docs/architecture.md, "stdin"): each input opens it for writing without blocking, writes,
 * and closes it again, so nothing of the daemon's is needed for the pipe to live on, and a later
 * daemon writes to it the same way. Every input is appended to input.log (first, see writeToPipe). End of input is
 * the keeper's SIGUSR1: it lets go of the pipe, and the task reads EOF once it has read the rest.
 * Inputs to one task are written one after another, never interleaved.
 */
export class TaskInput {
  private readonly queues = new Map<string, Promise<unknown>>()

  constructor(
    private readonly store: TaskStore,
    private readonly spoolRoot: string,
    private readonly log: Logger,
  ) {}

  /** Writes `data`, then closes the stdin when `eof` (on a terminal: types its EOF character); answers once done (TendError otherwise). */
  send(id: string, data: Buffer, eof: boolean): Promise<TaskInputResult> {
    const previous = this.queues.get(id) ?? Promise.resolve()
    const next = previous.then(
      () => this.write(id, data, eof),
      () => this.write(id, data, eof),
    )
    this.queues.set(id, next)
    void next.then(
      () => this.queues.get(id) === next && this.queues.delete(id),
      () => this.queues.get(id) === next && this.queues.delete(id),
    )
    return next
  }

  private async write(id: string, data: Buffer, eof: boolean): Promise<TaskInputResult> {
    const task = await startedTask(this.store, id)
    // Decided from the newest version: a close still on its way to disk refuses input already.
    refuseInput(this.store.current(id))
    const acceptedBytes = data.length > 0 ? await this.writeToPipe(task, data) : 0
    if (acceptedBytes < data.length) {
      throw new TendError('TEND_ERR_STDIN_FULL', { id, acceptedBytes, totalBytes: data.length, waitMs: INPUT_WAIT_MS })
    }
    if (eof && task.tty) {
      // A terminal's end of input is its EOF character, typed: the line discipline (or a REPL
      // reading raw) ends the read with it, and the terminal stays, as it does for a person.
      const typed = await this.writeToPipe(task, END_OF_FILE_CHARACTER)
      if (typed < END_OF_FILE_CHARACTER.length)
        throw new TendError('TEND_ERR_STDIN_FULL', { id, acceptedBytes, totalBytes: data.length + 1, waitMs: INPUT_WAIT_MS })
    } else if (eof) {
      endOfInput(this.store.current(id))
      await this.store.transition(id, (latest) => markStdinClosed(latest))
      this.log.info({ taskId: id }, 'task stdin closed')
    }
    const inputBytes = await this.inFolder(this.store.get(id), (folder) => lstat(folder.file(INPUT_LOG))).then(
      (info) => (info.isFile() ? info.size : 0),
      () => 0,
    )
    return { acceptedBytes, eof, inputBytes, task: this.store.get(id) }
  }

  /**
   * Runs `use` with the task's folder held open by descriptor (spool/task-folders.ts): a task under
   * `off` can put a link to another task's folder at its folder's name, and its input must never
   * reach that task's stdin or input.log. A folder that is not the one tend made is the pipe gone.
   */
  private async inFolder<T>(task: Task, use: (folder: OpenFolder) => Promise<T>): Promise<T> {
    let folder: OpenFolder
    try {
      folder = spoolFolders(this.spoolRoot).open(task.id)
    } catch (error) {
      const { code, message } = error as NodeJS.ErrnoException
      throw new TendError(
        'TEND_ERR_PIPE_GONE',
        { what: 'stdin pipe', id: task.id, detail: `its spool folder cannot be used: ${code ?? message} (replaced, by the task itself?)` },
        { cause: error },
      )
    }
    try {
      return await use(folder)
    } finally {
      folder.close()
    }
  }

  /**
   * Writes what the pipe takes within INPUT_WAIT_MS; answers how many bytes that was (all logged).
   * input.log is the record of what was sent, so it is written first, durably, and the pipe after:
   * a crash between the two leaves at most this input in the log that the task never got, never a
   * byte the task got missing from it. What the pipe did not take is cut off the log again.
   */
  private async writeToPipe(task: Task, data: Buffer): Promise<number> {
    // Both opened through the folder's descriptor, which may be let go of once they are open.
    const { pipe, log } = await this.inFolder(task, async (folder) => {
      const opened = await openKeeperFifo(task, folder.file(INPUT_FIFO), 'stdin pipe')
      try {
        return { pipe: opened, log: await this.logInput(task.id, folder, data) }
      } catch (error) {
        await opened.close()
        throw error
      }
    })
    let written = 0
    try {
      const deadline = Date.now() + INPUT_WAIT_MS
      // Tries at a full pipe since it last took bytes: the pause doubles from the first.
      let retry = 0
      while (written < data.length) {
        const chunk = await writeSome(task, pipe, data.subarray(written))
        if (chunk === 'gone') break
        if (chunk > 0) {
          written += chunk
          retry = 0
          continue
        }
        if (Date.now() >= deadline) break
        await delay(Math.min(backoffMs(retry++, RETRY_FIRST_MS, RETRY_MAX_MS), Math.max(1, deadline - Date.now())))
      }
    } finally {
      await pipe.close()
      if (log) await this.settleLog(task.id, log, written)
    }
    const logged = Math.min(written, log?.kept ?? 0)
    if (written > logged) await this.recordLoss(task.id, written - logged)
    if (written < data.length) this.log.warn({ taskId: task.id, acceptedBytes: written, totalBytes: data.length }, 'task stdin full: input cut short')
    return written
  }

  /**
   * Appends the input to input.log and syncs it, before any of it reaches the pipe; answers the
   * open log, where the input begins in it and how much of it the log kept (null when it could not
   * be opened: a log that cannot be written does not undo the input). What reaches the pipe but not
   * the log is never silent: the caller adds it to the task's inputLogLostBytes. A task under `off`
   * can replace input.log: a link or FIFO there is refused, not followed.
   */
  private async logInput(id: string, folder: OpenFolder, bytes: Buffer): Promise<LoggedInput | null> {
    let handle: FileHandle | null = null
    try {
      handle = await openRegularFileForWrite(folder.file(INPUT_LOG), { append: true })
      const offset = (await handle.stat()).size
      let kept = 0
      try {
        // A write may take part of the bytes (the disk filling up): the rest is written again or lost.
        while (kept < bytes.length) {
          const { bytesWritten } = await handle.write(bytes, kept, bytes.length - kept)
          if (bytesWritten <= 0) break
          kept += bytesWritten
        }
        await handle.datasync()
      } catch (error) {
        this.log.error({ taskId: id, err: error, lostBytes: bytes.length - kept }, 'input.log could not keep all of the input')
      }
      return { handle, offset, kept }
    } catch (error) {
      await handle?.close().catch(() => undefined)
      this.log.error({ taskId: id, err: error, lostBytes: bytes.length }, 'input.log could not be appended to')
      return null
    }
  }

  private async recordLoss(id: string, lostBytes: number): Promise<void> {
    await this.store
      .transition(id, (task) => Object.assign({}, task, { inputLogLostBytes: (task.inputLogLostBytes ?? 0) + lostBytes }))
      .catch((error: unknown) => this.log.error({ taskId: id, err: error, lostBytes }, 'the bytes input.log lost could not be recorded'))
  }

  /** Cuts the log back to what the pipe took (on the descriptor it was written through), then closes it. */
  private async settleLog(id: string, log: LoggedInput, sentBytes: number): Promise<void> {
    try {
      const end = log.offset + Math.min(sentBytes, log.kept)
      if ((await log.handle.stat()).size > end) {
        await log.handle.truncate(end)
        await log.handle.datasync()
      }
    } catch (error) {
      this.log.error({ taskId: id, err: error }, 'input.log could not be cut back to what the task was sent')
    } finally {
      await log.handle.close().catch(() => undefined)
    }
  }
}

/** input.log, open, with where the input being sent begins in it. */
interface LoggedInput {
  handle: FileHandle
  offset: number
  /** How many of the input's bytes the log holds (fewer when the disk refused the rest). */
  kept: number
}

/**
 * The task, once it is no longer queued or INPUT_WAIT_MS has passed: input sent right after the
 * start (an agent's first line) waits for the launch instead of failing.
 */
export function startedTask(store: TaskStore, id: string): Promise<Task> {
  if ((store.get(id).stdin ?? 'null') !== 'pipe') return Promise.resolve(store.get(id))
  return store.whenState(id, (task) => task.state !== 'queued', INPUT_WAIT_MS)
}

/** Why this task takes no input now, as a TendError; nothing when it does. */
function refuseInput(task: Task): void {
  const stdin = task.stdin ?? 'null'
  if (stdin === 'null') throw new TendError('TEND_ERR_NO_STDIN', { id: task.id, stdin: '/dev/null' })
  if (stdin === 'closed') throw new TendError('TEND_ERR_STDIN_CLOSED', { id: task.id })
  if (task.state === 'queued') throw new TendError('TEND_ERR_TASK_NOT_STARTED', { id: task.id, state: task.state, waitMs: INPUT_WAIT_MS })
  if (isFinished(task)) throw new TendError('TEND_ERR_TASK_FINISHED', { id: task.id, state: task.state })
}

/**
 * A FIFO of the task's keeper opened for writing without blocking: it never waits for a reader, and
 * ENXIO says there is none (the keeper and the task have both let go: the task has ended). Only a
 * FIFO is written.
 */
export async function openKeeperFifo(task: Task, path: string, what: string): Promise<FileHandle> {
  let pipe: FileHandle
  try {
    pipe = await open(path, constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENXIO') throw new TendError('TEND_ERR_TASK_FINISHED', { id: task.id, state: 'no process holds its stdin any more' })
    // The task can remove or replace the FIFOs in its folder (under off): a coded answer, not a fault of the daemon's.
    const gone =
      code === 'ENOENT' ? `${path} does not exist` : code === 'ELOOP' ? `${path} is a symbolic link` : code === 'EISDIR' ? `${path} is a folder` : null
    if (gone) throw new TendError('TEND_ERR_PIPE_GONE', { what, id: task.id, detail: `${gone} (removed or replaced, by the task itself?)` }, { cause: error })
    throw new TendError('TEND_ERR_PIPE_UNOPENABLE', { what, id: task.id, path, detail: code ?? (error as Error).message }, { cause: error })
  }
  const info = await pipe.stat()
  if (!info.isFIFO()) {
    await pipe.close()
    throw new TendError('TEND_ERR_PIPE_GONE', {
      what,
      id: task.id,
      detail: `${path} is ${fileKind(info)}, not its keeper's FIFO (replaced, by the task itself?)`,
    })
  }
  return pipe
}

/** One non-blocking write: bytes taken (0 when the pipe is full), or 'gone' when no reader is left. */
async function writeSome(task: Task, pipe: FileHandle, bytes: Buffer): Promise<number | 'gone'> {
  try {
    return (await pipe.write(bytes, 0, bytes.length)).bytesWritten
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return 0
    if (code === 'EPIPE') return 'gone'
    throw new TendError('TEND_ERR_PIPE_WRITE_FAILED', { what: 'stdin pipe', id: task.id, detail: code ?? (error as Error).message }, { cause: error })
  }
}

/**
 * Asks the task's keeper to let go of the pipe (SIGUSR1): the task then reads EOF. The keeper is
 * signalled only while it is the very process recorded (pid and start time), never a reuse of its pid.
 */
function endOfInput(task: Task): void {
  const keeper = task.state === 'running' ? task.keeper : null
  // Ended since its input was written (it read what it needed and exited): its stdin is gone with it.
  if (!keeper && isFinished(task)) throw new TendError('TEND_ERR_TASK_FINISHED', { id: task.id, state: task.state })
  if (!keeper) throw new TendError('TEND_ERR_STDIN_NO_KEEPER', { id: task.id, state: task.state })
  if (!isAliveIdentity({ pid: keeper.pid, startTime: String(keeper.startTicks) })) {
    // The keeper is gone: the task has ended (or is ending), and its stdin with it.
    throw new TendError('TEND_ERR_TASK_FINISHED', { id: task.id, state: 'its keeper is gone' })
  }
  try {
    process.kill(keeper.pid, 'SIGUSR1')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') throw new TendError('TEND_ERR_TASK_FINISHED', { id: task.id, state: 'its keeper is gone' })
    throw error
  }
}
