import { isFinished, TendError, type Task, type TerminalSize } from '../../../protocol/index.js'
import { resizeFifoPath } from '../../../spool/index.js'
import type { TaskStore } from '../../store/task-store.js'
import { INPUT_WAIT_MS, openKeeperFifo, startedTask } from './task-input.js'

/** When a resize refused for a full pipe may be tried again (Retry-After): a keeper that runs reads it at once. */
const BUSY_RETRY_AFTER_S = 1

/**
 * Resizes a terminal task's terminal: one "<cols> <rows>\n" line into the resize FIFO its keeper
 * holds (one write, far under PIPE_BUF: never split, never mixed with another), which applies it to
 * the terminal; the kernel then sends SIGWINCH to the task's foreground process group. The record
 * keeps the size, so `tend show` and a later daemon know it.
 */
export async function resizeTerminal(store: TaskStore, spoolRoot: string, id: string, size: TerminalSize): Promise<Task> {
  if (!store.get(id).tty) throw new TendError('TEND_ERR_NO_TTY', { id })
  const task = await startedTask(store, id)
  if (isFinished(task)) throw new TendError('TEND_ERR_TASK_FINISHED', { id, state: task.state })
  if (task.state === 'queued') throw new TendError('TEND_ERR_TASK_NOT_STARTED', { id, state: task.state, waitMs: INPUT_WAIT_MS })
  const fifo = await openKeeperFifo(task, resizeFifoPath(spoolRoot, id), 'resize pipe')
  try {
    const line = Buffer.from(`${size.cols} ${size.rows}\n`)
    const { bytesWritten } = await fifo.write(line, 0, line.length).catch((error: NodeJS.ErrnoException) => {
      // EAGAIN: the keeper has not read the last thousands of resizes (stopped, or starved of CPU):
      // the caller may try again once it has; EPIPE: it is gone.
      if (error.code === 'EAGAIN' || error.code === 'EWOULDBLOCK') throw new TendError('TEND_ERR_TERMINAL_BUSY', { id, retryAfterSeconds: BUSY_RETRY_AFTER_S })
      if (error.code === 'EPIPE') throw new TendError('TEND_ERR_TASK_FINISHED', { id, state: 'its keeper is gone' })
      throw new TendError('TEND_ERR_PIPE_WRITE_FAILED', { what: 'resize pipe', id, detail: error.code ?? error.message }, { cause: error })
    })
    if (bytesWritten !== line.length)
      throw new TendError('TEND_ERR_PIPE_WRITE_FAILED', { what: 'resize pipe', id, detail: `${bytesWritten} of ${line.length} bytes written` })
  } finally {
    await fifo.close()
  }
  return store.transition(id, (latest) => (latest.tty && !isFinished(latest) ? { ...latest, tty: { cols: size.cols, rows: size.rows } } : latest))
}
