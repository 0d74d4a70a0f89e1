import { sandboxEvidence, writableOf } from './sandbox-evidence.js'
import type { Task } from './task.js'

/**
 * What a sandboxed task could see and write, in one sentence without a way out: which profile it
 * ran under, the places it could write, and its network. Null for a task that ran unsandboxed.
 * Each audience adds its own way to allow more, and only for a failure that plausibly came from the
 * sandbox (sandboxEvidence): the CLI its flags (sandboxHint), the agent tools their parameters
 * (tools/core/agent-hint.ts).
 */
export function sandboxSummary(task: Task): string | null {
  if (task.sandbox === 'off') return null
  const writable = writableOf(task)
  const network =
    task.network === 'host' ? "with the host's network" : task.network === 'allow' ? 'network: loopback and the allowlist' : 'network: its loopback only'
  const places = `${writable.length > 0 ? `${writable.join(', ')} and ` : ''}a private /tmp, /dev/shm and ~/.cache`
  return (
    `ran in sandbox ${task.sandbox}: it could write only ${places}; ` +
    `the rest of the file system was read-only, the host's /tmp not visible, secrets and tend's state hidden; ${network}`
  )
}

/**
 * The sandbox summary of a sandboxed task whose failure plausibly came from its sandbox (a refusal
 * the record or the end of its output, `outputTail`, shows: sandboxEvidence). Null for any other ending.
 */
export function evidencedSandboxSummary(task: Task, outputTail: string): string | null {
  const summary = sandboxSummary(task)
  return summary === null || sandboxEvidence(task, outputTail) === null ? null : summary
}

/**
 * The CLI's line for a sandboxed task whose failure plausibly came from its sandbox
 * (evidencedSandboxSummary): what it could do, and the flags that allow more. Null for any other ending.
 */
export function sandboxHint(task: Task, outputTail: string): string | null {
  const summary = evidencedSandboxSummary(task, outputTail)
  if (summary === null) return null
  const more = ['--writable PATH', ...(task.network === 'host' ? [] : ['--network allow', '--net']), '--sandbox off'].join(', ')
  return `tend: ${summary}. To allow more: ${more}`
}
