import { isFinished, isTendError, type ReadResult } from '../../client/index.js'
import type { TaskService } from '../../client/task-service.js'
import { ToolFailure } from './tool-failure.js'

/** What a task_output call with wait_for found: the line that matched, or null when none did. */
export interface WaitForOutcome {
  pattern: string
  /** The first new line that matched (as matched: a terminal's as plain text); null when none did. */
  matchedLine: string | null
  /** How long the call waited at most, in ms. */
  waitMs: number
}

/** Longest one long-poll of the daemon's may be; a longer wait is several. */
const LONG_POLL_MS = 60_000

/**
 * Waits until a new complete line from `from` on matches `pattern`, the task ends, or `waitMs`
 * passes. The daemon matches (RE2, linear time): an agent's pattern never runs on a backtracking
 * engine here, where the output it would run on is a task's. Answers the daemon's last read, its
 * `matched.end` marking where the matching line ends.
 */
export async function awaitMatchingLine(
  client: TaskService,
  taskId: string,
  from: number,
  pattern: string,
  waitMs: number,
  signal?: AbortSignal,
): Promise<ReadResult> {
  const deadline = Date.now() + waitMs
  const poll = () => client.read(taskId, { from, maxBytes: 1, waitMs: Math.max(0, Math.min(deadline - Date.now(), LONG_POLL_MS)), waitFor: pattern, signal })
  let probe = await poll().catch(asWaitForFailure)
  // A read cut back below `from` answers at once: that is no reason to wait again. (Not `done`: a
  // one-byte read of an ended task's output is done only at its last byte.)
  while (!probe.matched && !isFinished(probe) && probe.outputBytes >= from && Date.now() < deadline) probe = await poll()
  return probe
}

/** The daemon's refusal of the pattern, in the words of the tool's parameter. */
function asWaitForFailure(error: unknown): never {
  if (isTendError(error, 'TEND_ERR_VALIDATION') && error.message.includes('waitFor: ')) {
    throw new ToolFailure(`wait_for is ${error.message.slice(error.message.indexOf('waitFor: ') + 'waitFor: '.length)}`)
  }
  throw error
}
