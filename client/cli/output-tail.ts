import { failedSandboxed, SANDBOX_EVIDENCE_TAIL_BYTES, type Task } from '../../protocol/index.js'
import type { TendClient } from '../client.js'

/**
 * The end of a task's output that its sandbox hint looks at (sandboxEvidence): the last 64 KiB of
 * a sandboxed task that failed, read only then; '' for any other task. A hint is an aid: a read
 * that fails (the task removed meanwhile) gives '' rather than failing the command.
 */
export async function outputTailForHint(client: TendClient, task: Task): Promise<string> {
  if (!failedSandboxed(task)) return ''
  const from = Math.max(0, task.outputBytes - SANDBOX_EVIDENCE_TAIL_BYTES)
  try {
    return (await client.read(task.id, { from, maxBytes: SANDBOX_EVIDENCE_TAIL_BYTES })).data
  } catch {
    return ''
  }
}
