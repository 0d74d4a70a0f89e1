import type { Task } from './task.js'

/**
 * What a sandboxed task that failed could see and write, in one sentence without a way out:
 * which profile it ran under, the places it could write, and its network. A command that fails on
 * "Read-only file system" or "No such file or directory" under /tmp then explains itself. Null
 * when the task did not fail or ran unsandboxed. Each audience adds its own way to allow more: the
 * CLI its flags (sandboxHint), the agent tools their parameters (tools/core/agent-hint.ts).
 */
export function sandboxSummary(task: Task): string | null {
  if (task.sandbox === 'off') return null
  if (!(task.state === 'failed' || (task.state === 'exited' && task.exitCode !== 0))) return null
  const writable = task.sandboxWritable ?? [task.cwd, ...task.writablePaths]
  const network =
    task.network === 'host' ? "with the host's network" : task.network === 'allow' ? 'network: loopback and the allowlist' : 'network: its loopback only'
  return (
    `ran in sandbox ${task.sandbox}: it could write only ${writable.length ? writable.join(', ') : 'nothing of the host'}` +
    ` and a private /tmp, /dev/shm and ~/.cache; ` +
    `the rest of the file system was read-only, the host's /tmp not visible, secrets and tend's state hidden; ${network}`
  )
}

/** The CLI's line for a sandboxed task that failed: what it could do, and the flags that allow more. */
export function sandboxHint(task: Task): string | null {
  const summary = sandboxSummary(task)
  if (summary === null) return null
  const more = ['--writable PATH', ...(task.network === 'host' ? [] : ['--network allow', '--net']), '--sandbox off'].join(', ')
  return `tend: ${summary}. To allow more: ${more}`
}
