import type { OwnerSession } from './owner-session.js'
import { readTaskOutput, type TaskOutputResult, type ToolSettings } from './operations.js'
import { inToolTerms } from './refusal-terms.js'
import { ToolFailure } from './tool-failure.js'

/** How long task_input waits for output when the call gives no yield_ms (at most maxYieldMs). */
export const TASK_INPUT_DEFAULT_YIELD_MS = 1000
/**
 * Once output has started to arrive, task_input returns after this long without more (or at
 * yield_ms): a program's answer usually comes in a few writes (a REPL's result, then its prompt).
 */
const QUIET_MS = 150

export interface TaskInputArgs {
  task_id: string
  text: string
  eof?: boolean
  yield_ms?: number
}

export interface TaskInputOutcome extends TaskOutputResult {
  /** Bytes written to the task's stdin. */
  sentBytes: number
  /** The stdin was closed after the text. */
  eof: boolean
}

/**
 * task_input: writes the text to the task's stdin exactly as given (a line needs its "\n"), then
 * waits up to yield_ms for output (returning early once output has come and paused, or the task
 * has ended) and answers what arrived since the agent's place, as task_output would.
 */
export async function sendTaskInput(session: OwnerSession, args: TaskInputArgs, settings: ToolSettings, signal?: AbortSignal): Promise<TaskInputOutcome> {
  if (typeof args.text !== 'string') throw new ToolFailure(`text must be a string, got ${typeof args.text}`)
  if (args.text === '' && !args.eof) throw new ToolFailure('text is empty: give the text to send (with "\\n" to end a line), or eof: true to close the stdin')
  if (args.yield_ms !== undefined && (!Number.isInteger(args.yield_ms) || args.yield_ms <= 0))
    throw new ToolFailure(`yield_ms must be a positive whole number of milliseconds, got ${args.yield_ms}`)
  const yieldMs = Math.min(args.yield_ms ?? TASK_INPUT_DEFAULT_YIELD_MS, settings.maxYieldMs)
  await session.open()
  return session.watch(args.task_id, async () => {
    const sent = await inToolTerms('the input was refused', undefined, () => session.client.input(args.task_id, args.text, { eof: args.eof === true }))
    await awaitOutput(session, args.task_id, yieldMs, signal)
    const result = await readTaskOutput(session, { task_id: args.task_id }, settings, signal)
    return { ...result, sentBytes: sent.acceptedBytes, eof: sent.eof }
  })
}

/** Waits until output past the agent's place has come and paused, the task has ended, or yieldMs has passed. */
async function awaitOutput(session: OwnerSession, taskId: string, yieldMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + yieldMs
  let seen = session.cursor(taskId)
  let arrived = false
  for (;;) {
    const left = deadline - Date.now()
    if (left <= 0) return
    const probe = await session.client.read(taskId, { from: seen, maxBytes: 1, waitMs: Math.min(arrived ? QUIET_MS : left, left, 60_000), signal })
    // Cut back below the agent's place (the task truncated its stdout): the read that follows starts over.
    if (probe.done || probe.outputBytes < seen) return
    if (probe.outputBytes > seen) {
      seen = probe.outputBytes
      arrived = true
    } else if (arrived) {
      return
    }
  }
}
