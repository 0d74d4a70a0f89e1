import { isFinished, type Task } from '../../client/index.js'
import type { OwnerSession } from './owner-session.js'
import { outputPathOf, readForModel, type ModelOutput } from './output-shaping.js'
import { ToolFailure } from './tool-failure.js'

export type ForegroundOutcome =
  | { kind: 'foreground'; task: Task; output: ModelOutput; outputPath: string }
  /** The yield time passed first: the output so far; the task goes on as a background task. */
  | { kind: 'yielded'; task: Task; output: ModelOutput; outputPath: string; yieldMs: number }

/**
 * Waits for a foreground task until it ends or `yieldMs` passes. An ending shown by this call
 * gets no notice; after a yield the task is the agent's background task, so its ending is left to
 * the notices (the session holds an ending that comes during the call until the call is over).
 * An abort before the yield stops the task; once the call has returned nothing stops it but its
 * time limit, task_kill, or the agent going away.
 */
export async function awaitForeground(
  session: OwnerSession,
  started: Task,
  yieldMs: number,
  budgetBytes: number,
  signal?: AbortSignal,
): Promise<ForegroundOutcome> {
  return session.watch(started.id, async () => {
    let task: Task
    try {
      task = await session.client.wait(started.id, { timeoutMs: yieldMs, signal })
      // wait() answers the record at its timeout; the live record has the output size on disk now.
      if (!isFinished(task)) task = await session.client.get(started.id)
    } catch (error) {
      if (signal?.aborted) {
        session.markSeen(started.id)
        await session.client.kill(started.id, { reason: 'the tool call was aborted' }).catch(() => undefined)
        throw new ToolFailure(`aborted; foreground task ${started.id} was stopped`)
      }
      throw error
    }
    const outputPath = outputPathOf(task)
    if (!isFinished(task)) {
      const from = session.cursor(task.id)
      const output = await readForModel(session.client, task.id, from, Math.max(from, task.outputBytes), budgetBytes, false)
      session.advance(task.id, output.next)
      return { kind: 'yielded', task, output, outputPath, yieldMs }
    }
    session.markSeen(task.id)
    if (task.state === 'failed') throw new ToolFailure(`the command could not be started: ${task.reason}`)
    const output = await readForModel(session.client, task.id, 0, task.outputBytes, budgetBytes)
    session.advance(task.id, output.next)
    return { kind: 'foreground', task, output, outputPath }
  })
}
